package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/odata/filter"
)

func newStoreWith(t *testing.T, opts Options) *Store {
	t.Helper()
	s := newStore(t)
	return detected(t, NewWithOptions(s.pool, opts))
}

// follow runs q and the queries of its continuations to the end, and
// returns the keys of each page.
func follow(t *testing.T, s *Store, table string, q EntityQuery) (pages [][]string) {
	t.Helper()
	for {
		page, err := s.QueryEntities(context.Background(), acct, table, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Entities) > q.Top {
			t.Fatalf("page of %d > top %d", len(page.Entities), q.Top)
		}
		keys := []string{}
		for _, e := range page.Entities {
			keys = append(keys, e.PartitionKey+"/"+e.RowKey)
		}
		pages = append(pages, keys)
		if !page.More {
			return pages
		}
		q.FromPK, q.FromRK, q.HasFromPK, q.HasFromRK = page.NextPK, page.NextRK, true, true
		if len(pages) > 10000 {
			t.Fatal("no end to the pages")
		}
	}
}

// collect follows continuations to the end and returns the keys and the
// number of pages. An empty filter f selects every entity.
func collect(t *testing.T, s *Store, table, f string, top int) (keys []string, pages, empty int) {
	t.Helper()
	var expr *filter.Expr
	if f != "" {
		var err error
		if expr, err = filter.Parse(f); err != nil {
			t.Fatal(err)
		}
	}
	all := follow(t, s, table, EntityQuery{Filter: expr, Top: top})
	for _, page := range all {
		if len(page) == 0 {
			empty++
		}
		keys = append(keys, page...)
	}
	return keys, len(all), empty
}

func TestScanInChunks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"small chunks", Options{ScanChunk: 3}},
		{"no budget", Options{ScanChunk: 4, ScanBudget: time.Nanosecond}},
		{"defaults", Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStoreWith(t, tc.opts)
			ctx := context.Background()
			if err := s.CreateTable(ctx, acct, "t1"); err != nil {
				t.Fatal(err)
			}
			var want, wantP1 []string
			for p := 0; p < 4; p++ {
				for r := 0; r < 10; r++ {
					pk, rk := fmt.Sprintf("p%d", p), fmt.Sprintf("r%d", r)
					if _, err := s.Write(ctx, acct, "t1", &Write{Op: OpInsert, PartitionKey: pk, RowKey: rk, Properties: props("N", r)}); err != nil {
						t.Fatal(err)
					}
					if r%4 == 1 {
						want = append(want, pk+"/"+rk)
						if p == 1 {
							wantP1 = append(wantP1, pk+"/"+rk)
						}
					}
				}
			}
			for _, top := range []int{1, 2, 1000} {
				got, pages, empty := collect(t, s, "t1", "N eq 1 or N eq 5 or N eq 9", top)
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("top %d: got %v\nwant %v", top, got, want)
				}
				t.Logf("top %d: %d pages, %d empty", top, pages, empty)
				got, _, _ = collect(t, s, "t1", "PartitionKey eq 'p1' and (N eq 1 or N eq 5 or N eq 9)", top)
				if strings.Join(got, " ") != strings.Join(wantP1, " ") {
					t.Errorf("top %d, one partition: got %v\nwant %v", top, got, wantP1)
				}
			}
			if tc.opts.ScanBudget == time.Nanosecond {
				// Out of budget after every chunk: pages end early, some
				// with no entities and a continuation, as Azure allows.
				_, pages, empty := collect(t, s, "t1", "N eq 9", 1000)
				if pages < 10 || empty == 0 {
					t.Errorf("budget of 1ns: %d pages, %d empty", pages, empty)
				}
			}
		})
	}
}

// Point, partition, range and OR-ed point filters must be index range
// scans on the primary key, never a scan of the table.
func TestKeyFiltersUsePrimaryKey(t *testing.T) {
	t.Parallel()
	dsn := migratedDB(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Enough rows, spread over tables, that a sequential scan is never the
	// cheap plan, and fresh statistics.
	if _, err := pool.Exec(ctx, `
INSERT INTO tables (account, name, lname) SELECT 'a', 't' || g, 't' || g FROM generate_series(1, 20) g;
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT t.id, entity_dkey(t.account, t.lname, 'p' || (g % 100)), 'p' || (g % 100), 'r' || g, 0, 0, '{"N": ["i32", 1]}'
FROM tables t, generate_series(1, 2000) g;
ANALYZE entities; ANALYZE tables;`); err != nil {
		t.Fatal(err)
	}
	// Each filter, as the query path sends it, must be served by index
	// conditions on the keys it names: "pk" only, or "pk" and "rk". A plan
	// that walks all of the table's rows in the index and filters them
	// would still name entities_pkey, so the conditions are what count.
	for _, tc := range []struct {
		filter string
		keys   []string // key columns every index condition must bound
	}{
		{"PartitionKey eq 'p1' and RowKey eq 'r101'", []string{"pk", "rk"}},
		{"PartitionKey eq 'p1'", []string{"pk"}},
		{"PartitionKey eq 'p1' and RowKey ge 'r1' and RowKey lt 'r2'", []string{"pk", "rk"}},
		{"PartitionKey ge 'p1' and PartitionKey lt 'p2'", []string{"pk"}},
		{"PartitionKey eq 'p1' and (RowKey eq 'r101' or RowKey eq 'r201')", []string{"pk", "rk"}},
		{"(PartitionKey eq 'p1' and RowKey eq 'r101') or (PartitionKey eq 'p2' and RowKey eq 'r2')", []string{"pk", "rk"}},
		{"'p1' eq PartitionKey", []string{"pk"}},
		{"PartitionKey eq 'p1' and N gt 0", []string{"pk"}},
	} {
		expr, err := filter.Parse(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []EntityQuery{
			{Filter: expr, Top: 1000},
			{Filter: expr, Top: 1000, FromPK: "p1", FromRK: "r1", HasFromPK: true, HasFromRK: true}, // a continuation
		} {
			sql, args, err := queryEntitiesSQL(false, "a", "t7", q)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := pool.Query(ctx, "EXPLAIN "+sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if rows.Err() != nil {
				t.Fatal(rows.Err())
			}
			text := strings.Join(plan, "\n")
			var conds []string
			for _, line := range plan {
				if _, c, ok := strings.Cut(line, "Index Cond: "); ok && strings.Contains(c, "table_id") {
					conds = append(conds, c)
				}
			}
			ok := strings.Contains(text, "entities_pkey") && !strings.Contains(text, "Seq Scan on entities") && len(conds) > 0
			for _, c := range conds {
				for _, k := range tc.keys {
					if !regexp.MustCompile(`(^|[^a-z_])` + k + `([^a-z_]|$)`).MatchString(c) {
						ok = false
					}
				}
			}
			if !ok {
				t.Errorf("%s (from %q): the index does not bound %v:\n%s", tc.filter, q.FromPK, tc.keys, text)
			}
		}
	}
}

// chunkTracer runs hook once, when the second statement of a chunked scan
// starts.
type chunkTracer struct {
	chunks atomic.Int32
	hook   func()
}

func (c *chunkTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "CASE WHEN") && c.chunks.Add(1) == 2 {
		c.hook()
	}
	return ctx
}

func (c *chunkTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A page read in several chunks never shows part of a batch that commits
// between them.
func TestScanSeesOneSnapshot(t *testing.T) {
	t.Parallel()
	dsn := migratedDB(t)
	ctx := context.Background()
	writer := newStoreOn(t, dsn, nil)
	if err := writer.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	var writes []Write
	for i := 0; i < 4; i++ {
		rk := fmt.Sprintf("r%d", i)
		if _, err := writer.Write(ctx, acct, "t1", &Write{Op: OpInsert, PartitionKey: "p", RowKey: rk, Properties: props("V", 0)}); err != nil {
			t.Fatal(err)
		}
		writes = append(writes, Write{Op: OpMerge, PartitionKey: "p", RowKey: rk, Properties: props("V", 1), Match: MatchAny})
	}
	tracer := &chunkTracer{hook: func() {
		if _, err := writer.Batch(ctx, acct, "t1", writes); err != nil {
			t.Errorf("batch between chunks: %v", err)
		}
	}}
	reader := NewWithOptions(newStoreOn(t, dsn, tracer).pool, Options{ScanChunk: 2, ScanFirst: time.Nanosecond})
	f, err := filter.Parse("V ge 0")
	if err != nil {
		t.Fatal(err)
	}
	page, err := reader.QueryEntities(ctx, acct, "t1", EntityQuery{Filter: f, Top: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if tracer.chunks.Load() < 2 {
		t.Fatalf("the scan ran %d chunks; the test needs two", tracer.chunks.Load())
	}
	seen := map[int64]int{}
	for i := range page.Entities {
		v, _ := page.Entities[i].Property("V")
		seen[v.Int]++
	}
	if len(page.Entities) != 4 || len(seen) != 1 {
		t.Fatalf("one page showed values %v of %d entities: part of a batch", seen, len(page.Entities))
	}
}

func newStoreOn(t *testing.T, dsn string, tracer pgx.QueryTracer) *Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return detected(t, New(pool))
}

// A first statement cut short by its share of the budget ends the page
// after its last match, or hands over to the chunked scan when it found
// none; following the continuations yields every match exactly once.
func TestScanFirstStatementCutShort(t *testing.T) {
	t.Parallel()
	base := newStore(t)
	ctx := context.Background()
	if err := base.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := base.pool.Exec(ctx, `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT t.id, entity_dkey(t.account, t.lname, 'p' || (g % 7)), 'p' || (g % 7), 'r' || lpad(g::text, 6, '0'), 1, 0,
       jsonb_build_object('N', jsonb_build_array('i32', g % 3), 'S', jsonb_build_array('str', repeat('x', 200)))
FROM tables t, generate_series(1, 30000) g WHERE t.lname = 't1'`); err != nil {
		t.Fatal(err)
	}
	var want []string
	rows, err := base.pool.Query(ctx, `SELECT pk || '/' || rk FROM entities WHERE props->'N'->>1 = '1' ORDER BY pk, rk`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	s := NewWithOptions(base.pool, Options{ScanFirst: 3 * time.Millisecond, ScanChunk: 2000})
	got, pages, _ := collect(t, s, "t1", "N eq 1", 1000)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %d matches in %d pages, want %d", len(got), pages, len(want))
	}
	t.Logf("%d matches in %d pages", len(got), pages)
}
