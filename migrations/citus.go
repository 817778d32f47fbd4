package migrations

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// distributeSQL distributes the schema on Citus (citus/distribute.sql).
//
//go:embed citus/distribute.sql
var distributeSQL string

// distributeLock is the advisory lock under which one process distributes
// while others that start at the same time wait, and then find it done.
const distributeLock = 0x70677461626c6573 // "pgtables"

// distribute runs distributeSQL when the citus extension is installed in
// the database: after the migrations, on every Up, so that a database that
// gets Citus later (a single node's, in place, or one restored from its
// dump) is distributed by the next `pgtables migrate` or start. Relations
// already distributed stay as they are.
func distribute(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("distribute: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var citus bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return fmt.Errorf("distribute: %w", err)
	}
	if !citus {
		return nil
	}
	// Citus cancels a transaction of a distributed deadlock, which its
	// DDL can form with other sessions' statements on the cluster
	// (seen with parallel tests, each in a schema of its own): the
	// transaction rolled back whole, and runs again.
	for attempt := 1; ; attempt++ {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(distributeLock)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, distributeSQL)
			return err
		})
		var pgErr *pgconn.PgError
		if err == nil || attempt == distributeAttempts || !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.DeadlockDetected {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("distribute: %w", ctx.Err())
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("distribute: %w", err)
	}
	return nil
}

// distributeAttempts bounds the runs of distributeSQL that deadlocks
// cancel.
const distributeAttempts = 5
