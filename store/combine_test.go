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
