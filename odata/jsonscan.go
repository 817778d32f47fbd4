package odata

import (
	"encoding/binary"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The request decoder and the stored-form decoder share this small strict
// JSON tokenizer. encoding/json is unsuitable for both: it silently repairs
// invalid UTF-8 and lone surrogates, keeps the last of duplicate keys and
// turns numbers into float64, and it is slower on the read hot path.

// syntaxError reports malformed JSON at a byte offset. It wraps no sentinel:
// DecodeEntity turns it into ErrInvalidInput for the client, while for
// DecodeStored bad input is our own bug and must not look like a 400.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return "offset " + strconv.Itoa(e.off) + ": " + e.msg
}

// maxDepth bounds the nesting that skipValue accepts, so that a hostile
// body cannot exhaust the stack.
const maxDepth = 64

// scanner walks buf. Strings without escapes come back as views into buf;
// strings with escapes are unescaped into scratch and come back as views
// into it. Views stay valid when scratch grows, because growing copies to a
// new array and leaves the old one untouched.
type scanner struct {
	buf     []byte
	pos     int
	scratch []byte
}

func (s *scanner) errAt(off int, msg string) error { return &syntaxError{off: off, msg: msg} }

// ws skips JSON whitespace.
func (s *scanner) ws() {
	for s.pos < len(s.buf) {
		switch s.buf[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next byte, or 0 at the end of input.
func (s *scanner) peek() byte {
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

// expect consumes c or fails.
func (s *scanner) expect(c byte, what string) error {
	if s.pos < len(s.buf) && s.buf[s.pos] == c {
		s.pos++
		return nil
	}
	if s.pos >= len(s.buf) {
		return s.errAt(s.pos, "unexpected end of input, expected "+what)
	}
	return s.errAt(s.pos, "expected "+what)
}

// SWAR constants for scanning eight string bytes at a time.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainASCII8 reports whether none of the eight bytes in x ends or escapes
// a string, is a control character or is non-ASCII.
func plainASCII8(x uint64) bool {
	if x&msb != 0 {
		return false
	}
	// With every byte below 0x80, (b - n) borrows into bit 7 exactly when
	// b < n, and (b ^ c) - 1 does so exactly when b == c.
	ctl := (x - lsb*0x20) & ^x & msb
	q := x ^ (lsb * '"')
	bs := x ^ (lsb * '\\')
	return ctl|((q-lsb)&^q&msb)|((bs-lsb)&^bs&msb) == 0
}

// str reads the JSON string that starts at s.pos (a '"') and returns its
// unescaped contents, which are guaranteed to be valid UTF-8.
func (s *scanner) str() ([]byte, error) {
	b := s.buf
	start := s.pos + 1
	i := start
	for {
		for i+8 <= len(b) && plainASCII8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			return nil, s.errAt(i, "unterminated string")
		}
		c := b[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return b[start:i], nil
		case c == '\\':
			return s.strEscaped(start, i)
		case c < 0x20:
			return nil, s.errAt(i, "control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, s.errAt(i, "invalid UTF-8")
			}
			i += n
		}
	}
}

// strEscaped finishes a string whose first escape is at i.
func (s *scanner) strEscaped(start, i int) ([]byte, error) {
	b := s.buf
	mark := len(s.scratch)
	s.scratch = append(s.scratch, b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return s.scratch[mark:], nil
		case c == '\\':
			if i+1 >= len(b) {
				return nil, s.errAt(i, "unterminated string")
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				s.scratch = append(s.scratch, e)
			case 'b':
				s.scratch = append(s.scratch, '\b')
			case 'f':
				s.scratch = append(s.scratch, '\f')
			case 'n':
				s.scratch = append(s.scratch, '\n')
			case 'r':
				s.scratch = append(s.scratch, '\r')
			case 't':
				s.scratch = append(s.scratch, '\t')
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok {
					return nil, s.errAt(i, `invalid \u escape`)
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 {
						return nil, s.errAt(i, "lone low surrogate")
					}
					r2, ok := rune(0), false
					if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
						r2, ok = hex4(b, i+8)
					}
					if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
						return nil, s.errAt(i, "unpaired high surrogate")
					}
					r = utf16.DecodeRune(r, r2)
					i += 6
				}
				s.scratch = utf8.AppendRune(s.scratch, r)
				i += 6
				continue
			default:
				return nil, s.errAt(i, "invalid escape")
			}
			i += 2
		case c < 0x20:
			return nil, s.errAt(i, "control character in string")
		case c < utf8.RuneSelf:
			s.scratch = append(s.scratch, c)
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, s.errAt(i, "invalid UTF-8")
			}
			s.scratch = append(s.scratch, b[i:i+n]...)
			i += n
		}
	}
	return nil, s.errAt(i, "unterminated string")
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// num reads a JSON number and reports whether it is lexically an integer
// (no fraction, no exponent): the lexical form decides the EDM type.
func (s *scanner) num() (text []byte, isInt bool, err error) {
	b := s.buf
	start := s.pos
	i := start
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return nil, false, s.errAt(i, "invalid number")
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		isInt = false
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return nil, false, s.errAt(i, "invalid number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		isInt = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return nil, false, s.errAt(i, "invalid number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.pos = i
	return b[start:i], isInt, nil
}

// word consumes the literal w (true, false, null) or fails.
func (s *scanner) word(w string) error {
	if len(s.buf)-s.pos >= len(w) && string(s.buf[s.pos:s.pos+len(w)]) == w {
		s.pos += len(w)
		return nil
	}
	return s.errAt(s.pos, "invalid literal")
}

// skipValue validates and skips any JSON value, nested ones included.
func (s *scanner) skipValue(depth int) error {
	if depth > maxDepth {
		return s.errAt(s.pos, "nesting too deep")
	}
	switch c := s.peek(); c {
	case '"':
		mark := len(s.scratch)
		_, err := s.str()
		s.scratch = s.scratch[:mark]
		return err
	case '{', '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		s.pos++
		s.ws()
		if s.peek() == end {
			s.pos++
			return nil
		}
		for {
			s.ws()
			if c == '{' {
				if s.peek() != '"' {
					return s.errAt(s.pos, "expected member name")
				}
				if err := s.skipValue(depth + 1); err != nil {
					return err
				}
				s.ws()
				if err := s.expect(':', "':'"); err != nil {
					return err
				}
				s.ws()
			}
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			s.ws()
			switch s.peek() {
			case ',':
				s.pos++
			case end:
				s.pos++
				return nil
			default:
				return s.errAt(s.pos, "expected ',' or '"+string(end)+"'")
			}
		}
	case 't':
		return s.word("true")
	case 'f':
		return s.word("false")
	case 'n':
		return s.word("null")
	case 0:
		if s.pos >= len(s.buf) {
			return s.errAt(s.pos, "unexpected end of input")
		}
	}
	_, _, err := s.num()
	return err
}
