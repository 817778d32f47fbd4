package odata

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// AppendStored appends the stored jsonb form of props.
func AppendStored(dst []byte, props []Property) []byte {
	dst = append(dst, '{')
	for i := range props {
		p := &props[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, p.Name)
		dst = append(dst, `:["`...)
		dst = append(dst, p.Value.Type.StoredTag()...)
		dst = append(dst, `",`...)
		dst = appendStoredValue(dst, &p.Value)
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

func appendStoredValue(dst []byte, v *Value) []byte {
	switch v.Type {
	case EdmString:
		dst = append(dst, '"')
		dst = appendStoredStringBody(dst, v.Str)
		return append(dst, '"')
	case EdmInt32:
		return strconv.AppendInt(dst, v.Int, 10)
	case EdmInt64:
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, v.Int, 10)
		return append(dst, '"')
	case EdmDouble:
		dst = append(dst, '"')
		if s, special := DoubleSpecial(v.Float); special {
			dst = append(dst, s...)
		} else {
			dst = AppendDouble(dst, v.Float)
		}
		return append(dst, '"')
	case EdmBoolean:
		return strconv.AppendBool(dst, v.Bool)
	case EdmDateTime:
		dst = append(dst, '"')
		dst = AppendDateTime(dst, v.Int, true)
		return append(dst, '"')
	case EdmGuid:
		return appendString(dst, v.Str)
	case EdmBinary:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes)
		return append(dst, '"')
	}
	return append(dst, "null"...)
}

// appendStoredStringBody is appendStringBody(StoredString(s)) in one pass
// and without the intermediate string: U+0000 and U+0001, which PostgreSQL
// cannot hold or which the mapping uses, become escaped U+0001 pairs.
func appendStoredStringBody(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 0:
			dst = appendStringBody(dst, s[start:i])
			dst = append(dst, `\u0001\u0001`...)
			start = i + 1
		case 1:
			dst = appendStringBody(dst, s[start:i])
			dst = append(dst, `\u0001\u0002`...)
			start = i + 1
		}
	}
	return appendStringBody(dst, s[start:])
}

// staged is a decoded property whose name and string value are still views
// into the input, until they are copied into the document's shared string.
type staged struct {
	name, str []byte
	strLen    int // length of str once loaded (see LoadedString)
	v         Value
}

// DecodeStored parses PostgreSQL's text of the stored form, appending to props.
//
// PostgreSQL writes jsonb as {"A": ["i32", 1], "B": ["str", "x"]}, with
// spaces after ':' and ',' and keys ordered by length, then bytes; the
// properties come back in that order. All names and string values of the
// document share one allocation.
func DecodeStored(src []byte, props []Property) ([]Property, error) {
	// Stage on the stack first: the count is then known and props grows
	// by one exact allocation.
	var stack [32]staged
	s := scanner{buf: src}
	st, text, err := parseStored(&s, stack[:0])
	if err != nil {
		return props, fmt.Errorf("decode stored properties: %w", err)
	}

	var sb strings.Builder
	sb.Grow(text)
	for i := range st {
		sb.Write(st[i].name)
		if st[i].v.Type == EdmString {
			appendLoaded(&sb, st[i].str)
		} else {
			sb.Write(st[i].str)
		}
	}
	all := sb.String()
	props = slices.Grow(props, len(st))
	off := 0
	for i := range st {
		p := Property{Name: all[off : off+len(st[i].name)], Value: st[i].v}
		off += len(st[i].name)
		if t := p.Value.Type; t == EdmString || t == EdmGuid {
			p.Value.Str = all[off : off+st[i].strLen]
			off += st[i].strLen
		}
		props = append(props, p)
	}
	return props, nil
}

// parseStored reads the document into st; text is the number of bytes of
// names and string values to copy out.
func parseStored(s *scanner, st []staged) (_ []staged, text int, err error) {
	s.ws()
	if err := s.expect('{', "'{'"); err != nil {
		return nil, 0, err
	}
	s.ws()
	if s.peek() == '}' {
		s.pos++
	} else {
		for {
			s.ws()
			if s.peek() != '"' {
				return nil, 0, s.errAt(s.pos, "expected property name")
			}
			name, err := s.str()
			if err != nil {
				return nil, 0, err
			}
			s.ws()
			if err := s.expect(':', "':'"); err != nil {
				return nil, 0, err
			}
			s.ws()
			if err := s.expect('[', "'['"); err != nil {
				return nil, 0, err
			}
			s.ws()
			if s.peek() != '"' {
				return nil, 0, s.errAt(s.pos, "expected type tag")
			}
			tagOff := s.pos
			tag, err := s.str()
			if err != nil {
				return nil, 0, err
			}
			s.ws()
			if err := s.expect(',', "','"); err != nil {
				return nil, 0, err
			}
			s.ws()
			valOff := s.pos
			p := staged{name: name}
			switch string(tag) {
			case "str":
				p.v.Type = EdmString
				if p.str, err = s.stringValue(); err == nil {
					var ok bool
					if p.strLen, ok = loadedLen(p.str); !ok {
						err = errStoredValue
					}
				}
			case "i32":
				p.v.Type = EdmInt32
				p.v.Int, err = s.intValue(32)
			case "i64":
				p.v.Type = EdmInt64
				p.v.Int, err = s.intValue(64)
			case "dbl":
				p.v.Type = EdmDouble
				p.v.Float, err = s.doubleValue()
			case "bool":
				p.v.Type = EdmBoolean
				p.v.Bool = s.peek() == 't'
				if p.v.Bool {
					err = s.word("true")
				} else {
					err = s.word("false")
				}
			case "dt":
				p.v.Type = EdmDateTime
				p.v.Int, err = s.dateTimeValue()
			case "guid":
				p.v.Type = EdmGuid
				p.str, err = s.guidValue()
				p.strLen = len(p.str)
			case "bin":
				p.v.Type = EdmBinary
				p.v.Bytes, err = s.binaryValue()
			default:
				return nil, 0, s.errAt(tagOff, "unknown type tag")
			}
			if err != nil {
				if _, ok := err.(*syntaxError); !ok {
					err = s.errAt(valOff, err.Error())
				}
				return nil, 0, err
			}
			text += len(name) + len(p.str)
			st = append(st, p)
			s.ws()
			if err := s.expect(']', "']'"); err != nil {
				return nil, 0, err
			}
			s.ws()
			if s.peek() == ',' {
				s.pos++
				continue
			}
			if err := s.expect('}', "',' or '}'"); err != nil {
				return nil, 0, err
			}
			break
		}
	}
	s.ws()
	if s.pos != len(s.buf) {
		return nil, 0, s.errAt(s.pos, "data after the JSON object")
	}
	return st, text, nil
}

// loadedLen is len(LoadedString(b)). It reports false for text that
// StoredString cannot have produced: U+0001 not followed by U+0001 or
// U+0002. (Loading that would even yield invalid UTF-8.)
func loadedLen(b []byte) (int, bool) {
	n := len(b)
	for i := bytes.IndexByte(b, 1); i >= 0; {
		if i+1 >= len(b) || b[i+1] != 1 && b[i+1] != 2 {
			return 0, false
		}
		n--
		next := bytes.IndexByte(b[i+2:], 1)
		if next < 0 {
			break
		}
		i += 2 + next
	}
	return n, true
}

// appendLoaded writes LoadedString(b).
func appendLoaded(sb *strings.Builder, b []byte) {
	for {
		i := bytes.IndexByte(b, 1)
		if i < 0 || i+1 >= len(b) {
			sb.Write(b)
			return
		}
		sb.Write(b[:i])
		sb.WriteByte(b[i+1] - 1)
		b = b[i+2:]
	}
}

var errStoredValue = errors.New("malformed value")

func (s *scanner) stringValue() ([]byte, error) {
	if s.peek() != '"' {
		return nil, errStoredValue
	}
	return s.str()
}

func (s *scanner) intValue(bits int) (int64, error) {
	var text []byte
	var err error
	if s.peek() == '"' {
		text, err = s.str()
	} else {
		var isInt bool
		text, isInt, err = s.num()
		if err == nil && !isInt {
			return 0, errStoredValue
		}
	}
	if err != nil {
		return 0, err
	}
	v, ok := parseInt(text, bits)
	if !ok {
		return 0, errStoredValue
	}
	return v, nil
}

func (s *scanner) doubleValue() (float64, error) {
	if s.peek() != '"' {
		text, _, err := s.num()
		if err != nil {
			return 0, err
		}
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil {
			return 0, errStoredValue
		}
		return f, nil
	}
	text, err := s.str()
	if err != nil {
		return 0, err
	}
	switch string(text) {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	f, ok := parseDoubleString(text)
	if !ok || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, errStoredValue
	}
	return f, nil
}

func (s *scanner) dateTimeValue() (int64, error) {
	text, err := s.stringValue()
	if err != nil {
		return 0, err
	}
	if t, ok := parseFixedDateTime(text); ok {
		return t, nil
	}
	// Not the form AppendStored writes; take any form ParseDateTime takes
	// rather than fail on a value another writer produced.
	t, ok := ParseDateTime(string(text))
	if !ok {
		return 0, errStoredValue
	}
	return t, nil
}

func (s *scanner) guidValue() ([]byte, error) {
	text, err := s.stringValue()
	if err != nil {
		return nil, err
	}
	if canonicalGuid(text) {
		return text, nil
	}
	g, ok := appendGuid(nil, text)
	if !ok {
		return nil, errStoredValue
	}
	return g, nil
}

func (s *scanner) binaryValue() ([]byte, error) {
	text, err := s.stringValue()
	if err != nil {
		return nil, err
	}
	b, ok := decodeBase64(text)
	if !ok {
		return nil, errStoredValue
	}
	return b, nil
}

// canonicalGuid reports whether b is already lower-case 8-4-4-4-12.
func canonicalGuid(b []byte) bool {
	if len(b) != 36 {
		return false
	}
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// parseFixedDateTime parses exactly yyyy-MM-ddTHH:mm:ss.fffffffZ, the
// stored form.
func parseFixedDateTime(b []byte) (int64, bool) {
	if len(b) != dateTimeFixedSz {
		return 0, false
	}
	return parseUTCDateTime(b)
}

// parseUTCDateTime parses yyyy-MM-ddTHH:mm:ss[.f{1,7}]Z, the form of the
// stored values and of what most clients send, without the generality (and
// cost) of ParseDateTime; callers fall back to ParseDateTime when it fails.
func parseUTCDateTime(b []byte) (int64, bool) {
	n := len(b)
	if n < 20 || n > dateTimeFixedSz || n == 21 || b[4] != '-' || b[7] != '-' || b[10] != 'T' ||
		b[13] != ':' || b[16] != ':' || b[n-1] != 'Z' || n > 20 && b[19] != '.' {
		return 0, false
	}
	num := func(from, to int) (int64, bool) {
		var v int64
		for _, c := range b[from:to] {
			if !isDigit(c) {
				return 0, false
			}
			v = v*10 + int64(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 7)
	day, ok3 := num(8, 10)
	hour, ok4 := num(11, 13)
	minute, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	var frac int64
	ok7 := true
	if n > 20 {
		frac, ok7 = num(20, n-1)
		for i := n - 1 - 20; i < 7; i++ {
			frac *= 10
		}
	}
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) ||
		year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	days := daysFromCivil(year, month, day)
	return ((days*24+hour)*60+minute)*60*ticksPerSecond + sec*ticksPerSecond + frac, true
}

func daysIn(year, month int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil counts the days from 0001-01-01 to the given proleptic
// Gregorian date, the day count behind .NET ticks.
func daysFromCivil(year, month, day int64) int64 {
	// Shift the year to start in March so the leap day is the year's last.
	if month <= 2 {
		year--
		month += 12
	}
	month -= 3
	days := year*365 + year/4 - year/100 + year/400
	days += (153*month + 2) / 5
	days += day - 1
	// 0000-03-01 is day 0 above; 0001-01-01 is 306 days later.
	return days - 306
}
