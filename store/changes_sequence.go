package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Ordering. A position taken when a change is written (a sequence value,
// the transaction's id) is not in commit order: a reader that resumed
// after the highest position it saw would skip a change that commits
// later with a lower one. So change rows are written without a position,
// each with a row in change_pending, and the sequencer numbers the rows
// that have committed, in one transaction at a time (the change_sequencer
// row's lock), from a counter: positions follow visibility. It deletes
// their pending rows and writes their positions to change_positions, so
// that a change row is written once and never updated. Within what one
// run finds, the changes of a transaction stay together and in their
// write order, and transactions go in the order of their first change's
// id (a sequence on each node): a transaction that began after another
// committed comes after it. A reader reads positions up to
// change_sequencer.visible. On Citus a second transaction raises it once
// the numbering one has committed: a transaction that numbers rows on
// several nodes commits on each of them one after another, and visible
// keeps readers from seeing a later node's rows before an earlier node's.
// One PostgreSQL commits at once and raises it in the numbering
// transaction.
const (
	sqlLockFeed     = `SELECT last, visible FROM change_sequencer FOR UPDATE SKIP LOCKED`
	sqlLockFeedWait = `SELECT last, visible FROM change_sequencer FOR UPDATE`

	// Change rows of replicas of the release before migration 0007 (a
	// rolling upgrade), and every change row on Citus (changes_citus.go),
	// have a tag and no pending row: they get one, and pos 0, which keeps
	// them from being taken again.
	sqlAdoptChanges = `
WITH m AS (UPDATE changes SET pos = 0 WHERE pos IS NULL AND tag IS NOT NULL RETURNING dkey, id, table_id, tag, at)
INSERT INTO change_pending (dkey, id, table_id, tag, at) SELECT dkey, id, table_id, tag, at FROM m`

	sqlUnsequenced = `
SELECT dkey, id, tag, at FROM change_pending ORDER BY id LIMIT $1`

	// The rest of the transactions of a full page of sqlUnsequenced.
	sqlUnsequencedOfTags = `
SELECT dkey, id, tag, at FROM change_pending WHERE tag = ANY($1) AND id > $2 ORDER BY id`

	// By the index on id: deleted pending rows wait for vacuum at the
	// start of the heap, where EXISTS would scan through them.
	sqlAnyUnsequenced = `
SELECT (SELECT id FROM change_pending ORDER BY id LIMIT 1) IS NOT NULL
    OR EXISTS (SELECT 1 FROM changes WHERE pos IS NULL AND tag IS NOT NULL)`

	// Only the rows whose pending row it deletes get a position: the
	// lock makes that all of them. By id alone, which is unique (each
	// node's sequence counts in a range of its own), so that the pending
	// rows are found through their index: a join with the arrays is
	// planned as a hash join over the whole table, dead rows included.
	// In position order: to the right edge of the indexes on pos.
	sqlNumberChanges = `
WITH d AS (
  DELETE FROM change_pending WHERE id = ANY($2::bigint[])
  RETURNING dkey, id, table_id, at)
INSERT INTO change_positions (dkey, id, table_id, pos, txn, at)
SELECT d.dkey, d.id, d.table_id, v.pos, v.txn, d.at
FROM d JOIN unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS v(dkey, id, pos, txn)
  ON v.dkey = d.dkey AND v.id = d.id
ORDER BY v.pos`

	sqlSetLast        = `UPDATE change_sequencer SET last = $1`
	sqlSetVisible     = `UPDATE change_sequencer SET visible = $1 WHERE visible < $1`
	sqlSetLastVisible = `UPDATE change_sequencer SET last = $1, visible = $1`

	// feedChannel is the NOTIFY channel on which the sequencer tells the
	// replicas' readers that positions became visible.
	feedChannel = "pgtables_changes"
	sqlNotify   = `SELECT pg_notify('` + feedChannel + `', $1::text)`
	sqlListen   = `LISTEN ` + feedChannel

	// sequenceChunk bounds the changes one sequencer transaction numbers.
	sequenceChunk = 5000
)

// errSequencerBusy: another sequencer holds the change_sequencer row.
var errSequencerBusy = errors.New("another sequencer is at work")

// unsequenced is a change row waiting for its position: its key, its
// transaction's tag and when that transaction began (the row's at).
type unsequenced struct {
	dkey, id, tag int64
	at            time.Time
}

// sequenceOnce numbers the committed changes that have no position yet, up
// to sequenceChunk of them, and makes them visible to readers. It returns
// how many it numbered; errSequencerBusy when another sequencer is at it,
// unless wait is set: then it waits for that one to finish.
func (s *Store) sequenceOnce(ctx context.Context, wait bool) (int, error) {
	var last, visible int64
	var n int
	var published bool
	lock := sqlLockFeed
	if wait {
		lock = sqlLockFeedWait
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, lock).Scan(&last, &visible); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return errSequencerBusy
			}
			return err
		}
		// On Citus every change row takes this way (changes_citus.go):
		// every run adopts.
		if wait || s.distributed.Load() || s.feed.adoptDue() {
			if _, err := tx.Exec(ctx, sqlAdoptChanges); err != nil {
				return err
			}
		}
		rows, err := queryUnsequenced(ctx, tx, sqlUnsequenced, sequenceChunk)
		if err != nil {
			return err
		}
		if len(rows) == sequenceChunk {
			// The page may end inside a transaction: take the rest of
			// the transactions it has begun.
			tags := make([]int64, 0, 64)
			seen := make(map[int64]bool)
			for _, r := range rows {
				if !seen[r.tag] {
					seen[r.tag] = true
					tags = append(tags, r.tag)
				}
			}
			more, err := queryUnsequenced(ctx, tx, sqlUnsequencedOfTags, tags, rows[len(rows)-1].id)
			if err != nil {
				return err
			}
			rows = append(rows, more...)
		}
		if len(rows) == 0 {
			return nil
		}
		dkeys, ids, pos, txns := numberChanges(rows, last)
		if _, err := tx.Exec(ctx, sqlNumberChanges, dkeys, ids, pos, txns); err != nil {
			return err
		}
		n = len(rows)
		last += int64(n)
		if s.distributed.Load() {
			_, err = tx.Exec(ctx, sqlSetLast, last)
			return err
		}
		// One PostgreSQL commits the numbering at once: it may publish
		// it in the same transaction.
		b := &pgx.Batch{}
		b.Queue(sqlSetLastVisible, last)
		b.Queue(sqlNotify, strconv.FormatInt(last, 10))
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		visible = last
		published = true
		return nil
	})
	if err != nil {
		if errors.Is(err, errSequencerBusy) {
			return 0, err
		}
		return 0, classify(fmt.Errorf("sequence changes: %w", err))
	}
	if visible < last {
		b := &pgx.Batch{}
		b.Queue(sqlSetVisible, last)
		b.Queue(sqlNotify, strconv.FormatInt(last, 10))
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return n, classify(fmt.Errorf("publish changes: %w", err))
		}
		published = true
	}
	if published {
		s.feed.wake()
	}
	return n, nil
}

func queryUnsequenced(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]unsequenced, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var r unsequenced
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (unsequenced, error) {
		err := row.Scan(&r.dkey, &r.id, &r.tag, &r.at)
		return r, err
	})
}

// numberChanges gives rows, ordered by id, the positions after last: the
// rows of one tag together, tags in the order of their first row in
// feedOrder. It returns the columns of sqlNumberChanges.
func numberChanges(rows []unsequenced, last int64) (dkeys, ids, pos, txns []int64) {
	order := feedOrder(rows)
	byTag := make(map[int64][]int, len(rows))
	var tags []int64
	for _, i := range order {
		r := rows[i]
		if _, ok := byTag[r.tag]; !ok {
			tags = append(tags, r.tag)
		}
		byTag[r.tag] = append(byTag[r.tag], i)
	}
	n := len(rows)
	dkeys, ids, pos, txns = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	for _, tag := range tags {
		first := last + 1
		for _, i := range byTag[tag] {
			last++
			dkeys, ids, pos, txns = append(dkeys, rows[i].dkey), append(ids, rows[i].id), append(pos, last), append(txns, first)
		}
	}
	return dkeys, ids, pos, txns
}

// idNode is the node whose sequence gave a change row its id. On Citus
// the id is taken where the statement is planned: on the node that holds
// the shard when pgtables routes it there, on the coordinator when it goes
// through the coordinator (as it does for a while after a node refused a
// connection), and each node's sequence counts in a range of its own
// (group << 48). Ids of one node are in write order; ids of two nodes say
// nothing about each other. On one PostgreSQL every id is of node 0.
func idNode(id int64) int64 { return id >> 48 }

// feedOrder returns the indexes of rows (ordered by id) in the order the
// feed lists them: the rows of each node in id order, the nodes' rows
// merged by when their transactions began. Ordering by id alone put a
// partition's changes taken by the coordinator's sequence (small ids) after
// earlier ones taken by a worker's (ids from 1 << 48) when both waited for
// the same run, as they do after a worker was down.
func feedOrder(rows []unsequenced) []int {
	var nodes []int64
	streams := make(map[int64][]int)
	for i, r := range rows {
		n := idNode(r.id)
		if _, ok := streams[n]; !ok {
			nodes = append(nodes, n)
		}
		streams[n] = append(streams[n], i)
	}
	order := make([]int, 0, len(rows))
	if len(nodes) == 1 {
		return append(order, streams[nodes[0]]...)
	}
	for len(order) < len(rows) {
		best := int64(-1)
		for _, n := range nodes {
			s := streams[n]
			if len(s) == 0 {
				continue
			}
			if best < 0 || rows[s[0]].at.Before(rows[streams[best][0]].at) {
				best = n
			}
		}
		order = append(order, streams[best][0])
		streams[best] = streams[best][1:]
	}
	return order
}

// sequence runs the sequencer until nothing is left to number, or another
// sequencer is at it. With wait, it waits for another sequencer instead:
// when it returns, every change committed before the call is visible.
func (s *Store) sequence(ctx context.Context, wait bool) error {
	for {
		n, err := s.sequenceOnce(ctx, wait)
		if errors.Is(err, errSequencerBusy) {
			return nil
		}
		if err != nil || n < sequenceChunk {
			return err
		}
	}
}

// A feedHub wakes the change feed readers of this process that wait for
// changes: on every position the sequencer makes visible, here or (by
// NOTIFY) on another replica.
type feedHub struct {
	mu      sync.Mutex
	ch      chan struct{}
	kick    chan struct{} // a write committed a change: sequence soon
	stopped chan struct{}
	stop    sync.Once
	// running: RunChangeFeed runs, and sequences what writes kick;
	// listening: its notifications come, so readers need no polling.
	running, listening atomic.Bool
	// adopted: when (unix ns) a run last took over the change rows of
	// an older release's replicas (sqlAdoptChanges).
	adopted atomic.Int64
}

// adoptInterval is how often the sequencer looks for change rows of an
// older release's replicas, written during a rolling upgrade: not on every
// run, whose statements should cost little.
const adoptInterval = time.Second

// adoptDue reports whether a run should take over older releases' change
// rows, and if so counts it done.
func (h *feedHub) adoptDue() bool {
	now := time.Now().UnixNano()
	last := h.adopted.Load()
	return now-last >= int64(adoptInterval) && h.adopted.CompareAndSwap(last, now)
}

func newFeedHub() *feedHub {
	return &feedHub{ch: make(chan struct{}), kick: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// wake wakes every waiting reader.
func (h *feedHub) wake() {
	h.mu.Lock()
	close(h.ch)
	h.ch = make(chan struct{})
	h.mu.Unlock()
}

// signal returns the channel that the next wake closes.
func (h *feedHub) signal() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch
}

// ChangeSignal returns a channel closed when new changes may be visible
// (take it before reading, so that no wake-up falls in between) and one
// closed when the change feed stops (RunChangeFeed ended, as at shutdown).
func (s *Store) ChangeSignal() (wake, stopped <-chan struct{}) {
	return s.feed.signal(), s.feed.stopped
}

// changeWritten tells the sequencer of this process that a write of
// account committed, with its changes if the account's feed is on.
func (s *Store) changeWritten(account string) {
	if !s.feedOn(account) {
		return
	}
	if !s.feed.running.Load() {
		// No sequencer here: the waiting readers sequence when woken.
		s.feed.wake()
		return
	}
	select {
	case s.feed.kick <- struct{}{}:
	default:
	}
}

// ChangeFeedTiming tunes RunChangeFeed; zero fields take the defaults.
type ChangeFeedTiming struct {
	// Spacing is the least time between two sequencer runs while writes
	// keep coming (default 50 ms): a run per write would double the
	// transactions.
	Spacing time.Duration
	// Poll is how often the sequencer looks for changes written through
	// other replicas, and readers are woken when notifications are not
	// coming (default 1 s).
	Poll time.Duration
	// PurgeEvery is how often changes past retention are purged (default
	// 1 min).
	PurgeEvery time.Duration
}

// RunChangeFeed sequences changes, wakes readers (LISTEN/NOTIFY, with a
// poll as fallback) and purges changes past retention until ctx ends; then
// waiting readers are told the feed stopped. Errors are logged and retried.
func (s *Store) RunChangeFeed(ctx context.Context, timing ChangeFeedTiming, log *slog.Logger) {
	s.feed.running.Store(true)
	defer s.feed.running.Store(false)
	defer s.feed.stop.Do(func() { close(s.feed.stopped) })
	if timing.Spacing <= 0 {
		timing.Spacing = 50 * time.Millisecond
	}
	if timing.Poll <= 0 {
		timing.Poll = time.Second
	}
	if timing.PurgeEvery <= 0 {
		timing.PurgeEvery = time.Minute
	}
	var listening sync.WaitGroup
	listening.Go(func() { s.listenChanges(ctx, log) })
	defer listening.Wait()
	poll := time.NewTicker(timing.Poll)
	defer poll.Stop()
	nextPurge := time.Now()
	var lastRun time.Time
	var lastCost time.Duration
	for {
		work := true
		select {
		case <-ctx.Done():
			return
		case <-s.feed.kick:
			if d := s.runSpacing(timing, lastCost) - time.Since(lastRun); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		case <-poll.C:
			if !s.feed.listening.Load() {
				// No notifications: readers re-check instead.
				s.feed.wake()
			}
			// Changes written through other replicas, or whose kick
			// came while a run was on.
			if err := s.pool.QueryRow(ctx, sqlAnyUnsequenced).Scan(&work); err != nil && ctx.Err() == nil {
				log.Warn("change feed: look for changes", "err", err)
			}
		}
		if work {
			lastRun = time.Now()
			if err := s.sequence(ctx, false); err != nil && ctx.Err() == nil {
				log.Warn("change feed: sequence changes", "err", err)
			}
			lastCost = time.Since(lastRun)
		}
		if time.Now().After(nextPurge) {
			nextPurge = time.Now().Add(timing.PurgeEvery)
			if _, err := s.PurgeChanges(ctx); err != nil && ctx.Err() == nil {
				log.Warn("change feed: purge changes past retention", "err", err)
			}
		}
	}
}

// listenChanges wakes readers on every notification of the sequencers,
// from a connection of its own, reconnecting after failures.
func (s *Store) listenChanges(ctx context.Context, log *slog.Logger) {
	for delay := time.Second; ctx.Err() == nil; {
		err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		log.Warn("change feed: listen for changes", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sqlListen); err != nil {
		return err
	}
	s.feed.listening.Store(true)
	defer s.feed.listening.Store(false)
	// Changes may have come while nobody listened.
	s.feed.wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		s.feed.wake()
	}
}
