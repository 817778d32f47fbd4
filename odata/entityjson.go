package odata

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"strings"
)

// EntityBody is a decoded Insert/Update/Merge request body.
type EntityBody struct {
	PartitionKey, RowKey       string
	HasPartitionKey, HasRowKey bool
	Properties                 []Property
}

// Member roles in a request body.
const (
	roleProp uint8 = iota
	rolePK
	roleRK
	roleTimestamp
	roleAnnot // Name@odata.type
)

// Value kinds as they appear in JSON.
const (
	kindString uint8 = iota
	kindNumber
	kindTrue
	kindFalse
	kindNull
	kindComposite // an object or array, never a legal property value
)

// member is one recorded member of a request body. Names and values are
// views into the body or the scanner's scratch buffer until the final copy.
type member struct {
	name  []byte
	key   []byte // the property a member is about: its name, or for an annotation the annotated name
	val   []byte // string contents or number text
	sig   uint32 // cheap digest of key that makes most comparisons one instruction
	off   int32  // offset of the name, for error messages
	ann   int32  // index of this member's type annotation, or -1
	role  uint8
	kind  uint8
	isInt bool // number without fraction or exponent
}

func keySig(k []byte) uint32 {
	if len(k) == 0 {
		return 0
	}
	return uint32(len(k))<<16 | uint32(k[0])<<8 | uint32(k[len(k)-1])
}

// The number of members DecodeEntity handles without a heap allocation for
// its bookkeeping, and the count up to which quadratic duplicate detection
// beats sorting.
const (
	stackMembers   = 32
	quadraticLimit = 16
)

// DecodeEntity parses and validates an entity request body.
//
// It checks everything a single property can violate (names, value sizes,
// types, annotations, duplicates) and the property count; key characters
// and the entity size are CheckEntity's job, because PUT and MERGE take the
// keys from the URL.
func DecodeEntity(body []byte) (*EntityBody, error) {
	var stack [stackMembers]member
	// scratch stays nil until a string has an escape: most bodies have
	// none, and a stack buffer would escape anyway through the views.
	s := scanner{buf: body}
	ms, err := parseEntityMembers(&s, stack[:0])
	if err != nil {
		return nil, invalidJSON(err)
	}
	if err := pairMembers(ms); err != nil {
		return nil, err
	}
	count := 0 // at most maxUserProperties, see parseEntityMembers
	for i := range ms {
		if ms[i].role == roleProp && ms[i].kind != kindNull {
			count++
		}
	}

	eb := &EntityBody{}
	if count > 0 {
		eb.Properties = make([]Property, 0, count)
	}
	// First pass, in body order: validate and convert every value, leaving
	// the strings for one shared allocation below. arena counts their bytes.
	arena := 0
	var pkMember, rkMember *member
	for i := range ms {
		m := &ms[i]
		if m.kind == kindNull {
			continue // null means absent, for keys too
		}
		switch m.role {
		case rolePK, roleRK:
			if err := checkKeyMember(ms, m); err != nil {
				return nil, err
			}
			if m.role == rolePK {
				pkMember = m
			} else {
				rkMember = m
			}
			arena += len(m.val)
		case roleProp:
			v, err := convertMember(ms, m)
			if err != nil {
				return nil, err
			}
			arena += len(m.name)
			switch v.Type {
			case EdmString:
				arena += len(m.val)
			case EdmGuid:
				arena += 36
			}
			eb.Properties = append(eb.Properties, Property{Value: v})
		}
	}

	// Second pass: copy names and string values into one fresh string, so
	// that nothing aliases the request body and an entity costs a single
	// allocation for all its text. The third pass hands out the pieces,
	// walking the members in the same order.
	var sb strings.Builder
	sb.Grow(arena)
	if pkMember != nil {
		sb.Write(pkMember.val)
	}
	if rkMember != nil {
		sb.Write(rkMember.val)
	}
	var guid [36]byte
	j := 0
	for i := range ms {
		m := &ms[i]
		if m.role != roleProp || m.kind == kindNull {
			continue
		}
		sb.Write(m.name)
		switch eb.Properties[j].Value.Type {
		case EdmString:
			sb.Write(m.val)
		case EdmGuid:
			g, _ := appendGuid(guid[:0], m.val)
			sb.Write(g)
		}
		j++
	}
	all := sb.String()
	off := 0
	next := func(n int) string {
		off += n
		return all[off-n : off]
	}
	if pkMember != nil {
		eb.PartitionKey, eb.HasPartitionKey = next(len(pkMember.val)), true
	}
	if rkMember != nil {
		eb.RowKey, eb.HasRowKey = next(len(rkMember.val)), true
	}
	j = 0
	for i := range ms {
		m := &ms[i]
		if m.role != roleProp || m.kind == kindNull {
			continue
		}
		p := &eb.Properties[j]
		p.Name = next(len(m.name))
		switch p.Value.Type {
		case EdmString:
			p.Value.Str = next(len(m.val))
		case EdmGuid:
			p.Value.Str = next(36)
		}
		j++
	}
	return eb, nil
}

// invalidJSON turns a scanner error into the client-facing error.
func invalidJSON(err error) error {
	if se, ok := err.(*syntaxError); ok {
		return Detailf(ErrInvalidInput, "The request body is not valid JSON: %s at offset %d.", se.msg, se.off)
	}
	return err
}

// parseEntityMembers reads the top-level object and records every member
// that matters. Control members (odata.*) and annotations other than
// odata.type are skipped here, nested values and all. More than
// maxUserProperties non-null properties end it with ErrTooManyProperties.
func parseEntityMembers(s *scanner, ms []member) ([]member, error) {
	if bytes.HasPrefix(s.buf, []byte("\xEF\xBB\xBF")) {
		s.pos = 3 // a UTF-8 byte order mark is harmless
	}
	s.ws()
	if err := s.expect('{', "'{'"); err != nil {
		return nil, err
	}
	s.ws()
	props := 0
	if s.peek() == '}' {
		s.pos++
	} else {
		for {
			s.ws()
			if s.peek() != '"' {
				return nil, s.errAt(s.pos, "expected member name")
			}
			off := s.pos
			name, err := s.str()
			if err != nil {
				return nil, err
			}
			s.ws()
			if err := s.expect(':', "':'"); err != nil {
				return nil, err
			}
			s.ws()
			role, baseLen, keep := classifyMember(name)
			if !keep {
				if err := s.skipValue(0); err != nil {
					return nil, err
				}
			} else {
				key := name[:baseLen]
				if role != roleAnnot {
					key = name
				}
				m := member{name: name, key: key, sig: keySig(key), off: int32(off), ann: -1, role: role}
				switch c := s.peek(); {
				case c == '"':
					m.kind = kindString
					m.val, err = s.str()
				case c == '-' || isDigit(c):
					m.kind = kindNumber
					m.val, m.isInt, err = s.num()
				case c == 't':
					m.kind = kindTrue
					err = s.word("true")
				case c == 'f':
					m.kind = kindFalse
					err = s.word("false")
				case c == 'n':
					m.kind = kindNull
					err = s.word("null")
				case c == '{' || c == '[':
					m.kind = kindComposite
					err = s.skipValue(0)
				case s.pos >= len(s.buf):
					err = s.errAt(s.pos, "unexpected end of input")
				default:
					err = s.errAt(s.pos, "invalid value")
				}
				if err != nil {
					return nil, err
				}
				if m.role == roleProp && m.kind != kindNull {
					// Stop early rather than record members by the
					// hundred thousand from a hostile body.
					if props++; props > maxUserProperties {
						return nil, errTooManyProperties()
					}
				}
				ms = append(ms, m)
			}
			s.ws()
			if s.peek() == ',' {
				s.pos++
				continue
			}
			if err := s.expect('}', "',' or '}'"); err != nil {
				return nil, err
			}
			break
		}
	}
	s.ws()
	if s.pos != len(s.buf) {
		return nil, s.errAt(s.pos, "data after the JSON object")
	}
	return ms, nil
}

// classifyMember tells what a member name means; keep is false for members
// that are ignored outright.
func classifyMember(name []byte) (role uint8, baseLen int, keep bool) {
	switch string(name) {
	case "PartitionKey":
		return rolePK, 0, true
	case "RowKey":
		return roleRK, 0, true
	case "Timestamp":
		return roleTimestamp, 0, true
	}
	if bytes.HasPrefix(name, []byte("odata.")) {
		return 0, 0, false
	}
	if i := bytes.IndexByte(name, '@'); i >= 0 {
		if i > 0 && string(name[i+1:]) == "odata.type" {
			return roleAnnot, i, true
		}
		return 0, 0, false
	}
	return roleProp, 0, true
}

// pairMembers rejects duplicate names and links each annotation to the
// member it annotates. Two members clash when they are about the same
// property and both are values or both are annotations (for annotations
// that is the same as having the same name); a value and an annotation
// about the same property pair up.
func pairMembers(ms []member) error {
	if len(ms) <= quadraticLimit {
		for i := 1; i < len(ms); i++ {
			mi := &ms[i]
			for j := 0; j < i; j++ {
				mj := &ms[j]
				if mi.sig != mj.sig || string(mi.key) != string(mj.key) {
					continue
				}
				switch ai, aj := mi.role == roleAnnot, mj.role == roleAnnot; {
				case ai == aj:
					return errDuplicate(mi)
				case ai:
					mj.ann = int32(i)
				default:
					mi.ann = int32(j)
				}
			}
		}
		return nil
	}
	// Many members: sort by (key, annotation last), which puts clashes and
	// pairs next to each other. Ties are broken by position so that the
	// duplicate reported is the later one, as above.
	idx := make([]int32, len(ms))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(x, y int32) int {
		a, b := &ms[x], &ms[y]
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		if (a.role == roleAnnot) != (b.role == roleAnnot) {
			if a.role == roleAnnot {
				return 1
			}
			return -1
		}
		return int(x - y)
	})
	for k := 1; k < len(idx); k++ {
		a, b := &ms[idx[k-1]], &ms[idx[k]]
		if !bytes.Equal(a.key, b.key) {
			continue
		}
		if (a.role == roleAnnot) == (b.role == roleAnnot) {
			return errDuplicate(b)
		}
		a.ann = idx[k] // a is the value, b its annotation
	}
	return nil
}

func errDuplicate(m *member) error {
	return Detailf(ErrDuplicateProperties, "A property is specified more than one time: '%s' at offset %d.", truncateForMessage(string(m.name)), m.off)
}

// annotationType reads the EDM type a member's annotation declares, if any.
func annotationType(ms []member, m *member) (EdmType, bool, error) {
	if m.ann < 0 {
		return 0, false, nil
	}
	a := &ms[m.ann]
	if a.kind != kindString {
		return 0, false, Detailf(ErrInvalidInput, "The type annotation of property '%s' is not a string.", truncateForMessage(string(m.name)))
	}
	t, ok := edmTypeOf(a.val)
	if !ok {
		return 0, false, Detailf(ErrInvalidInput, "The type '%s' of property '%s' is not supported.", truncateForMessage(string(a.val)), truncateForMessage(string(m.name)))
	}
	return t, true, nil
}

// edmTypeOf maps an OData type name ("Edm.Int64") to its EdmType, without
// converting the bytes to a string.
func edmTypeOf(b []byte) (EdmType, bool) {
	switch string(b) {
	case "Edm.String":
		return EdmString, true
	case "Edm.Int32":
		return EdmInt32, true
	case "Edm.Int64":
		return EdmInt64, true
	case "Edm.Double":
		return EdmDouble, true
	case "Edm.Boolean":
		return EdmBoolean, true
	case "Edm.DateTime":
		return EdmDateTime, true
	case "Edm.Guid":
		return EdmGuid, true
	case "Edm.Binary":
		return EdmBinary, true
	}
	return 0, false
}

// checkKeyMember checks that PartitionKey or RowKey is a string.
func checkKeyMember(ms []member, m *member) error {
	t, annotated, err := annotationType(ms, m)
	if err != nil {
		return err
	}
	if annotated && t != EdmString || m.kind != kindString {
		return Detailf(ErrInvalidInput, "The value of '%s' must be a string.", m.name)
	}
	return nil
}

// convertMember validates a property (name, then size, then type) and
// converts its value; strings and Guids are left for the caller to copy.
func convertMember(ms []member, m *member) (Value, error) {
	if err := checkPropertyName(m.name); err != nil {
		return Value{}, err
	}
	t, annotated, err := annotationType(ms, m)
	if err != nil {
		return Value{}, err
	}
	if !annotated {
		switch m.kind {
		case kindString:
			t = EdmString
		case kindTrue, kindFalse:
			t = EdmBoolean
		case kindNumber:
			t = EdmDouble
			if m.isInt {
				if v, ok := parseInt(m.val, 32); ok {
					return Value{Type: EdmInt32, Int: v}, nil
				}
			}
		default:
			return Value{}, Detailf(ErrInvalidInput, "The value of property '%s' is an object or array; only primitive values are supported.", truncateForMessage(string(m.name)))
		}
	}
	if m.kind == kindString {
		switch t {
		case EdmString:
			if utf16Over(m.val, maxStringLen) {
				return Value{}, errValueTooLarge(m)
			}
		case EdmBinary:
			if base64Len(m.val) > maxBinaryLen {
				return Value{}, errValueTooLarge(m)
			}
		}
	}
	v, ok := convertValue(t, m)
	if !ok {
		return Value{}, Detailf(ErrInvalidInput, "The value of property '%s' is not a valid %s.", truncateForMessage(string(m.name)), t)
	}
	if t == EdmDateTime && !ValidDateTime(v.Int) {
		return Value{}, Detailf(ErrOutOfRangeInput, "The %s value of property '%s' is outside 1601-01-01T00:00:00Z..9999-12-31T23:59:59.9999999Z.", t, truncateForMessage(string(m.name)))
	}
	return v, nil
}

func errValueTooLarge(m *member) error {
	return Detailf(ErrPropertyValueTooLarge, "The property value exceeds the maximum allowed size (64KB). If the property value is a string, it is UTF-16 encoded and the maximum number of characters should be 32K or less. Property: '%s'.", truncateForMessage(string(m.name)))
}

// base64Len is the decoded length of standard base64 text, padded or not,
// assuming it is well-formed; it lets the size check precede decoding.
func base64Len(b []byte) int {
	n := len(b)
	for n > 0 && b[n-1] == '=' {
		n--
	}
	return n * 6 / 8
}

// convertValue converts a member's JSON value to type t. Strings and Guids
// get no Str here (see DecodeEntity).
func convertValue(t EdmType, m *member) (Value, bool) {
	v := Value{Type: t}
	switch t {
	case EdmString:
		return v, m.kind == kindString
	case EdmInt32, EdmInt64:
		bits := 32
		if t == EdmInt64 {
			bits = 64
		}
		if m.kind == kindNumber && m.isInt || m.kind == kindString {
			var ok bool
			v.Int, ok = parseInt(m.val, bits)
			return v, ok
		}
	case EdmDouble:
		switch m.kind {
		case kindNumber:
			f, err := strconv.ParseFloat(string(m.val), 64)
			v.Float = f
			return v, err == nil
		case kindString:
			f, ok := parseDoubleString(m.val)
			v.Float = f
			return v, ok
		}
	case EdmBoolean:
		switch m.kind {
		case kindTrue, kindFalse:
			v.Bool = m.kind == kindTrue
			return v, true
		case kindString:
			switch {
			case bytes.EqualFold(m.val, []byte("true")):
				v.Bool = true
				return v, true
			case bytes.EqualFold(m.val, []byte("false")):
				return v, true
			}
		}
	case EdmDateTime:
		if m.kind == kindString {
			var ok bool
			if v.Int, ok = parseUTCDateTime(m.val); !ok {
				v.Int, ok = ParseDateTime(string(m.val))
			}
			return v, ok
		}
	case EdmGuid:
		if m.kind == kindString {
			var buf [36]byte
			_, ok := appendGuid(buf[:0], m.val)
			return v, ok
		}
	case EdmBinary:
		if m.kind == kindString {
			b, ok := decodeBase64(m.val)
			v.Bytes = b
			return v, ok
		}
	}
	return v, false
}

// parseInt parses an optionally signed decimal integer that fits in bits
// (32 or 64) bits, from bytes and without allocating.
func parseInt(b []byte, bits int) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	limit := uint64(1)<<(bits-1) - 1 // largest positive value
	if neg {
		limit++
	}
	var u uint64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		if u > (limit-uint64(c-'0'))/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		return -int64(u), true // wraps to math.MinInt64 for u == 1<<63, as wanted
	}
	return int64(u), true
}

// parseDoubleString parses the string forms of Edm.Double that clients send:
// a decimal number (JSON-like, but a leading '+', a bare leading or trailing
// '.' are tolerated as .NET does) or NaN/Infinity/-Infinity in any case.
func parseDoubleString(b []byte) (float64, bool) {
	switch {
	case bytes.EqualFold(b, []byte("NaN")):
		return math.NaN(), true
	case bytes.EqualFold(b, []byte("Infinity")), bytes.EqualFold(b, []byte("+Infinity")):
		return math.Inf(1), true
	case bytes.EqualFold(b, []byte("-Infinity")):
		return math.Inf(-1), true
	}
	// strconv.ParseFloat also takes hex floats, underscores and "inf";
	// none of those is a number here.
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	digits := 0
	for i < len(b) && isDigit(b[i]) {
		i++
		digits++
	}
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		exp := 0
		for i < len(b) && isDigit(b[i]) {
			i++
			exp++
		}
		if exp == 0 {
			return 0, false
		}
	}
	if i != len(b) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return f, err == nil
}

// decodeBase64 decodes standard base64, padded or not.
func decodeBase64(b []byte) ([]byte, bool) {
	enc := base64.StdEncoding
	if len(b)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	out := make([]byte, enc.DecodedLen(len(b)))
	n, err := enc.Decode(out, b)
	if err != nil {
		return nil, false
	}
	return out[:n:n], true
}

// DecodeTableName reads {"TableName":"..."} from a Create Table body.
// Other members are ignored; a missing or null TableName is
// ErrPropertiesNeedValue, a non-string one ErrInvalidInput.
func DecodeTableName(body []byte) (string, error) {
	s := &scanner{buf: body}
	name, found, err := parseTableName(s)
	if err != nil {
		return "", err
	}
	if !found {
		return "", Detailf(ErrPropertiesNeedValue, "Values have not been specified for all properties in the entity: TableName is missing.")
	}
	return name, nil
}

func parseTableName(s *scanner) (name string, found bool, err error) {
	if bytes.HasPrefix(s.buf, []byte("\xEF\xBB\xBF")) {
		s.pos = 3
	}
	s.ws()
	if err := s.expect('{', "'{'"); err != nil {
		return "", false, invalidJSON(err)
	}
	s.ws()
	seen := false
	if s.peek() == '}' {
		s.pos++
	} else {
		for {
			s.ws()
			if s.peek() != '"' {
				return "", false, invalidJSON(s.errAt(s.pos, "expected member name"))
			}
			off := s.pos
			key, err := s.str()
			if err != nil {
				return "", false, invalidJSON(err)
			}
			s.ws()
			if err := s.expect(':', "':'"); err != nil {
				return "", false, invalidJSON(err)
			}
			s.ws()
			if string(key) != "TableName" {
				if err := s.skipValue(0); err != nil {
					return "", false, invalidJSON(err)
				}
			} else {
				if seen {
					return "", false, Detailf(ErrDuplicateProperties, "A property is specified more than one time: 'TableName' at offset %d.", off)
				}
				seen = true
				switch s.peek() {
				case '"':
					v, err := s.str()
					if err != nil {
						return "", false, invalidJSON(err)
					}
					name, found = string(v), true
				case 'n':
					if err := s.word("null"); err != nil {
						return "", false, invalidJSON(err)
					}
				default:
					if err := s.skipValue(0); err != nil {
						return "", false, invalidJSON(err)
					}
					return "", false, Detailf(ErrInvalidInput, "The value of 'TableName' must be a string.")
				}
			}
			s.ws()
			if s.peek() == ',' {
				s.pos++
				continue
			}
			if err := s.expect('}', "',' or '}'"); err != nil {
				return "", false, invalidJSON(err)
			}
			break
		}
	}
	s.ws()
	if s.pos != len(s.buf) {
		return "", false, invalidJSON(s.errAt(s.pos, "data after the JSON object"))
	}
	return name, found, nil
}
