package tablecopy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Entity is one entity as it travels: its keys and its properties, each
// with its EDM type, in the order the source gave them.
type Entity struct {
	PartitionKey, RowKey string
	Props                []Prop
}

// Prop is one property: its EDM type ("Edm.String", ...) and its value as
// the protocol's JSON writes it (Int64 as a string of digits, a Double's
// NaN and infinities as strings, Binary as base64).
type Prop struct {
	Name  string
	Type  string
	Value json.RawMessage
}

// parseEntity reads an entity from the JSON object a query returns with
// full metadata, or a line of a dump: values, their "@odata.type"
// annotations, and odata.* fields and Timestamp, which it drops (the
// destination stamps its own). Without an annotation, the JSON kind of a
// value tells its type, as the protocol defines: a string is a String, a
// number without a fraction or exponent within the Int32 range an Int32,
// any other number a Double. Servers such as Azurite write a whole-number
// Double beyond the Int32 range bare (27780995601534970000), and the SDKs
// and the server read that as a Double.
func parseEntity(obj []byte) (Entity, error) {
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return Entity{}, errors.New("entity: not a JSON object")
	}
	var (
		e      Entity
		values = map[string]json.RawMessage{}
		types  = map[string]string{}
		order  []string
		keys   = map[string]bool{}
	)
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return Entity{}, fmt.Errorf("entity: %w", err)
		}
		name := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return Entity{}, fmt.Errorf("entity: %s: %w", name, err)
		}
		if keys[name] {
			return Entity{}, fmt.Errorf("entity: %s twice", name)
		}
		keys[name] = true
		switch {
		case strings.HasPrefix(name, "odata."), name == "Timestamp", name == "Timestamp@odata.type":
		case strings.HasSuffix(name, "@odata.type"):
			var typ string
			if err := json.Unmarshal(v, &typ); err != nil {
				return Entity{}, fmt.Errorf("entity: %s: %w", name, err)
			}
			types[strings.TrimSuffix(name, "@odata.type")] = typ
		case name == "PartitionKey" || name == "RowKey":
			var key string
			if err := json.Unmarshal(v, &key); err != nil {
				return Entity{}, fmt.Errorf("entity: %s: %w", name, err)
			}
			if name == "PartitionKey" {
				e.PartitionKey = key
			} else {
				e.RowKey = key
			}
		default:
			values[name] = v
			order = append(order, name)
		}
	}
	if _, err := d.Token(); err != nil {
		return Entity{}, fmt.Errorf("entity: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return Entity{}, errors.New("entity: data after the object")
	}
	if !keys["PartitionKey"] || !keys["RowKey"] {
		return Entity{}, errors.New("entity: without PartitionKey or RowKey")
	}
	for _, name := range order {
		v := values[name]
		typ := types[name]
		if typ == "" {
			switch c := v[0]; {
			case c == '"':
				typ = "Edm.String"
			case c == 't' || c == 'f':
				typ = "Edm.Boolean"
			case c == 'n':
				continue // null: the property is not there
			case bytes.ContainsAny(v, ".eE") || !isInt32(v):
				typ = "Edm.Double"
			default:
				typ = "Edm.Int32"
			}
		}
		e.Props = append(e.Props, Prop{Name: name, Type: typ, Value: v})
	}
	return e, nil
}

// isInt32 reports whether the digits of a JSON number without a fraction or
// exponent name a value within the Int32 range.
func isInt32(digits []byte) bool {
	_, err := strconv.ParseInt(string(digits), 10, 32)
	return err == nil
}

// MarshalJSON writes the entity with a type annotation on every property
// whose JSON kind alone would not say its type: on everything but String,
// Boolean and Int32, so that a whole-number Double stays a Double.
func (e Entity) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	key := func(s string) {
		k, _ := json.Marshal(s)
		b.Write(k)
		b.WriteByte(':')
	}
	b.WriteByte('{')
	for i, k := range [2][2]string{{"PartitionKey", e.PartitionKey}, {"RowKey", e.RowKey}} {
		if i > 0 {
			b.WriteByte(',')
		}
		key(k[0])
		v, _ := json.Marshal(k[1]) // a string always marshals
		b.Write(v)
	}
	for _, p := range e.Props {
		b.WriteByte(',')
		if p.Type != "Edm.String" && p.Type != "Edm.Boolean" && p.Type != "Edm.Int32" {
			key(p.Name + "@odata.type")
			t, _ := json.Marshal(p.Type)
			b.Write(t)
			b.WriteByte(',')
		}
		key(p.Name)
		b.Write(p.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
