package store

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtables/pgtables/odata"
)

// GetEntity reads one entity (see getEntity), outlasting a failover.
func (s *Store) GetEntity(ctx context.Context, account, table, pk, rk string) (*odata.Entity, error) {
	return outlast(ctx, s, primaryGone, func() (*odata.Entity, error) { return s.getEntity(ctx, account, table, pk, rk) })
}

// QueryEntities returns one page of a table's entities (see
// queryEntities), outlasting a failover.
func (s *Store) QueryEntities(ctx context.Context, account, table string, q EntityQuery) (*EntityPage, error) {
	return outlast(ctx, s, primaryGone, func() (*EntityPage, error) { return s.queryEntities(ctx, account, table, q) })
}

// QueryTables lists the tables of account (see queryTables), outlasting a
// failover.
func (s *Store) QueryTables(ctx context.Context, account string, q TableQuery) (*TablePage, error) {
	return outlast(ctx, s, primaryGone, func() (*TablePage, error) { return s.queryTables(ctx, account, q) })
}

// Write performs one entity write (see writeOne). While no primary takes
// it, it is tried again, but only when it certainly had no effect.
func (s *Store) Write(ctx context.Context, account, table string, w *Write) (Result, error) {
	return outlast(ctx, s, notSent, func() (Result, error) { return s.writeOne(ctx, account, table, w) })
}

// Batch runs an entity group transaction (see batch). While no primary
// takes it, it is tried again, but only when it certainly had no effect.
func (s *Store) Batch(ctx context.Context, account, table string, writes []Write) ([]Result, error) {
	return outlast(ctx, s, notSent, func() ([]Result, error) { return s.batch(ctx, account, table, writes) })
}

// outlast runs op, and again while it fails with an error that again
// says there is no writable primary, for up to Options.FailoverWait and
// within ctx: during a failover or a switchover, the request then waits
// for the new primary instead of failing. What op still fails with after
// that is its error (503 ServerBusy for these errors).
func outlast[T any](ctx context.Context, s *Store, again func(error) bool, op func() (T, error)) (T, error) {
	v, err := op()
	if err == nil || s.opts.FailoverWait <= 0 || !again(err) {
		return v, err
	}
	end := time.Now().Add(s.opts.FailoverWait)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		// Leave the request the time to answer.
		end = d.Add(-time.Second)
	}
	pause := 50 * time.Millisecond
	for time.Now().Add(pause).Before(end) {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		if v, err = op(); err == nil || !again(err) {
			return v, err
		}
		pause = min(2*pause, time.Second)
	}
	return v, err
}

// notSent reports an error that says the operation reached no server
// that could have acted on it: connecting failed or found a read-only
// server, or the server refused to write (25006). Such an operation had
// no effect, whatever it was, and may run again.
func notSent(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, errReadOnly) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(pgErr.Code == pgerrcode.ReadOnlySQLTransaction || pgErr.Code == pgerrcode.CannotConnectNow)
}

// primaryGone reports an error that says the primary went away: notSent,
// or a connection lost or shut down under the operation. A read may run
// again after it; a write may not, since it may have committed.
func primaryGone(err error) bool {
	if notSent(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgerrcode.IsConnectionException(pgErr.Code) ||
			pgErr.Code == pgerrcode.AdminShutdown || pgErr.Code == pgerrcode.CrashShutdown
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return false // a slow server, not a lost one
	}
	return netErr != nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed)
}
