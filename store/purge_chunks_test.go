package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// deadHistory gives the table name a history as an upsert-heavy workload
// leaves it before vacuum has run: live entities, and dead index entries of
// entities deleted and of versions replaced, interleaved with the live ones
// in key order. Autovacuum is off for the test's entities, so the dead
// entries stay.
func deadHistory(tb testing.TB, s *Store, name string, live, dead int) {
	tb.Helper()
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `ALTER TABLE entities SET (autovacuum_enabled = off)`); err != nil {
		tb.Fatal(err)
	}
	if err := s.CreateTable(ctx, acct, name); err != nil {
		tb.Fatal(err)
	}
	const insert = `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, entity_dkey(account, lname, 'p' || (g % 20)), 'p' || (g % 20), $3 || lpad(g::text, 7, '0'), 1, 40, '{"V": ["i32", 1]}'
FROM tables, generate_series(1, $2::int) g WHERE lname = $1 AND deleted_at IS NULL`
	for _, step := range []struct {
		sql  string
		args []any
	}{
		{insert, []any{name, live, "l"}},
		{insert, []any{name, dead / 2, "d"}},
		// Deleted entities leave their index entries behind.
		{`DELETE FROM entities WHERE table_id = (SELECT id FROM tables WHERE lname = $1 AND deleted_at IS NULL) AND rk LIKE 'd%'`, []any{name}},
		// Updates that change the key columns' row (a new version, not a
		// heap-only one) leave the old entries behind too.
		{`UPDATE entities SET rk = 'u' || rk WHERE table_id = (SELECT id FROM tables WHERE lname = $1 AND deleted_at IS NULL) AND rk < ('l' || lpad(($2::int / 2)::text, 7, '0'))`, []any{name, dead}},
		{`UPDATE entities SET rk = substr(rk, 2) WHERE table_id = (SELECT id FROM tables WHERE lname = $1 AND deleted_at IS NULL) AND rk LIKE 'u%'`, []any{name}},
	} {
		if _, err := s.pool.Exec(ctx, step.sql, step.args...); err != nil {
			tb.Fatalf("%s: %v", step.sql, err)
		}
	}
}

// purgeAll runs purge passes until the deleted tables are gone, and returns
// what they purged and the longest pass: with one deleted table, a pass is
// one chunk.
func purgeAll(tb testing.TB, s *Store, cfg PurgeConfig) (total PurgeStats, longest time.Duration) {
	tb.Helper()
	for pass := 0; ; pass++ {
		start := time.Now()
		st, err := s.PurgeOnce(context.Background(), cfg)
		if err != nil {
			tb.Fatal(err)
		}
		longest = max(longest, time.Since(start))
		total.Entities += st.Entities
		total.Tables += st.Tables
		if st.Pending == 0 {
			return total, longest
		}
		if pass > 100000 {
			tb.Fatal("the purge never ends")
		}
	}
}

// BenchmarkPurge measures the purge of a deleted table of n entities after
// an upsert-heavy history that left n dead index entries among them, while
// a reader holds a snapshot from before the delete (as request traffic
// does), so that the index entries of the rows purged so far stay in the
// way of every later scan. The time per 1,000 entities, and the longest
// chunk, should not grow with n and the relation's dead entries:
//
//	go test ./store -run '^$' -bench Purge -benchtime 3x
func BenchmarkPurge(b *testing.B) {
	for _, n := range []int{10000, 40000, 160000} {
		b.Run(fmt.Sprintf("entities=%d", n), func(b *testing.B) {
			s := newStore(b)
			ctx := context.Background()
			var longest time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// Each round's history only: vacuum removes the rounds
				// before.
				if _, err := s.pool.Exec(ctx, `VACUUM entities`); err != nil {
					b.Fatal(err)
				}
				name := fmt.Sprintf("t%d", i)
				deadHistory(b, s, name, n, n)
				reader, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := reader.Exec(ctx, `SELECT count(*) FROM tables`); err != nil {
					b.Fatal(err)
				}
				if err := s.DeleteTable(ctx, acct, name); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				st, chunk := purgeAll(b, s, PurgeConfig{Chunk: 5000})
				b.StopTimer()
				longest = max(longest, chunk)
				if err := reader.Rollback(ctx); err != nil {
					b.Fatal(err)
				}
				if st.Entities != int64(n) {
					b.Fatalf("purged %d entities, want %d", st.Entities, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N)/(float64(n)/1000), "ms/1000entities")
			b.ReportMetric(float64(longest.Microseconds())/1000, "ms/longest-chunk")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// chunkRecorder records the purge's chunks.
type chunkRecorder struct {
	nopObserver
	mu    sync.Mutex
	sizes []int64
}

func (c *chunkRecorder) PurgeChunk(_ time.Duration, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sizes = append(c.sizes, n)
}

// After many updates and deletes, with a snapshot from before the delete
// still open, the purge removes the deleted table's entities exactly, in
// chunks that each start where the one before ended, and leaves the
// entities of other tables alone; chunks shrink when they take longer
// than ChunkTime.
func TestPurgeAfterDeadHistory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		chunkTime time.Duration
		want      func(sizes []int64) bool
	}{
		{"fixed chunks", 0, func(sizes []int64) bool { return slices.Equal(sizes, []int64{1000, 1000, 1000, 1000, 1000}) }},
		// Every chunk takes longer than a nanosecond: down to a hundred.
		{"chunks shrink", time.Nanosecond, func(sizes []int64) bool {
			return sizes[0] == 1000 && sizes[1] == 500 && sizes[2] == 250 && sizes[3] == 125 && sizes[4] == 100
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := context.Background()
			const live = 5000
			deadHistory(t, s, "gone", live, 20000)
			deadHistory(t, s, "kept", 300, 600)
			reader, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Rollback(ctx) //nolint:errcheck // read only
			if _, err := reader.Exec(ctx, `SELECT count(*) FROM entities`); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteTable(ctx, acct, "gone"); err != nil {
				t.Fatal(err)
			}
			rec := &chunkRecorder{}
			s.SetObserver(rec)
			st, _ := purgeAll(t, s, PurgeConfig{Chunk: 1000, ChunkTime: tc.chunkTime})
			if st.Entities != live || st.Tables != 1 {
				t.Fatalf("purged %+v, want %d entities and the table", st, live)
			}
			if !tc.want(rec.sizes) {
				t.Errorf("chunks of %v", rec.sizes)
			}
			page, err := s.QueryEntities(ctx, acct, "kept", EntityQuery{Top: 1000})
			if err != nil || len(page.Entities) != 300 {
				t.Fatalf("the other table after the purge: %d entities, %v", len(page.Entities), err)
			}
		})
	}
}

// A write that found the table just before it was deleted and commits
// behind the purge's cursor, within the grace period, is purged all the
// same before the tombstone goes.
func TestPurgeCatchesStragglersBehindTheCursor(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	deadHistory(t, s, "gone", 500, 0)
	if err := s.DeleteTable(ctx, acct, "gone"); err != nil {
		t.Fatal(err)
	}
	cfg := PurgeConfig{Chunk: 100, Grace: time.Hour}
	for range 10 {
		if _, err := s.PurgeOnce(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	// The cursor is at the end; the straggler lands at the start.
	if _, err := s.pool.Exec(ctx, `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, entity_dkey(account, lname, 'a'), 'a', 'straggler', 1, 2, '{}' FROM tables WHERE lname = 'gone'`); err != nil {
		t.Fatal(err)
	}
	// The grace period is over.
	if _, err := s.pool.Exec(ctx, `UPDATE tables SET deleted_at = deleted_at - interval '2 hours' WHERE lname = 'gone'`); err != nil {
		t.Fatal(err)
	}
	st, _ := purgeAll(t, s, cfg)
	if st.Entities != 1 || st.Tables != 1 {
		t.Fatalf("purged %+v, want the straggler and the table", st)
	}
	var left int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM entities`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d entities left: %v", left, err)
	}
}

// The chunk's statements are key ranges of the primary key, from the
// cursor on, whatever plan the planner makes for them: no join that a
// nested loop could turn into a scan per row.
func TestPurgeChunkStatementsAreKeyRanges(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	// Statistics from before the table was filled, as after a bulk load.
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE entities`); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	deadHistory(t, s, "t", 20000, 20000)
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		conn, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Rollback(ctx) //nolint:errcheck // only plans
		if _, err := conn.Exec(ctx, `SET LOCAL plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, sqlPurgePlans); err != nil {
			t.Fatal(err)
		}
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{sqlPurgeChunkEnd, []any{int64(1), "p1", "l0000100", 999}},
			{sqlPurgeRange, []any{int64(1), "p1", "l0000100", "p3", "l0000001"}},
			{sqlPurgeRest, []any{int64(1), "p1", "l0000100"}},
		} {
			var plan []string
			rows, err := conn.Query(ctx, "EXPLAIN "+st.sql, st.args...)
			if err == nil {
				plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			bad := slices.ContainsFunc([]string{"Nested Loop", "SubPlan", "Seq Scan", "Bitmap", "Sort", "JIT"}, func(node string) bool {
				return strings.Contains(text, node)
			})
			if bad || !strings.Contains(text, "Index Only Scan using entities_pkey") && !strings.Contains(text, "Index Scan using entities_pkey") ||
				!strings.Contains(text, "ROW(pk, rk) >=") {
				t.Errorf("%s, %s:\n%s", mode, st.sql, text)
			}
		}
	}
}

// The purge pauses after working so that it works no more than its share
// of the time, and longer while requests hold most of the pool.
func TestPurgePause(t *testing.T) {
	t.Parallel()
	dsn := migratedDB(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool)
	quarter := PurgeConfig{Interval: 5 * time.Second, Share: 0.25}
	for _, tc := range []struct {
		busy time.Duration
		cfg  PurgeConfig
		want time.Duration
	}{
		{100 * time.Millisecond, quarter, 300 * time.Millisecond},
		{time.Second, PurgeConfig{Interval: 5 * time.Second, Share: 0.5}, time.Second},
		{10 * time.Second, quarter, 5 * time.Second}, // never longer than the idle pause
		{time.Second, PurgeConfig{}, 0},
	} {
		if got := s.purgePause(tc.busy, tc.cfg); got != tc.want {
			t.Errorf("after %v with %+v: pause %v, want %v", tc.busy, tc.cfg, got, tc.want)
		}
	}
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if got := s.purgePause(100*time.Millisecond, quarter); got != 1200*time.Millisecond {
		t.Errorf("with the pool busy: pause %v, want 1.2s", got)
	}
}
