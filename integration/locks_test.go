package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testdb"
)

// Tests that make the server wait on a lock, or cut a connection in the
// middle of a transaction, take and find locks the same way on PostgreSQL
// and on Citus, where the row locks are on the workers.

// lockEntity locks the row of one entity in tx until tx ends, as a write
// does. It names the entity's distribution key (migration 0003): on Citus
// a locking read must go to one shard.
func lockEntity(t testing.TB, tx pgx.Tx, table, pk, rk string) {
	t.Helper()
	var id, dkey int64
	if err := tx.QueryRow(bg, `SELECT id, entity_dkey(account, lname, $2) FROM tables WHERE lname = lower($1) AND deleted_at IS NULL`,
		table, pk).Scan(&id, &dkey); err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(bg, `SELECT 1 FROM entities WHERE table_id = $1 AND dkey = $2 AND pk = $3 AND rk = $4 FOR UPDATE`, id, dkey, pk, rk)
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("no entity %s/%s/%s to lock", table, pk, rk)
	}
}

// waitingOnLock counts the backends of the server whose connections say
// application_name = app that wait for a lock. On Citus the wait is on a
// worker, on behalf of the coordinator's backend: citus_lock_waits names
// that backend by its global pid.
func waitingOnLock(t testing.TB, conn *pgx.Conn, app string) int {
	t.Helper()
	sql := `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`
	if testdb.Citus() {
		sql = `SELECT count(DISTINCT w.waiting_gpid) FROM citus_lock_waits w
JOIN citus_stat_activity a ON a.global_pid = w.waiting_gpid AND NOT a.is_worker_query
WHERE a.application_name = $1`
	}
	var n int
	if err := conn.QueryRow(bg, sql, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// blockedBy returns the backend that waits for a lock held by holder's
// transaction, or 0 while none does: the server's own backend, which the
// server sees go when it is terminated. On Citus that is the coordinator's
// backend that the waiting worker query works for.
func blockedBy(t testing.TB, killer, holder *pgx.Conn) int32 {
	t.Helper()
	var pid int32
	var err error
	if testdb.Citus() {
		var gpid int64
		if err := holder.QueryRow(bg, `SELECT citus_backend_gpid()`).Scan(&gpid); err != nil {
			t.Fatal(err)
		}
		err = killer.QueryRow(bg, `SELECT a.pid FROM citus_lock_waits w
JOIN citus_stat_activity a ON a.global_pid = w.waiting_gpid AND NOT a.is_worker_query
WHERE w.blocking_gpid = $1 LIMIT 1`, gpid).Scan(&pid)
	} else {
		err = killer.QueryRow(bg, `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) LIMIT 1`,
			holder.PgConn().PID()).Scan(&pid)
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return pid
}

// terminate ends the backend pid of conn's server, and reports whether there
// was one. (Citus adds a pg_terminate_backend of a global pid: the cast
// picks the local one.)
func terminate(t testing.TB, conn *pgx.Conn, pid int32) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT pg_terminate_backend($1::integer)`, pid).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}
