package odata

import "strings"

// The stored form of properties is the jsonb document PostgreSQL keeps for
// an entity (the store package documents it in full):
//
//	{"Name": ["tag", value], ...}
//
// The tag names the EDM type so that a filter can demand the right type with
// one text comparison, and the value has the form that makes SQL compare it
// natively:
//
//	str  JSON string, passed through StoredString
//	i32  JSON number
//	i64  JSON string of decimal digits          (v->>1)::bigint
//	dbl  JSON string: AppendDouble's text,      (v->>1)::float8
//	     or NaN, Infinity, -Infinity
//	bool JSON true/false
//	dt   JSON string, 7 fractional digits, Z     text order = time order
//	guid JSON string, lower-case canonical
//	bin  JSON string, standard padded base64     decode(v->>1, 'base64')

var storedTags = [...]string{
	EdmString:   "str",
	EdmInt32:    "i32",
	EdmInt64:    "i64",
	EdmDouble:   "dbl",
	EdmBoolean:  "bool",
	EdmDateTime: "dt",
	EdmGuid:     "guid",
	EdmBinary:   "bin",
}

// StoredTag returns the tag that marks t in the stored form.
func (t EdmType) StoredTag() string {
	if int(t) < len(storedTags) {
		return storedTags[t]
	}
	return ""
}

// StoredString maps a string to the text kept in PostgreSQL, which refuses
// U+0000 in text and jsonb. U+0000 becomes U+0001 U+0001 and U+0001 becomes
// U+0001 U+0002; every other character stays. The mapping is injective and
// keeps ordinal order, so stored strings compare exactly as the originals do
// and a filter literal passed through it compares correctly in SQL.
func StoredString(s string) string {
	if strings.IndexByte(s, 0) < 0 && strings.IndexByte(s, 1) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case 0:
			b.WriteString("\x01\x01")
		case 1:
			b.WriteString("\x01\x02")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// LoadedString reverses StoredString.
func LoadedString(s string) string {
	if strings.IndexByte(s, 1) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 1 && i+1 < len(s) {
			i++
			c = s[i] - 1
		}
		b.WriteByte(c)
	}
	return b.String()
}
