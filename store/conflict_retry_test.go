package store

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestMetadataTransactionsRetryConflicts: a short metadata transaction
// cancelled as a deadlock or a serialization failure runs again, and
// nothing else does.
func TestMetadataTransactionsRetryConflicts(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	t.Cleanup(s.Close)
	other := errors.New("not a conflict")
	for _, tc := range []struct {
		name      string
		failures  []error
		wantRuns  int
		wantError error
	}{
		{"deadlock then success", []error{&pgconn.PgError{Code: pgerrcode.DeadlockDetected}, &pgconn.PgError{Code: pgerrcode.DeadlockDetected}}, 3, nil},
		{"serialization failure then success", []error{&pgconn.PgError{Code: pgerrcode.SerializationFailure}}, 2, nil},
		{"other error", []error{other}, 1, other},
		{"unique violation", []error{&pgconn.PgError{Code: pgerrcode.UniqueViolation}}, 1, &pgconn.PgError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			err := s.inConflictRetry(context.Background(), func(tx pgx.Tx) error {
				runs++
				var one int
				if err := tx.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
					return err
				}
				if runs <= len(tc.failures) {
					return tc.failures[runs-1]
				}
				return nil
			})
			if runs != tc.wantRuns {
				t.Errorf("ran %d times, want %d", runs, tc.wantRuns)
			}
			switch want := tc.wantError.(type) {
			case nil:
				if err != nil {
					t.Errorf("error %v", err)
				}
			case *pgconn.PgError:
				if !errors.As(err, &want) {
					t.Errorf("error %v, want a PostgreSQL error", err)
				}
			default:
				if !errors.Is(err, want) {
					t.Errorf("error %v, want %v", err, want)
				}
			}
		})
	}
	t.Run("always conflicting", func(t *testing.T) {
		runs := 0
		err := s.inConflictRetry(context.Background(), func(pgx.Tx) error {
			runs++
			return &pgconn.PgError{Code: pgerrcode.DeadlockDetected}
		})
		if runs != maxTxAttempts || !retryable(err) {
			t.Errorf("ran %d times (want %d), error %v", runs, maxTxAttempts, err)
		}
	})
}
