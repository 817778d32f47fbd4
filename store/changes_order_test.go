package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Concurrent writers, single and in batches, some failing, while a reader
// keeps resuming from its last cursor and the sequencer runs as on a
// server: the reader sees every committed change exactly once, none of a
// failed write, each entity's changes in the order they were made, and a
// batch's changes together; and a reader resuming from any cursor sees
// exactly the changes after it. On Citus too (CI runs the store's Citus
// tests there).
func TestChangesOrderWithoutSkipsCitus(t *testing.T) {
	t.Parallel()
	dsn := migratedDB(t)
	s := storeOn(t, dsn, 0)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "order"); err != nil {
		t.Fatal(err)
	}
	feedCtx, stopFeed := context.WithCancel(ctx)
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		s.RunChangeFeed(feedCtx, ChangeFeedTiming{Spacing: 5 * time.Millisecond, Poll: 20 * time.Millisecond}, slog.New(slog.DiscardHandler))
	}()
	defer func() { stopFeed(); <-feedDone }()

	start, err := s.Changes(ctx, acct, "order", CursorNow, 1)
	if err != nil {
		t.Fatal(err)
	}
	const writers, perWriter, batches = 6, 25, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var committed int // changes that must appear
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for w := range writers {
		wg.Go(func() {
			// Writers 0-2 share a partition; each has an entity of its own.
			pk := "p" + strconv.Itoa(w/3)
			rk := "w" + strconv.Itoa(w)
			for v := 1; v <= perWriter; v++ {
				op := OpReplace
				if v%3 == 0 {
					op = OpMerge
				}
				if _, err := s.Write(ctx, acct, "order", &Write{Op: op, PartitionKey: pk, RowKey: rk, Properties: props("v", v)}); err != nil {
					fail(err)
					return
				}
				// An insert of an existing entity fails: no change.
				if _, err := s.Write(ctx, acct, "order", &Write{Op: OpInsert, PartitionKey: pk, RowKey: rk}); !errors.Is(err, ErrEntityExists) {
					fail(fmt.Errorf("insert of an existing entity: %v", err))
					return
				}
				mu.Lock()
				committed++
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for b := range batches {
			var ws []Write
			for i := range 5 {
				ws = append(ws, Write{Op: OpReplace, PartitionKey: "b", RowKey: fmt.Sprintf("r%d", i), Properties: props("batch", b)})
			}
			if _, err := s.Batch(ctx, acct, "order", ws); err != nil {
				fail(err)
				return
			}
			// Rolled back as a whole: its replace must not appear.
			bad := []Write{{Op: OpReplace, PartitionKey: "b", RowKey: "r0", Properties: props("batch", -1)}, {Op: OpInsert, PartitionKey: "b", RowKey: "r1"}}
			if _, err := s.Batch(ctx, acct, "order", bad); !errors.Is(err, ErrEntityExists) {
				fail(fmt.Errorf("failing batch: %v", err))
				return
			}
			mu.Lock()
			committed += len(ws)
			mu.Unlock()
		}
	})
	writing := make(chan struct{})
	go func() { wg.Wait(); close(writing) }()

	// The reader, resuming while the writes go on.
	var seen []Change
	cursor := start.Cursor
	read := func() int {
		page, err := s.Changes(ctx, acct, "order", cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, page.Changes...)
		cursor = page.Cursor
		return len(page.Changes)
	}
	for done := false; !done; {
		select {
		case <-writing:
			done = true
		default:
			read()
		}
	}
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	for read() > 0 {
	}
	if len(seen) != committed {
		t.Fatalf("the reader saw %d changes, %d were committed", len(seen), committed)
	}
	last := map[string]int64{}
	batchTxn := map[string]bool{}
	for i, c := range seen {
		if err := c.Entity.DecodeProperties(); err != nil {
			t.Fatal(err)
		}
		var v int64 = -2
		for _, p := range c.Entity.Properties {
			if p.Name == "v" || p.Name == "batch" {
				v = p.Value.Int
			}
		}
		key := c.PartitionKey + "/" + c.RowKey
		if c.PartitionKey == "b" {
			if v < 0 {
				t.Fatalf("change %d of a rolled back batch", i)
			}
			// A batch's five changes are contiguous, in its order.
			if c.RowKey == "r0" {
				if i+5 > len(seen) {
					t.Fatalf("batch cut short at %d", i)
				}
				for j := 1; j < 5; j++ {
					n := seen[i+j]
					if n.Txn != c.Txn || n.RowKey != "r"+strconv.Itoa(j) {
						t.Fatalf("batch at %d: change %d is %s/%s txn %s, want r%d of txn %s", i, j, n.PartitionKey, n.RowKey, n.Txn, j, c.Txn)
					}
				}
				if batchTxn[c.Txn] {
					t.Fatalf("txn %s twice", c.Txn)
				}
				batchTxn[c.Txn] = true
			}
		} else if v != last[key]+1 {
			t.Fatalf("change %d: %s has v=%d after v=%d", i, key, v, last[key])
		}
		last[key] = v
	}
	// Resuming from any cursor gives exactly what follows it.
	for i := 0; i < len(seen); i += 17 {
		page, err := s.Changes(ctx, acct, "order", seen[i].Cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Changes) != len(seen)-i-1 || (len(page.Changes) > 0 && page.Changes[0].Cursor != seen[i+1].Cursor) {
			t.Fatalf("from change %d: %d changes, want %d", i, len(page.Changes), len(seen)-i-1)
		}
	}
	// A cursor outlives the store that gave it (a restart of pgtables).
	s2 := storeOn(t, dsn, 0)
	page, err := s2.Changes(ctx, acct, "order", seen[len(seen)-2].Cursor, 10)
	if err != nil || len(page.Changes) != 1 || page.Changes[0].Cursor != seen[len(seen)-1].Cursor {
		t.Fatalf("another store from the second last cursor: %+v, %v", page, err)
	}
}

// The sequencer numbers a transaction's changes together and transactions
// in the order of their first change.
func TestNumberChanges(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	rows := []unsequenced{pendingRow(1, 10, 7, t0), pendingRow(1, 11, 8, t0), pendingRow(2, 12, 7, t0), pendingRow(1, 13, 9, t0), pendingRow(1, 14, 8, t0)}
	_, p, end := numberChanges(rows, 100)
	dkeys, ids, pos, txns := p.dkeys, p.ids, p.pos, p.txns
	if end != 105 {
		t.Errorf("last position %d, want 105", end)
	}
	if got, want := fmt.Sprint(ids), "[10 12 11 14 13]"; got != want {
		t.Errorf("ids %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(pos), "[101 102 103 104 105]"; got != want {
		t.Errorf("positions %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(txns), "[101 101 103 103 105]"; got != want {
		t.Errorf("txns %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(dkeys), "[1 2 1 1 1]"; got != want {
		t.Errorf("dkeys %s, want %s", got, want)
	}
}

// A row of a batch's changes (migration 0009) takes as many positions as
// it holds changes, and has the last of them; its transaction's txn is the
// first.
func TestNumberChangesOfBatchRows(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	batch := func(id, tag int64, n int32) unsequenced {
		return unsequenced{dkey: 1, id: id, tag: tag, at: t0.UnixMicro(), n: n, direct: true, last: true}
	}
	rows := []unsequenced{batch(10, 7, 100), batch(11, 8, 1), batch(12, 9, 3)}
	d, p, end := numberChanges(rows, 100)
	if len(p.ids) != 0 {
		t.Errorf("pending positions %v", p.ids)
	}
	for _, c := range []struct{ name, got, want string }{
		{"ids", fmt.Sprint(d.ids), "[10 11 12]"},
		{"positions", fmt.Sprint(d.pos), "[200 201 204]"},
		{"txns", fmt.Sprint(d.txns), "[101 201 202]"},
		{"ns", fmt.Sprint(d.ns), "[100 1 3]"},
		{"last position", fmt.Sprint(end), "204"},
	} {
		if c.got != c.want {
			t.Errorf("%s %s, want %s", c.name, c.got, c.want)
		}
	}
}

// pendingRow is a change row with a pending row, waiting for its position.
func pendingRow(dkey, id, tag int64, at time.Time) unsequenced {
	return unsequenced{dkey: dkey, id: id, tag: tag, at: at.UnixMicro()}
}

// Cursors round-trip; anything else is refused, never "now" or "oldest".
func TestCursorTokens(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]int64{{1, 0}, {7, 1}, {1 << 40, 1 << 50}} {
		tok := encodeCursor(c[0], c[1])
		if tok == CursorNow || tok == CursorOldest {
			t.Fatalf("token %s", tok)
		}
		id, pos, ok := decodeCursor(tok)
		if !ok || id != c[0] || pos != c[1] {
			t.Errorf("decode(encode(%v)) = %d %d %v", c, id, pos, ok)
		}
	}
	for _, bad := range []string{"", "now", "AQ", "AQEB!", "AgEB", encodeCursor(1, 2) + "A", "AQEBAQ"} {
		if _, _, ok := decodeCursor(bad); ok {
			t.Errorf("%q decoded", bad)
		}
	}
}

// FuzzCursor: decoding never panics, and what decodes encodes back the same.
func FuzzCursor(f *testing.F) {
	f.Add(encodeCursor(3, 9))
	f.Add("now")
	f.Fuzz(func(t *testing.T, s string) {
		id, pos, ok := decodeCursor(s)
		if ok && encodeCursor(id, pos) != s {
			t.Errorf("%q decodes to %d %d, which encode to %q", s, id, pos, encodeCursor(id, pos))
		}
	})
}

// Ids of two nodes' sequences do not compare (Citus: the coordinator's
// count from 1, a worker's from its group << 48): the sequencer keeps each
// node's rows in id order and merges the nodes by when their transactions
// began. Ordered by id alone, the coordinator's later changes of a
// partition went before a worker's earlier ones that waited in the same
// run, after the worker was down (TestChangeFeedChaos on Citus).
func TestNumberChangesOfTwoNodes(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const w = 1 << 48      // the first id of the worker of group 1
	rows := []unsequenced{ // in id order, as the sequencer reads them
		pendingRow(1, 5, 30, at(2000)), // the coordinator's, after the worker came back
		pendingRow(1, 6, 31, at(2001)), // the coordinator's
		pendingRow(1, w+7, 20, at(0)),  // the worker's, before it went down
		pendingRow(1, w+8, 21, at(3)),  // the worker's: began before w+7 committed, written after
		pendingRow(1, w+9, 21, at(3)),  // same transaction
		pendingRow(1, w+10, 32, at(2500)),
	}
	_, p, _ := numberChanges(rows, 0)
	ids, txns := p.ids, p.txns
	if got, want := fmt.Sprint(ids), fmt.Sprint([]int64{w + 7, w + 8, w + 9, 5, 6, w + 10}); got != want {
		t.Errorf("ids %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(txns), "[1 2 2 4 5 6]"; got != want {
		t.Errorf("txns %s, want %s", got, want)
	}
	// Within a node, id order wins over the time a transaction began.
	rows = []unsequenced{pendingRow(1, w+1, 1, at(10)), pendingRow(1, w+2, 2, at(5)), pendingRow(1, 3, 3, at(7))}
	_, p, _ = numberChanges(rows, 0)
	ids = p.ids
	if got, want := fmt.Sprint(ids), fmt.Sprint([]int64{3, w + 1, w + 2}); got != want {
		t.Errorf("ids %s, want %s", got, want)
	}
}
