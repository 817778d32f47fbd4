package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A combiner coalesces concurrent single-statement operations into
// pipelined round trips. While fewer than its limit of round trips are in
// flight, a statement goes out at once, alone: no added latency. Once the
// limit is reached, statements that arrive queue up, and the next free
// slot sends all of them as one pgx.Batch on one connection: one network
// write, one wakeup of the database and, for writes, one commit for many
// requests (a group commit). Under load this makes the database's work per
// request, not round trips and commits, the limit.
//
// A batch runs in one implicit transaction, so its statements see each
// other's effects in the order sent, as if run one after another; they are
// concurrent requests, so any order is a valid one. Writes are sent in key
// order, so two batches always take row locks in the same order and cannot
// deadlock each other. Nothing is reported before the batch has committed.
// When a statement fails, the implicit transaction is rolled back entirely
// and every statement of the batch runs again on its own; when the
// connection fails, every statement gets the error (as a lone statement
// would), since whether the batch committed is unknown.
type combiner struct {
	pool interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
		Acquire(context.Context) (*pgxpool.Conn, error)
	}
	alone querier // runs a statement by itself
	limit int     // round trips in flight at once
	// ceiling bounds the round trips in flight when they stall: a round
	// trip waiting for a row lock, or whose database process waits for a
	// CPU, must not hold up every other request.
	ceiling int
	// live, when set, holds the statement of a table guard on this
	// combiner's node (see tableGuard); nil or unset: sqlGuardTableLive.
	live *atomic.Pointer[string]

	mu       sync.Mutex
	inflight int
	pending  []*combined
	progress time.Time     // when a round trip last started or ended
	rtt      time.Duration // recent round trips' duration, smoothed
}

// combined is one statement waiting for its round trip.
type combined struct {
	key  string // sort key: statements are sent in this order
	sql  string
	args []any
	scan []any // QueryRow's destinations; nil: Exec
	// group names the statements that one statement built by merge can
	// answer together; empty: none.
	group string
	merge merger
	guard *guard // nil: none
	// change is the statement's change row on Citus, filled by its scan
	// and inserted after it (sendTx); nil: none.
	change *pendingChange
	tag    pgconn.CommandTag
	err    error
	done   chan struct{}
}

// A guard is a statement that runs before a statement in the same
// implicit transaction: when the guard fails, the statement has no effect
// and fails with the guard's error (see tableids.go). Statements of one
// round trip whose guards have the same key share one.
type guard struct {
	key  string
	sql  string
	args []any
	// check, when set, is a second statement, sent after sql: it runs in
	// a snapshot taken after sql's locks are held (see citus_writes.go).
	check string
	// shard, when set, is the shard the guarded statement writes: sql
	// then takes the ids of the shards of every statement of the round
	// trip that shares the guard, in order, as its last argument, and
	// check as its only one.
	shard int64
}

// queue queues g's statements, for the statements of units that share it.
func (g *guard) queue(b *pgx.Batch, units [][]*combined) {
	if g.shard == 0 {
		b.Queue(g.sql, g.args...)
		if g.check != "" {
			b.Queue(g.check)
		}
		return
	}
	var shards []int64
	for _, u := range units {
		if h := u[0].guard; h != nil && h.key == g.key && !slices.Contains(shards, h.shard) {
			shards = append(shards, h.shard)
		}
	}
	slices.Sort(shards)
	b.Queue(g.sql, append(g.args[:len(g.args):len(g.args)], shards)...)
	if g.check != "" {
		b.Queue(g.check, shards)
	}
}

// answer reads the answers of g's statements from br: the first failure,
// for a guard of shards (see shard) as a *shardGuardError when the server
// reported it.
func (g *guard) answer(br pgx.BatchResults) error {
	_, err := br.Exec()
	if g.check != "" {
		if _, checkErr := br.Exec(); err == nil {
			err = checkErr
		}
	}
	var pgErr *pgconn.PgError
	if g.shard != 0 && errors.As(err, &pgErr) {
		return &shardGuardError{err}
	}
	return err
}

// A shardGuardError is the failure of a guard of shards that the server
// reported: the transaction was rolled back, so the statements it guards
// had no effect.
type shardGuardError struct{ err error }

func (e *shardGuardError) Error() string { return e.err.Error() }
func (e *shardGuardError) Unwrap() error { return e.err }

// A merger builds one statement that answers several QueryRow statements
// of a group, so the database parses, binds and runs one statement, not
// one per request. Each of its rows starts with the 1-based position of
// the statement it answers, followed by that statement's columns; a
// statement that gets no row gets pgx.ErrNoRows, as from QueryRow.
type merger func(ops []*combined) (sql string, args []any)

const (
	// combineTimeout bounds a shared round trip, which outlives the
	// requests that wait for it.
	combineTimeout = 30 * time.Second
	// combineStall is how long round trips may all be in flight with none
	// starting or ending before a statement gets a round trip beyond the
	// limit; twice the recent round trip time, when that is longer. On a
	// shared machine a round trip often waits for a CPU, and another one
	// meanwhile keeps the database busy (about +6% for conditional updates
	// at 16 clients, against a 50 ms allowance); while round trips are
	// slow anyway, under heavy load, opening more would only split their
	// commits.
	combineStall = time.Millisecond
)

func newCombiner(s *Store, limit, ceiling int) *combiner {
	return newCombinerOn(s.pool, limit, ceiling)
}

// newCombinerOn is a combiner whose round trips go to pool.
func newCombinerOn(pool *pgxpool.Pool, limit, ceiling int) *combiner {
	limit = max(limit, 1)
	return &combiner{pool: pool, alone: pool, limit: limit, ceiling: max(ceiling, limit), progress: time.Now()}
}

// queryRow runs sql and scans its one row into dest, as QueryRow().Scan.
func (c *combiner) queryRow(ctx context.Context, key, sql string, args []any, dest ...any) error {
	op := &combined{key: key, sql: sql, args: args, scan: dest, done: make(chan struct{})}
	return c.submit(ctx, op)
}

// queryRowChange is queryRow after g (see guard; nil: none), with the
// change row ch (nil: none) inserted after it in its transaction (see
// sendTx).
func (c *combiner) queryRowChange(ctx context.Context, key string, g *guard, ch *pendingChange, sql string, args []any, dest ...any) error {
	op := &combined{key: key, sql: sql, args: args, scan: dest, guard: g, change: ch, done: make(chan struct{})}
	return c.submit(ctx, op)
}

// exec runs sql, as Exec.
func (c *combiner) exec(ctx context.Context, key, sql string, args []any) (pgconn.CommandTag, error) {
	op := &combined{key: key, sql: sql, args: args, done: make(chan struct{})}
	err := c.submit(ctx, op)
	return op.tag, err
}

func (c *combiner) submit(ctx context.Context, op *combined) error {
	c.mu.Lock()
	now := time.Now()
	if c.inflight < c.limit || c.inflight < c.ceiling && now.Sub(c.progress) > max(combineStall, 2*c.rtt) {
		c.inflight++
		c.progress = now
		batch := append(c.pending, op)
		c.pending = nil
		c.mu.Unlock()
		if len(batch) == 1 {
			// Alone: the caller's own deadline applies, as without us.
			c.sendAlone(ctx, op)
			close(op.done)
			c.next(ctx, now)
			return op.err
		}
		go c.run(ctx, batch)
	} else {
		c.pending = append(c.pending, op)
		c.mu.Unlock()
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		// The statement still runs with its batch; its outcome is lost, as
		// a lone statement's is when its client goes away.
		return ctx.Err()
	}
}

// run sends batch, which serves several requests: one of them giving up
// must not cancel it. Then it sends what queued meanwhile, for as long as
// something did: under load one goroutine carries the round trips, rather
// than a new one (growing a new stack through pgx) for each.
func (c *combiner) run(ctx context.Context, batch []*combined) {
	for batch != nil {
		start := time.Now()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), combineTimeout)
		c.send(sctx, batch)
		cancel()
		batch = c.take(start)
	}
}

// next hands a lone statement's finished round trip on to the statements
// that queued meanwhile, or frees its slot.
func (c *combiner) next(ctx context.Context, start time.Time) {
	if batch := c.take(start); batch != nil {
		go c.run(ctx, batch)
	}
}

// take returns the statements that queued while a round trip (begun at
// start) was in flight, for the next one in the same slot; with none, it
// frees the slot.
func (c *combiner) take(start time.Time) []*combined {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress = time.Now()
	c.rtt += (c.progress.Sub(start) - c.rtt) / 8
	batch := c.pending
	c.pending = nil
	if len(batch) == 0 {
		c.inflight--
		return nil
	}
	return batch
}

func (c *combiner) send(ctx context.Context, batch []*combined) {
	defer func() {
		for _, op := range batch {
			close(op.done)
		}
	}()
	if len(batch) == 1 {
		c.sendAlone(ctx, batch[0])
		return
	}
	slices.SortStableFunc(batch, func(a, b *combined) int { return cmp.Compare(a.key, b.key) })
	if slices.ContainsFunc(batch, func(op *combined) bool { return op.change != nil }) {
		c.sendTx(ctx, batch)
		return
	}
	units := groupStatements(batch)
	b := &pgx.Batch{}
	queueUnits(b, units)
	br := c.pool.SendBatch(ctx, b)
	var failed error
	for i := range units {
		if err := answerUnit(br, units, i); err != nil && failed == nil {
			failed = err
		}
	}
	if err := br.Close(); err != nil && failed == nil {
		failed = err
	}
	switch {
	case failed == nil:
	case unavailable(failed):
		for _, op := range batch {
			op.err = failed
		}
	default:
		// A statement failed and took the batch's transaction with it.
		for _, op := range batch {
			c.sendAlone(ctx, op)
		}
	}
}

func (c *combiner) sendAlone(ctx context.Context, op *combined) {
	if op.change != nil {
		c.sendTx(ctx, []*combined{op})
		return
	}
	if op.guard != nil {
		b := &pgx.Batch{}
		op.guard.queue(b, [][]*combined{{op}})
		b.Queue(op.sql, op.args...)
		br := c.pool.SendBatch(ctx, b)
		guardErr := op.guard.answer(br)
		answer(br, op)
		if err := br.Close(); err != nil && op.err == nil {
			op.err = err
		}
		if guardErr != nil {
			op.err = guardErr
		}
		return
	}
	if op.scan != nil {
		op.tag, op.err = pgconn.CommandTag{}, c.alone.QueryRow(ctx, op.sql, op.args...).Scan(op.scan...)
	} else {
		op.tag, op.err = c.alone.Exec(ctx, op.sql, op.args...)
	}
}

// firstGuard reports whether the statement of units[i] has a guard that
// no statement before it in the round trip shares.
func firstGuard(units [][]*combined, i int) bool {
	g := units[i][0].guard
	if g == nil {
		return false
	}
	for _, u := range units[:i] {
		if u[0].guard != nil && u[0].guard.key == g.key {
			return false
		}
	}
	return true
}

// answer reads the result of op's statement from br.
func answer(br pgx.BatchResults, op *combined) {
	if op.scan != nil {
		op.tag, op.err = pgconn.CommandTag{}, br.QueryRow().Scan(op.scan...)
	} else {
		op.tag, op.err = br.Exec()
	}
}

// groupStatements splits a sorted batch into the statements to send: a
// group's statements (see combined.group) together, in the place of its
// first, every other statement alone. A statement alone is a view of
// batch, capped so that a group growing from it copies: batches of writes,
// which have no groups, allocate nothing per statement.
func groupStatements(batch []*combined) [][]*combined {
	units := make([][]*combined, 0, len(batch))
next:
	for j, op := range batch {
		if op.group != "" && op.merge != nil {
			for i, u := range units {
				if u[0].group == op.group {
					units[i] = append(u, op)
					continue next
				}
			}
		}
		units = append(units, batch[j:j+1:j+1])
	}
	return units
}

// answerMerged reads the rows of a merged statement (see merger) into the
// statements of its group.
func answerMerged(br pgx.BatchResults, ops []*combined) {
	for _, op := range ops {
		op.err = pgx.ErrNoRows
	}
	rows, err := br.Query()
	if err == nil {
		err = routeRows(rows, ops)
	}
	if err != nil {
		for _, op := range ops {
			op.err = err
		}
	}
}

func routeRows(rows pgx.Rows, ops []*combined) error {
	defer rows.Close()
	var dest []any
	var pos int64
	for rows.Next() {
		fd := rows.FieldDescriptions()
		if len(fd) == 0 {
			return errors.New("merged statement: no columns")
		}
		if err := rows.Conn().TypeMap().Scan(fd[0].DataTypeOID, fd[0].Format, rows.RawValues()[0], &pos); err != nil {
			return fmt.Errorf("merged statement: position: %w", err)
		}
		if pos < 1 || pos > int64(len(ops)) || !errors.Is(ops[pos-1].err, pgx.ErrNoRows) {
			return fmt.Errorf("merged statement: row for position %d of %d", pos, len(ops))
		}
		op := ops[pos-1]
		dest = append(append(dest[:0], &pos), op.scan...)
		op.err = rows.Scan(dest...)
	}
	return rows.Err()
}

// sendTx sends batch (sorted), some of whose statements have change rows,
// in an explicit transaction of two round trips: BEGIN with the
// statements (and their guards), then the change rows of the statements
// that wrote, in one statement, with the COMMIT (changes_citus.go). A
// statement that fails rolls the transaction back, and each statement of
// a batch of several runs again on its own, as in send.
func (c *combiner) sendTx(ctx context.Context, batch []*combined) {
	fail := func(err error) {
		for _, op := range batch {
			op.err = err
		}
	}
	failed := c.sendTxOnce(ctx, batch)
	switch {
	case failed == nil:
	case unavailable(failed) || len(batch) == 1:
		fail(failed)
	default:
		// With the connection back in the pool: one each may be needed.
		for _, op := range batch {
			op.err, op.tag = nil, pgconn.CommandTag{}
			c.sendTx(ctx, []*combined{op})
		}
	}
}

// sendTxOnce is one try of sendTx: it returns the error that rolled the
// transaction back, if one did.
func (c *combiner) sendTxOnce(ctx context.Context, batch []*combined) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	units := groupStatements(batch)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	queueUnits(b, units)
	br := conn.SendBatch(ctx, b)
	_, failed := br.Exec()
	for i := range units {
		if failed != nil {
			break
		}
		failed = answerUnit(br, units, i)
	}
	if err := br.Close(); err != nil && failed == nil {
		failed = err
	}
	if failed == nil {
		var changes []*pendingChange
		for _, op := range batch {
			if op.change != nil && op.err == nil {
				changes = append(changes, op.change)
			}
		}
		b := &pgx.Batch{}
		if len(changes) > 0 {
			sql, args := insertChangesArgs(changes)
			b.Queue(sql, args...)
		}
		b.Queue("COMMIT")
		failed = conn.SendBatch(ctx, b).Close()
		if failed == nil {
			return nil
		}
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
			_ = conn.Conn().Close(rctx)
		}
		cancel()
	}
	return failed
}

// queueUnits queues units' statements, each merged unit as one statement,
// a guard before the first statement it guards.
func queueUnits(b *pgx.Batch, units [][]*combined) {
	for i, u := range units {
		if firstGuard(units, i) {
			u[0].guard.queue(b, units[i:])
		}
		if len(u) > 1 {
			sql, args := u[0].merge(u)
			b.Queue(sql, args...)
		} else {
			b.Queue(u[0].sql, u[0].args...)
		}
	}
}

// answerUnit reads the answers of units[i], queued by queueUnits, from br:
// its guard's first, when it is the first unit the guard guards, whose
// failure is every statement's of the unit. It returns the unit's first
// failure other than a statement that found no row.
func answerUnit(br pgx.BatchResults, units [][]*combined, i int) error {
	u := units[i]
	var guardErr error
	if firstGuard(units, i) {
		guardErr = u[0].guard.answer(br)
	}
	if len(u) > 1 {
		answerMerged(br, u)
	} else {
		answer(br, u[0])
	}
	var failed error
	for _, op := range u {
		if guardErr != nil {
			op.err = guardErr
		}
		if op.err != nil && !errors.Is(op.err, pgx.ErrNoRows) && failed == nil {
			failed = op.err
		}
	}
	return failed
}
