package odata

import (
	"bytes"
	"math"
	"strconv"
)

// ParseGuid parses a GUID in its hyphenated 8-4-4-4-12 form, in any letter
// case and optionally in braces, and returns the lower-case canonical form.
func ParseGuid(s string) (string, bool) {
	var buf [36]byte
	b, ok := appendGuid(buf[:0], s)
	if !ok {
		return "", false
	}
	return string(b), true
}

// appendGuid is ParseGuid for both strings and byte slices (the request
// decoder parses from the body without an intermediate string): it appends
// the canonical form to dst, or returns dst unchanged and false.
func appendGuid[T string | []byte](dst []byte, s T) ([]byte, bool) {
	if len(s) == 38 && s[0] == '{' && s[37] == '}' {
		s = s[1:37]
	}
	if len(s) != 36 {
		return dst, false
	}
	start := len(dst)
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return dst[:start], false
			}
		default:
			switch {
			case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			case c >= 'A' && c <= 'F':
				c += 'a' - 'A'
			default:
				return dst[:start], false
			}
		}
		dst = append(dst, c)
	}
	return dst, true
}

// AppendDouble appends the wire form of a finite double: the shortest text
// that parses back to the same bits, always with a decimal point or an
// exponent so that no client reads it back as an integer (5 -> "5.0",
// -0 -> "-0.0", 1e21 -> "1E+21"). NaN and infinities have no number form;
// see DoubleSpecial.
func AppendDouble(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.AppendFloat(dst, f, 'E', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, '.', '0')
	}
	return dst
}

// DoubleSpecial returns the annotated string form of NaN and ±Infinity and
// false for finite values.
func DoubleSpecial(f float64) (string, bool) {
	switch {
	case math.IsNaN(f):
		return "NaN", true
	case math.IsInf(f, 1):
		return "Infinity", true
	case math.IsInf(f, -1):
		return "-Infinity", true
	}
	return "", false
}

// UTF16Len returns the length of s in UTF-16 code units, the unit of the
// service's string and key limits.
func UTF16Len(s string) int { return utf16Len(s) }

func utf16Len[T string | []byte](s T) int {
	n, i := 0, 0
	// Keys and values are mostly ASCII, one unit per byte: take them 8
	// bytes at a time and count byte by byte only where a word has a high bit.
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if w&msb == 0 {
			n += 8
			continue
		}
		for j := i; j < i+8; j++ {
			n += utf16Units(s[j])
		}
	}
	for ; i < len(s); i++ {
		n += utf16Units(s[i])
	}
	return n
}

// utf16Units is what byte c of valid UTF-8 adds to the UTF-16 length: the
// lead byte of a character counts its units, continuation bytes nothing.
func utf16Units(c byte) int {
	switch {
	case c < 0x80 || c >= 0xC0 && c < 0xF0:
		return 1 // ASCII, or the lead byte of a 2- or 3-byte sequence
	case c >= 0xF0:
		return 2 // lead byte of a 4-byte sequence: a surrogate pair
	}
	return 0
}

// utf16Over reports whether s is longer than limit UTF-16 units. A string
// never has more units than bytes, so most need no counting at all.
func utf16Over[T string | []byte](s T, limit int) bool {
	return len(s) > limit && utf16Len(s) > limit
}
