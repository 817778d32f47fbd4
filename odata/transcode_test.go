package odata

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testdb"
)

// sameJSON compares two documents by meaning: same members, same values.
// A number with a point or an exponent is a Double and compares by value
// (0E0 is 0.0); one without compares by its text, so 5 and 5.0 differ.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var norm func(v any) any
	norm = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			if strings.ContainsAny(string(x), ".eE") {
				f, err := x.Float64()
				if err != nil {
					t.Fatalf("number %s: %v", x, err)
				}
				return f
			}
			return string(x)
		case map[string]any:
			for k, e := range x {
				x[k] = norm(e)
			}
		case []any:
			for i, e := range x {
				x[i] = norm(e)
			}
		}
		return v
	}
	parse := func(x []byte) any {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("invalid JSON %q: %v", x, err)
		}
		return norm(v)
	}
	return reflect.DeepEqual(parse(a), parse(b))
}

// The transcoded document must say exactly what decoding the stored form
// and encoding the properties says, for every type, every metadata level
// and $select, on PostgreSQL's own text of the stored form.
func TestTranscodeMatchesDecodeEncode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	cases := [][]Property{sampleProps(), nil, {prop("Only", vStr("x"))}, {prop("Nul", vStr("\x00"))}}
	for _, p := range sampleProps() {
		cases = append(cases, []Property{p})
	}
	for i, props := range cases {
		var stored []byte
		if err := conn.QueryRow(ctx, "SELECT $1::text::jsonb", string(AppendStored(nil, props))).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		decoded, err := DecodeStored(stored, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []Format{NoMetadata, MinimalMetadata, FullMetadata} {
			for _, sel := range [][]string{nil, {"RowKey", "S", "Missing", "DNaN", "Dfive"}} {
				for _, whole := range []bool{false, true} {
					enc := &Encoder{Format: f, ServiceURL: testSvc, Account: "a", Table: "t", Select: sel, WholeDoubleTypes: whole}
					base := Entity{PartitionKey: "p'", RowKey: "r", Timestamp: MinDateTime + 12345, ETag: `W/"x"`}
					viaProps, viaStored := base, base
					viaProps.Properties = decoded
					if viaProps.Properties == nil {
						viaProps.Properties = []Property{}
					}
					viaStored.Stored = stored
					want := enc.AppendEntities(nil, []Entity{viaProps})
					got := enc.AppendEntities(nil, []Entity{viaStored})
					if !sameJSON(t, got, want) {
						t.Errorf("case %d format %d select %v whole %v:\n got %s\nwant %s", i, f, sel, whole, got, want)
					}
				}
			}
		}
	}
}

// Input the transcoder does not know falls back to decoding, never to a
// broken document.
func TestTranscodeFallsBack(t *testing.T) {
	t.Parallel()
	enc := &Encoder{Format: MinimalMetadata, ServiceURL: testSvc, Table: "t"}
	for _, stored := range []string{
		`{"D": ["dt", "2024-01-02T03:04:05Z"]}`, // not the fixed width
		`{"G": ["guid", "C9DA6455-213D-42C9-9A79-3E9149A57833"]}`,
		`{"N": ["i32", "5"]}`,              // a number as a string
		`{"X": ["dbl", "5"]}`,              // no point: would read as Int32
		`{"S": ["str", "a\u0001\u0001b"]}`, // the stored escape of U+0000
		`{"S": ["nope", 1]}`,
	} {
		e := Entity{PartitionKey: "p", RowKey: "r", Stored: []byte(stored)}
		got := enc.AppendEntity(nil, &e)
		props, err := DecodeStored([]byte(stored), nil)
		want := enc.AppendEntity(nil, &Entity{PartitionKey: "p", RowKey: "r", Properties: props})
		if err != nil {
			want = enc.AppendEntity(nil, &Entity{PartitionKey: "p", RowKey: "r", Properties: []Property{}})
		}
		if !sameJSON(t, got, want) {
			t.Errorf("%s:\n got %s\nwant %s", stored, got, want)
		}
	}
}

// FuzzTranscode: whatever DecodeStored accepts, the transcoder writes the
// same document as decoding and encoding, or declines.
func FuzzTranscode(f *testing.F) {
	f.Add([]byte(pgStyle(AppendStored(nil, sampleProps()))))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"A": ["dbl", "1E+21"], "B": ["dt", "1601-01-01T00:00:00.0000000Z"]}`))
	f.Fuzz(func(t *testing.T, stored []byte) {
		props, err := DecodeStored(stored, nil)
		if err != nil {
			return
		}
		enc := &Encoder{Format: MinimalMetadata, ServiceURL: testSvc, Table: "t", WholeDoubleTypes: true}
		dst := []byte("{")
		out, ok := enc.appendStoredMembers(dst, stored)
		if !ok {
			if !bytes.Equal(out, []byte("{")) {
				t.Fatalf("declined but wrote %q", out)
			}
			return
		}
		got := append(out, '}')
		want := append(enc.appendEntityPropsOnly(props), '}')
		if !sameJSON(t, got, want) {
			t.Fatalf("stored %q:\n got %s\nwant %s", stored, got, want)
		}
	})
}

// appendEntityPropsOnly writes just the properties, as the transcoder does.
func (enc *Encoder) appendEntityPropsOnly(props []Property) []byte {
	dst := []byte("{")
	for i := range props {
		dst = enc.appendProperty(dst, props[i].Name, &props[i].Value)
	}
	return dst
}
