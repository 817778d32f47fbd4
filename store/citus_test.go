package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/odata/filter"
)

// newCitusStore is a store on a schema of its own whose entities are
// distributed; the test runs only on Citus (PGTABLES_TEST_BACKEND=citus).
func newCitusStore(t *testing.T) *Store {
	t.Helper()
	testdb.NeedCitus(t)
	t.Parallel()
	s := newStore(t)
	if !s.Distributed() {
		t.Fatal("entities are not distributed")
	}
	return s
}

// On a Citus cluster (PGTABLES_TEST_BACKEND=citus; CI runs this file's
// tests there), the statements of one partition run on one shard: the
// point reads and writes name the distribution key, and so do queries
// whose filter pins the partition; other queries run on every shard.
func TestCitusPartitionStatementsRunOnOneShard(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	tasks := func(t *testing.T, sql string, args ...any) string {
		t.Helper()
		rows, err := s.pool.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			if _, n, ok := strings.Cut(line, "Task Count: "); ok {
				return n
			}
		}
		t.Fatalf("no Citus plan for %s", sql)
		return ""
	}
	dk := distributionKey(acct, "t", "p")
	if n := tasks(t, sqlGet, acct, "t", dk, "p", "r"); n != "1" {
		t.Errorf("point read: %s tasks", n)
	}
	if n := tasks(t, sqlMerge+sqlReturning, acct, "t", dk, "p", "r", []byte(`{}`), 0, int64(1)); n != "1" {
		t.Errorf("merge: %s tasks", n)
	}
	if n := tasks(t, sqlReplace+sqlVersionReplace+sqlReturning, acct, "t", dk, "p", "r", []byte(`{}`), 0, int64(1), int64(1), uint32(1)); n != "1" {
		t.Errorf("conditional replace: %s tasks", n)
	}
	if n := tasks(t, sqlDelete+sqlVersionDelete, acct, "t", dk, "p", "r", int64(1), uint32(1)); n != "1" {
		t.Errorf("conditional delete: %s tasks", n)
	}
	for _, tc := range []struct {
		filter string
		one    bool
	}{
		{"PartitionKey eq 'p'", true},
		{"PartitionKey eq 'p' and (RowKey ge 'a' or N eq 1)", true},
		{"PartitionKey ge 'p'", false},
		{"PartitionKey eq 'p' or PartitionKey eq 'q'", false},
		{"N eq 1", false},
	} {
		e, err := filter.Parse(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		sql, args, err := queryEntitiesSQL(true, acct, "t", EntityQuery{Filter: e, Top: 10})
		if err != nil {
			t.Fatal(err)
		}
		if n := tasks(t, sql, args...); (n == "1") != tc.one {
			t.Errorf("%s: %s tasks", tc.filter, n)
		}
	}
}

// On Citus a single insert and Insert Or Replace name their table's id in
// INSERT ... VALUES, which goes to the partition's shard in one step, and
// so do a batch's through live_table_id; the single node's INSERT ...
// SELECT FROM tables would run in two through the coordinator. A missing
// or deleted table still gets ErrTableNotFound, alone and inside an
// entity group transaction.
func TestCitusInsertsGoStraightToTheShard(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if s.inserts() != &citusInserts {
		t.Fatalf("a distributed store uses the single node's inserts")
	}
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	plan := func(sql string, args ...any) string {
		t.Helper()
		rows, err := s.pool.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			b.WriteString(line + "\n")
		}
		return b.String()
	}
	byName := []any{acct, "t", distributionKey(acct, "t", "p"), "p", "r", int64(1), 10, []byte(`{}`)}
	byID := []any{int64(1), distributionKey(acct, "t", "p"), "p", "r", int64(1), 10, []byte(`{}`)}
	for _, tc := range []struct {
		name string
		sql  string
		args []any
	}{
		{"insert", sqlInsertByID, byID},
		{"insert or replace", sqlUpsertReplaceByID, byID},
		{"batch's insert", citusInserts.insert, byName},
		{"batch's insert or replace", citusInserts.upsertReplace, byName},
	} {
		if p := plan(tc.sql, tc.args...); strings.Contains(p, "INSERT ... SELECT") || !strings.Contains(p, "Task Count: 1") {
			t.Errorf("%s is not routed to one shard:\n%s", tc.name, p)
		}
	}
	if p := plan(singleNodeInserts.insert, byName...); !strings.Contains(p, "INSERT ... SELECT") {
		t.Errorf("the single node's insert has a one-step plan on Citus too; the test no longer tells:\n%s", p)
	}

	if err := s.CreateTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"never", "gone"} {
		for _, op := range []Op{OpInsert, OpReplace, OpMerge} {
			w := Write{Op: op, PartitionKey: "p", RowKey: "r"}
			if _, err := s.Write(ctx, acct, table, &w); !errors.Is(err, ErrTableNotFound) {
				t.Errorf("op %d on table %s: %v, want ErrTableNotFound", op, table, err)
			}
			batch := []Write{{Op: OpReplace, PartitionKey: "p", RowKey: "a"}, w}
			var be *BatchError
			if _, err := s.Batch(ctx, acct, table, batch); !errors.As(err, &be) || !errors.Is(be.Err, ErrTableNotFound) {
				t.Errorf("batch with op %d on table %s: %v, want a BatchError of ErrTableNotFound", op, table, err)
			}
		}
	}
	// And the table that is there takes them.
	for _, op := range []Op{OpInsert, OpReplace, OpMerge} {
		if _, err := s.Write(ctx, acct, "t", &Write{Op: op, PartitionKey: "p", RowKey: "r"}); err != nil {
			t.Errorf("op %d: %v", op, err)
		}
	}
}

// On Citus the guard that checks a cached table id (tableids.go), when
// it goes through Citus, and the statements by that id take Citus's fast
// path: a plan that the node caches, rather than planning the statement
// anew on every call; the subquery on tables by name does not.
func TestCitusTableGuardTakesTheFastPath(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	cfg := s.pool.Config().ConnConfig.Copy()
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET client_min_messages = debug2"); err != nil {
		t.Fatal(err)
	}
	fastPath := func(sql string, args ...any) bool {
		t.Helper()
		notices = nil
		if _, err := conn.Exec(ctx, "EXPLAIN "+sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return slices.ContainsFunc(notices, func(m string) bool { return strings.Contains(m, "fast-path router query") })
	}
	dk := distributionKey(acct, "t", "p")
	for _, tc := range []struct {
		name string
		sql  string
		args []any
		want bool
	}{
		{"guard", sqlGuardTableLive, []any{int64(1)}, true},
		{"conditional replace", sqlReplace + sqlReturning, []any{acct, "t", dk, "p", "r", []byte(`{}`), 10, int64(1)}, false},
		{"read by id", sqlGetByID, []any{int64(1), dk, "p", "r"}, true},
		{"replace by id with an ETag", sqlReplaceByID + sqlVersionUpdateByID + sqlReturning, []any{int64(1), dk, "p", "r", []byte(`{}`), 10, int64(1), int64(1), uint32(1)}, true},
		{"delete by id with an ETag", sqlDeleteByID + sqlVersionDeleteByID, []any{int64(1), dk, "p", "r", int64(1), uint32(1)}, true},
	} {
		if got := fastPath(tc.sql, tc.args...); got != tc.want {
			t.Errorf("%s: fast path %v, want %v; Citus said %q", tc.name, got, tc.want, notices)
		}
	}
}
