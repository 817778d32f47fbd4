package odata

// EdmType is one of the eight property types of the Table service.
type EdmType uint8

// The EDM types the Table service stores.
const (
	EdmString EdmType = iota + 1
	EdmInt32
	EdmInt64
	EdmDouble
	EdmBoolean
	EdmDateTime
	EdmGuid
	EdmBinary
)

var edmNames = [...]string{
	EdmString:   "Edm.String",
	EdmInt32:    "Edm.Int32",
	EdmInt64:    "Edm.Int64",
	EdmDouble:   "Edm.Double",
	EdmBoolean:  "Edm.Boolean",
	EdmDateTime: "Edm.DateTime",
	EdmGuid:     "Edm.Guid",
	EdmBinary:   "Edm.Binary",
}

// String returns the OData name, such as "Edm.Int64".
func (t EdmType) String() string {
	if int(t) < len(edmNames) && edmNames[t] != "" {
		return edmNames[t]
	}
	return "Edm.Unknown"
}

// Value is a typed, non-null property value. Exactly one field besides Type
// is meaningful:
//
//	EdmString   Str (valid UTF-8; may contain U+0000)
//	EdmInt32    Int (within int32 range)
//	EdmInt64    Int
//	EdmDouble   Float (NaN and ±Inf allowed)
//	EdmBoolean  Bool
//	EdmDateTime Int: ticks of 100 ns since 0001-01-01T00:00:00Z (see Ticks)
//	EdmGuid     Str: lower-case canonical 8-4-4-4-12 form
//	EdmBinary   Bytes
type Value struct {
	Type  EdmType
	Str   string
	Int   int64
	Float float64
	Bool  bool
	Bytes []byte
}

// Property is a named user property of an entity.
type Property struct {
	Name  string
	Value Value
}

// Entity is a stored entity: its keys, its server-assigned Timestamp and ETag,
// and its user properties (never PartitionKey, RowKey or Timestamp).
//
// Entities read from the database may carry their properties still in the
// stored form (Stored, PostgreSQL's text of it) with Properties nil: the
// Encoder writes them from there without decoding, which is most of the
// read path's work. DecodeProperties fills Properties when they are needed.
//
// A page of a query may come already written (Encoded): each entity as
// its object, by the Encoder of the document that holds it, written as
// its row arrived from the database, so that the page's writing overlaps
// the database's sending, and the stored form is never copied.
type Entity struct {
	PartitionKey string
	RowKey       string
	Timestamp    int64 // ticks, see Ticks
	ETag         string
	Properties   []Property
	Stored       []byte
	// Encoded is the entity as AppendEntityObject of the document's
	// Encoder writes it, when written already; Properties and Stored are
	// then nil.
	Encoded []byte
}

// DecodeProperties fills Properties from Stored, if they are not there yet.
func (e *Entity) DecodeProperties() error {
	if e.Properties != nil || e.Stored == nil {
		return nil
	}
	props, err := DecodeStored(e.Stored, nil)
	if err != nil {
		return err
	}
	if props == nil {
		props = []Property{}
	}
	e.Properties = props
	return nil
}

// Property returns the named user property and whether it exists.
func (e *Entity) Property(name string) (Value, bool) {
	_ = e.DecodeProperties()
	for i := range e.Properties {
		if e.Properties[i].Name == name {
			return e.Properties[i].Value, true
		}
	}
	return Value{}, false
}

// ParseEdmType returns the type of an OData name such as "Edm.Int64".
func ParseEdmType(name string) (EdmType, bool) {
	for t, n := range edmNames {
		if n != "" && n == name {
			return EdmType(t), true
		}
	}
	return 0, false
}
