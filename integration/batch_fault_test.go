package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/store"
)

// TestBatchBackendTerminated cuts the database connection of a batch in the
// middle of its transaction (pg_terminate_backend from the test) and checks
// that the client gets an error, never a success, and that the partition
// holds all of the batch or none of it.
//
// Each batch upserts 100 entities: the first 50 exist (V = 0), the other 50
// are new. In the "Blocked" attempts a transaction of the test holds the
// row (or, for a new entity, an uncommitted insert of its key) of the
// batch's operation k, so the batch is certain to be caught after writing
// k entities; its backend is the one pg_blocking_pids names. In the
// "Racing" attempts nothing blocks the batch: the test terminates whatever
// backend holds a lock on this schema's entities as soon as it sees one,
// which lands anywhere from the first write to the commit.
//
// It finds the batch's session on the server the store's pool connects
// to, so on Citus the store sends everything through the coordinator
// (no routing to the shard's node).
func TestBatchBackendTerminated(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnvWith(t, store.Options{RouteConns: -1})
	ctx := context.Background()
	c, table := e.newTable()
	connect := func() *pgx.Conn {
		conn, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig.Copy())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	killer, holder := connect(), connect()
	var tableID int64
	if err := killer.QueryRow(ctx, `SELECT id FROM tables WHERE lname = lower($1) AND deleted_at IS NULL`, table).Scan(&tableID); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 2000)
	const existing, total = 50, 100
	rk := func(i int) string { return fmt.Sprintf("r%03d", i) }

	// seed writes the existing half of a partition. A racing termination
	// that came after its batch had finished has killed an idle connection
	// of the server's pool; its next use fails once with a retryable 503
	// (the pool checks only connections idle for over a second), so the
	// seed retries that.
	seed := func(t *testing.T, pk string) {
		var acts []aztables.TransactionAction
		for i := range existing {
			acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
				Entity: batchEntity(t, pk, rk(i), map[string]any{"V": 0, "Pad": pad})})
		}
		for try := 0; ; try++ {
			_, err := c.SubmitTransaction(ctx, acts, nil)
			if err == nil {
				return
			}
			if status, _ := txFailure(err); status != http.StatusServiceUnavailable || try == 3 {
				t.Fatalf("seed: %v", err)
			}
		}
	}
	// submit runs the batch that writes V = v to all 100 entities.
	submit := func(t *testing.T, pk string, v int) <-chan error {
		var acts []aztables.TransactionAction
		for i := range total {
			acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace,
				Entity: batchEntity(t, pk, rk(i), map[string]any{"V": v, "Pad": pad})})
		}
		done := make(chan error, 1)
		go func() {
			_, err := c.SubmitTransaction(ctx, acts, nil)
			done <- err
		}()
		return done
	}
	// check asserts all or nothing: 50 entities at V = 0 or 100 at V = v.
	check := func(t *testing.T, pk string, v int) (all bool) {
		counts := map[int]int{}
		rows, err := killer.Query(ctx, `SELECT (props->'V'->>1)::int FROM entities WHERE table_id = $1 AND pk = $2`, tableID, pk)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var got int
			if err := rows.Scan(&got); err != nil {
				t.Fatal(err)
			}
			counts[got]++
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		switch {
		case n == existing && counts[0] == existing:
			return false
		case n == total && counts[v] == total:
			return true
		}
		t.Errorf("partition %s holds part of the batch: %d entities, by V: %v", pk, n, counts)
		return false
	}
	// wantFailure asserts that the client was told of the failure with a
	// retryable 503, not a success and not a half-written answer.
	wantFailure := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("batch whose connection was cut reported success")
			return
		}
		if status, code := txFailure(err); status != http.StatusServiceUnavailable || code != "ServerBusy" {
			t.Errorf("got %d %s, want 503 ServerBusy: %v", status, code, err)
		}
	}

	// check reads V in its stored form, ["i32", n] (store package doc).
	// Make sure that holds before relying on it.
	seed(t, "format")
	var stored string
	if err := killer.QueryRow(ctx, `SELECT props->>'V' FROM entities WHERE table_id = $1 AND pk = 'format' LIMIT 1`, tableID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != `["i32", 0]` {
		t.Fatalf("stored form of V is %s, the test reads [\"i32\", n]", stored)
	}

	for _, k := range []int{0, 17, existing - 1, existing, total - 1} {
		t.Run(fmt.Sprintf("Blocked%d", k), func(t *testing.T) {
			pk := fmt.Sprintf("blocked%d", k)
			seed(t, pk)
			tx, err := holder.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck
			if k < existing {
				lockEntity(t, tx, table, pk, rk(k))
			} else {
				_, err = tx.Exec(ctx, `INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT id, entity_dkey(account, lname, $2), $2, $3, 1, 0, '{}' FROM tables WHERE id = $1`, tableID, pk, rk(k))
			}
			if err != nil {
				t.Fatal(err)
			}
			done := submit(t, pk, 1)
			var victim int32
			deadline := time.Now().Add(20 * time.Second)
			for victim == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the batch never waited for the test's lock")
				}
				select {
				case err := <-done:
					t.Fatalf("batch finished while its row was locked: %v", err)
				default:
				}
				if victim = blockedBy(t, killer, holder); victim == 0 {
					time.Sleep(2 * time.Millisecond)
				}
			}
			if !terminate(t, killer, victim) {
				t.Fatalf("backend %d was gone before the test ended it", victim)
			}
			wantFailure(t, <-done)
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if check(t, pk, 1) {
				t.Errorf("a batch cut before its commit was written")
			}
		})
	}

	// The racing attempts wait a little longer each time between seeing the
	// batch's transaction and terminating it, to land at different points
	// of it (a batch takes some tens of milliseconds here).
	caught := 0
	for attempt, delay := range []time.Duration{0, 1, 2, 5, 10, 20, 30, 50} {
		delay *= time.Millisecond
		t.Run(fmt.Sprintf("Racing%d", attempt), func(t *testing.T) {
			pk := fmt.Sprintf("racing%d", attempt)
			seed(t, pk)
			done := submit(t, pk, 1)
			var err error
			killed := false
		poll:
			for {
				select {
				case err = <-done:
					break poll
				default:
				}
				if killed {
					time.Sleep(time.Millisecond)
					continue
				}
				var pids []int32
				rows, qerr := killer.Query(ctx, `
SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_class r ON r.oid = l.relation
WHERE r.relname = 'entities' AND r.relnamespace = current_schema()::regnamespace AND l.pid <> pg_backend_pid()`)
				if qerr == nil {
					pids, qerr = pgx.CollectRows(rows, pgx.RowTo[int32])
				}
				if qerr != nil {
					t.Fatal(qerr)
				}
				if len(pids) > 0 {
					time.Sleep(delay)
				}
				for _, pid := range pids {
					terminate(t, killer, pid)
					killed = true
				}
			}
			all := check(t, pk, 1)
			switch {
			case err == nil && !all:
				t.Errorf("batch reported success but is not all there")
			case err != nil:
				wantFailure(t, err)
			}
			if killed {
				caught++
			}
			t.Logf("terminated after %v: %v; batch error: %v; written: %v", delay, killed, err != nil, all)
		})
	}
	t.Logf("the racing terminations caught %d batches", caught)
}
