package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// What a run numbers of what it read, and the watermark it leaves: a
// transaction is numbered whole or not at all, ids not seen become gaps
// with the run's bound, and a gap goes once it is numbered, belongs to a
// row with a pending row, or every transaction below its bound has ended.
func TestWatermarkPlan(t *testing.T) {
	t.Parallel()
	// own: a row without a pending row, of tag; lastOf: its transaction's
	// last.
	own := func(id, tag int64, lastOf bool) unsequenced {
		return unsequenced{id: id, tag: tag, direct: true, last: lastOf}
	}
	foreign := func(id int64) unsequenced { return unsequenced{id: id, tag: 0} }
	pending := func(id, tag int64) unsequenced { return unsequenced{id: id, tag: tag} }
	cases := []struct {
		name     string
		w        watermark
		sc       scan
		take     string // ids in order
		scanned  int64
		gaps     string // id/xmax
		numbered int
	}{
		{"ids not seen are gaps",
			watermark{scanned: 10},
			scan{direct: []unsequenced{own(11, 1, true), own(12, 2, true), own(15, 3, true)}, xmin: 90, bound: 100},
			"[11 12 15]", 15, "[13/100 14/100]", 3},
		{"a gap seen is numbered; unseen ones go once their transactions ended",
			watermark{scanned: 20, gaps: []int64{13, 14, 16}, gapXmax: []int64{100, 100, 120}},
			scan{direct: []unsequenced{own(14, 4, true), own(21, 5, true)}, xmin: 110, bound: 130},
			"[14 21]", 21, "[16/120]", 2},
		{"rows with pending rows are neither numbered here nor gaps",
			watermark{scanned: 10, gaps: []int64{9}, gapXmax: []int64{200}},
			scan{direct: []unsequenced{foreign(9), foreign(11), own(12, 1, true)}, xmin: 90, bound: 100},
			"[12]", 12, "[]", 1},
		{"pending rows are numbered in id order with the others",
			watermark{scanned: 10},
			scan{direct: []unsequenced{own(11, 1, true), foreign(12), own(13, 3, true)}, pending: []unsequenced{pending(12, 2)}, xmin: 90, bound: 100},
			"[11 12 13]", 13, "[]", 3},
		{"a cut page leaves a transaction whose last row it did not read, and all after its first row",
			watermark{scanned: 10},
			scan{direct: []unsequenced{own(11, 1, true), own(12, 2, false), own(13, 3, true), own(14, 2, false)}, full: true, xmin: 90, bound: 100},
			"[11]", 11, "[]", 1},
		{"a transaction across the cut waits too",
			watermark{scanned: 10},
			scan{direct: []unsequenced{own(11, 1, false), own(12, 2, false), own(13, 1, true)}, full: true, xmin: 90, bound: 100},
			"[]", 10, "[]", 0},
		{"a cut page numbers the transactions it read whole",
			watermark{scanned: 10},
			scan{direct: []unsequenced{own(11, 1, false), own(13, 1, true), own(14, 2, true)}, full: true, xmin: 90, bound: 100},
			"[11 13 14]", 14, "[12/100]", 3},
		{"a gap left for later stays, whatever its transaction",
			watermark{scanned: 12, gaps: []int64{11}, gapXmax: []int64{50}},
			scan{direct: []unsequenced{own(11, 1, false), own(13, 2, true), own(14, 1, false)}, full: true, xmin: 90, bound: 100},
			"[]", 12, "[11/50]", 0},
		{"nothing is numbered past a cut page of pending rows",
			watermark{scanned: 10},
			scan{direct: []unsequenced{own(11, 1, true), foreign(12), own(13, 3, true)}, pending: []unsequenced{pending(12, 2)}, pendingEnd: 12, xmin: 90, bound: 100},
			"[11 12]", 12, "[]", 2},
		{"nothing read: the watermark stays",
			watermark{scanned: 10, gaps: []int64{7}, gapXmax: []int64{100}},
			scan{xmin: 99, bound: 100},
			"[]", 10, "[7/100]", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			take, next := c.w.plan(c.sc)
			var ids []int64
			for _, r := range take {
				ids = append(ids, r.id)
			}
			var gaps []string
			for i, g := range next.gaps {
				gaps = append(gaps, fmt.Sprintf("%d/%d", g, next.gapXmax[i]))
			}
			if got := fmt.Sprint(ids); got != c.take && !(c.take == "[]" && len(ids) == 0) {
				t.Errorf("take %s, want %s", got, c.take)
			}
			if next.scanned != c.scanned {
				t.Errorf("scanned %d, want %d", next.scanned, c.scanned)
			}
			if got := fmt.Sprint(gaps); got != c.gaps && !(c.gaps == "[]" && len(gaps) == 0) {
				t.Errorf("gaps %s, want %s", got, c.gaps)
			}
			if next.gaps == nil || next.gapXmax == nil {
				t.Error("nil gaps: the columns are NOT NULL")
			}
		})
	}
}

// On one PostgreSQL the sequencer finds committed change rows by their ids:
// a change of a transaction still open when a later one commits is
// numbered once it commits, after the later one, and one rolled back never
// appears, and its id leaves the gaps once no transaction that could hold
// it is left.
func TestChangesAroundOpenTransactions(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "open"); err != nil {
		t.Fatal(err)
	}
	write := func(rk string) {
		t.Helper()
		if _, err := s.Write(ctx, acct, "open", &Write{Op: OpInsert, PartitionKey: "p", RowKey: rk}); err != nil {
			t.Fatal(err)
		}
	}
	open := func(rk string) func(commit bool) { return openChange(t, s, "open", rk) }
	write("a")
	endB := open("b")
	endX := open("x")
	write("c")
	changes, cursor := readAll(t, s, "open", CursorOldest, 1000)
	if got := rowKeys(changes); got != "[a c]" {
		t.Fatalf("with b and x open: %s, want a c", got)
	}
	endB(true)
	endX(false)
	write("d")
	more, _ := readAll(t, s, "open", cursor, 1000)
	if got := rowKeys(more); got != "[b d]" {
		t.Fatalf("after b committed and x rolled back: %s, want b d", got)
	}
	var gaps []int64
	if err := s.pool.QueryRow(ctx, `SELECT gaps FROM change_counter`).Scan(&gaps); err != nil {
		t.Fatal(err)
	}
	// Another test's transactions may hold the xmin back for a while.
	for deadline := time.Now().Add(30 * time.Second); len(gaps) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("gaps %v stay", gaps)
		}
		if _, _, err := s.sequenceOnce(ctx, true); err != nil {
			t.Fatal(err)
		}
		if err := s.pool.QueryRow(ctx, `SELECT gaps FROM change_counter`).Scan(&gaps); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A run with nothing to number.
	if n, _, err := s.sequenceOnce(ctx, true); err != nil || n != 0 {
		t.Fatalf("a run with nothing to number: %d, %v", n, err)
	}
	if all, _ := readAll(t, s, "open", CursorOldest, 1000); rowKeys(all) != "[a c b d]" {
		t.Fatalf("in all: %s, want a c b d", rowKeys(all))
	}
}

// openChange writes a change row of table in a transaction that stays
// open, as recordChange writes it: in a transaction that has its id first
// (as the entity's write gives it); on Citus as changes_citus.go does,
// without last. It returns what ends that transaction.
func openChange(t *testing.T, s *Store, table, rk string) func(commit bool) {
	t.Helper()
	ctx := context.Background()
	var tableID int64
	if err := s.pool.QueryRow(ctx, `SELECT id FROM tables WHERE account = $1 AND lname = $2`, acct, table).Scan(&tableID); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO changes (dkey, table_id, tag, last, op, pk, rk, ts, xid, props)
VALUES (1, $1, $2, $3, 1, 'q', $4, 1, 1, '{}')`, tableID, newChangeTag(), lastOf(s), rk); err != nil {
		t.Fatal(err)
	}
	return func(commit bool) {
		t.Helper()
		var err error
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// lastOf is the last column of a change row that is its transaction's
// only one: NULL on Citus (changes_citus.go).
func lastOf(s *Store) *bool {
	if s.distributed.Load() {
		return nil
	}
	last := true
	return &last
}

// A transaction may have its id, and take its change row's id, while its
// transaction id is above the xmax of the sequencer's snapshot (one past
// the latest transaction that completed, not the next one to be
// assigned): here "late" takes its id after "early" has its transaction
// id, and "early" takes a later id and commits first. "late"'s id is a gap
// that runs while it stays open must keep, however many: the acknowledged
// write that commits last must still reach the feed (the chaos test lost
// batches' first operations this way).
func TestChangeOfATransactionAboveTheSnapshotXmax(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "outrun"); err != nil {
		t.Fatal(err)
	}
	early, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback(ctx)
	if _, err := early.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	endLate := openChange(t, s, "outrun", "late")
	if _, err := early.Exec(ctx, `INSERT INTO changes (dkey, table_id, tag, last, op, pk, rk, ts, xid, props)
SELECT 1, id, $2, $3, 1, 'q', 'early', 1, 1, '{}' FROM tables WHERE account = $1 AND lname = 'outrun'`,
		acct, newChangeTag(), lastOf(s)); err != nil {
		t.Fatal(err)
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, err := s.sequenceOnce(ctx, true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	endLate(true)
	if all, _ := readAll(t, s, "outrun", CursorOldest, 1000); rowKeys(all) != "[early late]" {
		t.Fatalf("in all: %s, want early late", rowKeys(all))
	}
}

func rowKeys(changes []Change) string {
	var rks []string
	for _, c := range changes {
		rks = append(rks, c.RowKey)
	}
	return fmt.Sprint(rks)
}
