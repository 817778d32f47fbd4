package odata

import (
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Encoder writes response bodies (rest-protocol.md §4.1, §4.4): compact
// JSON, members in the order Azure emits them.
//
// ServiceURL is the service base as the client addressed it, without a
// trailing slash (http://127.0.0.1:10002/devstoreaccount1). Select, when
// non-nil, lists the properties to write, in order and without duplicates
// (as ParseSelect returns them); nil means all.
type Encoder struct {
	Format     Format
	ServiceURL string
	Account    string
	Table      string
	Select     []string
	// WholeDoubleTypes annotates Doubles of whole value (5.0, -0.0) with
	// Edm.Double where metadata is written. Azure leaves them bare, and
	// clients that parse JSON numbers without their lexical form (the
	// JavaScript SDK, Go's ListEntities) then read them back as Int32.
	WholeDoubleTypes bool
}

// wholeDouble reports whether AppendDouble writes f as a whole number with
// ".0", which clients that drop the lexical form read as an integer. From
// 1e21 on it writes an exponent, and every client reads a Double.
func wholeDouble(f float64) bool { return f == math.Trunc(f) && math.Abs(f) < 1e21 }

// AppendEntity appends a single-entity document.
func (enc *Encoder) AppendEntity(dst []byte, e *Entity) []byte {
	dst = append(dst, '{')
	if enc.Format != NoMetadata {
		dst = enc.appendMetadataURL(dst, enc.Table, true)
	}
	dst = enc.appendEntityMembers(dst, e)
	return append(dst, '}')
}

// AppendEntityObject appends e as one JSON object of its members in
// enc.Format, without a document's metadata URL: an entity embedded in
// another document (the change feed's).
func (enc *Encoder) AppendEntityObject(dst []byte, e *Entity) []byte {
	dst = append(dst, '{')
	dst = enc.appendEntityMembers(dst, e)
	return append(dst, '}')
}

// AppendEntities appends a collection document.
func (enc *Encoder) AppendEntities(dst []byte, es []Entity) []byte {
	dst = append(dst, '{')
	if enc.Format != NoMetadata {
		dst = enc.appendMetadataURL(dst, enc.Table, false)
		dst = append(dst, ',')
	}
	dst = append(dst, `"value":[`...)
	// Written already, the entities' size is known: one allocation at most.
	n := 0
	for i := range es {
		n += len(es[i].Encoded) + 1
	}
	dst = slices.Grow(dst, n+2)
	for i := range es {
		if i > 0 {
			dst = append(dst, ',')
		}
		if es[i].Encoded != nil {
			dst = append(dst, es[i].Encoded...)
			continue
		}
		dst = append(dst, '{')
		dst = enc.appendEntityMembers(dst, &es[i])
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// AppendTable appends a single-table document.
func (enc *Encoder) AppendTable(dst []byte, name string) []byte {
	dst = append(dst, '{')
	if enc.Format != NoMetadata {
		dst = enc.appendMetadataURL(dst, "Tables", true)
	}
	dst = enc.appendTableMembers(dst, name)
	return append(dst, '}')
}

// AppendTables appends a table collection document.
func (enc *Encoder) AppendTables(dst []byte, names []string) []byte {
	dst = append(dst, '{')
	if enc.Format != NoMetadata {
		dst = enc.appendMetadataURL(dst, "Tables", false)
		dst = append(dst, ',')
	}
	dst = append(dst, `"value":[`...)
	for i, name := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		dst = enc.appendTableMembers(dst, name)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendMetadataURL writes "odata.metadata":"{svc}/$metadata#<set>[/@Element]".
func (enc *Encoder) appendMetadataURL(dst []byte, set string, element bool) []byte {
	dst = append(dst, `"odata.metadata":"`...)
	dst = appendStringBody(dst, enc.ServiceURL)
	dst = append(dst, "/$metadata#"...)
	dst = appendStringBody(dst, set)
	if element {
		dst = append(dst, "/@Element"...)
	}
	return append(dst, '"')
}

// appendKey starts a member, with the comma that separates it from the one
// before; every object here starts with '{', so that byte tells.
func appendKey(dst []byte, name string) []byte {
	if dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	dst = appendString(dst, name)
	return append(dst, ':')
}

// appendAnnotation writes "name@odata.type":"<type>".
func appendAnnotation(dst []byte, name string, t EdmType) []byte {
	if dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = appendStringBody(dst, name)
	dst = append(dst, `@odata.type":"`...)
	dst = append(dst, t.String()...)
	return append(dst, '"')
}

func (enc *Encoder) appendEntityMembers(dst []byte, e *Entity) []byte {
	full := enc.Format == FullMetadata
	if full {
		dst = appendKey(dst, "odata.type")
		dst = append(dst, '"')
		dst = appendStringBody(dst, enc.Account)
		dst = append(dst, '.')
		dst = appendStringBody(dst, enc.Table)
		dst = append(dst, '"')
		dst = appendKey(dst, "odata.id")
		dst = append(dst, '"')
		dst = appendStringBody(dst, enc.ServiceURL)
		dst = append(dst, '/')
		dst = appendEntityPath(dst, enc.Table, e.PartitionKey, e.RowKey)
		dst = append(dst, '"')
	}
	if enc.Format != NoMetadata && e.ETag != "" {
		dst = appendKey(dst, "odata.etag")
		dst = appendString(dst, e.ETag)
	}
	if full {
		dst = appendKey(dst, "odata.editLink")
		dst = append(dst, '"')
		dst = appendEntityPath(dst, enc.Table, e.PartitionKey, e.RowKey)
		dst = append(dst, '"')
	}
	props := e.Properties
	if props == nil && e.Stored != nil {
		if enc.Select == nil {
			dst = appendKey(dst, "PartitionKey")
			dst = appendString(dst, e.PartitionKey)
			dst = appendKey(dst, "RowKey")
			dst = appendString(dst, e.RowKey)
			dst = enc.appendTimestamp(dst, e.Timestamp)
			if out, ok := enc.appendStoredMembers(dst, e.Stored); ok {
				return out
			}
			// Not in the form the transcoder knows: decode it. A stored
			// form that does not even decode is written as no properties
			// rather than as broken JSON; the store checks it on read.
			props, _ = DecodeStored(e.Stored, nil)
			for i := range props {
				dst = enc.appendProperty(dst, props[i].Name, &props[i].Value)
			}
			return dst
		}
		props, _ = DecodeStored(e.Stored, nil)
	}
	if enc.Select == nil {
		dst = appendKey(dst, "PartitionKey")
		dst = appendString(dst, e.PartitionKey)
		dst = appendKey(dst, "RowKey")
		dst = appendString(dst, e.RowKey)
		dst = enc.appendTimestamp(dst, e.Timestamp)
		for i := range e.Properties {
			dst = enc.appendProperty(dst, e.Properties[i].Name, &e.Properties[i].Value)
		}
		return dst
	}
	for _, name := range enc.Select {
		switch name {
		case "PartitionKey":
			dst = appendKey(dst, name)
			dst = appendString(dst, e.PartitionKey)
		case "RowKey":
			dst = appendKey(dst, name)
			dst = appendString(dst, e.RowKey)
		case "Timestamp":
			dst = enc.appendTimestamp(dst, e.Timestamp)
		default:
			if !selectable(name) {
				continue
			}
			if v, ok := findProperty(props, name); ok {
				dst = enc.appendProperty(dst, name, v)
			} else {
				dst = appendKey(dst, name)
				dst = append(dst, "null"...)
			}
		}
	}
	return dst
}

// selectable rejects names that are control information rather than
// properties; writing them would clash with the metadata members.
func selectable(name string) bool {
	if len(name) >= 6 && name[:6] == "odata." {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '@' {
			return false
		}
	}
	return true
}

func findProperty(props []Property, name string) (*Value, bool) {
	for i := range props {
		if props[i].Name == name {
			return &props[i].Value, true
		}
	}
	return nil, false
}

func (enc *Encoder) appendTimestamp(dst []byte, ticks int64) []byte {
	if enc.Format == FullMetadata {
		dst = appendAnnotation(dst, "Timestamp", EdmDateTime)
	}
	dst = appendKey(dst, "Timestamp")
	dst = append(dst, '"')
	dst = AppendDateTime(dst, ticks, false)
	return append(dst, '"')
}

// appendProperty writes a property, preceded by its type annotation where
// the value's JSON form does not imply the type (and metadata is wanted).
func (enc *Encoder) appendProperty(dst []byte, name string, v *Value) []byte {
	annotate := enc.Format != NoMetadata
	switch v.Type {
	case EdmString:
		dst = appendKey(dst, name)
		return appendString(dst, v.Str)
	case EdmInt32:
		dst = appendKey(dst, name)
		return strconv.AppendInt(dst, v.Int, 10)
	case EdmBoolean:
		dst = appendKey(dst, name)
		return strconv.AppendBool(dst, v.Bool)
	case EdmDouble:
		if s, special := DoubleSpecial(v.Float); special {
			if annotate {
				dst = appendAnnotation(dst, name, EdmDouble)
			}
			dst = appendKey(dst, name)
			dst = append(dst, '"')
			dst = append(dst, s...)
			return append(dst, '"')
		}
		if annotate && enc.WholeDoubleTypes && wholeDouble(v.Float) {
			dst = appendAnnotation(dst, name, EdmDouble)
		}
		dst = appendKey(dst, name)
		return AppendDouble(dst, v.Float)
	case EdmInt64, EdmDateTime, EdmGuid, EdmBinary:
		if annotate {
			dst = appendAnnotation(dst, name, v.Type)
		}
		dst = appendKey(dst, name)
		dst = append(dst, '"')
		switch v.Type {
		case EdmInt64:
			dst = strconv.AppendInt(dst, v.Int, 10)
		case EdmDateTime:
			dst = AppendDateTime(dst, v.Int, false)
		case EdmGuid:
			dst = appendStringBody(dst, v.Str)
		case EdmBinary:
			dst = base64.StdEncoding.AppendEncode(dst, v.Bytes)
		}
		return append(dst, '"')
	}
	// A Value without a valid type is a bug upstream; null keeps the
	// document well-formed.
	dst = appendKey(dst, name)
	return append(dst, "null"...)
}

func (enc *Encoder) appendTableMembers(dst []byte, name string) []byte {
	if enc.Format == FullMetadata {
		dst = appendKey(dst, "odata.type")
		dst = append(dst, '"')
		dst = appendStringBody(dst, enc.Account)
		dst = append(dst, `.Tables"`...)
		dst = appendKey(dst, "odata.id")
		dst = append(dst, '"')
		dst = appendStringBody(dst, enc.ServiceURL)
		dst = append(dst, "/Tables("...)
		dst = appendKeyLiteral(dst, name)
		dst = append(dst, `)"`...)
		dst = appendKey(dst, "odata.editLink")
		dst = append(dst, `"Tables(`...)
		dst = appendKeyLiteral(dst, name)
		dst = append(dst, `)"`...)
	}
	if enc.Select == nil {
		dst = appendKey(dst, "TableName")
		return appendString(dst, name)
	}
	for _, sel := range enc.Select {
		if !selectable(sel) {
			continue
		}
		dst = appendKey(dst, sel)
		if sel == "TableName" {
			dst = appendString(dst, name)
		} else {
			dst = append(dst, "null"...)
		}
	}
	return dst
}

// EntityPath returns table(PartitionKey='..',RowKey='..') with keys escaped.
//
// Keys are written as OData string literals (quotes doubled) and then
// percent-encoded the way .NET and Go's url.PathEscape do it, except for the
// quotes that delimit the literals, which every SDK sends literally.
func EntityPath(table, pk, rk string) string {
	return string(AppendEntityPath(nil, table, pk, rk))
}

// AppendEntityPath appends EntityPath(table, pk, rk) to dst.
func AppendEntityPath(dst []byte, table, pk, rk string) []byte {
	dst = append(dst, table...)
	return appendKeyPredicate(dst, pk, rk)
}

// appendEntityPath is EntityPath for the inside of a JSON string: the
// table name is JSON-escaped (it is alphanumeric in practice), the key
// literals need no escaping once percent-encoded.
func appendEntityPath(dst []byte, table, pk, rk string) []byte {
	dst = appendStringBody(dst, table)
	return appendKeyPredicate(dst, pk, rk)
}

func appendKeyPredicate(dst []byte, pk, rk string) []byte {
	dst = append(dst, "(PartitionKey="...)
	dst = appendKeyLiteral(dst, pk)
	dst = append(dst, ",RowKey="...)
	dst = appendKeyLiteral(dst, rk)
	return append(dst, ')')
}

// appendKeyLiteral appends 'value' with inner quotes doubled and everything
// that url.PathEscape escapes percent-encoded (so a doubled quote becomes
// %27%27).
func appendKeyLiteral(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	dst = append(dst, '\'')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '.', c == '~',
			c == '$', c == '&', c == '+', c == ':', c == '=', c == '@':
			dst = append(dst, c)
		case c == '\'':
			dst = append(dst, "%27%27"...)
		default:
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		}
	}
	return append(dst, '\'')
}

// appendString appends s as a quoted JSON string.
// AppendJSONString appends s as a JSON string.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }

func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendStringBody(dst, s)
	return append(dst, '"')
}

// plainJSON marks the bytes that a JSON string holds as they are: ASCII
// but for controls, '"' and '\\'. One lookup per byte of every key and
// ETag of a page, where four comparisons took a fifth of its encoding.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendStringBody appends s JSON-escaped, without quotes: '"', '\' and
// control characters escaped, everything else raw. Invalid UTF-8 (which no
// Value should hold) becomes U+FFFD so the document stays valid.
func appendStringBody(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainJSON[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || n != 1 {
				i += n
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		}
		i++
		start = i
	}
	return append(dst, s[start:]...)
}
