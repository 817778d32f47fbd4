package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/internal/testdb"
)

// fill writes partitions of the given sizes, named p00, p01, ..., with
// RowKeys r000, r001, ... and N counting entities in key order, and
// returns every key in order.
func fill(t *testing.T, s *Store, table string, sizes []int) []string {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, table); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for p, size := range sizes {
		pk := fmt.Sprintf("p%02d", p)
		var batch []Write
		for r := 0; r < size; r++ {
			rk := fmt.Sprintf("r%03d", r)
			batch = append(batch, Write{Op: OpInsert, PartitionKey: pk, RowKey: rk, Properties: props("N", len(keys))})
			keys = append(keys, pk+"/"+rk)
			if len(batch) == 100 || r == size-1 {
				if _, err := s.Batch(ctx, acct, table, batch); err != nil {
					t.Fatal(err)
				}
				batch = nil
			}
		}
	}
	return keys
}

// Pages across partitions, which on Citus are found in steps (spread.go),
// hold what one statement over the whole table would: every match once, in
// order, never more than $top, whatever the sizes of the partitions and
// wherever the continuations fall. On PostgreSQL the same test checks the
// one-statement page it is measured against.
func TestCitusPagesAcrossPartitions(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if s.Distributed() != testdb.Citus() {
		t.Fatalf("distributed: %v on this backend", s.Distributed())
	}
	// Empty, single-entity, small and larger-than-a-page partitions, next
	// to each other.
	sizes := []int{1, 3, 0, 250, 1, 1, 7, 120, 0, 2, 1, 40, 300, 5, 1}
	all := fill(t, s, "t1", sizes)
	// On Citus: the nodes' placements read directly (across_nodes.go),
	// and the steps through the coordinator.
	stores := []*Store{s}
	if s.Distributed() {
		stores = append(stores, unrouted(t, s))
	}
	for _, s := range stores {
		pagesAcrossPartitions(t, s, all)
	}
}

// unrouted is a store on s's database whose statements all go to the
// coordinator.
func unrouted(t *testing.T, s *Store) *Store {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), s.pool.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return detected(t, NewWithOptions(pool, Options{RouteConns: -1}))
}

// pagesAcrossPartitions checks TestCitusPagesAcrossPartitions's pages of
// the table t1 of keys all on s.
func pagesAcrossPartitions(t *testing.T, s *Store, all []string) {
	t.Helper()
	for _, tc := range []struct {
		filter string
		keep   func(pk, rk string, n int) bool
	}{
		{"", func(string, string, int) bool { return true }},
		{"N ge 100 and N lt 700", func(_, _ string, n int) bool { return n >= 100 && n < 700 }},
		{"RowKey lt 'r002'", func(_, rk string, _ int) bool { return rk < "r002" }},
		{"PartitionKey ge 'p03' and PartitionKey le 'p07'", func(pk, _ string, _ int) bool { return pk >= "p03" && pk <= "p07" }},
		{"PartitionKey eq 'p12' or PartitionKey eq 'p01'", func(pk, _ string, _ int) bool { return pk == "p12" || pk == "p01" }},
	} {
		var want []string
		for n, k := range all {
			pk, rk, _ := strings.Cut(k, "/")
			if tc.keep(pk, rk, n) {
				want = append(want, k)
			}
		}
		for _, top := range []int{1, 2, 7, 100, 249, 1000} {
			if top < 7 && len(want) > 400 {
				continue // thousands of pages say no more than a few hundred
			}
			got, _, _ := collect(t, s, "t1", tc.filter, top)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("filter %q, top %d: %d keys, want %d\ngot  %.300v\nwant %.300v", tc.filter, top, len(got), len(want), got, want)
			}
		}
	}
	// A shared access signature's key range bounds every step.
	q := EntityQuery{Top: 50, Range: KeyRange{Lower: &KeyBound{PK: "p03", RK: "r100", HasRK: true}, Upper: &KeyBound{PK: "p07", RK: "r003", HasRK: true}}}
	got := slices.Concat(follow(t, s, "t1", q)...)
	var want []string
	for _, k := range all {
		pk, rk, _ := strings.Cut(k, "/")
		if q.Range.Contains(pk, rk) {
			want = append(want, k)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("key range: got %v\nwant %v", got, want)
	}
}

// keysTracer runs hook once, when the first statement that finds a page's
// keys has ended.
type keysTracer struct {
	done atomic.Bool
	hook func()
}

func (k *keysTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(data.SQL, sqlQueryKeys) {
		return context.WithValue(ctx, k, true)
	}
	return ctx
}

func (k *keysTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(k) != nil && k.done.CompareAndSwap(false, true) {
		k.hook()
	}
}

// Writes that commit between the steps of a page across partitions leave
// it a page of the query: in order, no more than $top, and the pages that
// follow its continuation hold the rest.
func TestCitusPageAcrossPartitionsRacesWrites(t *testing.T) {
	testdb.NeedCitus(t) // on PostgreSQL a page is one statement: nothing commits within it
	t.Parallel()
	for _, tc := range []struct {
		name   string
		writes []Write
		want   string
	}{
		{
			// The key after the page leaves the table: the next page
			// starts there all the same.
			name:   "next key deleted",
			writes: []Write{{Op: OpDelete, PartitionKey: "p01", RowKey: "r000", Match: MatchAny}},
			want:   "p00/r000 p00/r001 p00/r002 p00/r003 p00/r004 | p01/r001 p01/r002 p01/r003 p01/r004",
		},
		{
			// An entity arrives within the page: the page still ends at
			// $top, and the next one starts where it ended.
			name: "entity inserted within the page",
			writes: []Write{
				{Op: OpInsert, PartitionKey: "p00", RowKey: "r002a", Properties: props("N", -1)},
				{Op: OpDelete, PartitionKey: "p01", RowKey: "r000", Match: MatchAny},
			},
			want: "p00/r000 p00/r001 p00/r002 p00/r002a p00/r003 | p00/r004 p01/r001 p01/r002 p01/r003 p01/r004",
		},
		{
			name:   "entity of the page deleted",
			writes: []Write{{Op: OpDelete, PartitionKey: "p00", RowKey: "r001", Match: MatchAny}},
			want:   "p00/r000 p00/r002 p00/r003 p00/r004 | p01/r000 p01/r001 p01/r002 p01/r003 p01/r004",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := migratedDB(t)
			ctx := context.Background()
			writer := newStoreOn(t, dsn, nil)
			fill(t, writer, "t1", []int{5, 5})
			tracer := &keysTracer{hook: func() {
				for i := range tc.writes {
					if _, err := writer.Write(ctx, acct, "t1", &tc.writes[i]); err != nil {
						t.Errorf("write between steps: %v", err)
					}
				}
			}}
			reader := newStoreOn(t, dsn, tracer)
			if !reader.Distributed() {
				t.Fatal("entities are not distributed")
			}
			// The steps run where the nodes' placements are not read
			// directly (across_nodes.go): through the coordinator.
			reader = unrouted(t, reader)
			var pages []string
			for _, keys := range follow(t, reader, "t1", EntityQuery{Top: 5}) {
				pages = append(pages, strings.Join(keys, " "))
			}
			if !tracer.done.Load() {
				t.Fatal("no page found its keys in a step of its own")
			}
			if got := strings.Join(pages, " | "); got != tc.want {
				t.Errorf("pages\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
