package odata

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the Table service (rest-protocol.md §4.11). Lengths are in
// UTF-16 code units, the unit the service counts in.
const (
	maxUserProperties = 252     // 255 including PartitionKey, RowKey, Timestamp
	maxEntitySize     = 1 << 20 // Azure's size formula, see EntitySize
	maxKeyLen         = 512     // 1 KiB of UTF-16
	maxNameLen        = 255
	maxStringLen      = 32768 // 64 KiB of UTF-16
	maxBinaryLen      = 65536
	minTableNameLen   = 3
	maxTableNameLen   = 63
)

// ValidateKey checks a PartitionKey or RowKey value; name is "PartitionKey" or "RowKey".
func ValidateKey(name, value string) error {
	bad := utf16Over(value, maxKeyLen) || !utf8.ValidString(value)
	for i := 0; i < len(value) && !bad; i++ {
		switch c := value[i]; {
		case c < 0x20, c == 0x7F, c == '/', c == '\\', c == '#', c == '?':
			bad = true
		case c == 0xC2 && i+1 < len(value) && value[i+1] <= 0x9F:
			// U+0080..U+009F are C2 80..C2 9F in UTF-8.
			bad = true
		}
	}
	if bad {
		return Detailf(ErrOutOfRangeInput, "The '%s' parameter of value '%s' is out of range.", name, truncateForMessage(value))
	}
	return nil
}

// EntitySize is Azure's size of an entity.
//
// The formula is the one Azure documents: 4 bytes of overhead, the keys as
// UTF-16, and per property 8 bytes plus its UTF-16 name plus its value.
func EntitySize(pk, rk string, props []Property) int {
	return 4 + 2*(utf16Len(pk)+utf16Len(rk)) + PropertiesSize(props)
}

// PropertiesSize is the part of EntitySize that props contribute.
func PropertiesSize(props []Property) int {
	n := 0
	for i := range props {
		n += 8 + 2*utf16Len(props[i].Name) + valueSize(&props[i].Value)
	}
	return n
}

func valueSize(v *Value) int {
	switch v.Type {
	case EdmString:
		return 4 + 2*utf16Len(v.Str)
	case EdmBinary:
		return 4 + len(v.Bytes)
	case EdmBoolean:
		return 1
	case EdmInt32:
		return 4
	case EdmInt64, EdmDouble, EdmDateTime:
		return 8
	case EdmGuid:
		return 16
	}
	return 0
}

// CheckEntity checks the limits that depend on the whole entity.
func CheckEntity(pk, rk string, props []Property) error {
	if err := ValidateKey("PartitionKey", pk); err != nil {
		return err
	}
	if err := ValidateKey("RowKey", rk); err != nil {
		return err
	}
	if len(props) > maxUserProperties {
		return errTooManyProperties()
	}
	if EntitySize(pk, rk, props) > maxEntitySize {
		return Detailf(ErrEntityTooLarge, "The entity is larger than the maximum allowed size (1MB).")
	}
	return nil
}

func errTooManyProperties() error {
	return Detailf(ErrTooManyProperties, "The entity contains more properties than allowed. Each entity can include up to 252 properties to store data. Each entity also has 3 system properties.")
}

// ValidateTableName checks a table name for Create Table.
//
// A name with a character outside [A-Za-z0-9] or a leading digit is
// InvalidResourceName whatever its length; only a well-formed name of the
// wrong length is OutOfRangeInput.
func ValidateTableName(name string) error {
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		if !letter && (i == 0 || !isDigit(c)) {
			return Detailf(ErrInvalidResourceName, "The specifed resource name contains invalid characters.")
		}
	}
	if len(name) < minTableNameLen || len(name) > maxTableNameLen {
		return Detailf(ErrOutOfRangeInput, "The specified resource name length is not within the permissible limits.")
	}
	if strings.EqualFold(name, "tables") {
		return Detailf(ErrInvalidInput, "The table name 'Tables' is reserved.")
	}
	return nil
}

// checkPropertyName applies the name rules in Azure's order: length first,
// then form. The form is that of a C# identifier, which is what the service
// demands (names also travel as XML element names and in $select/$filter).
func checkPropertyName(name []byte) error {
	if utf16Over(name, maxNameLen) {
		return Detailf(ErrPropertyNameTooLong, "The property name exceeds the maximum allowed length (255).")
	}
	if !validPropertyName(name) {
		return Detailf(ErrPropertyNameInvalid, "The property name '%s' is invalid.", truncateForMessage(string(name)))
	}
	return nil
}

// validPropertyName reports whether name is C#-identifier-like: a letter
// (L*, Nl) or '_' first, then letters, Nl, Mn, Mc, Nd, Pc or Cf.
func validPropertyName(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || i > 0 && isDigit(c)
			if !ok {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		if r == utf8.RuneError && n == 1 {
			return false
		}
		ok := unicode.IsLetter(r) || unicode.Is(unicode.Nl, r)
		if !ok && i > 0 {
			ok = unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc, unicode.Cf)
		}
		if !ok {
			return false
		}
		i += n
	}
	return true
}

// CheckPropertyName reports whether name is a valid property name, with
// the error a request naming it would get.
func CheckPropertyName(name string) error { return checkPropertyName([]byte(name)) }
