package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgtables/pgtables/odata"
)

// Two stores on one database, as two servers: the one that builds or
// drops an index uses that at once; the other within its cache's TTL,
// and its pages meanwhile are those of a query without the index.
func TestIndexCacheAcrossStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newStore(t)
	const ttl = 300 * time.Millisecond
	b := detected(t, NewWithOptions(a.pool, Options{IndexCacheTTL: ttl}))
	if err := a.CreateTable(ctx, acct, "cached"); err != nil {
		t.Fatal(err)
	}
	var ws []Write
	for r := range 100 {
		ws = append(ws, Write{Op: OpInsert, PartitionKey: "p", RowKey: fmt.Sprintf("r%03d", r), Properties: props("N", r)})
	}
	if _, err := a.Batch(ctx, acct, "cached", ws); err != nil {
		t.Fatal(err)
	}
	q := EntityQuery{Filter: mustParse(t, "N eq 7 or N eq 70"), Top: 1000}
	// query checks a page's entities and returns the indexes its
	// statement named.
	query := func(s *Store) []string {
		t.Helper()
		page, err := s.QueryEntities(ctx, acct, "cached", q)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range page.Entities {
			keys = append(keys, e.RowKey)
		}
		if strings.Join(keys, ",") != "r007,r070" || page.More {
			t.Fatalf("page %v, more %v", keys, page.More)
		}
		_, ixs, _, err := s.cachedIndexes(ctx, acct, "cached")
		if err != nil {
			t.Fatal(err)
		}
		var named []string
		for _, ix := range ixs {
			named = append(named, ix.Property)
		}
		return named
	}
	// soon waits until b's statements name want, at most about its TTL.
	soon := func(want string) {
		t.Helper()
		start := time.Now()
		for strings.Join(query(b), ",") != want {
			if time.Since(start) > ttl+2*time.Second {
				t.Fatalf("after %v the other store still names %v, want %q", time.Since(start), query(b), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if named := query(b); len(named) != 0 {
		t.Fatalf("no index yet, named %v", named)
	}
	ix, err := a.CreateIndex(ctx, acct, "cached", IndexSpec{Property: "N", Type: odata.EdmInt32})
	if err != nil {
		t.Fatal(err)
	}
	waitIndexes(t, a, "cached")
	if named := query(a); strings.Join(named, ",") != "N" {
		t.Fatalf("the building store names %v once ready, want N", named)
	}
	// What the statements name is what they may use: TestIndexUsedByFilter
	// shows the plans of a large table then read the index.
	soon("N")
	if err := a.DropIndex(ctx, acct, "cached", ix.Name); err != nil {
		t.Fatal(err)
	}
	if named := query(a); len(named) != 0 {
		t.Fatalf("the dropping store still names %v", named)
	}
	soon("")
}

// A table deleted and created again under its name while another store
// has the old table's id cached: that store's pages are the new table's.
func TestIndexCacheTableCreatedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newStore(t)
	b := detected(t, NewWithOptions(a.pool, Options{IndexCacheTTL: time.Hour}))
	fill := func(n int) {
		t.Helper()
		if err := a.CreateTable(ctx, acct, "again"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateIndex(ctx, acct, "again", IndexSpec{Property: "N", Type: odata.EdmInt32}); err != nil {
			t.Fatal(err)
		}
		waitIndexes(t, a, "again")
		if _, err := a.Write(ctx, acct, "again", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "r", Properties: props("N", n)}); err != nil {
			t.Fatal(err)
		}
	}
	fill(1)
	q := EntityQuery{Filter: mustParse(t, "N ge 1"), Top: 1000}
	if page, err := b.QueryEntities(ctx, acct, "again", q); err != nil || len(page.Entities) != 1 {
		t.Fatalf("first table: %v entities, %v", page, err)
	}
	if err := a.DeleteTable(ctx, acct, "again"); err != nil {
		t.Fatal(err)
	}
	fill(2)
	page, err := b.QueryEntities(ctx, acct, "again", q)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entities) != 1 || !strings.Contains(string(page.Entities[0].Stored), "2") {
		t.Fatalf("table created again: %d entities %v, want its one", len(page.Entities), page.Entities)
	}
	if err := a.DeleteTable(ctx, acct, "again"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.QueryEntities(ctx, acct, "again", q); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("deleted table: %v, want ErrTableNotFound", err)
	}
}
