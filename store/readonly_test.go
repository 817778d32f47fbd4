package store

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// storeOn returns a store on dsn, its pool configured as the server's
// (ConfigurePool) and at most conns connections (0: pgxpool's default).
func storeOn(t testing.TB, dsn string, conns int32) *Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if conns > 0 {
		cfg.MaxConns = conns
	}
	ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool)
	t.Cleanup(s.Close)
	return detected(t, s)
}

// detected returns s once it knows, as the server's store does, whether
// its entities are distributed: on Citus the test then takes the
// statements of a distributed schema. (A server that refuses the store is
// the test's to find.)
func detected(t testing.TB, s *Store) *Store {
	t.Helper()
	if err := s.DetectDistribution(context.Background()); err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	return s
}

// A server that is read-only from the start (a standby, a database with
// default_transaction_read_only) is no database for the store: writes,
// reads and the readiness check fail as unavailable (503 ServerBusy), and
// no connection to it stays in the pool.
func TestReadOnlyServerIsUnavailable(t *testing.T) {
	t.Parallel()
	dsn := migratedDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	u.RawQuery = q.Encode()
	s := storeOn(t, u.String(), 2)
	ctx := context.Background()
	if err := s.Ping(ctx); !errors.Is(err, ErrUnavailable) || !errors.Is(err, errReadOnly) {
		t.Fatalf("ping: %v, want unavailable, read-only", err)
	}
	if err := s.CreateTable(ctx, acct, "t1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("create table: %v, want unavailable", err)
	}
	if _, err := s.GetEntity(ctx, acct, "t1", "p", "r"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("get entity: %v, want unavailable", err)
	}
	if n := s.pool.Stat().TotalConns(); n != 0 {
		t.Fatalf("%d connections to a read-only server in the pool", n)
	}
}

// A pooled connection whose server turns read-only (here: its session;
// on a failover: the whole server) is not used again, whether the pool
// learns it from the server's report or from a write that fails with
// 25006: the next write gets a new connection and succeeds.
func TestReadOnlyConnectionLeavesPool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// then runs on the connection made read-only, before its release;
		// it reports with t.Error, not t.Fatal.
		then func(ctx context.Context, t *testing.T, c *pgxpool.Conn)
	}{
		{"released", func(context.Context, *testing.T, *pgxpool.Conn) {}},
		{"write fails", func(ctx context.Context, t *testing.T, c *pgxpool.Conn) {
			_, err := c.Exec(ctx, "CREATE TABLE read_only_probe ()")
			if !errors.Is(classify(err), ErrUnavailable) {
				t.Errorf("write on a read-only connection: %v, want unavailable", err)
			}
			if !c.Conn().IsClosed() {
				t.Error("connection still open after 25006")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// One connection: the write after the release can only reuse
			// it or make a new one.
			s := storeOn(t, migratedDB(t), 1)
			ctx := context.Background()
			if err := s.CreateTable(ctx, acct, "t1"); err != nil {
				t.Fatal(err)
			}
			c, err := s.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Errors while c is out of the pool do not end the test at
			// once: the pool's Close waits for c.
			if _, err := c.Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
				t.Error(err)
			}
			tc.then(ctx, t, c)
			c.Release()
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("ping after the release: %v", err)
			}
			if _, err := s.Write(ctx, acct, "t1", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "r"}); err != nil {
				t.Fatalf("write after the release: %v", err)
			}
		})
	}
}

// With FailoverWait, reads and writes that found no server to take them
// (here: the first connects go to a closed port, as they do while a
// failover has no primary yet) wait for one and succeed; without it they
// fail at once as unavailable.
func TestFailoverWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wait time.Duration
		want error
	}{
		{"waits", 20 * time.Second, nil},
		{"no wait", 0, ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := migratedDB(t)
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			ConfigurePool(cfg)
			var connects, fail atomic.Int32
			cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
				if connects.Add(1) <= fail.Load() {
					cc.Host, cc.Port, cc.Fallbacks = "127.0.0.1", 1, nil
				}
				return nil
			}
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s := NewWithOptions(pool, Options{FailoverWait: tc.wait})
			t.Cleanup(s.Close)
			ctx := context.Background()
			if err := s.CreateTable(ctx, acct, "t1"); err != nil {
				t.Fatal(err)
			}
			for _, op := range []struct {
				name string
				run  func() error
			}{
				{"write", func() error {
					_, err := s.Write(ctx, acct, "t1", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "r"})
					return err
				}},
				{"batch", func() error {
					_, err := s.Batch(ctx, acct, "t1", []Write{{Op: OpInsert, PartitionKey: "p", RowKey: "b"}})
					return err
				}},
				{"read", func() error {
					_, err := s.GetEntity(ctx, acct, "t1", "p", "r")
					if tc.want != nil && errors.Is(err, ErrEntityNotFound) {
						return nil // the writes before failed, as they should
					}
					return err
				}},
				{"query", func() error {
					_, err := s.QueryEntities(ctx, acct, "t1", EntityQuery{Top: 10})
					return err
				}},
			} {
				// The pool's connections go; the next three connects fail.
				pool.Reset()
				fail.Store(connects.Load() + 3)
				if err := op.run(); !errors.Is(err, tc.want) && (tc.want != nil || err != nil) {
					t.Errorf("%s: %v, want %v", op.name, err, tc.want)
				}
			}
		})
	}
}
