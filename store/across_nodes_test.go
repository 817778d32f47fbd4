package store

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pagesOf follows q's pages on s and prints them as follow's keys, a page
// a "|".
func pagesOf(t *testing.T, s *Store, table string, q EntityQuery) string {
	t.Helper()
	var pages []string
	for _, p := range follow(t, s, table, q) {
		pages = append(pages, strings.Join(p, " "))
	}
	return strings.Join(pages, " | ")
}

// A pageCase is a query of a test of pages: its filter ("": none), $top
// and key range.
type pageCase struct {
	filter string
	top    int
	rng    KeyRange
}

// compare checks that tc's pages of table t on reader are those through
// citus, with the tracer's counts reset before reader's, and returns how
// many there are.
func (tc pageCase) compare(t *testing.T, citus, reader *Store, tracer *statementTracer) (pages int64) {
	t.Helper()
	q := EntityQuery{Top: tc.top, Range: tc.rng}
	if tc.filter != "" {
		q.Filter = mustParse(t, tc.filter)
	}
	want := pagesOf(t, citus, "t", q)
	tracer.across.Store(0)
	tracer.nodes.Store(0)
	tracer.other.Store(0)
	got := pagesOf(t, reader, "t", q)
	if got != want {
		t.Errorf("%s, top %d: pages\n%s\nthrough Citus\n%s", tc.filter, tc.top, got, want)
	}
	return int64(strings.Count(got, "|") + 1)
}

// On Citus a page of an unindexed filter across partitions, or of none,
// is a statement on each node's placements, merged in pgtables
// (across_nodes.go): the pages, continuations included, are those that
// Citus gives for the same query, and a page goes through Citus when a
// placement is stale (a shard moved: not the node's in the metadata, or
// its table gone) or the cached table id is that of a table deleted
// since.
func TestCitusFilterAcrossNodes(t *testing.T) {
	newCitusStore(t) // skips on PostgreSQL
	dsn := migratedDB(t)
	ctx := context.Background()
	writer := newStoreOn(t, dsn, nil)
	sizes := make([]int, 24)
	for i := range sizes {
		sizes[i] = 1 + i*7%5
	}
	fill(t, writer, "t", sizes)
	tracer := &statementTracer{}
	reader := newStoreOn(t, dsn, tracer)
	rt := reader.router.Load()
	nodes, shards := nodeShards(rt.cur.Load(), time.Now().UnixNano())
	if len(nodes) < 2 {
		t.Fatalf("the shards of entities are read directly on %d nodes, want every shard on a worker, on 2 at least", len(nodes))
	}
	citus := unrouted(t, writer)
	cases := []pageCase{
		{filter: "N ne 2", top: 1000},
		{filter: "N ne 2", top: 7},
		{filter: "N ge 10 and N lt 30", top: 1},
		{filter: "N ge 10 and N lt 30", top: 4},
		{filter: "N gt 1000", top: 5},
		{top: 9},
		{filter: "RowKey le 'r001'", top: 3},
		{filter: "N lt 50", top: 6, rng: KeyRange{Lower: &KeyBound{PK: "p03", RK: "r001", HasRK: true}, Upper: &KeyBound{PK: "p17"}}},
	}
	for _, tc := range cases {
		pages := tc.compare(t, citus, reader, tracer)
		wantNodes := pages * int64(len(nodes))
		if tc.filter == "" {
			// A continued page of a scan reads the rest of the
			// continuation's partition first, on its node: here no
			// partition fills a page (scanFromPartition).
			wantNodes = int64(len(nodes)) + (pages-1)*(1+int64(len(nodes)))
		}
		if n, m := tracer.across.Load(), tracer.nodes.Load(); n != 0 || m != wantNodes {
			t.Errorf("%s, top %d: %d pages ran %d statements through Citus and %d on nodes, want 0 and %d", tc.filter, tc.top, pages, n, m, wantNodes)
		}
	}
	if strings.Count(pagesOf(t, citus, "t", EntityQuery{Filter: mustParse(t, "N ne 2"), Top: 1000}), "/") < 40 {
		t.Fatal("the table is too small for the test to tell")
	}

	// Stale placements: the page goes through Citus, and is right.
	q := EntityQuery{Filter: mustParse(t, "N ne 2"), Top: 5}
	want := pagesOf(t, citus, "t", q)
	staleGoesThroughCitus(t, rt, shards[0][0], &tracer.across, func() string { return pagesOf(t, reader, "t", q) }, want)

	// The table deleted and created again under the same name: the cached
	// id is the old table's, whose rows are still there.
	if got := pagesOf(t, reader, "t", q); got != want {
		t.Fatalf("pages\n%s\nwant\n%s", got, want)
	}
	if err := writer.DeleteTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	fill(t, writer, "t", []int{3, 0, 0, 4})
	tracer.across.Store(0)
	tracer.nodes.Store(0)
	want = "p00/r000 p00/r001 p03/r000 p03/r001 p03/r002 | p03/r003"
	for i := range 2 {
		if got := pagesOf(t, reader, "t", q); got != want {
			t.Errorf("read %d of the table created again: pages\n%s\nwant\n%s", i, got, want)
		}
	}
	// The first page on the nodes finds the cached id deleted and goes
	// through Citus; the other three on the nodes, with the new id.
	if n, m := tracer.across.Load(), tracer.nodes.Load(); n != 1 || m != 4*int64(len(nodes)) {
		t.Errorf("two reads of the table created again ran %d statements through Citus and %d on nodes, want 1 and %d", n, m, 4*len(nodes))
	}
	if err := writer.DeleteTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.QueryEntities(ctx, acct, "t", q); err != ErrTableNotFound {
		t.Errorf("deleted table: %v, want ErrTableNotFound", err)
	}
}

// On Citus a page of one partition is a statement on its shard's
// placement, on the shard's node (partitionOnNode): the pages are those
// that Citus gives for the same query, and a page goes through Citus when
// the placement is stale or the cached table id is that of a table
// deleted since.
func TestCitusPartitionPageOnNode(t *testing.T) {
	newCitusStore(t) // skips on PostgreSQL
	dsn := migratedDB(t)
	ctx := context.Background()
	writer := newStoreOn(t, dsn, nil)
	fill(t, writer, "t", []int{3, 40, 1, 25})
	tracer := &statementTracer{}
	reader := newStoreOn(t, dsn, tracer)
	citus := unrouted(t, writer)
	cases := []pageCase{
		{filter: "PartitionKey eq 'p01'", top: 1000},
		{filter: "PartitionKey eq 'p01'", top: 7},
		{filter: "PartitionKey eq 'p03' and RowKey ge 'r010'", top: 4},
		{filter: "PartitionKey eq 'p01' and N gt 20", top: 3},
		{filter: "PartitionKey eq 'p02'", top: 1},
		{filter: "PartitionKey eq 'p09'", top: 5},
		{filter: "PartitionKey eq 'p01'", top: 6, rng: KeyRange{Lower: &KeyBound{PK: "p01", RK: "r005", HasRK: true}, Upper: &KeyBound{PK: "p01", RK: "r020", HasRK: true}}},
	}
	for _, tc := range cases {
		pages := tc.compare(t, citus, reader, tracer)
		if n, m := tracer.other.Load(), tracer.nodes.Load(); n != 0 || m != pages {
			t.Errorf("%s, top %d: %d pages ran %d statements through Citus and %d on the node, want 0 and %d", tc.filter, tc.top, pages, n, m, pages)
		}
	}

	// A scan of the table: a continued page reads the rest of the
	// continuation's partition on its node first, then what follows on
	// every node (scanFromPartition).
	for _, tc := range []pageCase{
		{top: 1000}, {top: 7}, {top: 30}, {top: 40}, {top: 1},
		{top: 9, rng: KeyRange{Lower: &KeyBound{PK: "p01", RK: "r005", HasRK: true}, Upper: &KeyBound{PK: "p03", RK: "r020", HasRK: true}}},
	} {
		tc.compare(t, citus, reader, tracer)
		if n := tracer.other.Load(); n != 0 {
			t.Errorf("scan, top %d: %d statements through Citus", tc.top, n)
		}
	}

	// A stale placement: the page goes through Citus, and is right.
	q := EntityQuery{Filter: mustParse(t, "PartitionKey eq 'p01'"), Top: 15}
	want := pagesOf(t, citus, "t", q)
	rt := reader.router.Load()
	_, sr, ok := rt.placeRange(distributionKey(acct, "t", "p01"))
	if !ok || sr.direct == nil {
		t.Fatal("the partition's shard has no placement read directly")
	}
	staleGoesThroughCitus(t, rt, sr.direct, &tracer.other, func() string { return pagesOf(t, reader, "t", q) }, want)

	// The table deleted and created again under the same name: the cached
	// id is the old table's (read above), whose rows are still there.
	if err := writer.DeleteTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	fill(t, writer, "t", []int{0, 2})
	want = "p01/r000 p01/r001"
	for i := range 2 {
		if got := pagesOf(t, reader, "t", q); got != want {
			t.Errorf("read %d of the table created again: pages\n%s\nwant\n%s", i, got, want)
		}
	}
	if err := writer.DeleteTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.QueryEntities(ctx, acct, "t", q); err != ErrTableNotFound {
		t.Errorf("deleted table: %v, want ErrTableNotFound", err)
	}
}

// staleGoesThroughCitus checks that read gives want, through Citus
// (counted by citus), with the placements of rt as if the shard of moved
// had moved, in two ways: no longer the node's in Citus's metadata, or its
// placement's table gone; then it restores them.
func staleGoesThroughCitus(t *testing.T, rt *router, moved *directRead, citus *atomic.Int64, read func() string, want string) {
	t.Helper()
	for rt.loading.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	cur := rt.cur.Load()
	for _, tc := range []struct {
		name   string
		direct *directRead
	}{
		{"a shard no longer the node's", newDirectRead(moved.id+1_000_000, moved.shard, moved.tables)},
		{"a placement's table gone", newDirectRead(moved.id, moved.shard+"_gone", moved.tables)},
	} {
		for rt.loading.Load() {
			time.Sleep(10 * time.Millisecond) // the last case's reload
		}
		p := *cur
		p.ranges = append([]shardRange(nil), cur.ranges...)
		for i := range p.ranges {
			// By id: a reload since the caller found moved made new ones.
			if d := p.ranges[i].direct; d != nil && d.id == moved.id {
				p.ranges[i].direct = tc.direct
			}
		}
		p.loaded = time.Now().Add(time.Hour) // no reload meanwhile
		rt.cur.Store(&p)
		citus.Store(0)
		if got := read(); got != want {
			t.Errorf("%s: pages\n%s\nwant\n%s", tc.name, got, want)
		}
		if citus.Load() == 0 {
			t.Errorf("%s: no page went through Citus", tc.name)
		}
	}
	for rt.loading.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	rt.cur.Store(cur)
}
