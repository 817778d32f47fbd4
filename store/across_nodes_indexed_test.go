package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgtables/pgtables/odata"
)

// On Citus a page of an indexed filter across partitions reads the shards
// on their nodes and merges them: the pages, in key order, with their
// continuations, are those of the query; a shard that is no longer where
// the placements say sends the page through the coordinator, with the same
// answer; a deleted table has no pages.
func TestCitusIndexedPagesReadShardsOnTheirNodes(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	// 20 partitions, spread over every shard, 12 entities each, Age 0..5.
	var want []string
	for p := 0; p < 20; p++ {
		pk := fmt.Sprintf("p%02d", p)
		var writes []Write
		for r := 0; r < 12; r++ {
			rk := fmt.Sprintf("r%02d", r)
			writes = append(writes, Write{Op: OpInsert, PartitionKey: pk, RowKey: rk, Properties: props("Age", r%6, "Pad", pk+rk)})
			if r%6 == 3 {
				want = append(want, pk+"/"+rk)
			}
		}
		if _, err := s.Batch(ctx, acct, "t", writes); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateIndex(ctx, acct, "t", IndexSpec{Property: "Age", Type: odata.EdmInt32}); err != nil {
		t.Fatal(err)
	}
	waitIndexes(t, s, "t")
	rt := s.router.Load()
	if rt == nil {
		t.Fatal("no routing")
	}
	var direct atomic.Int64
	rt.acrossHook = func() { direct.Add(1) }

	// all pages the query "Age eq 3" of top entities each, as keys.
	all := func(t *testing.T, top int) []string {
		t.Helper()
		q := EntityQuery{Filter: mustParse(t, "Age eq 3"), Top: top}
		var keys []string
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("no end after %d pages", pages)
			}
			page, err := s.QueryEntities(ctx, acct, "t", q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Entities) > top {
				t.Fatalf("%d entities, top %d", len(page.Entities), top)
			}
			for _, e := range page.Entities {
				keys = append(keys, e.PartitionKey+"/"+e.RowKey)
				if e.ETag == "" || e.Timestamp == 0 {
					t.Fatalf("entity without ETag or Timestamp: %+v", e)
				}
				if ps, err := odata.DecodeStored(e.Stored, nil); err != nil || len(ps) != 2 {
					t.Fatalf("properties %s: %v", e.Stored, err)
				}
			}
			if !page.More {
				return keys
			}
			q.FromPK, q.FromRK, q.HasFromPK, q.HasFromRK = page.NextPK, page.NextRK, true, true
		}
	}
	for _, top := range []int{1000, 20, 7, 1} {
		before := direct.Load()
		if got := all(t, top); !slices.Equal(got, want) {
			t.Errorf("top %d: %v\nwant %v", top, got, want)
		}
		if direct.Load() == before {
			t.Errorf("top %d: no page read the shards on their nodes", top)
		}
	}

	// A shard that the placements say a node holds and which it does not:
	// through the coordinator, and the same pages.
	p := rt.cur.Load()
	moved := *p
	moved.ranges = slices.Clone(p.ranges)
	d := *moved.ranges[0].direct
	d.id = -1 // no such shard anywhere
	moved.ranges[0].direct = &d
	moved.loaded = time.Now()
	rt.cur.Store(&moved)
	before := direct.Load()
	// One page: the first finds the shard missing and has the placements
	// loaded again, after which pages read the nodes again.
	if got := all(t, 1000); !slices.Equal(got, want) {
		t.Errorf("shard moved: %v\nwant %v", got, want)
	}
	if direct.Load() != before {
		t.Error("a page read the shards on their nodes though one was not there")
	}

	// A deleted table: the cached id is not live any more.
	if err := s.DeleteTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	_, err := s.QueryEntities(ctx, acct, "t", EntityQuery{Filter: mustParse(t, "Age eq 3"), Top: 10})
	if !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("deleted table: %v, want ErrTableNotFound", err)
	}
}
