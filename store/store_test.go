package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/migrations"
	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/odata/filter"
)

const acct = "acct"

// migratedDB returns the URL of a database schema of the test's own, migrated.
func migratedDB(t testing.TB) string {
	t.Helper()
	dsn := testdb.New(t)
	if err := migrations.Up(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func newStore(t testing.TB) *Store {
	t.Helper()
	return storeOn(t, migratedDB(t), 0)
}

func props(kv ...any) []odata.Property {
	var ps []odata.Property
	for i := 0; i < len(kv); i += 2 {
		var v odata.Value
		switch x := kv[i+1].(type) {
		case int:
			v = odata.Value{Type: odata.EdmInt32, Int: int64(x)}
		case string:
			v = odata.Value{Type: odata.EdmString, Str: x}
		case float64:
			v = odata.Value{Type: odata.EdmDouble, Float: x}
		}
		ps = append(ps, odata.Property{Name: kv[i].(string), Value: v})
	}
	return ps
}

func TestETagRoundTrip(t *testing.T) {
	t.Parallel()
	for _, ts := range []int64{odata.MinDateTime, odata.Ticks(time.Now()), odata.MaxDateTime} {
		for _, xmin := range []uint32{0, 1, 1 << 31, 1<<32 - 1} {
			tag := formatETag(ts, xmin, "p", "r")
			m, err := ParseMatch([]string{tag})
			if err != nil || m.kind != matchETag || m.ts != ts || m.xmin != xmin {
				t.Errorf("ParseMatch(%q) = %+v, %v", tag, m, err)
			}
			if m.forKeys("p", "r").kind != matchETag || m.forKeys("p", "r2").kind != matchNever || m.forKeys("pr", "").kind != matchNever {
				t.Errorf("ETag %s is not bound to its entity", tag)
			}
		}
	}
	tag := formatETag(odata.Ticks(time.Date(2021, 9, 21, 0, 52, 39, 283908700, time.UTC)), 42, "p", "r")
	if want := `W/"datetime'2021-09-21T00%3A52%3A39.2839087Z'-42-`; !strings.HasPrefix(tag, want) {
		t.Errorf("formatETag = %s, want prefix %s", tag, want)
	}
	// Entities written together share Timestamp and xmin, not their ETag.
	if formatETag(1, 2, "p", "a") == formatETag(1, 2, "p", "b") {
		t.Error("two entities of one write share an ETag")
	}
}

func TestParseMatch(t *testing.T) {
	t.Parallel()
	ours := formatETag(odata.Ticks(time.Now()), 7, "p", "r")
	tests := []struct {
		in   []string
		kind matchKind
		err  bool
	}{
		{nil, matchNone, false},
		{[]string{"*"}, matchAny, false},
		{[]string{` * `}, matchAny, false},
		{[]string{ours}, matchETag, false},
		{[]string{`W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`}, matchNever, false}, // Azure's shape, not ours
		{[]string{`w/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`}, matchNever, false}, // lower-case weak prefix
		{[]string{"w" + ours[1:]}, matchNever, false},
		{[]string{`W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'-x"`}, matchNever, false},
		{[]string{`W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'-99999999999"`}, matchNever, false},
		{[]string{""}, 0, true}, // present but empty: never an upsert
		{[]string{"  "}, 0, true},
		{[]string{`"abc"`}, 0, true}, // strong: never ours
		{[]string{ours[2:]}, 0, true},
		{[]string{"*", "*"}, 0, true},
		{[]string{ours, ours}, 0, true},
		{[]string{"garbage"}, 0, true},
		{[]string{`W/abc`}, 0, true},
		{[]string{`X/"abc"`}, 0, true},
		{[]string{`"a"b"`}, 0, true},
		{[]string{`"a", "b"`}, 0, true},
		{[]string{`W/"a", W/"b"`}, 0, true},
	}
	for _, tt := range tests {
		m, err := ParseMatch(tt.in)
		if (err != nil) != tt.err || (err == nil && m.kind != tt.kind) {
			t.Errorf("ParseMatch(%q) = %+v, %v", tt.in, m, err)
		}
		if err != nil && !errors.Is(err, odata.ErrInvalidInput) {
			t.Errorf("ParseMatch(%q) error %v is not InvalidInput", tt.in, err)
		}
	}
}

func TestTables(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "MyTable"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"MyTable", "mytable", "MYTABLE"} {
		if err := s.CreateTable(ctx, acct, n); !errors.Is(err, ErrTableExists) {
			t.Errorf("create %s: %v, want ErrTableExists", n, err)
		}
	}
	if err := s.CreateTable(ctx, "other", "mytable"); err != nil {
		t.Errorf("same name in another account: %v", err)
	}
	for i := 0; i < 5; i++ {
		if err := s.CreateTable(ctx, acct, fmt.Sprintf("T%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	q := TableQuery{Top: 2}
	for {
		page, err := s.QueryTables(ctx, acct, q)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, page.Names...)
		if page.Next == "" {
			break
		}
		q.From = page.Next
	}
	if got := strings.Join(names, ","); got != "MyTable,T0,T1,T2,T3,T4" {
		t.Errorf("listing = %s", got)
	}
	if err := s.DeleteTable(ctx, acct, "MYTABLE"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTable(ctx, acct, "mytable"); !errors.Is(err, ErrTableNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if err := s.CreateTable(ctx, acct, "mytable"); err != nil {
		t.Errorf("name not free after delete: %v", err)
	}
}

func TestWrites(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	write := func(w Write) (Result, error) { return s.Write(ctx, acct, "T1", &w) }

	if _, err := s.Write(ctx, acct, "missing", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "r"}); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("insert into missing table: %v", err)
	}
	r1, err := write(Write{Op: OpInsert, PartitionKey: "p", RowKey: "r", Properties: props("A", 1, "B", "x")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := write(Write{Op: OpInsert, PartitionKey: "p", RowKey: "r"}); !errors.Is(err, ErrEntityExists) {
		t.Fatalf("duplicate insert: %v", err)
	}
	stale, _ := ParseMatch([]string{r1.ETag})
	r2, err := write(Write{Op: OpMerge, PartitionKey: "p", RowKey: "r", Properties: props("C", 2.5), Match: stale})
	if err != nil {
		t.Fatal(err)
	}
	if r2.ETag == r1.ETag || r2.Timestamp <= r1.Timestamp {
		t.Fatalf("merge did not advance: %+v -> %+v", r1, r2)
	}
	for _, op := range []Op{OpReplace, OpMerge, OpDelete} {
		if _, err := write(Write{Op: op, PartitionKey: "p", RowKey: "r", Match: stale}); !errors.Is(err, ErrConditionNotMet) {
			t.Errorf("op %d with stale etag: %v", op, err)
		}
		if _, err := write(Write{Op: op, PartitionKey: "p", RowKey: "nope", Match: MatchAny}); !errors.Is(err, ErrEntityNotFound) {
			t.Errorf("op %d on missing entity: %v", op, err)
		}
	}
	e, err := s.GetEntity(ctx, acct, "t1", "p", "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.DecodeProperties(); err != nil || len(e.Properties) != 3 || e.ETag != r2.ETag {
		t.Fatalf("after merge: %+v", e)
	}
	// Upserts create, then replace or merge.
	if _, err := write(Write{Op: OpReplace, PartitionKey: "p", RowKey: "u", Properties: props("A", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := write(Write{Op: OpReplace, PartitionKey: "p", RowKey: "u", Properties: props("B", 2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := write(Write{Op: OpMerge, PartitionKey: "p", RowKey: "u", Properties: props("C", 3)}); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.GetEntity(ctx, acct, "t1", "p", "u"); e.DecodeProperties() != nil || len(e.Properties) != 2 {
		t.Fatalf("upserts: %+v", e.Properties)
	}
	if _, err := write(Write{Op: OpDelete, PartitionKey: "p", RowKey: "u", Match: MatchAny}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEntity(ctx, acct, "t1", "p", "u"); !errors.Is(err, ErrEntityNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
}

// A merge whose result breaks a limit fails exactly and changes nothing,
// even though each request alone is within the limits.
func TestMergeLimits(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	many := func(prefix string, n int) []odata.Property {
		var ps []odata.Property
		for i := 0; i < n; i++ {
			ps = append(ps, odata.Property{Name: fmt.Sprintf("%s%d", prefix, i), Value: odata.Value{Type: odata.EdmInt32}})
		}
		return ps
	}
	for _, match := range []Match{{}, MatchAny} {
		rk := fmt.Sprintf("r%d", match.kind)
		if _, err := s.Write(ctx, acct, "t1", &Write{Op: OpInsert, PartitionKey: "p", RowKey: rk, Properties: many("a", 200)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(ctx, acct, "t1", &Write{Op: OpMerge, PartitionKey: "p", RowKey: rk, Properties: many("b", 53), Match: match}); !errors.Is(err, odata.ErrTooManyProperties) {
			t.Errorf("merge to 253 properties: %v", err)
		}
		// Overwriting existing names stays within the limit.
		if _, err := s.Write(ctx, acct, "t1", &Write{Op: OpMerge, PartitionKey: "p", RowKey: rk, Properties: append(many("a", 200), many("b", 52)...), Match: match}); err != nil {
			t.Errorf("merge to 252 properties: %v", err)
		}
		big := strings.Repeat("x", 30000)
		for i := 0; i < 16; i++ {
			_, err := s.Write(ctx, acct, "t1", &Write{Op: OpMerge, PartitionKey: "p", RowKey: rk, Properties: []odata.Property{{Name: fmt.Sprintf("a%d", i), Value: odata.Value{Type: odata.EdmString, Str: big}}}, Match: match})
			if err != nil {
				t.Fatalf("merge big property %d: %v", i, err)
			}
		}
		// 17 strings of 60 KB exceed 1 MiB.
		_, err := s.Write(ctx, acct, "t1", &Write{Op: OpMerge, PartitionKey: "p", RowKey: rk, Properties: []odata.Property{{Name: "a16", Value: odata.Value{Type: odata.EdmString, Str: big}}, {Name: "a17", Value: odata.Value{Type: odata.EdmString, Str: big}}}, Match: match})
		if !errors.Is(err, odata.ErrEntityTooLarge) {
			t.Errorf("merge beyond 1 MiB: %v", err)
		}
		e, err := s.GetEntity(ctx, acct, "t1", "p", rk)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := e.Property("a16"); v.Type != odata.EdmInt32 {
			t.Errorf("failed merge changed the entity: a16 = %+v", v)
		}
	}
}

func TestQueryPaging(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for p := 0; p < 3; p++ {
		for r := 0; r < 7; r++ {
			pk, rk := fmt.Sprintf("p%d", p), fmt.Sprintf("r%02d", r)
			want = append(want, pk+"/"+rk)
			if _, err := s.Write(ctx, acct, "t1", &Write{Op: OpInsert, PartitionKey: pk, RowKey: rk, Properties: props("N", r)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := slices.Concat(follow(t, s, "t1", EntityQuery{Top: 4})...)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("paged %v\nwant %v", got, want)
	}
	f, err := filter.Parse("PartitionKey eq 'p1' and N ge 5")
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.QueryEntities(ctx, acct, "t1", EntityQuery{Top: 1000, Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entities) != 2 || page.More {
		t.Fatalf("filtered page: %+v", page)
	}
	if _, err := s.QueryEntities(ctx, acct, "nope", EntityQuery{Top: 10}); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("query missing table: %v", err)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 25; i++ {
		if _, err := s.Write(ctx, acct, "t1", &Write{Op: OpInsert, PartitionKey: "p", RowKey: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	// The name is free at once; the new table is empty and untouched by
	// the purge of the old one.
	if err := s.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "t1", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "new"}); err != nil {
		t.Fatal(err)
	}
	cfg := PurgeConfig{Chunk: 10, Grace: 0}
	var total PurgeStats
	for i := 0; i < 10; i++ {
		st, err := s.PurgeOnce(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		total.Entities += st.Entities
		total.Tables += st.Tables
	}
	if total.Entities != 25 || total.Tables != 1 {
		t.Fatalf("purged %+v, want 25 entities and 1 table", total)
	}
	page, err := s.QueryEntities(ctx, acct, "t1", EntityQuery{Top: 100})
	if err != nil || len(page.Entities) != 1 {
		t.Fatalf("new table after purge: %+v %v", page, err)
	}
}

// Several replicas purge at once, one of them stopped in the middle of a
// pass: every row of the deleted tables goes exactly once (the purgers'
// counts add up to the rows there were, no row is deleted twice and no
// pass fails), every tombstone is dropped, and a live table of the same
// name is untouched.
func TestPurgeReplicas(t *testing.T) {
	t.Parallel()
	dsn := migratedDB(t)
	ctx := context.Background()
	replica := func() *Store {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return detected(t, New(pool))
	}
	s := replica()
	const tables, each = 4, 3000
	for i := range tables {
		name := fmt.Sprintf("t%d", i)
		if err := s.CreateTable(ctx, acct, name); err != nil {
			t.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, entity_dkey(account, lname, 'p' || (g % 7)), 'p' || (g % 7), lpad(g::text, 6, '0'), 1, 10, '{}'
FROM tables, generate_series(1, $2::int) g WHERE lname = $1 AND deleted_at IS NULL`, name, each); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTable(ctx, acct, name); err != nil {
			t.Fatal(err)
		}
	}
	// A live table named like a deleted one.
	if err := s.CreateTable(ctx, acct, "t0"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "t0", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "live"}); err != nil {
		t.Fatal(err)
	}
	cfg := PurgeConfig{Chunk: 500, Grace: 0}

	// A replica stopped in the middle of its pass: its context ends while
	// it works, so it purges some chunks (or none) and leaves the rest.
	var purged atomic.Int64
	stopped, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	st, err := replica().PurgeOnce(stopped, cfg)
	if err != nil && !errors.Is(err, context.Canceled) && stopped.Err() == nil {
		t.Fatalf("the stopped purger: %v", err)
	}
	purged.Add(st.Entities)

	// Then three replicas at once, until nothing is left.
	var wg sync.WaitGroup
	var dropped atomic.Int64
	errs := make(chan error, 3)
	for range 3 {
		r := replica()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pass := 0; pass < 1000; pass++ {
				st, err := r.PurgeOnce(ctx, cfg)
				if err != nil {
					errs <- err
					return
				}
				purged.Add(st.Entities)
				dropped.Add(st.Tables)
				if st.Pending == 0 {
					return
				}
			}
			errs <- errors.New("purge not done after 1000 passes")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if purged.Load() != tables*each || dropped.Load() > tables {
		t.Fatalf("purged %d entities and dropped %d tombstones, want %d and at most %d", purged.Load(), dropped.Load(), tables*each, tables)
	}
	var rows, tombstones int
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM tables WHERE deleted_at IS NOT NULL)`).Scan(&rows, &tombstones); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || tombstones != 0 {
		t.Fatalf("after the purge: %d entities (want the live one), %d tombstones", rows, tombstones)
	}
	if _, err := s.GetEntity(ctx, acct, "t0", "p", "live"); err != nil {
		t.Fatalf("the live table's entity: %v", err)
	}
}

// A batch that loses a serialization conflict or a deadlock is run again,
// invisibly to the caller, and gives up with ErrUnavailable (a retryable
// 503) after a bounded number of attempts; either way it is all or
// nothing. The failures are injected by a trigger that raises them for the
// first n writes, counted by a sequence, which no rollback resets.
func TestBatchRetriesInjectedConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		sqlstate string
		failures int
		wantErr  bool
	}{
		{"serialization failures", "40001", 3, false},
		{"deadlocks", "40P01", 2, false},
		// As Citus reports a worker's serialization failure at COMMIT:
		// an internal error after a warning with 40001.
		{"serialization failures at commit", "commit", 3, false},
		{"conflicts without end", "40001", 1000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			// Partition locks are advisory locks, which the schemas of
			// parallel tests share: a name of its own keeps this batch
			// from queueing behind theirs.
			table := "inject" + tc.sqlstate + fmt.Sprint(tc.failures)
			retries := &retryCounter{}
			s.SetObserver(retries)
			if err := s.CreateTable(ctx, acct, table); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Write(ctx, acct, table, &Write{Op: OpInsert, PartitionKey: "p", RowKey: "a", Properties: props("N", 1)}); err != nil {
				t.Fatal(err)
			}
			inject := fmt.Sprintf(`
CREATE SEQUENCE injected;
CREATE FUNCTION inject_conflict() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('injected') <= %d THEN
        RAISE EXCEPTION 'injected conflict' USING ERRCODE = '%s';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER inject_conflict BEFORE INSERT OR UPDATE ON entities
FOR EACH ROW EXECUTE FUNCTION inject_conflict();`, tc.failures, tc.sqlstate)
			if tc.sqlstate == "commit" {
				// A deferred trigger runs at COMMIT, once a transaction.
				inject = fmt.Sprintf(`
CREATE SEQUENCE injected;
CREATE FUNCTION inject_conflict() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('injected') <= %d THEN
        RAISE WARNING 'could not serialize access due to read/write dependencies among transactions' USING ERRCODE = '40001';
        RAISE EXCEPTION 'could not commit transaction for shard on at least one active node' USING ERRCODE = 'XX000';
    END IF;
    RETURN NEW;
END $$;
CREATE CONSTRAINT TRIGGER inject_conflict AFTER INSERT ON entities
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.rk = 'b') EXECUTE FUNCTION inject_conflict();`, tc.failures)
			}
			if _, err := s.pool.Exec(ctx, inject); err != nil {
				t.Fatal(err)
			}
			before := snapshotEntities(t, s)
			_, err := s.Batch(ctx, acct, table, []Write{
				{Op: OpMerge, PartitionKey: "p", RowKey: "a", Properties: props("M", 2), Match: MatchAny},
				{Op: OpInsert, PartitionKey: "p", RowKey: "b", Properties: props("N", 3)},
			})
			if tc.wantErr {
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("got %v, want ErrUnavailable", err)
				}
				if got := retries.n.Load(); got != maxBatchAttempts-1 {
					t.Errorf("%d retries, want %d", got, maxBatchAttempts-1)
				}
				if after := snapshotEntities(t, s); after != before {
					t.Fatalf("a failed batch wrote:\nbefore %s\nafter  %s", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("batch: %v", err)
			}
			if got := retries.n.Load(); got != int64(tc.failures) {
				t.Errorf("%d retries, want %d", got, tc.failures)
			}
			a, err := s.GetEntity(ctx, acct, table, "p", "a")
			if err != nil || !strings.Contains(string(a.Stored), `"M"`) || !strings.Contains(string(a.Stored), `"N"`) {
				t.Fatalf("merged entity: %+v %v", a, err)
			}
			page, err := s.QueryEntities(ctx, acct, table, EntityQuery{Top: 10})
			if err != nil || len(page.Entities) != 2 {
				t.Fatalf("after the batch: %+v %v", page, err)
			}
		})
	}
}

// snapshotEntities is every entity row of s's schema, versions included.
func snapshotEntities(t *testing.T, s *Store) string {
	t.Helper()
	var snap string
	if err := s.pool.QueryRow(context.Background(),
		`SELECT coalesce(string_agg(format('%s|%s|%s|%s|%s', table_id, pk, rk, xmin, props), E'\n' ORDER BY pk, rk), '') FROM entities`).Scan(&snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// retryCounter is an Observer that counts batch retries.
type retryCounter struct{ n atomic.Int64 }

func (r *retryCounter) BatchRun(int)                    {}
func (r *retryCounter) BatchRetried()                   { r.n.Add(1) }
func (r *retryCounter) PurgePass(PurgeStats, error)     {}
func (r *retryCounter) PurgeChunk(time.Duration, int64) {}

// Concurrent batches on one partition queue on its lock, each taking its
// snapshot only once the batch before it committed, so they seldom need
// serialization retries; every one that reports success is applied.
func TestBatchSerializes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	retries := &retryCounter{}
	s.SetObserver(retries)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := s.Batch(ctx, acct, "t1", []Write{
					{Op: OpMerge, PartitionKey: "p", RowKey: "counter", Properties: props(fmt.Sprintf("w%d", w), i+1)},
					{Op: OpInsert, PartitionKey: "p", RowKey: fmt.Sprintf("log-%d-%d", w, i)},
				})
				errs <- err
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("batch: %v", err)
		}
	}
	e, err := s.GetEntity(ctx, acct, "t1", "p", "counter")
	if err != nil {
		t.Fatal(err)
	}
	// A batch can still lose a race between its snapshot and its try of
	// the lock, rarely; waiting for the lock inside the transaction made
	// about every second batch conflict.
	if n := retries.n.Load(); n > workers*each/4 {
		t.Errorf("%d serialization retries of %d batches", n, workers*each)
	}
	for w := 0; w < workers; w++ {
		if v, _ := e.Property(fmt.Sprintf("w%d", w)); v.Int != each {
			t.Errorf("w%d = %d, want %d", w, v.Int, each)
		}
	}
	page, err := s.QueryEntities(ctx, acct, "t1", EntityQuery{Top: 1000})
	if err != nil || len(page.Entities) != workers*each+1 {
		t.Fatalf("entities: %d %v", len(page.Entities), err)
	}
	_, err = s.Batch(ctx, acct, "t1", []Write{
		{Op: OpInsert, PartitionKey: "p", RowKey: "fresh"},
		{Op: OpInsert, PartitionKey: "p", RowKey: "counter"},
	})
	be, ok := IsBatchError(err)
	if !ok || be.Index != 1 || !errors.Is(err, ErrEntityExists) {
		t.Fatalf("failing batch: %v", err)
	}
	if _, err := s.GetEntity(ctx, acct, "t1", "p", "fresh"); !errors.Is(err, ErrEntityNotFound) {
		t.Fatalf("failed batch left a write: %v", err)
	}
}

// Concurrent insert-only batches into one partition, as a bulk load makes
// them, queue on the partition lock and seldom need a retry.
func TestBatchInsertsOnePartition(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	retries := &retryCounter{}
	s.SetObserver(retries)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t1"); err != nil {
		t.Fatal(err)
	}
	const workers, each, size = 8, 5, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				writes := make([]Write, size)
				for j := range writes {
					writes[j] = Write{Op: OpInsert, PartitionKey: "p", RowKey: fmt.Sprintf("%d-%d-%03d", w, i, j)}
				}
				_, err := s.Batch(ctx, acct, "t1", writes)
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("batch: %v", err)
		}
	}
	if n := retries.n.Load(); n > workers*each/4 {
		t.Errorf("%d serialization retries of %d batches", n, workers*each)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM entities").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != workers*each*size {
		t.Errorf("%d entities, want %d", n, workers*each*size)
	}
}

// The store's distribution key is migration 0003's entity_dkey, for every
// kind of key: the migration fills the column with it, the store finds
// rows by its own.
func TestDistributionKeyMatchesSQL(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	for _, k := range [][3]string{
		{"devstoreaccount1", "mytable", "p"},
		{"a", "t", ""},
		{"acct2", "t0123456789", "it's é 😀 +%"},
		{"devstoreaccount1", "x", strings.Repeat("k", 1024)},
	} {
		var want int64
		if err := s.pool.QueryRow(ctx, "SELECT entity_dkey($1, $2, $3)", k[0], k[1], k[2]).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := distributionKey(k[0], k[1], k[2]); got != want {
			t.Errorf("distributionKey%q = %d, entity_dkey %d", k, got, want)
		}
	}
}
