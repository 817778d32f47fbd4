package integration

import (
	"context"
	"slices"
	"testing"

	"github.com/pgtables/pgtables/tableapi"
	"github.com/pgtables/pgtables/tablecopy"
)

// pgtables copy -indexes: a table's index definitions go from one
// pgtables into a dump with its entities, and from the dump to another
// pgtables, where they are declared (and build) once the entities are
// in; copied again, the destination keeps the indexes it has.
func TestCopyIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := newEnv(t), newEnv(t)
	client, table := src.newTable()
	addAges(t, client, 150)
	defs := []tableapi.IndexSpec{
		{Property: "Age", Type: "Edm.Int32"},
		{Property: "Age", Type: "Edm.Int64", AfterPartitionKey: true},
	}
	for _, ix := range defs {
		if _, err := src.indexClient(t).CreateIndex(ctx, table, ix); err != nil {
			t.Fatal(err)
		}
	}
	from, err := tablecopy.NewEndpoint(src.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dump, err := tablecopy.CreateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tablecopy.Copy(ctx, from, dump, tablecopy.Options{Tables: []string{table}, Indexes: true}); err != nil {
		t.Fatal(err)
	}
	if err := dump.Close(); err != nil {
		t.Fatal(err)
	}
	fromDump, err := tablecopy.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	to, err := tablecopy.NewEndpoint(dst.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		results, err := tablecopy.Copy(ctx, fromDump, to, tablecopy.Options{Indexes: true})
		if err != nil || len(results) != 1 || results[0].Entities != 150 {
			t.Fatalf("copy from the dump: %+v, %v; want 150 entities", results, err)
		}
	}
	got, err := dst.indexClient(t).Indexes(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	var specs []tableapi.IndexSpec
	for _, ix := range got {
		specs = append(specs, tableapi.IndexSpec{Property: ix.Property, Type: ix.Type, AfterPartitionKey: ix.AfterPartitionKey})
		if ix.State == "failed" {
			t.Errorf("index on %s %s failed at the destination: %s", ix.Property, ix.Type, ix.Error)
		}
	}
	if !slices.Equal(specs, defs) {
		t.Errorf("the destination holds indexes %+v, want %+v", specs, defs)
	}
}
