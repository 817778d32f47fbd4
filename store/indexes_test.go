package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/odata"
)

// waitIndexes waits until no index of table is building and returns them.
func waitIndexes(t *testing.T, s *Store, table string) []Index {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		ixs, err := s.Indexes(ctx, acct, table)
		if err != nil {
			t.Fatal(err)
		}
		building := false
		for _, ix := range ixs {
			building = building || ix.State == IndexBuilding
		}
		if !building {
			return ixs
		}
		if time.Now().After(deadline) {
			t.Fatalf("indexes still building: %+v\nthe database's busy backends:\n%s", ixs, busyBackends(s.pool))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// busyBackends describes every backend of the database (on Citus, of
// every node) that is not idle: what a build that does not end waits for.
func busyBackends(pool *pgxpool.Pool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node, view := "'local'", "pg_stat_activity"
	if testdb.Citus() {
		node, view = "'node ' || nodeid", "citus_stat_activity"
	}
	rows, err := pool.Query(ctx, `SELECT format('%s pid %s %s %s/%s xact %s: %s', `+node+
		`, pid, state, wait_event_type, wait_event, now() - xact_start, left(regexp_replace(query, '\s+', ' ', 'g'), 300))
FROM `+view+` WHERE state IS DISTINCT FROM 'idle' AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND query NOT LIKE '%csa_from_one_node%'`)
	if err != nil {
		return err.Error()
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(lines, "\n")
}

// pgIndexes returns the names of the PostgreSQL indexes on entities whose
// name starts with prefix, with whether each is valid.
func pgIndexes(t *testing.T, pool *pgxpool.Pool, prefix string) map[string]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'entities'::regclass AND starts_with(c.relname, $1)`, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]bool{}
	for rows.Next() {
		var name string
		var valid bool
		if err := rows.Scan(&name, &valid); err != nil {
			t.Fatal(err)
		}
		m[name] = valid
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIndexLifecycle(t *testing.T) {
	t.Parallel()
	s := newStoreWith(t, Options{MaxIndexes: 3})
	t.Cleanup(s.Close)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "Ix"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := s.Write(ctx, acct, "Ix", &Write{Op: OpInsert, PartitionKey: "p", RowKey: fmt.Sprint(i), Properties: props("Age", i, "Name", fmt.Sprint("n", i))}); err != nil {
			t.Fatal(err)
		}
	}
	age := IndexSpec{Property: "Age", Type: odata.EdmInt32}
	ix, err := s.CreateIndex(ctx, acct, "ix", age)
	if err != nil {
		t.Fatal(err)
	}
	if ix.State != IndexBuilding || !strings.HasPrefix(ix.Name, "pi_") || ix.Property != "Age" {
		t.Fatalf("created %+v", ix)
	}
	errCases := []struct {
		table string
		spec  IndexSpec
		want  error
	}{
		{"ix", age, ErrIndexExists},
		// The numeric types are one index.
		{"ix", IndexSpec{Property: "Age", Type: odata.EdmDouble}, ErrIndexExists},
		{"nope", age, ErrTableNotFound},
		{"ix", IndexSpec{Property: "RowKey", Type: odata.EdmString}, ErrIndexType},
		{"ix", IndexSpec{Property: "a-b", Type: odata.EdmString}, ErrIndexType},
		{"ix", IndexSpec{Property: "Age", Type: 0}, ErrIndexType},
	}
	for _, c := range errCases {
		if _, err := s.CreateIndex(ctx, acct, c.table, c.spec); !errors.Is(err, c.want) {
			t.Errorf("CreateIndex(%s, %+v) = %v, want %v", c.table, c.spec, err, c.want)
		}
	}
	for _, spec := range []IndexSpec{{Property: "Name", Type: odata.EdmString}, {Property: "Age", Type: odata.EdmInt32, AfterPartitionKey: true}} {
		if _, err := s.CreateIndex(ctx, acct, "ix", spec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateIndex(ctx, acct, "ix", IndexSpec{Property: "Other", Type: odata.EdmGuid}); !errors.Is(err, ErrTooManyIndexes) {
		t.Fatalf("fourth index: %v", err)
	}
	ixs := waitIndexes(t, s, "ix")
	if len(ixs) != 3 {
		t.Fatalf("indexes %+v", ixs)
	}
	valid := pgIndexes(t, s.pool, "pi_")
	for _, x := range ixs {
		if x.State != IndexReady || x.Error != "" || !valid[x.Name] {
			t.Errorf("index %+v: valid in PostgreSQL %v", x, valid[x.Name])
		}
	}
	if err := s.DropIndex(ctx, acct, "ix", ix.Name); err != nil {
		t.Fatal(err)
	}
	if err := s.DropIndex(ctx, acct, "ix", ix.Name); !errors.Is(err, ErrIndexNotFound) {
		t.Fatalf("second drop: %v", err)
	}
	if err := s.DropIndex(ctx, acct, "nope", ix.Name); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("drop on a missing table: %v", err)
	}
	if _, ok := pgIndexes(t, s.pool, "pi_")[ix.Name]; ok {
		t.Fatalf("index %s still in PostgreSQL", ix.Name)
	}
	if ixs, err := s.Indexes(ctx, acct, "ix"); err != nil || len(ixs) != 2 {
		t.Fatalf("after drop: %+v %v", ixs, err)
	}
	if _, err := s.Indexes(ctx, acct, "nope"); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("indexes of a missing table: %v", err)
	}
}

// A build that fails (here on a value that PostgreSQL cannot cast, which
// only a row written behind the store's back can hold) ends failed, with
// the error, and no invalid index left behind.
func TestIndexBuildFails(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "bad"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, entity_dkey(account, lname, 'p'), 'p', 'r', 1, 1, '{"X": ["dbl", "not a number"]}'
FROM tables WHERE account = $1 AND lname = 'bad'`, acct); err != nil {
		t.Fatal(err)
	}
	ix, err := s.CreateIndex(ctx, acct, "bad", IndexSpec{Property: "X", Type: odata.EdmDouble})
	if err != nil {
		t.Fatal(err)
	}
	ixs := waitIndexes(t, s, "bad")
	if len(ixs) != 1 || ixs[0].State != IndexFailed || !strings.Contains(ixs[0].Error, "not a number") {
		t.Fatalf("indexes %+v", ixs)
	}
	if left := pgIndexes(t, s.pool, ix.Name); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	// A failed index may be dropped like any other.
	if err := s.DropIndex(ctx, acct, "bad", ix.Name); err != nil {
		t.Fatal(err)
	}
}

// TestIndexBuildEndRecordedAfterAFailure fails the first two statements that
// record a build's end (as a deadlock or a lost connection would): the
// build is recorded ready all the same, rather than left building until
// someone takes it for orphaned. Only on one PostgreSQL: Citus refuses
// triggers on its reference tables, which the catalog's tables are there.
func TestIndexBuildEndRecordedAfterAFailure(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `
CREATE SEQUENCE end_attempts;
CREATE FUNCTION fail_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('end_attempts') <= 2 THEN
    RAISE EXCEPTION 'injected failure' USING ERRCODE = '40P01';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fail_end BEFORE UPDATE ON property_indexes FOR EACH ROW EXECUTE FUNCTION fail_end()`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIndex(ctx, acct, "t", IndexSpec{Property: "X", Type: odata.EdmInt32}); err != nil {
		t.Fatal(err)
	}
	ixs := waitIndexes(t, s, "t")
	if len(ixs) != 1 || ixs[0].State != IndexReady {
		t.Fatalf("indexes %+v", ixs)
	}
	var attempts int64
	if err := s.pool.QueryRow(ctx, `SELECT last_value FROM end_attempts`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 3 {
		t.Fatalf("%d attempts to record the end, want 3", attempts)
	}
}

// Dropping a table drops its indexes (the purger does), and a table
// created again under its name starts without any.
func TestIndexDropTable(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	ix, err := s.CreateIndex(ctx, acct, "gone", IndexSpec{Property: "Age", Type: odata.EdmInt64})
	if err != nil {
		t.Fatal(err)
	}
	waitIndexes(t, s, "gone")
	if err := s.DeleteTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	if ixs, err := s.Indexes(ctx, acct, "gone"); err != nil || len(ixs) != 0 {
		t.Fatalf("new table's indexes: %+v %v", ixs, err)
	}
	if _, err := s.PurgeOnce(ctx, PurgeConfig{Chunk: 100}); err != nil {
		t.Fatal(err)
	}
	if left := pgIndexes(t, s.pool, ix.Name); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM property_indexes`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("catalog rows %d %v", n, err)
	}
}

// explainQuery returns the plan of the first statement of q's page.
func explainQuery(t *testing.T, s *Store, table string, q EntityQuery) string {
	t.Helper()
	ctx := context.Background()
	var err error
	if q.tableID, q.indexes, _, err = s.cachedIndexes(ctx, acct, table); err != nil {
		t.Fatal(err)
	}
	sql, args, err := queryEntitiesSQL(s.distributed.Load(), acct, table, q)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN "+sql, args...)
	return planText(t, rows, err)
}

// planText returns the lines of an EXPLAIN's rows, as one text; err is
// the error of sending it.
func planText(t *testing.T, rows pgx.Rows, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// explainGeneric returns the generic plan of sql (a plan for any values
// of its parameters, what a prepared statement gets once PostgreSQL finds
// it no worse than a custom one), prepared on a connection of its own to
// the database of cfg.
func explainGeneric(t *testing.T, cfg *pgx.ConnConfig, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	sd, err := conn.Prepare(ctx, "generic", sql)
	if err != nil {
		t.Fatal(err)
	}
	if len(sd.ParamOIDs) != len(args) {
		t.Fatalf("%d parameters, %d values", len(sd.ParamOIDs), len(args))
	}
	// EXECUTE takes its values as literals (it has no parameters of its own).
	values := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			values[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case []byte:
			values[i] = fmt.Sprintf(`'\x%x'`, v)
		case float64:
			values[i] = fmt.Sprintf("'%v'", v)
		default:
			values[i] = fmt.Sprint(v)
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE generic("+strings.Join(values, ", ")+")")
	return planText(t, rows, err)
}

// shardOtherwise matches a plan that reads a shard of entities other than
// by a property index: whole, or by its primary key.
var shardOtherwise = regexp.MustCompile(`Seq Scan on entities_|entities_pkey_`)

// nodePlans returns the generic plans of the statements of q's page on
// the Citus nodes (readNodes), one per node.
func nodePlans(t *testing.T, s *Store, q EntityQuery) []string {
	t.Helper()
	rt := s.router.Load()
	if rt == nil {
		t.Fatal("no routing")
	}
	nodes, shards := nodeShards(rt.cur.Load(), time.Now().UnixNano())
	if nodes == nil {
		t.Fatal("no direct reads of the shards")
	}
	rest, args, err := acrossWhereOf(q.tableID, q, pageStatement{}, true)
	if err != nil {
		t.Fatal(err)
	}
	var plans []string
	for i, n := range nodes {
		sql := acrossNodesSQL(shards[i], strconv.FormatInt(q.tableID, 10), rest, q.Top)
		plans = append(plans, explainGeneric(t, n.pool.Config().ConnConfig, sql, args))
	}
	return plans
}

// A selective filter on an indexed property reads the index: the plans
// name it.
func TestIndexUsedByFilter(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	for _, name := range []string{"big", "other"} {
		if err := s.CreateTable(ctx, acct, name); err != nil {
			t.Fatal(err)
		}
	}
	// 20,000 entities over 100 partitions: Age 0..999, When one a minute.
	if _, err := s.pool.Exec(ctx, `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT t.id, entity_dkey(t.account, t.lname, 'p' || i % 100), 'p' || i % 100, lpad(i::text, 6, '0'), 1, 100,
	jsonb_build_object('Age', jsonb_build_array('i32', i % 1000),
		'When', jsonb_build_array('dt', to_char(timestamp '2026-01-01' + i * interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS".0000000Z"')))
FROM tables t, generate_series(1, 20000) i WHERE t.account = $1`, acct); err != nil {
		t.Fatal(err)
	}
	specs := []IndexSpec{
		{Property: "Age", Type: odata.EdmInt32},
		{Property: "When", Type: odata.EdmDateTime},
		{Property: "Age", Type: odata.EdmInt32, AfterPartitionKey: true},
	}
	names := map[IndexSpec]string{}
	for _, spec := range specs {
		ix, err := s.CreateIndex(ctx, acct, "big", spec)
		if err != nil {
			t.Fatal(err)
		}
		names[spec] = ix.Name
	}
	waitIndexes(t, s, "big")
	// No ANALYZE here: the build gathers the statistics the planner needs
	// to take the index, on every shard on Citus.
	analyzed := `SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relid = 'entities'::regclass`
	if s.distributed.Load() {
		analyzed = `SELECT bool_and(result::boolean) FROM run_command_on_shards('entities',
			$$SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relid = '%s'::regclass$$)`
	}
	var ok bool
	if err := s.pool.QueryRow(ctx, analyzed).Scan(&ok); err != nil || !ok {
		t.Fatalf("entities not analyzed after the builds: %v %v", ok, err)
	}
	cases := []struct {
		filter string
		index  IndexSpec
	}{
		{"Age eq 42", specs[0]},
		{"Age eq 42L", specs[0]},
		{"Age eq 42.0", specs[0]},
		{"Age ge 998 and Age lt 999", specs[0]},
		{"When ge datetime'2026-01-03T00:00:00Z' and When lt datetime'2026-01-03T00:10:00Z'", specs[1]},
		{"PartitionKey eq 'p7' and Age gt 990", specs[2]},
		{"Age eq 42 or Age eq 43", specs[0]},
	}
	for _, c := range cases {
		plan := explainQuery(t, s, "big", EntityQuery{Filter: mustParse(t, c.filter), Top: 1000})
		// The index meant for it, or another one that serves it too (the
		// after-PartitionKey index of Age also has Age's value as a key).
		used := false
		for spec, name := range names {
			used = used || strings.Contains(plan, name) && spec.Property == c.index.Property
		}
		if !used {
			t.Errorf("%s: plan does not use %s:\n%s", c.filter, names[c.index], plan)
		}
		// Equalities alone: one plan for every value, which uses the
		// index too (genericIndexPlan). Through Citus the coordinator
		// plans (the nodes' statements: TestCitusIndexedPagesReadShardsOnTheirNodes).
		q := EntityQuery{Filter: mustParse(t, c.filter), Top: 1000}
		var err error
		if q.tableID, q.indexes, _, err = s.cachedIndexes(ctx, acct, "big"); err != nil {
			t.Fatal(err)
		}
		wantGeneric := !strings.Contains(c.filter, " g") && !strings.Contains(c.filter, " l")
		if got := genericIndexPlan(q); got != wantGeneric {
			t.Errorf("%s: genericIndexPlan %v, want %v", c.filter, got, wantGeneric)
		}
		if !wantGeneric {
			continue
		}
		if s.distributed.Load() {
			// Each node's statement on its shards (acrossNodes).
			for i, plan := range nodePlans(t, s, q) {
				if !strings.Contains(plan, names[c.index]) || shardOtherwise.MatchString(plan) {
					t.Errorf("%s: node %d's generic plan reads a shard without %s:\n%s", c.filter, i, names[c.index], plan)
				}
			}
			continue
		}
		sql, args, err := queryEntitiesSQL(false, acct, "big", q)
		if err != nil {
			t.Fatal(err)
		}
		if plan := explainGeneric(t, s.pool.Config().ConnConfig, sql, args); !strings.Contains(plan, names[c.index]) {
			t.Errorf("%s: generic plan does not use %s:\n%s", c.filter, names[c.index], plan)
		}
	}
	// Another table has no indexes: its plan uses none.
	if plan := explainQuery(t, s, "other", EntityQuery{Filter: mustParse(t, "Age eq 42"), Top: 1000}); strings.Contains(plan, "pi_") {
		t.Errorf("other table's plan uses a property index:\n%s", plan)
	}
}

// A build whose process stopped (here: an invalid index and a catalog row
// that says building, which no process holds the build lock of) is found
// out when the indexes are listed: it ends failed, with nothing left.
func TestIndexBuildOrphaned(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "orphan"); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := s.pool.QueryRow(ctx, `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, entity_dkey(account, lname, 'p'), 'p', 'r', 1, 1, '{"X": ["dbl", "not a number"]}'
FROM tables WHERE account = $1 AND lname = 'orphan' RETURNING table_id`, acct).Scan(&id); err != nil {
		t.Fatal(err)
	}
	spec := IndexSpec{Property: "X", Type: odata.EdmDouble}
	name := indexName(id, spec)
	if _, err := s.pool.Exec(ctx, indexDDL(id, name, spec)); err == nil {
		t.Fatal("the build of a bad value did not fail")
	}
	if valid, ok := pgIndexes(t, s.pool, name)[name]; !ok || valid {
		t.Fatalf("no invalid index to recover from: %v %v", ok, valid)
	}
	if _, err := s.pool.Exec(ctx, `
INSERT INTO property_indexes (table_id, name, property, type, after_pk, created_at) VALUES ($1, $2, 'X', 'Edm.Double', false, now() - interval '1 hour')`, id, name); err != nil {
		t.Fatal(err)
	}
	ixs, err := s.Indexes(ctx, acct, "orphan")
	if err != nil || len(ixs) != 1 || ixs[0].State != IndexFailed {
		t.Fatalf("listed %+v %v", ixs, err)
	}
	// The listing told; the catalog follows once what the build left is
	// dropped.
	var state, msg string
	for deadline := time.Now().Add(time.Minute); state != IndexFailed; time.Sleep(20 * time.Millisecond) {
		if err := s.pool.QueryRow(ctx, `SELECT state, error FROM property_indexes WHERE name = $1`, name).Scan(&state, &msg); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("catalog still says %s", state)
		}
	}
	if !strings.Contains(msg, "interrupted") {
		t.Fatalf("recorded error %q", msg)
	}
	if left := pgIndexes(t, s.pool, name); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
