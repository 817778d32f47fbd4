package odata

import (
	"bytes"
	"strconv"
)

// The read path's hot loop: PostgreSQL's text of the stored form is already
// JSON, with names and string values escaped as the wire wants them, so an
// entity is written by copying tokens rather than by decoding every value
// into a Property and encoding it again. Only what differs between the
// stored and the wire form is touched: type annotations, doubles leaving
// their quotes, DateTimes losing trailing zeros, and strings that carry the
// stored escape of U+0000 (see StoredString).

// appendStoredMembers writes the properties of stored, as returned by
// PostgreSQL, as members of the object being written to dst. It reports
// false, with dst unchanged, on any input it does not recognise; the
// caller then decodes and encodes instead.
func (enc *Encoder) appendStoredMembers(dst []byte, stored []byte) ([]byte, bool) {
	start := len(dst)
	t := transcoder{src: stored}
	annotate := enc.Format != NoMetadata
	wholeDoubles := annotate && enc.WholeDoubleTypes
	t.ws()
	if !t.byte('{') {
		return dst[:start], false
	}
	t.ws()
	if t.byte('}') {
		return dst, t.end()
	}
	for {
		name, ok := t.str()
		if !ok || !t.sep(':') || !t.byte('[') {
			return dst[:start], false
		}
		t.ws()
		tag, ok := t.str()
		if !ok || !t.sep(',') {
			return dst[:start], false
		}
		value, ok := t.value()
		if !ok {
			return dst[:start], false
		}
		t.ws()
		if !t.byte(']') {
			return dst[:start], false
		}
		if dst, ok = appendStoredMember(dst, name, tag, value, annotate, wholeDoubles); !ok {
			return dst[:start], false
		}
		t.ws()
		if t.byte('}') {
			return dst, t.end()
		}
		if !t.sep(',') {
			return dst[:start], false
		}
	}
}

// appendStoredMember writes one property from its raw tokens: name and tag
// as quoted JSON strings, value as its JSON token.
func appendStoredMember(dst, name, tag, value []byte, annotate, wholeDoubles bool) ([]byte, bool) {
	key := func(dst []byte) []byte {
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
		dst = append(dst, name...)
		return append(dst, ':')
	}
	annotation := func(dst []byte, t EdmType) []byte {
		if !annotate {
			return dst
		}
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
		dst = append(dst, name[:len(name)-1]...)
		dst = append(dst, `@odata.type":"`...)
		dst = append(dst, t.String()...)
		return append(dst, '"')
	}
	quoted := len(value) >= 2 && value[0] == '"'
	switch string(tag[1 : len(tag)-1]) {
	case "str":
		if !quoted {
			return dst, false
		}
		if bytes.Contains(value, []byte(`\u0001`)) {
			return dst, false // the stored escape of U+0000: decode it
		}
		return append(key(dst), value...), true
	case "i32":
		if quoted || !canonicalInt(value) {
			return dst, false
		}
		return append(key(dst), value...), true
	case "bool":
		if quoted {
			return dst, false
		}
		return append(key(dst), value...), true
	case "i64":
		if !quoted || !canonicalInt(value[1:len(value)-1]) {
			return dst, false
		}
		return append(key(annotation(dst, EdmInt64)), value...), true
	case "guid":
		if !quoted || len(value) != 38 || hasUpperHex(value) {
			return dst, false
		}
		return append(key(annotation(dst, EdmGuid)), value...), true
	case "bin":
		if !quoted || !paddedBase64(value[1:len(value)-1]) {
			return dst, false
		}
		return append(key(annotation(dst, EdmBinary)), value...), true
	case "dbl":
		if !quoted {
			return dst, false
		}
		text := value[1 : len(value)-1]
		switch string(text) {
		case "NaN", "Infinity", "-Infinity":
			return append(key(annotation(dst, EdmDouble)), value...), true
		}
		// The stored text is AppendDouble's; a number always carries a
		// point or an exponent, so the value stays a Double on the wire.
		if !jsonNumber(text) || !bytes.ContainsAny(text, ".eE") {
			return dst, false
		}
		if wholeDoubles {
			f, err := strconv.ParseFloat(string(text), 64)
			if err != nil {
				return dst, false
			}
			if wholeDouble(f) {
				dst = annotation(dst, EdmDouble)
			}
		}
		return append(key(dst), text...), true
	case "dt":
		// Fixed width with seven fractional digits: drop the zeros Azure
		// drops, and the point when nothing is left after it.
		text := value[1 : len(value)-1]
		if !quoted || len(text) != dateTimeFixedSz || text[19] != '.' || text[27] != 'Z' {
			return dst, false
		}
		frac := text[20:27]
		frac = bytes.TrimRight(frac, "0")
		dst = key(annotation(dst, EdmDateTime))
		dst = append(dst, '"')
		dst = append(dst, text[:19]...)
		if len(frac) > 0 {
			dst = append(dst, '.')
			dst = append(dst, frac...)
		}
		return append(dst, `Z"`...), true
	}
	return dst, false
}

// canonicalInt accepts -?(0|[1-9][0-9]*), the form strconv writes.
func canonicalInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// hasUpperHex reports whether b holds an upper-case hex digit. A byte
// loop: bytes.IndexFunc decodes runes, a tenth of a page's transcoding.
func hasUpperHex(b []byte) bool {
	for _, c := range b {
		if c >= 'A' && c <= 'F' {
			return true
		}
	}
	return false
}

// paddedBase64 accepts standard base64 with padding, as clients decode it.
func paddedBase64(b []byte) bool {
	if len(b)%4 != 0 {
		return false
	}
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
		case c == '=' && i >= len(b)-2:
		default:
			return false
		}
	}
	return len(b) < 2 || b[len(b)-2] != '=' || b[len(b)-1] == '='
}

// jsonNumber accepts the JSON number grammar.
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	start := i
	if n := digits(); n == 0 || n > 1 && b[start] == '0' {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// transcoder tokenizes PostgreSQL's jsonb text without decoding it.
type transcoder struct {
	src []byte
	pos int
}

func (t *transcoder) ws() {
	for t.pos < len(t.src) {
		switch t.src[t.pos] {
		case ' ', '\t', '\n', '\r':
			t.pos++
		default:
			return
		}
	}
}

func (t *transcoder) byte(c byte) bool {
	if t.pos < len(t.src) && t.src[t.pos] == c {
		t.pos++
		return true
	}
	return false
}

// sep reads a separator with the whitespace around it.
func (t *transcoder) sep(c byte) bool {
	t.ws()
	ok := t.byte(c)
	t.ws()
	return ok
}

func (t *transcoder) end() bool {
	t.ws()
	return t.pos == len(t.src)
}

// shortString is how many bytes str looks at one by one before it
// searches with IndexByte: names, type tags and most values are shorter,
// and for them two IndexByte calls cost more than the loop.
const shortString = 16

// str returns a whole JSON string token, quotes included.
func (t *transcoder) str() ([]byte, bool) {
	if !t.byte('"') {
		return nil, false
	}
	start := t.pos - 1
short:
	for end := min(t.pos+shortString, len(t.src)); t.pos < end; t.pos++ {
		switch t.src[t.pos] {
		case '"':
			t.pos++
			return t.src[start:t.pos], true
		case '\\':
			break short // an escape: from here on, the search below
		}
	}
	for t.pos < len(t.src) {
		// The next quote, then any escape before it: both searches are
		// IndexByte's vectorised scans, where IndexAny walks byte by byte,
		// and stored strings seldom hold an escape.
		i := bytes.IndexByte(t.src[t.pos:], '"')
		if i < 0 {
			return nil, false
		}
		if j := bytes.IndexByte(t.src[t.pos:t.pos+i], '\\'); j >= 0 {
			t.pos += j + 2 // an escape: skip the backslash and the escaped byte
			continue
		}
		t.pos += i + 1
		return t.src[start:t.pos], true
	}
	return nil, false
}

// value returns a string, number or literal token.
func (t *transcoder) value() ([]byte, bool) {
	if t.pos < len(t.src) && t.src[t.pos] == '"' {
		return t.str()
	}
	start := t.pos
	for t.pos < len(t.src) {
		switch c := t.src[t.pos]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E', c >= 'a' && c <= 'z':
			t.pos++
			continue
		}
		break
	}
	return t.src[start:t.pos], t.pos > start
}
