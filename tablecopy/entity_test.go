package tablecopy

import (
	"reflect"
	"testing"
)

func TestParseEntityTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json string
		want []Prop
	}{
		{`{"PartitionKey":"p","RowKey":"r","odata.etag":"W/\"x\"","Timestamp":"2024-01-01T00:00:00Z","S":"a","I":5,"D":5.0,"E":1e3,"B":false,"N":null}`,
			[]Prop{{"S", "Edm.String", []byte(`"a"`)}, {"I", "Edm.Int32", []byte(`5`)}, {"D", "Edm.Double", []byte(`5.0`)}, {"E", "Edm.Double", []byte(`1e3`)}, {"B", "Edm.Boolean", []byte(`false`)}}},
		{`{"PartitionKey":"p","RowKey":"r","W@odata.type":"Edm.Double","W":5,"L":"9223372036854775807","L@odata.type":"Edm.Int64"}`,
			[]Prop{{"W", "Edm.Double", []byte(`5`)}, {"L", "Edm.Int64", []byte(`"9223372036854775807"`)}}},
		// Whole numbers beyond the Int32 range, bare as Azurite writes a
		// whole-number Double: Doubles, as the SDKs read them.
		{`{"PartitionKey":"p","RowKey":"r","Max":2147483647,"Min":-2147483648,"Over":2147483648,"Under":-2147483649,"Big":27780995601534970000,"Huge":1000000000000000000000000}`,
			[]Prop{{"Max", "Edm.Int32", []byte(`2147483647`)}, {"Min", "Edm.Int32", []byte(`-2147483648`)}, {"Over", "Edm.Double", []byte(`2147483648`)},
				{"Under", "Edm.Double", []byte(`-2147483649`)}, {"Big", "Edm.Double", []byte(`27780995601534970000`)}, {"Huge", "Edm.Double", []byte(`1000000000000000000000000`)}}},
	} {
		e, err := parseEntity([]byte(tc.json))
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if e.PartitionKey != "p" || e.RowKey != "r" || !reflect.DeepEqual(e.Props, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.json, e, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `{"RowKey":"r"}`, `{"PartitionKey":"p","RowKey":"r","A":1,"A":2}`, `{"PartitionKey":"p","RowKey":"r"} {}`, `{"PartitionKey":1,"RowKey":"r"}`} {
		if _, err := parseEntity([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// What an entity writes, it reads back as the same entity: types and
// values survive a dump.
func FuzzEntityRoundTrip(f *testing.F) {
	f.Add([]byte(`{"PartitionKey":"p","RowKey":"r","S":"a","I":5,"D":5.0,"W@odata.type":"Edm.Double","W":5,"L@odata.type":"Edm.Int64","L":"1"}`))
	f.Add([]byte(`{"PartitionKey":"","RowKey":"","B":true,"N":null}`))
	f.Add([]byte(`{"PartitionKey":"p","RowKey":"r","Big":27780995601534970000,"Over":2147483648}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := parseEntity(raw)
		if err != nil {
			return
		}
		out, err := e.MarshalJSON()
		if err != nil {
			return // keys that JSON cannot hold
		}
		again, err := parseEntity(out)
		if err != nil {
			t.Fatalf("%s wrote %s, which does not parse: %v", raw, out, err)
		}
		if !reflect.DeepEqual(e, again) {
			t.Fatalf("%s wrote %s:\n got %+v\nwant %+v", raw, out, again, e)
		}
	})
}
