package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/odata/filter"
)

// A page whose filter the key does not serve counts the rows it examined:
// the whole table for a property alone, the one partition when the filter
// pins it; a page that the key serves counts nothing.
func TestQueryCountsExaminedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	if err := s.CreateTable(ctx, acct, "ex"); err != nil {
		t.Fatal(err)
	}
	for p, n := range []int{30, 60} {
		for r := range n {
			w := &Write{Op: OpInsert, PartitionKey: fmt.Sprintf("p%d", p), RowKey: fmt.Sprintf("r%03d", r), Properties: props("N", r)}
			if _, err := s.Write(ctx, acct, "ex", w); err != nil {
				t.Fatal(err)
			}
		}
	}
	// On Citus only the chunked scan counts.
	citus := testdb.Citus()
	tests := []struct {
		name     string
		opts     Options
		filter   string
		min, max int64 // examined; 0, 0: not counted
		maybe    bool  // may be left uncounted
	}{
		{"property", Options{}, "N eq -1", 90, 91, citus},
		{"property in a partition", Options{}, "PartitionKey eq 'p1' and N eq -1", 60, 61, citus},
		{"chunked scan", Options{ScanFirst: time.Nanosecond, ScanChunk: 7}, "N eq -1", 90, 90 + 90/7, false},
		{"partition", Options{}, "PartitionKey eq 'p1'", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := detected(t, NewWithOptions(s.pool, tt.opts))
			f, err := filter.Parse(tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			page, err := st.QueryEntities(ctx, acct, "ex", EntityQuery{Filter: f, Top: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if page.More || len(page.Entities) != 0 && tt.max > 0 {
				t.Fatalf("%d entities, more %v: want one empty page", len(page.Entities), page.More)
			}
			switch {
			case !page.Counted && (tt.maybe || tt.max == 0):
			case !page.Counted || tt.max == 0:
				t.Errorf("counted %v, want %v", page.Counted, tt.max > 0)
			case page.Examined < tt.min || page.Examined > tt.max:
				t.Errorf("examined %d rows, want %d..%d", page.Examined, tt.min, tt.max)
			}
		})
	}
}

// With an index on the property, the page examines the rows the index
// finds, not the table: the counted statement is planned for its values,
// as every statement that may use an index is.
func TestQueryCountsExaminedRowsWithIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	if err := s.CreateTable(ctx, acct, "exi"); err != nil {
		t.Fatal(err)
	}
	// Enough rows that a scan costs more than the index.
	const n = 5000
	for p := range n / 100 {
		var ws []Write
		for r := range 100 {
			ws = append(ws, Write{Op: OpInsert, PartitionKey: fmt.Sprintf("p%03d", p), RowKey: fmt.Sprintf("r%03d", r), Properties: props("N", p*100+r)})
		}
		if _, err := s.Batch(ctx, acct, "exi", ws); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE entities"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIndex(ctx, acct, "exi", IndexSpec{Property: "N", Type: odata.EdmInt32}); err != nil {
		t.Fatal(err)
	}
	for ready := false; !ready; {
		ixs, err := s.Indexes(ctx, acct, "exi")
		if err != nil {
			t.Fatal(err)
		}
		if len(ixs) != 1 || ixs[0].State == IndexFailed {
			t.Fatalf("indexes %+v", ixs)
		}
		ready = ixs[0].State == IndexReady
		time.Sleep(20 * time.Millisecond)
	}
	f, err := filter.Parse("N eq 7 or N eq 250")
	if err != nil {
		t.Fatal(err)
	}
	// Run more than the five times after which a prepared statement may
	// get a generic plan, which no partial index serves.
	for i := range 8 {
		page, err := s.QueryEntities(ctx, acct, "exi", EntityQuery{Filter: f, Top: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Entities) != 2 {
			t.Fatalf("%d entities, want 2", len(page.Entities))
		}
		if page.Counted && page.Examined > 10 {
			t.Fatalf("run %d examined %d rows of %d for 2 matches: the index was not used", i+1, page.Examined, n)
		}
		if !page.Counted && !testdb.Citus() {
			t.Fatal("not counted")
		}
	}
}
