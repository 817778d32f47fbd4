package tablecopy

import (
	"context"
	"reflect"
	"testing"

	"github.com/pgtables/pgtables/tableapi"
)

// memIndexed is memTables that also holds index definitions, as a
// pgtables endpoint does.
type memIndexed struct {
	memTables
	indexes map[string][]tableapi.Index
}

func (m *memIndexed) Indexes(_ context.Context, table string) ([]tableapi.Index, error) {
	return m.indexes[table], nil
}

// Index definitions go into a dump with the entities and come out of it
// again, without what only the source's state was (name, state,
// progress); without Options.Indexes they stay behind; a destination that
// holds none makes asking for them an error.
func TestCopyIndexesThroughADump(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	defs := []tableapi.Index{
		{Property: "Age", Type: "Edm.Int32"},
		{Property: "Seen", Type: "Edm.DateTime", AfterPartitionKey: true},
	}
	src := &memIndexed{memTables: memTables{tables: map[string][]Entity{"t1": nil, "t2": nil}}, indexes: map[string][]tableapi.Index{
		"t1": {
			{Name: "pi_1_a", Property: "Age", Type: "Edm.Int32", State: "ready"},
			{Name: "pi_1_b", Property: "Seen", Type: "Edm.DateTime", AfterPartitionKey: true, State: "building", Progress: &tableapi.IndexProgress{Phase: "building index"}},
		},
	}}
	for _, tt := range []struct {
		name    string
		indexes bool
		want    []tableapi.Index
	}{
		{"with -indexes", true, defs},
		{"without", false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dump, err := CreateDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Copy(ctx, src, dump, Options{Indexes: tt.indexes}); err != nil {
				t.Fatal(err)
			}
			if err := dump.Close(); err != nil {
				t.Fatal(err)
			}
			back, err := OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := back.Indexes(ctx, "t1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("the dump holds %+v, want %+v", got, tt.want)
			}
			if got, _ := back.Indexes(ctx, "t2"); got != nil {
				t.Errorf("t2, without indexes, has %+v in the dump", got)
			}
		})
	}
	if _, err := Copy(ctx, src, &memTables{tables: map[string][]Entity{}}, Options{Indexes: true}); err == nil {
		t.Error("a copy of indexes into a destination without any succeeded")
	}
}
