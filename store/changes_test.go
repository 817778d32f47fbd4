package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// readAll reads every change of the table after cursor, page by page.
func readAll(t *testing.T, s *Store, table, cursor string, limit int) ([]Change, string) {
	t.Helper()
	var all []Change
	for {
		page, err := s.Changes(context.Background(), acct, table, cursor, limit)
		if err != nil {
			t.Fatalf("Changes(%s): %v", cursor, err)
		}
		all = append(all, page.Changes...)
		if page.Cursor == cursor && len(page.Changes) > 0 {
			t.Fatalf("cursor did not move past %d changes", len(page.Changes))
		}
		cursor = page.Cursor
		if len(page.Changes) < limit {
			return all, cursor
		}
	}
}

// Every kind of write records its change with what it did to the entity:
// an upsert that creates is an insert, one that updates a replace or a
// merge, and the entity after the change goes with it.
func TestChangesRecordEveryWrite(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "feed"); err != nil {
		t.Fatal(err)
	}
	star, _ := ParseMatch([]string{"*"})
	writes := []struct {
		w    Write
		want Op
	}{
		{Write{Op: OpInsert, PartitionKey: "p", RowKey: "a", Properties: props("n", 1)}, OpInsert},
		{Write{Op: OpReplace, PartitionKey: "p", RowKey: "b", Properties: props("n", 2)}, OpInsert}, // upsert creating
		{Write{Op: OpReplace, PartitionKey: "p", RowKey: "b", Properties: props("n", 3)}, OpReplace},
		{Write{Op: OpMerge, PartitionKey: "p", RowKey: "c", Properties: props("n", 4)}, OpInsert},
		{Write{Op: OpMerge, PartitionKey: "p", RowKey: "c", Properties: props("m", 5)}, OpMerge},
		{Write{Op: OpMerge, PartitionKey: "p", RowKey: "a", Properties: props("m", 6), Match: star}, OpMerge},
		{Write{Op: OpReplace, PartitionKey: "p", RowKey: "a", Properties: props("k", 7), Match: star}, OpReplace},
		{Write{Op: OpDelete, PartitionKey: "p", RowKey: "b", Match: star}, OpDelete},
	}
	var etags []string
	for i, w := range writes {
		res, err := s.Write(ctx, acct, "feed", &w.w)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		etags = append(etags, res.ETag)
	}
	changes, _ := readAll(t, s, "feed", CursorOldest, 3)
	if len(changes) != len(writes) {
		t.Fatalf("%d changes, want %d", len(changes), len(writes))
	}
	for i, c := range changes {
		w := writes[i]
		if c.Op != w.want || c.PartitionKey != w.w.PartitionKey || c.RowKey != w.w.RowKey {
			t.Errorf("change %d: %v %s/%s, want %v %s/%s", i, c.Op, c.PartitionKey, c.RowKey, w.want, w.w.PartitionKey, w.w.RowKey)
		}
		if w.want == OpDelete {
			if c.Entity != nil || c.ETag != "" {
				t.Errorf("change %d: a delete with an entity or ETag", i)
			}
			continue
		}
		if c.ETag != etags[i] {
			t.Errorf("change %d: ETag %s, the write answered %s", i, c.ETag, etags[i])
		}
		if err := c.Entity.DecodeProperties(); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(c.Entity.Properties); got == "[]" {
			t.Errorf("change %d: no properties", i)
		}
	}
	// A position keeps its change's at to the microsecond (a delete's
	// Timestamp, retention), though a run passes it on as a number.
	var positions, differ int
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE p.at <> c.at)
FROM change_positions p JOIN changes c ON c.dkey = p.dkey AND c.id = p.id`).Scan(&positions, &differ); err != nil {
		t.Fatal(err)
	}
	if positions != len(writes) || differ != 0 {
		t.Errorf("%d positions, %d of them with another at than their change's, want %d and 0", positions, differ, len(writes))
	}
	// The merge of c kept n and added m.
	if err := changes[4].Entity.DecodeProperties(); err != nil || len(changes[4].Entity.Properties) != 2 {
		t.Errorf("merged entity: %+v, %v", changes[4].Entity.Properties, err)
	}
}

// A failed write records nothing; the changes of a batch are contiguous,
// in its order, with one txn.
func TestChangesOfBatchesAndFailures(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "feed"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "feed", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "x"}); err != nil {
		t.Fatal(err)
	}
	// Fails on its last insert: nothing of it is written.
	_, err := s.Batch(ctx, acct, "feed", []Write{
		{Op: OpInsert, PartitionKey: "p", RowKey: "y"},
		{Op: OpInsert, PartitionKey: "p", RowKey: "x"},
	})
	if !errors.Is(err, ErrEntityExists) {
		t.Fatalf("batch: %v, want EntityExists", err)
	}
	if _, err := s.Write(ctx, acct, "feed", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "x"}); !errors.Is(err, ErrEntityExists) {
		t.Fatalf("insert again: %v", err)
	}
	var batch []Write
	for _, rk := range []string{"k3", "k1", "k2"} {
		batch = append(batch, Write{Op: OpInsert, PartitionKey: "q", RowKey: rk, Properties: props("v", rk)})
	}
	if _, err := s.Batch(ctx, acct, "feed", batch); err != nil {
		t.Fatal(err)
	}
	mixed := []Write{
		{Op: OpReplace, PartitionKey: "q", RowKey: "k2"},
		{Op: OpInsert, PartitionKey: "q", RowKey: "k0"},
		{Op: OpMerge, PartitionKey: "q", RowKey: "k1", Properties: props("w", 1)},
	}
	if _, err := s.Batch(ctx, acct, "feed", mixed); err != nil {
		t.Fatal(err)
	}
	changes, _ := readAll(t, s, "feed", CursorOldest, 1000)
	var got []string
	for _, c := range changes {
		got = append(got, fmt.Sprintf("%v %s/%s", c.Op, c.PartitionKey, c.RowKey))
	}
	want := []string{"insert p/x", "insert q/k3", "insert q/k1", "insert q/k2", "replace q/k2", "insert q/k0", "merge q/k1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	if changes[1].Txn != changes[3].Txn || changes[4].Txn != changes[6].Txn || changes[0].Txn == changes[1].Txn || changes[3].Txn == changes[4].Txn {
		t.Errorf("txns %v %v %v / %v %v %v", changes[1].Txn, changes[2].Txn, changes[3].Txn, changes[4].Txn, changes[5].Txn, changes[6].Txn)
	}
}

// A batch of inserts is one change row holding its changes (migration
// 0009): a reader gets them one by one, in the batch's order, with the
// ETags the batch answered, and resumes from a cursor inside the batch,
// whatever its page size.
func TestChangesOfABatchOfInsertsInPages(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "feed"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "feed", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "before"}); err != nil {
		t.Fatal(err)
	}
	var batch []Write
	for _, rk := range []string{"k4", "k1", "k3", "k0", "k2"} {
		batch = append(batch, Write{Op: OpInsert, PartitionKey: "q", RowKey: rk, Properties: props("v", rk)})
	}
	results, err := s.Batch(ctx, acct, "feed", batch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "feed", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "after"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"insert p/before", "insert q/k4", "insert q/k1", "insert q/k3", "insert q/k0", "insert q/k2", "insert p/after"}
	for _, limit := range []int{1, 2, 3, 4, 1000} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			changes, _ := readAll(t, s, "feed", CursorOldest, limit)
			var got []string
			cursors := map[string]bool{}
			for _, c := range changes {
				got = append(got, fmt.Sprintf("%v %s/%s", c.Op, c.PartitionKey, c.RowKey))
				if cursors[c.Cursor] {
					t.Errorf("cursor %s twice", c.Cursor)
				}
				cursors[c.Cursor] = true
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("changes %v, want %v", got, want)
			}
			for i, c := range changes[1:6] {
				if c.ETag != results[i].ETag || c.Timestamp != results[i].Timestamp {
					t.Errorf("change %s: ETag %s at %d, the batch answered %s at %d", c.RowKey, c.ETag, c.Timestamp, results[i].ETag, results[i].Timestamp)
				}
				if c.Txn != changes[1].Txn {
					t.Errorf("change %s: txn %s, the batch's first %s", c.RowKey, c.Txn, changes[1].Txn)
				}
				if err := c.Entity.DecodeProperties(); err != nil || fmt.Sprint(c.Entity.Properties) != fmt.Sprint(props("v", c.RowKey)) {
					t.Errorf("change %s: entity %v, %v", c.RowKey, c.Entity.Properties, err)
				}
			}
			if changes[0].Txn == changes[1].Txn || changes[6].Txn == changes[1].Txn {
				t.Errorf("txns %s %s %s", changes[0].Txn, changes[1].Txn, changes[6].Txn)
			}
			// From every cursor, exactly the changes after it.
			for i, c := range changes {
				rest, _ := readAll(t, s, "feed", c.Cursor, limit)
				if len(rest) != len(changes)-i-1 || len(rest) > 0 && rest[0].Cursor != changes[i+1].Cursor {
					t.Errorf("after change %d: %d changes", i, len(rest))
				}
			}
		})
	}
}

// The purge of a deleted table removes its changes with it, and leaves
// those of the table created again under its name; retention removes
// changes past it and moves the oldest cursor on. On Citus too (CI runs
// the store's Citus tests there).
func TestChangesPurgedCitus(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	count := func(where string) int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM changes WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := s.CreateTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Write(ctx, acct, "gone", &Write{Op: OpInsert, PartitionKey: "p", RowKey: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Changes(ctx, acct, "gone", CursorNow, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Changes(ctx, acct, "gone", CursorOldest, 10); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("feed of a deleted table: %v", err)
	}
	if err := s.CreateTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "gone", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "new"}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := s.PurgeOnce(ctx, PurgeConfig{Chunk: 100, Grace: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if n := count("true"); n != 1 {
		t.Fatalf("%d changes after the purge, want the new table's one", n)
	}

	// Retention: everything is older than a millisecond.
	s.opts.ChangeFeed.Retention = time.Millisecond
	page, err := s.Changes(ctx, acct, "gone", CursorOldest, 10)
	if err != nil || len(page.Changes) != 1 {
		t.Fatalf("before retention: %+v %v", page, err)
	}
	time.Sleep(5 * time.Millisecond)
	if n, err := s.PurgeChanges(ctx); err != nil || n != 1 {
		t.Fatalf("retention purged %d, %v", n, err)
	}
	_, err = s.Changes(ctx, acct, "gone", CursorOldest+"x", 10)
	if !errors.Is(err, ErrInvalidCursor) {
		t.Errorf("a malformed cursor: %v", err)
	}
	var expired *CursorExpiredError
	if _, err := s.Changes(ctx, acct, "gone", encodeCursor(mustTableID(t, s, "gone"), 0), 10); !errors.As(err, &expired) {
		t.Fatalf("a cursor before retention: %v", err)
	}
	if page, err := s.Changes(ctx, acct, "gone", expired.Oldest, 10); err != nil || len(page.Changes) != 0 {
		t.Fatalf("from the oldest cursor: %+v %v", page, err)
	}
}

// Retention purges a change only once every change before it has expired
// too: a long transaction's changes are numbered when it commits, after
// younger changes, while their age is their write's. On Citus too.
func TestRetentionKeepsYoungerChangesBeforeAnOlderOneCitus(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "kept"); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.Write(ctx, acct, "kept", &Write{Op: OpInsert, PartitionKey: "p", RowKey: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Changes(ctx, acct, "kept", CursorOldest, 10)
	if err != nil || len(page.Changes) != 4 {
		t.Fatalf("changes: %+v %v", page, err)
	}
	// By position: expired, retained, expired (the long transaction's),
	// retained.
	id := mustTableID(t, s, "kept")
	pos, err := pgx.CollectRows(must(s.pool.Query(ctx, `SELECT pos FROM change_positions WHERE table_id = $1 ORDER BY pos`, id)), pgx.RowTo[int64])
	if err != nil || len(pos) != 4 {
		t.Fatalf("positions %v, %v", pos, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE change_positions SET at = $3 WHERE table_id = $1 AND pos = ANY($2)`,
		id, []int64{pos[0], pos[2]}, time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	s.opts.ChangeFeed.Retention = time.Hour
	if n, err := s.PurgeChanges(ctx); err != nil || n != 1 {
		t.Fatalf("retention purged %d, %v; want the first change only", n, err)
	}
	page, err = s.Changes(ctx, acct, "kept", page.Changes[0].Cursor, 10)
	if err != nil || len(page.Changes) != 3 || page.Changes[0].RowKey != "1" {
		t.Fatalf("after the first change: %+v %v; want the three after it", page, err)
	}
}

func mustTableID(t *testing.T, s *Store, table string) int64 {
	t.Helper()
	var id int64
	if err := s.pool.QueryRow(context.Background(), sqlLiveTableID, acct, table).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// OffOnCitus (pgtables' default) keeps the feed on with one PostgreSQL
// and off where entities are distributed: there writes record nothing and
// reads answer ErrChangeFeedOff. Runs on both backends.
func TestChangeFeedOffOnCitus(t *testing.T) {
	t.Parallel()
	s := newStoreWith(t, Options{ChangeFeed: ChangeFeedConfig{OffOnCitus: true}})
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "auto"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "auto", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "r"}); err != nil {
		t.Fatal(err)
	}
	var recorded int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM changes`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	on := !s.Distributed()
	if s.ChangeFeedOn(acct) != on || (recorded > 0) != on {
		t.Fatalf("distributed %v: feed on %v, %d changes recorded", s.Distributed(), s.ChangeFeedOn(acct), recorded)
	}
	_, err := s.Changes(ctx, acct, "auto", CursorOldest, 10)
	if on != (err == nil) || (!on && !errors.Is(err, ErrChangeFeedOff)) {
		t.Fatalf("distributed %v: read %v", s.Distributed(), err)
	}
}

// Replicas of earlier releases, during a rolling upgrade, record their
// changes as their release did: before migration 0007 a change row with
// its tag and no position, and no pending row (as Citus still does); before
// 0008, on one PostgreSQL, a change row without tag and a pending row with
// it. The sequencer takes such rows over, and they reach the feed in their
// order with this release's, once. On Citus too.
func TestChangesOfOlderReleaseCitus(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "upgrade"); err != nil {
		t.Fatal(err)
	}
	write := func(rk string) {
		t.Helper()
		if _, err := s.Write(ctx, acct, "upgrade", &Write{Op: OpInsert, PartitionKey: "p", RowKey: rk, Properties: props("n", 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// The statement of migration 0006's release (recordChange then).
	oldWrite := func(rk string) {
		t.Helper()
		_, err := s.pool.Exec(ctx, `
WITH w AS (
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, $3, $4, $5, 1, 10, '{}' FROM tables WHERE account = $1 AND lname = $2 AND deleted_at IS NULL
RETURNING xmin, ts, table_id, dkey, pk, rk, props)
INSERT INTO changes (dkey, table_id, tag, op, pk, rk, ts, xid, props)
SELECT dkey, table_id, $6, 1, pk, rk, ts, xmin::text::bigint, props FROM w`,
			acct, "upgrade", distributionKey(acct, "upgrade", "p"), "p", rk, newChangeTag())
		if err != nil {
			t.Fatal(err)
		}
	}
	// The statement of migration 0007's release on one PostgreSQL
	// (recordChange then); on Citus that release wrote as 0006's.
	writeOf0007 := func(rk string) {
		t.Helper()
		if s.distributed.Load() {
			oldWrite(rk)
			return
		}
		_, err := s.pool.Exec(ctx, `
WITH w AS (
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, $3, $4, $5, 1, 10, '{}' FROM tables WHERE account = $1 AND lname = $2 AND deleted_at IS NULL
RETURNING xmin, xmax, ts, table_id, dkey, pk, rk, props),
c AS (
INSERT INTO changes (dkey, table_id, op, pk, rk, ts, xid, props)
SELECT dkey, table_id, 1, pk, rk, ts, xmin::text::bigint, props FROM w
RETURNING dkey, id, table_id),
p AS (
INSERT INTO change_pending (dkey, id, table_id, tag)
SELECT dkey, id, table_id, $6::bigint FROM c)
SELECT 1 FROM w`,
			acct, "upgrade", distributionKey(acct, "upgrade", "p"), "p", rk, newChangeTag())
		if err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	oldWrite("b")
	write("c")
	writeOf0007("d")
	oldWrite("e")
	changes, cursor := readAll(t, s, "upgrade", CursorOldest, 1000)
	if got := rowKeys(changes); got != "[a b c d e]" {
		t.Fatalf("changes of %v, want a b c d e", got)
	}
	writeOf0007("f")
	write("g")
	more, _ := readAll(t, s, "upgrade", cursor, 1000)
	if rowKeys(more) != "[f g]" || more[0].Op != OpInsert {
		t.Fatalf("after the cursor: %+v, want the inserts of f and g", more)
	}
	if again, _ := readAll(t, s, "upgrade", CursorOldest, 1000); len(again) != 7 {
		t.Fatalf("%d changes in all, want 7", len(again))
	}
}
