package filter

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pgtables/pgtables/odata"
)

// tokKind classifies tokens. Keywords are words: whether a word is a keyword
// depends on where it stands, which only the parser knows.
type tokKind uint8

const (
	tEOF tokKind = iota
	tLParen
	tRParen
	tWord    // identifier or keyword
	tLiteral // literal other than true/false, with its value parsed
)

// token is one lexical unit; pos and end are byte offsets into the filter.
type token struct {
	kind     tokKind
	pos, end int
	val      odata.Value // tLiteral
}

// lexer produces tokens on demand, so that a long input is rejected by the
// parser's limits before it is tokenized in full.
type lexer struct {
	src string
	i   int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// identStart and identPart follow C# identifiers, which property names are.
func identStart(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r)
}

func identPart(r rune) bool {
	return identStart(r) || unicode.IsDigit(r) ||
		unicode.In(r, unicode.Mn, unicode.Mc, unicode.Pc, unicode.Cf)
}

// runeAt decodes the rune at byte offset i (utf8.RuneError, 0 at the end).
func (l *lexer) runeAt(i int) (rune, int) {
	if i >= len(l.src) {
		return utf8.RuneError, 0
	}
	if c := l.src[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(l.src[i:])
}

// wordEnd returns the end of the identifier-like run starting at i.
func (l *lexer) wordEnd(i int) int {
	for i < len(l.src) {
		r, n := l.runeAt(i)
		if !identPart(r) {
			break
		}
		i += n
	}
	return i
}

func (l *lexer) next() (token, error) {
	for l.i < len(l.src) && isSpace(l.src[l.i]) {
		l.i++
	}
	start := l.i
	if start == len(l.src) {
		return token{kind: tEOF, pos: start, end: start}, nil
	}
	c := l.src[start]
	switch {
	case c == '(':
		l.i++
		return token{kind: tLParen, pos: start, end: l.i}, nil
	case c == ')':
		l.i++
		return token{kind: tRParen, pos: start, end: l.i}, nil
	case c == '\'':
		return l.lexString()
	case isDigit(c):
		return l.lexNumber()
	case c == '-':
		if start+1 < len(l.src) && isDigit(l.src[start+1]) {
			return l.lexNumber()
		}
		if end := l.wordEnd(start + 1); end > start+1 {
			w := l.src[start+1 : end]
			if strings.EqualFold(w, "inf") || strings.EqualFold(w, "infinity") {
				l.i = end
				return token{kind: tLiteral, pos: start, end: end,
					val: odata.Value{Type: odata.EdmDouble, Float: math.Inf(-1)}}, nil
			}
		}
		return token{}, errAt(start, "negation is only supported in numeric literals: unexpected '-'")
	}
	if r, _ := l.runeAt(start); identStart(r) {
		end := l.wordEnd(start)
		if end < len(l.src) && l.src[end] == '\'' {
			return l.lexPrefixed(start, end)
		}
		l.i = end
		return token{kind: tWord, pos: start, end: end}, nil
	}
	switch c {
	case '/':
		return token{}, errAt(start, "paths and lambda operators (any, all) are not supported: unexpected '/'")
	case ',':
		return token{}, errAt(start, "functions are not supported: unexpected ','")
	case '"':
		return token{}, errAt(start, "string literals are enclosed in single quotes: unexpected '\"'")
	}
	r, _ := l.runeAt(start)
	return token{}, errAt(start, "unexpected character %s", quoteRune(r))
}

// lexString reads a quoted string, in which a doubled quote stands for one.
func (l *lexer) lexString() (token, error) {
	start := l.i
	var b strings.Builder
	i := start + 1
	from := i
	for {
		j := strings.IndexByte(l.src[i:], '\'')
		if j < 0 {
			return token{}, errAt(start, "unterminated string literal")
		}
		i += j
		if i+1 < len(l.src) && l.src[i+1] == '\'' {
			b.WriteString(l.src[from : i+1])
			i += 2
			from = i
			continue
		}
		break
	}
	var s string
	if b.Len() == 0 {
		s = l.src[from:i] // the common case: no escapes, no copy
	} else {
		b.WriteString(l.src[from:i])
		s = b.String()
	}
	l.i = i + 1
	return token{kind: tLiteral, pos: start, end: l.i, val: odata.Value{Type: odata.EdmString, Str: s}}, nil
}

// lexNumber reads [-]digits[.digits][e[+-]digits][L|l|D|d] and checks
// that the value fits its type.
func (l *lexer) lexNumber() (token, error) {
	s := l.src
	start := l.i
	i := start
	if s[i] == '-' {
		i++
	}
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	double := false
	if i+1 < len(s) && s[i] == '.' && isDigit(s[i+1]) {
		double = true
		i += 2
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			double = true
			for i = j; i < len(s) && isDigit(s[i]); i++ {
			}
		}
	}
	numEnd := i
	typ := odata.EdmInt32
	if double {
		typ = odata.EdmDouble
	}
	if i < len(s) {
		switch s[i] {
		case 'L', 'l':
			if !double {
				typ = odata.EdmInt64
				i++
			}
		case 'D', 'd':
			typ = odata.EdmDouble
			i++
		}
	}
	// A number must end where a word could not go on: "12ab", "1.5.2",
	// "3L5" and "1.x" are malformed rather than two tokens.
	if i < len(s) {
		if r, _ := l.runeAt(i); identPart(r) || r == '.' || r == '\'' {
			end := l.wordEnd(i)
			if end == i {
				end = i + 1
			}
			return token{}, errAt(start, "malformed numeric literal '%s'", clip(s[start:end]))
		}
	}
	l.i = i
	text := s[start:numEnd]
	tok := token{kind: tLiteral, pos: start, end: i, val: odata.Value{Type: typ}}
	var err error
	switch typ {
	case odata.EdmInt32:
		tok.val.Int, err = strconv.ParseInt(text, 10, 32)
	case odata.EdmInt64:
		tok.val.Int, err = strconv.ParseInt(text, 10, 64)
	case odata.EdmDouble:
		// Underflow rounds to zero silently, as in .NET; overflow is an error.
		tok.val.Float, err = strconv.ParseFloat(text, 64)
	}
	if err != nil {
		return token{}, errAt(start, "Unrecognized '%s' literal '%s'", typ, clip(s[start:i]))
	}
	return tok, nil
}

// lexPrefixed reads datetime'..', guid'..', binary'..' and X'..'; the word
// of the prefix spans [start, q) and s[q] is the opening quote.
func (l *lexer) lexPrefixed(start, q int) (token, error) {
	prefix := l.src[start:q]
	j := strings.IndexByte(l.src[q+1:], '\'')
	if j < 0 {
		return token{}, errAt(start, "unterminated %s literal", clip(prefix))
	}
	end := q + 1 + j + 1
	body := l.src[q+1 : end-1]
	tok := token{kind: tLiteral, pos: start, end: end}
	bad := func(t odata.EdmType, why string) (token, error) {
		return token{}, errAt(start, "Unrecognized '%s' literal '%s' (%s)", t, clip(l.src[start:end]), why)
	}
	switch {
	case strings.EqualFold(prefix, "datetime"):
		ticks, ok := odata.ParseDateTime(body)
		if !ok {
			return bad(odata.EdmDateTime, "expected yyyy-mm-ddThh:mm[:ss[.fffffff]][Z|±hh:mm]")
		}
		// Beyond this range the fixed-width stored form cannot express the
		// instant; no stored value is outside it anyway.
		if ticks < 0 || ticks > odata.MaxDateTime {
			return bad(odata.EdmDateTime, "out of range")
		}
		tok.val = odata.Value{Type: odata.EdmDateTime, Int: ticks}
	case strings.EqualFold(prefix, "guid"):
		g, ok := odata.ParseGuid(body)
		if !ok {
			return bad(odata.EdmGuid, "expected xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")
		}
		tok.val = odata.Value{Type: odata.EdmGuid, Str: g}
	case strings.EqualFold(prefix, "binary"), strings.EqualFold(prefix, "x"):
		if len(body)%2 != 0 {
			return bad(odata.EdmBinary, "odd number of hex digits")
		}
		b := make([]byte, len(body)/2) // never nil: nil would reach SQL as NULL
		if _, err := hex.Decode(b, []byte(body)); err != nil {
			return bad(odata.EdmBinary, "expected hex digits")
		}
		tok.val = odata.Value{Type: odata.EdmBinary, Bytes: b}
	default:
		return token{}, errAt(start, "unknown literal prefix '%s'", clip(prefix))
	}
	l.i = end
	return tok, nil
}

// clip shortens text quoted in error messages.
func clip(s string) string {
	const max = 40
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + "..."
		}
		n++
	}
	return s
}

func quoteRune(r rune) string {
	if unicode.IsPrint(r) {
		return "'" + string(r) + "'"
	}
	return strconv.QuoteRuneToASCII(r)
}
