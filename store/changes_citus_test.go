package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Concurrent writes share round trips (combiner), on Citus with their
// change rows inserted after them in the round trip's transaction: the
// feed holds exactly the writes that succeeded, each once, with the ETag
// it answered, and none that failed (an insert of an existing entity, a
// replace with a stale If-Match, a delete of a missing entity), whatever
// else shared their round trip.
func TestChangesOfCombinedWritesCitus(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "combined"); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 30
	var mu sync.Mutex
	acked := map[string]string{} // op pk/rk#n -> ETag ("" for a delete)
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds*4)
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				pk := fmt.Sprintf("p%d", i%4) // partitions on both nodes, shared by writers
				rk := fmt.Sprintf("r%d", i%5) // keys written by several writers: inserts collide
				sk := fmt.Sprintf("s%d-%d", w, i)
				var first string // the ETag of sk's first version, stale after its replace
				cases := []struct {
					write func() Write
					ok    func(error) bool // an expected failure
				}{
					{func() Write { return Write{Op: OpInsert, PartitionKey: pk, RowKey: rk, Properties: props("w", w)} }, func(err error) bool { return errors.Is(err, ErrEntityExists) }},
					{func() Write { return Write{Op: OpReplace, PartitionKey: pk, RowKey: sk, Properties: props("i", i)} }, nil},
					{func() Write {
						return Write{Op: OpMerge, PartitionKey: pk, RowKey: sk, Properties: props("m", i), Match: MatchAny}
					}, nil},
					{func() Write {
						m, err := ParseMatch([]string{first})
						if err != nil {
							errs <- fmt.Errorf("parse %s: %w", first, err)
						}
						return Write{Op: OpReplace, PartitionKey: pk, RowKey: sk, Properties: props("x", i), Match: m}
					}, func(err error) bool { return errors.Is(err, ErrConditionNotMet) }},
					{func() Write { return Write{Op: OpDelete, PartitionKey: pk, RowKey: "none" + sk, Match: MatchAny} }, func(err error) bool { return errors.Is(err, ErrEntityNotFound) }},
					{func() Write { return Write{Op: OpDelete, PartitionKey: pk, RowKey: sk, Match: MatchAny} }, nil},
				}
				for _, c := range cases {
					wr := c.write()
					res, err := s.Write(ctx, acct, "combined", &wr)
					if err != nil {
						if c.ok == nil || !c.ok(err) {
							errs <- fmt.Errorf("%v %s/%s: %w", wr.Op, wr.PartitionKey, wr.RowKey, err)
						}
						continue
					}
					if first == "" && wr.RowKey == sk {
						first = res.ETag
					}
					mu.Lock()
					key := fmt.Sprintf("%v %s/%s", wr.Op, wr.PartitionKey, wr.RowKey)
					for n := 0; ; n++ {
						if _, dup := acked[fmt.Sprintf("%s#%d", key, n)]; !dup {
							acked[fmt.Sprintf("%s#%d", key, n)] = res.ETag
							break
						}
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	changes, _ := readAll(t, s, "combined", CursorOldest, 1000)
	got := map[string]string{}
	for _, c := range changes {
		op := c.Op
		if op == OpInsert && strings.HasPrefix(c.RowKey, "s") {
			op = OpReplace // an upsert that created
		}
		key := fmt.Sprintf("%v %s/%s", op, c.PartitionKey, c.RowKey)
		for n := 0; ; n++ {
			if _, dup := got[fmt.Sprintf("%s#%d", key, n)]; !dup {
				got[fmt.Sprintf("%s#%d", key, n)] = c.ETag
				break
			}
		}
	}
	// Rows of no table's feed count too: a change row of a failed write
	// would have none.
	var rows int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM changes`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(acked) || rows != len(acked) {
		t.Errorf("%d changes in the feed, %d change rows, %d acknowledged writes", len(got), rows, len(acked))
	}
	for k, etag := range acked {
		if g, ok := got[k]; !ok {
			t.Errorf("acknowledged, not in the feed: %s", k)
		} else if g != etag {
			t.Errorf("%s: ETag %s in the feed, the write answered %s", k, g, etag)
		}
	}
	for k := range got {
		if _, ok := acked[k]; !ok {
			t.Errorf("in the feed, not acknowledged: %s", k)
		}
	}
}
