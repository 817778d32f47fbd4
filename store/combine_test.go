package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements that share round trips each get their own answer.
func TestCombinerAnswers(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := newCombiner(s, 1, 1)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var got int
			if err := c.queryRow(ctx, fmt.Sprint(i), "SELECT $1::int * 2", []any{i}, &got); err != nil || got != 2*i {
				errs <- fmt.Errorf("%d: got %d, %v", i, got, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A failing statement takes its batch's implicit transaction down; every
// other statement of the batch runs again and succeeds, and the failing
// one reports its own error. Nothing is applied twice.
func TestCombinerFailureRerunsAlone(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, "CREATE TABLE counts (k int PRIMARY KEY, n int)"); err != nil {
		t.Fatal(err)
	}
	c := newCombiner(s, 1, 1)
	batch := []*combined{
		{key: "1", sql: "INSERT INTO counts VALUES (1, 1) RETURNING n", scan: []any{new(int)}, done: make(chan struct{})},
		{key: "2", sql: "SELECT 1/0", scan: []any{new(int)}, done: make(chan struct{})},
		{key: "3", sql: "INSERT INTO counts VALUES (3, 1)", done: make(chan struct{})},
	}
	c.send(ctx, batch)
	if batch[0].err != nil || batch[2].err != nil {
		t.Fatalf("healthy statements failed: %v, %v", batch[0].err, batch[2].err)
	}
	if batch[1].err == nil {
		t.Fatal("division by zero succeeded")
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM counts").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows, %v; want the two inserts once each", n, err)
	}
	if batch[2].tag.RowsAffected() != 1 {
		t.Errorf("exec result lost: %v", batch[2].tag)
	}
}

// A round trip stuck on a row lock does not hold up other statements for
// longer than the stall allowance. While recent round trips have been
// slow, the allowance is twice their time: a statement then waits for the
// slot rather than opening a round trip that would split the commits.
func TestCombinerStallAllowance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rtt     time.Duration // recent round trips
		through bool          // the statement behind the stuck one runs
	}{
		{name: "stall", rtt: 0, through: true},
		{name: "slow round trips", rtt: time.Minute, through: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := context.Background()
			if _, err := s.pool.Exec(ctx, "CREATE TABLE locked (k int PRIMARY KEY); INSERT INTO locked VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			tx, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck
			if _, err := tx.Exec(ctx, "SELECT 1 FROM locked WHERE k = 1 FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			c := newCombiner(s, 1, 4)
			c.rtt = tt.rtt
			stuck := make(chan error, 1)
			go func() {
				_, err := c.exec(ctx, "a", "UPDATE locked SET k = 1 WHERE k = 1", nil)
				stuck <- err
			}()
			// The one slot is now held by the stuck update, for longer than
			// the stall allowance.
			time.Sleep(max(2*combineStall, 50*time.Millisecond))
			var v int
			wait := 10 * time.Second
			if !tt.through {
				wait = 300 * time.Millisecond
			}
			qctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			err = c.queryRow(qctx, "b", "SELECT 7", nil, &v)
			switch {
			case tt.through && (err != nil || v != 7):
				t.Fatalf("a statement behind a stuck round trip: %d, %v", v, err)
			case !tt.through && !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("a statement behind a slow round trip got a round trip of its own: %d, %v", v, err)
			}
			tx.Rollback(ctx) //nolint:errcheck
			if err := <-stuck; err != nil {
				t.Fatalf("the stuck update: %v", err)
			}
			if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
				t.Fatal(err)
			}
		})
	}
}

// Statements of one group share one statement built by their merger; each
// gets its own row, pgx.ErrNoRows without one, and the statements outside
// the group are unaffected. When the merged statement fails, or answers
// for a statement it was not given, every statement runs again alone.
func TestCombinerMerges(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	times10 := func(ops []*combined) (string, []any) {
		vs := make([]int32, len(ops))
		for i, op := range ops {
			vs[i] = op.args[0].(int32)
		}
		return "SELECT k.i, k.v * 10 FROM unnest($1::int[]) WITH ORDINALITY AS k(v, i) WHERE k.v <> 0", []any{vs}
	}
	// A broken merger's statements run again alone; alone, the statement
	// for 0 gets no row either.
	tests := []struct {
		name  string
		merge merger
	}{
		{name: "merged", merge: times10},
		{name: "fails", merge: func(ops []*combined) (string, []any) {
			return "SELECT k.i, 1 / 0 FROM unnest($1::int[]) WITH ORDINALITY AS k(v, i)", []any{[]int32{1}}
		}},
		{name: "answers a stranger", merge: func(ops []*combined) (string, []any) {
			return "SELECT 99::bigint, 1", nil
		}},
		{name: "answers twice", merge: func(ops []*combined) (string, []any) {
			return "SELECT 1::bigint, 1 FROM generate_series(1, 2)", nil
		}},
	}
	want := []int32{10, 20, 0, 30, 50, 70} // 0: pgx.ErrNoRows
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCombiner(s, 1, 1)
			var batch []*combined
			got := make([]int32, 6)
			for i, g := range []struct {
				group string
				v     int32
			}{{"g", 1}, {"g", 2}, {"g", 0}, {"g", 3}, {"h", 5}, {"", 7}} {
				batch = append(batch, &combined{
					sql: "SELECT $1::int * 10 WHERE $1::int <> 0", args: []any{g.v}, scan: []any{&got[i]},
					group: g.group, merge: tt.merge, done: make(chan struct{}),
				})
			}
			c.send(ctx, batch)
			for i, op := range batch {
				switch {
				case want[i] == 0 && !errors.Is(op.err, pgx.ErrNoRows):
					t.Errorf("statement %d: %v, want no rows", i, op.err)
				case want[i] != 0 && (op.err != nil || got[i] != want[i]):
					t.Errorf("statement %d: %d, %v; want %d", i, got[i], op.err, want[i])
				}
			}
		})
	}
}

// The point reads of a round trip become one statement per table, and each
// read gets its own outcome: the entity, no entity, or no table.
func TestPointReadsMerged(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	for _, table := range []string{"t1", "t2"} {
		if err := s.CreateTable(ctx, acct, table); err != nil {
			t.Fatal(err)
		}
		for _, rk := range []string{"a", "b"} {
			if _, err := s.Write(ctx, acct, table, &Write{Op: OpInsert, PartitionKey: "p", RowKey: rk, Properties: props("T", table+rk)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		table, rk string
		want      error
	}{
		{"t1", "a", nil}, {"t1", "missing", ErrEntityNotFound}, {"T2", "b", nil}, {"nope", "a", ErrTableNotFound},
		{"t1", "b", nil}, {"t2", "a", nil}, {"nope", "b", ErrTableNotFound}, {"t2", "missing", ErrEntityNotFound},
	}
	var reads []*pointRead
	var batch []*combined
	for _, tt := range tests {
		r := newPointRead(acct, tableKey(tt.table), "p", tt.rk)
		reads = append(reads, r)
		batch = append(batch, &r.op)
	}
	if units := groupStatements(batch); len(units) != 3 {
		t.Fatalf("%d statements for 3 tables", len(units))
	}
	s.reads.send(ctx, batch)
	for i, tt := range tests {
		e, err := reads[i].entity(reads[i].op.err)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s/%s: %v, want %v", tt.table, tt.rk, err, tt.want)
			continue
		}
		if err != nil {
			continue
		}
		if err := e.DecodeProperties(); err != nil || e.RowKey != tt.rk || len(e.Properties) != 1 || e.Properties[0].Value.Str != tableKey(tt.table)+tt.rk {
			t.Errorf("%s/%s: %+v, %v", tt.table, tt.rk, e, err)
		}
	}
}

// The merged point read keeps one generic plan: a custom plan for each
// call would cost more than the statements it replaces.
func TestPointReadsMergedGenericPlan(t *testing.T) {
	t.Parallel()
	// With statistics of a populated table, the array length decides the
	// custom plans' estimates.
	s := populatedStore(t)
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for i := 0; i < 12; i++ {
		var ops []*combined
		for j := 0; j <= i%4; j++ {
			ops = append(ops, &newPointRead(acct, "t1", "p", fmt.Sprint(j)).op)
		}
		sql, args := mergeGets(ops)
		rows, _ := conn.Query(ctx, sql, args...)
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var generic, custom int64
	if err := conn.QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", sqlGetMany).Scan(&generic, &custom); err != nil {
		t.Fatal(err)
	}
	if generic < 6 {
		t.Errorf("%d generic and %d custom plans in 12 calls", generic, custom)
	}
}

// BenchmarkPointReads times one round trip of six point reads of a table,
// sent as six pipelined statements and as one merged statement.
func BenchmarkPointReads(b *testing.B) {
	s := populatedStore(b)
	ctx := context.Background()
	for _, merged := range []bool{false, true} {
		b.Run(fmt.Sprintf("merged=%t", merged), func(b *testing.B) {
			c := newCombiner(s, 1, 1)
			batch := make([]*combined, 6)
			for i := 0; b.Loop(); i++ {
				for j := range batch {
					g := (i*len(batch) + j) * 7919 % 10000
					r := newPointRead(acct, "t1", fmt.Sprint("p", g/1000), fmt.Sprint("r", g))
					if !merged {
						r.op.merge = nil
					}
					batch[j] = &r.op
				}
				c.send(ctx, batch)
				for _, op := range batch {
					if op.err != nil {
						b.Fatal(op.err)
					}
				}
			}
		})
	}
}

// populatedStore returns a store with table t1 of 10,000 entities (keys
// p<g/1000>, r<g>), analyzed.
func populatedStore(tb testing.TB) *Store {
	tb.Helper()
	s := newStore(tb)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t1"); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, entity_dkey(account, lname, 'p' || g / 1000), 'p' || g / 1000, 'r' || g, 1, 2, '{"A": "0123456789"}' FROM tables, generate_series(0, 9999) g;
ANALYZE entities, tables`); err != nil {
		tb.Fatal(err)
	}
	return s
}
