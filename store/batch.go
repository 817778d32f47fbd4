package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/odata"
)

// BatchError reports the operation of an entity group transaction that
// failed; nothing of the batch was written.
type BatchError struct {
	Index int // 0-based position of the failing operation
	Err   error
}

func (e *BatchError) Error() string { return fmt.Sprintf("batch operation %d: %v", e.Index, e.Err) }

// Unwrap returns the operation's error.
func (e *BatchError) Unwrap() error { return e.Err }

// maxBatchAttempts bounds how often a batch that lost a serialization
// conflict is run again before the client is told to retry.
const maxBatchAttempts = 12

// batch runs the writes of an entity group transaction on one table, all or
// nothing, in one SERIALIZABLE transaction: no reader ever sees part of it
// and concurrent batches behave as if run one after another. All writes
// share one Timestamp. Serialization failures and deadlocks are retried
// here, invisibly to the client, a bounded number of times with jitter.
// A failing write is reported as a *BatchError.
func (s *Store) batch(ctx context.Context, account, table string, writes []Write) ([]Result, error) {
	obs := s.observer()
	obs.BatchRun(len(writes))
	// The batch's changes in the feed share a tag (changes.go).
	writes = slices.Clone(writes)
	tag := newChangeTag()
	for i := range writes {
		writes[i].txn = tag
		writes[i].more = i < len(writes)-1
	}
	var lastErr error
	for attempt := 0; attempt < maxBatchAttempts; attempt++ {
		// The first attempt only tries the partition lock; later ones wait
		// for it before their snapshot is taken.
		wait := attempt > 0
		if attempt > 0 && !errors.Is(lastErr, errPartitionBusy) {
			obs.BatchRetried()
			// Full jitter, growing to ~50 ms, keeps colliding batches from
			// colliding again in lockstep.
			backoff := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
			select {
			case <-ctx.Done():
				return nil, classify(fmt.Errorf("batch: %w", ctx.Err()))
			case <-time.After(backoff):
			}
		}
		results, err := s.batchOnce(ctx, account, table, writes, wait)
		if err == nil {
			s.changeWritten(account)
		}
		if errors.Is(err, errInsertConflict) {
			i, ferr := s.firstExisting(ctx, account, table, writes)
			if ferr != nil {
				return nil, ferr
			}
			if i >= 0 {
				return nil, &BatchError{Index: i, Err: ErrEntityExists}
			}
			// The entity in the way was deleted meanwhile: run again.
			lastErr = err
			continue
		}
		if err == nil || !(retryable(err) || errors.Is(err, errPartitionBusy) || errors.Is(err, errCommitConflict)) {
			return results, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%w: batch kept conflicting: %w", ErrUnavailable, lastErr)
}

// errPartitionBusy means another batch holds the partition's lock.
var errPartitionBusy = errors.New("partition locked by another batch")

// errCommitConflict means a batch failed to serialize at COMMIT on a Citus
// worker: retryable, as a serialization failure.
var errCommitConflict = errors.New("serialization failure at commit")

// commitConflict reports a failed COMMIT that Citus preceded with a
// serialization failure's warning (ConfigurePool), on the batch's
// connection since its transaction began.
func commitConflict(c *pgconn.PgConn, err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InternalError && c.CustomData()[serializationWarning] == true
}

// errInsertConflict means an insert-only batch met an existing entity; the
// transaction is gone, and firstExisting tells which operation failed.
var errInsertConflict = errors.New("an entity of the batch exists")

const (
	// Batches on one partition take an advisory lock on it, so that they
	// queue instead of failing each other's serializable reads and being
	// retried over and over. A SERIALIZABLE transaction's snapshot is taken
	// by its first statement, so a batch must not wait for the lock inside
	// its transaction: the snapshot would predate the writes of the batch
	// it waited for, and it would fail on them. A batch therefore first
	// tries the transaction-scoped lock and, when another batch holds it,
	// starts again: it waits for the session-scoped lock, and only then
	// begins its transaction. Single-entity writes take no lock; a batch
	// that conflicts with one of them is retried as a whole (see Batch).
	//
	// A batch of inserts only reads nothing another batch writes, except
	// for a key both insert, which fails it as a serialization conflict
	// and a retry then reports as EntityAlreadyExists. So it waits for the
	// transaction-scoped lock inside its transaction, sent together with
	// its one statement: bulk loads into one partition queue without a
	// round trip more.
	sqlTryLockPartition  = `SELECT pg_try_advisory_xact_lock($1)`
	sqlWaitPartitionXact = `SELECT pg_advisory_xact_lock($1)`
	sqlLockPartition     = `SELECT pg_advisory_lock($1)`
	sqlUnlockPartition   = `SELECT pg_advisory_unlock($1)`

	// A batch of inserts only is one statement. It is a plain INSERT: an
	// existing entity fails it with a unique violation, and only then
	// does sqlExistingKeys find which one. ON CONFLICT DO NOTHING would
	// name it in the same round trip, but its speculative insertion made
	// every successful batch cost PostgreSQL 10-20% more (pgbench, 100
	// rows of 500 bytes).
	sqlInsertMany     = sqlInsertManyBody + "\nRETURNING rk, xmin"
	sqlInsertManyBody = `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT t.id, $3, $4, r.rk, $5, r.size, r.props
FROM tables t, unnest($6::text[], $7::integer[], $8::jsonb[]) AS r(rk, size, props)
WHERE t.account = $1 AND t.lname = $2 AND t.deleted_at IS NULL`

	sqlExistingKeys = `
SELECT rk FROM entities
WHERE table_id = ` + liveTable + ` AND dkey = $3 AND pk = $4 AND rk = ANY($5::text[])`
)

// partitionLock is the advisory lock key of a partition. A collision
// between two partitions only makes their batches queue.
func partitionLock(account, table, pk string) int64 {
	h := fnv.New64a()
	h.Write([]byte(account))
	h.Write([]byte{0})
	h.Write([]byte(tableKey(table)))
	h.Write([]byte{0})
	h.Write([]byte(pk))
	return int64(h.Sum64())
}

func (s *Store) batchOnce(ctx context.Context, account, table string, writes []Write, wait bool) ([]Result, error) {
	var conn *pgxpool.Conn
	err := s.routed(account, tableKey(table), writes[0].PartitionKey, func(_, _ *combiner, pool *pgxpool.Pool) (err error) {
		conn, err = pool.Acquire(ctx)
		return err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("begin batch: %w", err))
	}
	defer conn.Release()
	lock := partitionLock(account, table, writes[0].PartitionKey)
	inserts := insertsOnly(writes)
	if wait && !inserts {
		if _, err := conn.Exec(ctx, sqlLockPartition, lock); err != nil {
			// Whether the lock was granted is unknown: the session goes.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
			return nil, classify(fmt.Errorf("lock partition: %w", err))
		}
		defer unlockPartition(ctx, conn, lock)
	}
	delete(conn.Conn().PgConn().CustomData(), serializationWarning)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return nil, classify(fmt.Errorf("begin batch: %w", err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	now := s.ticks()
	var results []Result
	if inserts {
		results, err = s.insertMany(ctx, tx, account, table, writes, now, lock)
	} else {
		results, err = s.writeEach(ctx, tx, account, table, writes, now, lock, !wait)
	}
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		if retryable(err) {
			return nil, err
		}
		if commitConflict(conn.Conn().PgConn(), err) {
			return nil, fmt.Errorf("%w: %w", errCommitConflict, err)
		}
		return nil, classify(fmt.Errorf("commit batch: %w", err))
	}
	return results, nil
}

// unlockPartition releases the session-scoped partition lock, or, when
// that fails, closes the session, which releases it too.
func unlockPartition(ctx context.Context, conn *pgxpool.Conn, lock int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, sqlUnlockPartition, lock); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// tryLocked reads the outcome of sqlTryLockPartition.
func tryLocked(row pgx.Row) error {
	var ok bool
	if err := row.Scan(&ok); err != nil {
		return batchFailure(0, fmt.Errorf("lock partition: %w", err))
	}
	if !ok {
		return errPartitionBusy
	}
	return nil
}

// batchFailure sorts an error of a batch's statement: a conflict to retry,
// a database outage, or the failure of operation i.
func batchFailure(i int, err error) error {
	switch {
	case retryable(err):
		return err
	case unavailable(err):
		return classify(err)
	}
	return &BatchError{Index: i, Err: err}
}

func (s *Store) writeEach(ctx context.Context, tx pgx.Tx, account, table string, writes []Write, now, lock int64, tryLock bool) ([]Result, error) {
	if tryLock {
		if err := tryLocked(tx.QueryRow(ctx, sqlTryLockPartition, lock)); err != nil {
			return nil, err
		}
	}
	results := make([]Result, len(writes))
	for i := range writes {
		res, err := s.write(ctx, tx, account, table, &writes[i], now)
		if err != nil {
			return nil, batchFailure(i, err)
		}
		results[i] = res
	}
	return results, nil
}

func insertsOnly(writes []Write) bool {
	for i := range writes {
		if writes[i].Op != OpInsert {
			return false
		}
	}
	return true
}

// insertMany runs a batch of inserts as one statement, sent together with
// the partition lock: one round trip between BEGIN and COMMIT.
func (s *Store) insertMany(ctx context.Context, tx pgx.Tx, account, table string, writes []Write, now, lock int64) ([]Result, error) {
	pk := writes[0].PartitionKey
	rks := make([]string, len(writes))
	sizes := make([]int32, len(writes))
	props := make([][]byte, len(writes))
	// The stored forms share one buffer, sized by the first entity's.
	var buf []byte
	for i := range writes {
		w := &writes[i]
		rks[i] = w.RowKey
		sizes[i] = int32(odata.EntitySize(pk, w.RowKey, w.Properties))
		start := len(buf)
		buf = odata.AppendStored(buf, w.Properties)
		if i == 0 {
			buf = slices.Grow(buf, len(buf)*(len(writes)-1)+len(buf)/2)
		}
		props[i] = buf[start:len(buf):len(buf)]
	}
	b := &pgx.Batch{}
	b.Queue(sqlWaitPartitionXact, lock)
	lt := tableKey(table)
	dkey := distributionKey(account, lt, pk)
	// On Citus the change rows follow the insert (changes_citus.go).
	citusChanges := s.distributed.Load() && s.feedOn(account)
	sql, args := sqlInsertMany+", table_id", []any{account, lt, dkey, pk, now, rks, sizes, props}
	if !citusChanges {
		sql, args = s.capturedBatch(account, writes[0].txn, args)
	}
	b.Queue(sql, args...)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, batchFailure(0, fmt.Errorf("lock partition: %w", err))
	}
	rows, err := br.Query()
	if isUniqueViolation(err) {
		return nil, errInsertConflict
	}
	if err != nil {
		return nil, batchFailure(0, fmt.Errorf("insert entities: %w", err))
	}
	inserted := make(map[string]uint32, len(writes))
	var rk string
	var xmin uint32
	var tableID int64
	dest := []any{&rk, &xmin, &tableID}
	if !citusChanges {
		dest = dest[:2]
	}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		inserted[rk] = xmin
		return nil
	})
	if err == nil {
		err = br.Close()
	}
	if isUniqueViolation(err) {
		return nil, errInsertConflict
	}
	if err != nil {
		return nil, batchFailure(0, fmt.Errorf("insert entities: %w", err))
	}
	// A plain INSERT writes every row or fails: no row means that the
	// statement found no live table.
	if len(inserted) == 0 {
		return nil, &BatchError{Index: 0, Err: ErrTableNotFound}
	}
	results := make([]Result, len(writes))
	for i := range writes {
		x := inserted[writes[i].RowKey]
		results[i] = Result{Timestamp: now, ETag: formatETag(now, x, pk, writes[i].RowKey)}
	}
	if citusChanges {
		changes := make([]*pendingChange, len(writes))
		for i := range writes {
			changes[i] = &pendingChange{tag: writes[i].txn, op: 1, pk: pk, rk: rks[i], tableID: tableID, dkey: dkey, ts: now, xid: int64(inserted[rks[i]]), props: props[i]}
		}
		if err := insertManyChanges(ctx, tx, changes); err != nil {
			return nil, batchFailure(0, fmt.Errorf("record changes: %w", err))
		}
	}
	return results, nil
}

// firstExisting returns the index of the first write whose entity exists,
// or -1.
func (s *Store) firstExisting(ctx context.Context, account, table string, writes []Write) (int, error) {
	rks := make([]string, len(writes))
	for i := range writes {
		rks[i] = writes[i].RowKey
	}
	lt, pk := tableKey(table), writes[0].PartitionKey
	var existing []string
	err := s.routed(account, lt, pk, func(_, _ *combiner, pool *pgxpool.Pool) error {
		rows, err := pool.Query(ctx, sqlExistingKeys, account, lt, distributionKey(account, lt, pk), pk, rks)
		if err != nil {
			return err
		}
		existing, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return 0, classify(fmt.Errorf("find existing entities: %w", err))
	}
	for i := range writes {
		if slices.Contains(existing, writes[i].RowKey) {
			return i, nil
		}
	}
	return -1, nil
}

// IsBatchError returns the failing operation of a batch error.
func IsBatchError(err error) (*BatchError, bool) {
	var be *BatchError
	ok := errors.As(err, &be)
	return be, ok
}
