package migrations

import (
	"context"
	"fmt"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testdb"
)

// Migration 0007 carries the change feed over: numbered changes keep their
// positions (now in change_positions), unnumbered ones stay for the
// sequencer to take over, and the sequencer's state is kept. Down gives
// 0006's layout back with the same positions. On Citus too, where the new
// relations are distributed after the migration.
func TestUpgradeCarriesChangeFeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, m, conn := feedDBAt(t, 6)
	if _, err := conn.Exec(ctx, `
INSERT INTO tables (id, account, name, lname) OVERRIDING SYSTEM VALUE VALUES (5, 'acct', 'T', 't');
INSERT INTO changes (dkey, id, table_id, tag, op, pk, rk, ts, xid, props, at, pos, txn) VALUES
  (11, 1, 5, 7, 1, 'p', 'a', 1, 100, '{}', '2026-01-01', 1, 1),
  (11, 2, 5, 7, 4, 'p', 'b', NULL, NULL, NULL, '2026-01-01', 2, 1),
  (12, 3, 5, 8, 1, 'q', 'c', 2, 101, '{}', '2026-01-02', NULL, NULL);
UPDATE change_feed SET last = 2, visible = 2, purged = 0`); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(7); err != nil {
		t.Fatal(err)
	}
	if err := distribute(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	query := func(sql string) string {
		t.Helper()
		return queryText(t, conn, sql)
	}
	checks := []struct{ sql, want string }{
		{`SELECT format('%s/%s pos %s txn %s %s', dkey, id, pos, txn, at::date) FROM change_positions ORDER BY pos`,
			`[11/1 pos 1 txn 1 2026-01-01 11/2 pos 2 txn 1 2026-01-01]`},
		{`SELECT format('%s pos %s tag %s', id, pos, tag) FROM changes ORDER BY id`,
			`[1 pos 1 tag 7 2 pos 2 tag 7 3 pos  tag 8]`},
		{`SELECT format('%s %s %s', last, visible, purged) FROM change_sequencer`, `[2 2 0]`},
		{`SELECT a.attname::text FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		  WHERE i.indrelid = 'changes'::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`, `[id dkey]`},
	}
	for _, c := range checks {
		if got := query(c.sql); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.sql, got, c.want)
		}
	}

	// A change of this release, numbered, and one pending: down keeps
	// both as 0006 would have them.
	if _, err := conn.Exec(ctx, `
INSERT INTO changes (dkey, id, table_id, op, pk, rk, ts, xid, props) VALUES
  (13, 4, 5, 1, 'r', 'd', 3, 102, '{}'), (13, 5, 5, 1, 'r', 'e', 4, 103, '{}');
INSERT INTO change_positions (dkey, id, table_id, pos, txn, at) VALUES (13, 4, 5, 3, 3, '2026-01-03');
INSERT INTO change_pending (dkey, id, table_id, tag, at) VALUES (13, 5, 5, 9, '2026-01-04')`); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(6); err != nil {
		t.Fatal(err)
	}
	if got, want := query(`SELECT format('%s pos %s txn %s tag %s %s', id, pos, txn, tag, at::date) FROM changes ORDER BY id`),
		`[1 pos 1 txn 1 tag 7 2026-01-01 2 pos 2 txn 1 tag 7 2026-01-01 3 pos  txn  tag 8 2026-01-02 4 pos 3 txn 3 tag 0 2026-01-03 5 pos  txn  tag 9 2026-01-04]`; got != want {
		t.Errorf("after down:\n got %s\nwant %s", got, want)
	}
	if got := query(`SELECT format('%s %s', last, visible) FROM change_feed`); got != `[2 2]` {
		t.Errorf("change_feed after down: %s", got)
	}
}

// Migration 0008 keeps 0007's changes where they are (numbered ones keep
// their positions, pending ones their pending rows) and starts the
// sequencer's watermark above every existing change row. Down gives rows
// of 0008's form a pending row where unnumbered, and drops their tags,
// which 0007's sequencer would take for an older release's rows to adopt.
// On Citus too.
func TestUpgradeStartsChangeWatermark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, m, conn := feedDBAt(t, 7)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	query := func(sql string) string {
		t.Helper()
		return queryText(t, conn, sql)
	}
	// 0007's: one numbered, one pending.
	exec(`
INSERT INTO tables (id, account, name, lname) OVERRIDING SYSTEM VALUE VALUES (5, 'acct', 'T', 't');
INSERT INTO changes (dkey, id, table_id, op, pk, rk, ts, xid, props) VALUES
  (11, 1, 5, 1, 'p', 'a', 1, 100, '{}'), (11, 2, 5, 1, 'p', 'b', 2, 101, '{}');
INSERT INTO change_positions (dkey, id, table_id, pos, txn, at) VALUES (11, 1, 5, 1, 1, '2026-01-01');
INSERT INTO change_pending (dkey, id, table_id, tag, at) VALUES (11, 2, 5, 7, '2026-01-02');
UPDATE change_sequencer SET last = 1, visible = 1`)
	if err := m.Migrate(8); err != nil {
		t.Fatal(err)
	}
	checks := []struct{ sql, want string }{
		{`SELECT format('%s %s %s %s %s', last, visible, scanned, gaps, gap_xmax) FROM change_numbering`, `[1 1 2 {} {}]`},
		{`SELECT format('%s/%s', id, pos) FROM change_positions ORDER BY pos`, `[1/1]`},
		{`SELECT format('%s tag %s', id, tag) FROM change_pending`, `[2 tag 7]`},
		{`SELECT pg_get_expr(indpred, indrelid) FROM pg_index WHERE indexrelid = 'changes_unsequenced'::regclass`,
			`[((pos IS NULL) AND (tag IS NOT NULL) AND (last IS NULL))]`},
	}
	for _, c := range checks {
		if got := query(c.sql); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.sql, got, c.want)
		}
	}

	// 0008's: one numbered, one not.
	exec(`
INSERT INTO changes (dkey, id, table_id, tag, last, op, pk, rk, ts, xid, props, at) VALUES
  (12, 3, 5, 8, true, 1, 'q', 'c', 3, 102, '{}', '2026-01-03'), (12, 4, 5, 9, true, 1, 'q', 'd', 4, 103, '{}', '2026-01-04');
INSERT INTO change_positions (dkey, id, table_id, pos, txn, at) VALUES (12, 3, 5, 2, 2, '2026-01-03');
UPDATE change_numbering SET last = 2, visible = 2, scanned = 3, gaps = '{1}', gap_xmax = '{5}'`)
	if err := m.Migrate(7); err != nil {
		t.Fatal(err)
	}
	down := []struct{ sql, want string }{
		{`SELECT format('%s %s', last, visible) FROM change_sequencer`, `[2 2]`},
		{`SELECT format('%s tag %s %s', id, tag, at::date) FROM change_pending ORDER BY id`, `[2 tag 7 2026-01-02 4 tag 9 2026-01-04]`},
		{`SELECT format('%s tag %s', id, tag) FROM changes ORDER BY id`, `[1 tag  2 tag  3 tag  4 tag ]`},
		{`SELECT format('%s/%s', id, pos) FROM change_positions ORDER BY pos`, `[1/1 3/2]`},
	}
	for _, c := range down {
		if got := query(c.sql); got != c.want {
			t.Errorf("after down, %s:\n got %s\nwant %s", c.sql, got, c.want)
		}
	}
	if err := m.Migrate(8); err != nil {
		t.Fatal(err)
	}
	if got := query(`SELECT format('%s %s', scanned, gaps) FROM change_numbering`); got != `[4 {}]` {
		t.Errorf("up again: %s", got)
	}
}

// Migration 0009 stops the previous release's sequencer and readers: its
// numbering table is gone, and a position row it would write without n (a
// batch's row taken for one change) is refused. On Citus too.
func TestUpgradeStopsThePreviousSequencer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, conn := feedDBAt(t, 9)
	for _, sql := range []string{
		`SELECT visible, purged FROM change_numbering`,
		`INSERT INTO change_positions (dkey, id, table_id, pos, txn, at) VALUES (1, 1, 1, 1, 1, now())`,
	} {
		if _, err := conn.Exec(ctx, sql); err == nil {
			t.Errorf("%s: no error", sql)
		}
	}
}

// Migration 0009 records a batch of inserts in one change row; down gives
// each of its entities a change row of its own, and a numbered batch's
// entities the positions the row stood for. The sequencer's watermark
// covers the numbered ones' new ids, and not the unnumbered rows below
// them, which wait in its gaps. On Citus too.
func TestDowngradeSplitsChangeBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, m, conn := feedDBAt(t, 9)
	if _, err := conn.Exec(ctx, `
INSERT INTO tables (id, account, name, lname) OVERRIDING SYSTEM VALUE VALUES (5, 'acct', 'T', 't');
INSERT INTO changes (dkey, id, table_id, tag, last, op, pk, rk, ts, xid, props, at, rks, entities) VALUES
  (11, 1, 5, 7, true, 1, 'p', 'x', 1, 100, '{}', '2026-01-01', NULL, NULL),
  (12, 2, 5, 8, true, 1, 'q', '', 2, 101, NULL, '2026-01-02', '{a,b,c}', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[]),
  (11, 3, 5, 9, true, 1, 'p', 'y', 3, 102, '{}', '2026-01-03', NULL, NULL),
  (12, 4, 5, 10, true, 1, 'q', '', 4, 103, NULL, '2026-01-04', '{d,e}', ARRAY['{"n": 4}', '{"n": 5}']::jsonb[]);
INSERT INTO change_positions (dkey, id, table_id, pos, txn, at, n) VALUES
  (11, 1, 5, 1, 1, '2026-01-01', 1), (12, 2, 5, 4, 2, '2026-01-02', 3);
UPDATE change_counter SET last = 4, visible = 4, scanned = 2, gaps = '{}', gap_xmax = '{}'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT setval('changes_id_seq', 4)`); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(8); err != nil {
		t.Fatal(err)
	}
	checks := []struct{ sql, want string }{
		{`SELECT format('%s %s/%s tag %s last %s %s', id, pk, rk, tag, last, props) FROM changes ORDER BY id`,
			`[1 p/x tag 7 last t {} 3 p/y tag 9 last t {} 5 q/a tag 8 last f {"n": 1} 6 q/b tag 8 last f {"n": 2} 7 q/c tag 8 last t {"n": 3} 8 q/d tag 10 last f {"n": 4} 9 q/e tag 10 last t {"n": 5}]`},
		{`SELECT format('%s/%s txn %s %s', id, pos, txn, at::date) FROM change_positions ORDER BY pos`,
			`[1/1 txn 1 2026-01-01 5/2 txn 2 2026-01-02 6/3 txn 2 2026-01-02 7/4 txn 2 2026-01-02]`},
		{`SELECT format('%s %s %s %s', last, visible, scanned, gaps) FROM change_numbering`, `[4 4 7 {3,4}]`},
		{`SELECT cardinality(gap_xmax)::text FROM change_numbering`, `[2]`},
	}
	for _, c := range checks {
		if got := queryText(t, conn, c.sql); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.sql, got, c.want)
		}
	}
}

// feedDBAt migrates a database of its own to version, distributed on
// Citus as a cluster of that release is, and connects to it; the test's
// end closes both.
func feedDBAt(t *testing.T, version uint) (*pgx.ConnConfig, *migrate.Migrate, *pgx.Conn) {
	t.Helper()
	dsn := testdb.New(t)
	ctx := context.Background()
	cfg, m := migratedTo(t, dsn, version)
	t.Cleanup(func() { m.Close() })
	if err := distribute(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return cfg, m, conn
}

// queryText runs sql, whose rows are one text each, and prints them.
func queryText(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(all)
}
