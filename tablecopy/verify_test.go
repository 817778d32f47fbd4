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
