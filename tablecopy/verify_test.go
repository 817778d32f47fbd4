package tablecopy

import (
	"context"
	"reflect"
	"testing"
)

// Verify compares by value and type, not by text, and names the keys that
// differ.
func TestVerify(t *testing.T) {
	t.Parallel()
	ent := func(pk, rk string, props ...Prop) Entity { return Entity{PartitionKey: pk, RowKey: rk, Props: props} }
	p := func(name, typ, v string) Prop { return Prop{Name: name, Type: typ, Value: []byte(v)} }
	src := &memTables{tables: map[string][]Entity{"t": {
		ent("a", "1", p("D", "Edm.Double", `5.0`), p("T", "Edm.DateTime", `"2024-01-01T00:00:00Z"`), p("G", "Edm.Guid", `"AB5C0000-0000-0000-0000-000000000000"`)),
		ent("a", "2", p("N", "Edm.Double", `"NaN"`), p("S", "Edm.String", `"x"`)),
		ent("b", "1", p("L", "Edm.Int64", `"9007199254740993"`)),
		ent("c", "1"),
	}}}
	same := &memTables{tables: map[string][]Entity{"t": {
		// The same values in other words, and properties in another order.
		ent("a", "1", p("G", "Edm.Guid", `"ab5c0000-0000-0000-0000-000000000000"`), p("T", "Edm.DateTime", `"2024-01-01T00:00:00.0000000Z"`), p("D", "Edm.Double", `5E0`)),
		ent("a", "2", p("S", "Edm.String", `"x"`), p("N", "Edm.Double", `"NaN"`)),
		ent("b", "1", p("L", "Edm.Int64", `"9007199254740993"`)),
		ent("c", "1"),
	}}}
	other := &memTables{tables: map[string][]Entity{"t": {
		ent("a", "1", p("D", "Edm.Int32", `5`), p("T", "Edm.DateTime", `"2024-01-01T00:00:00Z"`), p("G", "Edm.Guid", `"ab5c0000-0000-0000-0000-000000000000"`)),
		ent("b", "1", p("L", "Edm.Int64", `"9007199254740992"`)),
		ent("b", "2"),
		ent("c", "1"),
	}}}
	ctx := context.Background()
	c := Verify(ctx, src, same, []string{"t"}, "")[0]
	if !c.Equal() || c.Source != 4 || c.Dest != 4 {
		t.Errorf("same entities: %+v", c)
	}
	c = Verify(ctx, src, other, []string{"t"}, "")[0]
	want := TableCheck{Missing: []string{`"a"/"2"`}, Extra: []string{`"b"/"2"`}, Changed: []string{`"a"/"1"`, `"b"/"1"`}}
	if c.Equal() || c.Err != nil || !reflect.DeepEqual([][]string{c.Missing, c.Extra, c.Changed}, [][]string{want.Missing, want.Extra, want.Changed}) {
		t.Errorf("other entities: %+v", c)
	}
}

// A whole-number Double one server writes bare (Azurite:
// 27780995601534970000) and another with an annotation and an exponent
// is the same value: verify reads both as Doubles, as the copy does,
// rather than failing on an Int32 out of range.
func TestVerifyBareWholeDoubles(t *testing.T) {
	t.Parallel()
	parse := func(lines ...string) []Entity {
		var es []Entity
		for _, l := range lines {
			e, err := parseEntity([]byte(l))
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			es = append(es, e)
		}
		return es
	}
	bare := &memTables{tables: map[string][]Entity{"t": parse(
		`{"PartitionKey":"p","RowKey":"1","Big":27780995601534970000,"Over":2147483648,"Under":-2147483649,"Small":7}`,
		`{"PartitionKey":"p","RowKey":"2","Neg":-27780995601534970000}`,
	)}}
	annotated := &memTables{tables: map[string][]Entity{"t": parse(
		`{"PartitionKey":"p","RowKey":"1","Big@odata.type":"Edm.Double","Big":2.778099560153497E+19,"Over@odata.type":"Edm.Double","Over":2147483648.0,`+
			`"Under@odata.type":"Edm.Double","Under":-2.147483649e9,"Small":7}`,
		`{"PartitionKey":"p","RowKey":"2","Neg@odata.type":"Edm.Double","Neg":-2.778099560153497e19}`,
	)}}
	// The same values as an Int64 are another type, and a difference.
	int64s := &memTables{tables: map[string][]Entity{"t": parse(
		`{"PartitionKey":"p","RowKey":"1","Big":27780995601534970000,"Over@odata.type":"Edm.Int64","Over":"2147483648","Under":-2147483649,"Small":7}`,
		`{"PartitionKey":"p","RowKey":"2","Neg":-27780995601534970000}`,
	)}}
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		src, dst Source
		equal    bool
	}{
		{"bare to annotated", bare, annotated, true},
		{"annotated to bare", annotated, bare, true},
		{"bare to bare", bare, bare, true},
		{"Double to Int64", bare, int64s, false},
	} {
		c := Verify(ctx, tc.src, tc.dst, []string{"t"}, "")[0]
		if c.Err != nil || c.Equal() != tc.equal || c.Source != 2 || c.Dest != 2 {
			t.Errorf("%s: %+v, want equal %v", tc.name, c, tc.equal)
		}
	}
}
