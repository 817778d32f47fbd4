package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Ordering. A position taken when a change is written (a sequence value,
// the transaction's id) is not in commit order: a reader that resumed
// after the highest position it saw would skip a change that commits
// later with a lower one. So change rows are written without a position,
// and the sequencer numbers the rows that have committed, in one
// transaction at a time (the sequencer's lock), from a counter:
// positions follow visibility. It writes their positions to
// change_positions, so that a change row is written once and never
// updated. Within what one run numbers, the changes of a transaction stay
// together and in their write order, and transactions go in the order of
// their first change's id (a sequence on each node): a transaction that
// began after another committed comes after it. A reader reads positions
// up to change_counter.visible. On Citus a second transaction raises it
// once the numbering one has committed: a transaction that numbers rows
// on several nodes commits on each of them one after another, and visible
// keeps readers from seeing a later node's rows before an earlier node's.
// One PostgreSQL commits at once and raises it in the numbering
// transaction.
//
// Finding the committed rows not yet numbered. On one PostgreSQL (migration
// 0008) by their ids alone: a write takes its change row's id from the
// sequence after its transaction has its transaction id (the entity is
// written first, in the same statement), so an id below a visible one
// belongs to a transaction that had its transaction id before the reading
// snapshot was taken: below any transaction id taken after it, such as
// the run's own, which the run takes after its scan (its lock is an
// advisory one: a row lock on change_counter would give it one before).
// Once every transaction below that bound has ended, the id is visible or
// never will be. Not the snapshot's xmax, which is one past the latest
// transaction that completed, not the next to begin: a transaction above
// it stays above later snapshots' xmin while it is open (the chaos test of
// the feed lost batches' first changes so). The sequencer keeps a
// watermark (scanned, and the gaps below it, each with its bound) and
// reads the rows above it and in its gaps. Elsewhere each change row has a
// narrow row in change_pending that stands for it (0007): on Citus, where
// ids come from several nodes' sequences, every run adopts the change rows
// (a pending row each, pos 0 on the change row), and on one PostgreSQL the
// rows of the previous release's replicas during a rolling upgrade come
// with theirs; a run deletes the pending rows it numbers.
const (
	// The sequencer's lock: an advisory lock keyed by change_counter's
	// oid, so one per schema of a database. Statements that follow it in
	// the batch of a run that did not get it take it again (feedLocked),
	// to skip their work; what they did is rolled back.
	sqlLockFeed     = `SELECT ` + feedLocked
	sqlLockFeedWait = `SELECT true FROM pg_advisory_xact_lock(` + feedLockKey + `)`
	feedLockKey     = `1885827170, 'change_counter'::regclass::oid::int`
	feedLocked      = `pg_try_advisory_xact_lock(` + feedLockKey + `)`
	// A statement of its own, after the lock's: a snapshot taken before
	// the lock could miss the previous run's numbering.
	sqlFeedNumbering = `SELECT last, visible, scanned, gaps, gap_xmax FROM change_counter`
	// The run's transaction id, taken after its scan (see Finding).
	sqlRunXid = `SELECT pg_current_xact_id()::text::bigint WHERE ` + feedLocked
	// A change's at (when its transaction began) passes through a run
	// as microseconds since 1970, exact both ways (extract gives a
	// numeric; the interval's product is exact below 2^53): pgx encoded
	// an array of timestamptz at about 280 ns an element, twenty times
	// an array of bigint, and decoded each into a time.Time.
	changeAt   = `(extract(epoch FROM at) * 1000000)::bigint`
	changeAtOf = `to_timestamp(0) + a * interval '1 microsecond'`
	// The settings of a run's transaction (see sequenceOn): no JIT, and
	// no sequential scan.
	sqlRunSettings = `SELECT set_config('jit', 'off', true), set_config('enable_seqscan', 'off', true)`

	// Change rows of 0006's form, as Citus writes them
	// (changes_citus.go), have a tag and no pending row: they get one,
	// and pos 0, which keeps them from being taken again.
	sqlAdoptChanges = `
WITH m AS (UPDATE changes SET pos = 0 WHERE pos IS NULL AND tag IS NOT NULL AND last IS NULL RETURNING dkey, id, table_id, tag, at)
INSERT INTO change_pending (dkey, id, table_id, tag, at) SELECT dkey, id, table_id, tag, at FROM m`

	sqlUnsequenced = `
SELECT dkey, id, tag, ` + changeAt + `, table_id FROM change_pending ORDER BY id LIMIT $1`

	// The rest of the transactions of a full page of sqlUnsequenced.
	sqlUnsequencedOfTags = `
SELECT dkey, id, tag, ` + changeAt + `, table_id FROM change_pending WHERE tag = ANY($1) AND id > $2 ORDER BY id`

	// What a run of the sequencer may number on one PostgreSQL, in one
	// statement whose snapshot is taken once the run holds the lock: the
	// change rows above the watermark (up to $1 of them) and in its gaps
	// that the snapshot sees (rows with last NULL have pending rows), the
	// pending rows (up to $1), and the snapshot's xmin.
	sqlScanChanges = `
SELECT s.xmin, c.pending, c.id, c.dkey, c.table_id, c.tag, c.at, c.last, c.n
FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin, scanned, gaps
      FROM change_counter WHERE ` + feedLocked + ` LIMIT 1) s
LEFT JOIN LATERAL (
  SELECT false AS pending, id, dkey, table_id, coalesce(tag, 0) AS tag, ` + changeAt + ` AS at, last, coalesce(cardinality(rks), 1) AS n FROM changes WHERE id = ANY(s.gaps)
  UNION ALL
  (SELECT false, id, dkey, table_id, coalesce(tag, 0), ` + changeAt + `, last, coalesce(cardinality(rks), 1) FROM changes WHERE id > s.scanned ORDER BY id LIMIT $1)
  UNION ALL
  (SELECT true, id, dkey, table_id, tag, ` + changeAt + `, NULL, 1 FROM change_pending ORDER BY id LIMIT $1)
) c ON true`

	// By the index on id: deleted pending rows wait for vacuum at the
	// start of the heap, where EXISTS would scan through them.
	sqlAnyUnsequencedCitus = `
SELECT (SELECT id FROM change_pending ORDER BY id LIMIT 1) IS NOT NULL
    OR EXISTS (SELECT 1 FROM changes WHERE pos IS NULL AND tag IS NOT NULL AND last IS NULL)`
	// The first id above the watermark, and the first in its gaps, by
	// the primary key's order: EXISTS is planned as a scan of the heap,
	// which holds those rows at its end, and the gaps' EXISTS, planned
	// while changes was empty (the cached plan of a new database), read
	// all of it on every poll until an ANALYZE.
	sqlAnyUnsequenced = `
SELECT (SELECT id FROM change_pending ORDER BY id LIMIT 1) IS NOT NULL
    OR (SELECT id FROM changes WHERE id > (SELECT scanned FROM change_counter) ORDER BY id LIMIT 1) IS NOT NULL
    OR (SELECT id FROM changes WHERE id = ANY((SELECT gaps FROM change_counter)::bigint[]) ORDER BY id LIMIT 1) IS NOT NULL
    OR EXISTS (SELECT 1 FROM changes WHERE pos IS NULL AND tag IS NOT NULL AND last IS NULL)`

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
INSERT INTO change_positions (dkey, id, table_id, pos, txn, at, n)
SELECT d.dkey, d.id, d.table_id, v.pos, v.txn, d.at, 1
FROM d JOIN unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS v(dkey, id, pos, txn)
  ON v.dkey = d.dkey AND v.id = d.id
ORDER BY v.pos`

	// The positions of rows without pending rows, given in position
	// order, and the sequencer's state after a run on one PostgreSQL,
	// which tells the readers ($12: when there are new positions). A
	// row of a batch's changes (n of them, migration 0009) has the last
	// of its positions.
	sqlNumberDirect = `
WITH p AS (
  INSERT INTO change_positions (dkey, id, table_id, pos, txn, at, n)
  SELECT d, i, t, p, x, ` + changeAtOf + `, n
  FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::integer[]) AS v(d, i, t, p, x, a, n))
UPDATE change_counter SET last = $8::bigint, visible = $8::bigint, scanned = $9, gaps = $10, gap_xmax = $11
RETURNING CASE WHEN $12 THEN pg_notify('` + feedChannel + `', $8::bigint::text) END`

	sqlSetLast    = `UPDATE change_counter SET last = $1`
	sqlSetVisible = `UPDATE change_counter SET visible = $1 WHERE visible < $1`

	// feedChannel is the NOTIFY channel on which the sequencer tells the
	// replicas' readers that positions became visible.
	feedChannel = "pgtables_changes"
	sqlNotify   = `SELECT pg_notify('` + feedChannel + `', $1::text)`
	sqlListen   = `LISTEN ` + feedChannel

	// sequenceChunk bounds the changes one sequencer transaction numbers
	// (it reads more when a transaction's changes straddle its end).
	sequenceChunk = 5000
)

// errSequencerBusy: another sequencer holds the lock.
var errSequencerBusy = errors.New("another sequencer is at work")

// errPageCut: a run numbered nothing of a full page, cut inside a
// transaction that began at its start.
var errPageCut = errors.New("the page of changes ends inside its first transaction")

// unsequenced is a change row waiting for its positions: its key, its
// transaction's tag and when that transaction began (the row's at), its
// table, how many changes it holds (n: a batch's, migration 0009; else
// 1); direct: a row without a pending row (0008), and then last: its
// transaction's last change.
type unsequenced struct {
	dkey, id, tag int64
	at            int64 // microseconds since 1970 (changeAt)
	tableID       int64
	n             int32
	direct, last  bool
}

// A watermark is what the sequencer of one PostgreSQL knows of the change
// rows without pending rows: the rows with ids above scanned are yet to be
// read; of the ids up to it, those in gaps were not visible when read (or
// were rows left for a later run), each with gapXmax, the bound of the run
// that put it there (a transaction id above that of every transaction
// that could hold it); every other id up to scanned is numbered, or never
// held such a row.
type watermark struct {
	scanned       int64
	gaps, gapXmax []int64
}

// A scan is what a run read: direct, the rows of sqlScanChanges in id
// order (those above scanned cut at the limit when full; foreign ones,
// with pending rows, have direct false), with its snapshot's xmin and its
// bound, the run's transaction id, taken after the snapshot; pending, the
// rows of change_pending in id order, read up to pendingEnd when that page
// was cut at the limit (0: not cut).
type scan struct {
	direct      []unsequenced
	full        bool
	xmin, bound int64
	pending     []unsequenced
	pendingEnd  int64
}

// plan returns what a run numbers of what it read, in id order, and the
// watermark after it. Every transaction's rows are numbered in one run:
// when a page was cut, a transaction whose last row (direct rows say
// which is their transaction's last) was not read, and everything from
// its first row on, wait for a later run, so that no transaction is
// numbered ahead of one that committed before it began. Pending rows
// beyond a cut page of them were not read: nothing after it is numbered.
func (w watermark) plan(sc scan) (take []unsequenced, next watermark) {
	rows := make([]unsequenced, 0, len(sc.direct)+len(sc.pending))
	for _, r := range sc.direct {
		if r.direct {
			rows = append(rows, r)
		}
	}
	rows = append(rows, sc.pending...)
	slices.SortFunc(rows, func(a, b unsequenced) int { return cmp.Compare(a.id, b.id) })
	cut := int64(math.MaxInt64)
	if sc.pendingEnd > 0 {
		cut = sc.pendingEnd + 1
	}
	if sc.full || sc.pendingEnd > 0 {
		type span struct {
			first, last int64
			ended       bool
		}
		tags := make(map[int64]*span)
		for _, r := range rows {
			t := tags[r.tag]
			if t == nil {
				t = &span{first: r.id}
				tags[r.tag] = t
			}
			t.last = r.id
			t.ended = t.ended || !r.direct || r.last || !sc.full
		}
		for _, t := range tags {
			if !t.ended {
				cut = min(cut, t.first)
			}
		}
		// A transaction with rows on both sides of the cut waits too.
		for moved := true; moved; {
			moved = false
			for _, t := range tags {
				if t.first < cut && t.last >= cut {
					cut, moved = t.first, true
				}
			}
		}
	}
	taken := make(map[int64]bool)
	for _, r := range rows {
		if r.id >= cut {
			break
		}
		take = append(take, r)
		if r.direct {
			taken[r.id] = true
		}
	}

	// Never nil: the columns are NOT NULL.
	next = watermark{scanned: w.scanned, gaps: []int64{}, gapXmax: []int64{}}
	found := make(map[int64]bool, len(sc.direct))
	for _, r := range sc.direct {
		found[r.id] = true
		if r.id > w.scanned {
			next.scanned = max(next.scanned, min(r.id, cut-1))
		}
	}
	keep := func(id, xmax int64) {
		next.gaps = append(next.gaps, id)
		next.gapXmax = append(next.gapXmax, xmax)
	}
	direct := make(map[int64]bool, len(sc.direct))
	for _, r := range sc.direct {
		direct[r.id] = r.direct
	}
	for i, g := range w.gaps {
		switch {
		case taken[g] || (found[g] && !direct[g]):
			// Numbered now, or a row with a pending row.
		case found[g]:
			keep(g, w.gapXmax[i]) // left for a later run
		case w.gapXmax[i] > sc.xmin:
			keep(g, w.gapXmax[i]) // its transaction may still commit
		}
	}
	for id := w.scanned + 1; id <= next.scanned; id++ {
		if !found[id] {
			keep(id, sc.bound)
		}
	}
	return take, next
}

// sequenceOnce numbers the committed changes that have no position yet, up
// to about sequenceChunk of them, and makes them visible to readers. It
// returns how many it numbered and whether more may be waiting;
// errSequencerBusy when another sequencer is at it, unless wait is set:
// then it waits for that one to finish.
//
// A run is two round trips on one connection, its transaction begun by
// the first and committed by the second: what a run costs is mostly per
// statement and round trip, not per change (at 20 runs a second, several
// times its changes' own cost at a few hundred writes a second).
func (s *Store) sequenceOnce(ctx context.Context, wait bool) (int, bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, false, classify(fmt.Errorf("sequence changes: %w", err))
	}
	defer conn.Release()
	var r sequenced
	for limit := sequenceChunk; ; limit *= 2 {
		r, err = s.sequenceOn(ctx, conn.Conn(), wait, limit)
		if conn.Conn().PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, rerr := conn.Exec(rctx, "ROLLBACK"); rerr != nil {
				_ = conn.Conn().Close(rctx)
			}
			cancel()
		}
		// A page cut inside a transaction that began at its start: read
		// more, in a run of its own (its scan must come before its
		// transaction id).
		if !errors.Is(err, errPageCut) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, errSequencerBusy) {
			return 0, false, err
		}
		return 0, false, classify(fmt.Errorf("sequence changes: %w", err))
	}
	published := r.published
	if r.visible < r.last {
		b := &pgx.Batch{}
		b.Queue(sqlSetVisible, r.last)
		b.Queue(sqlNotify, strconv.FormatInt(r.last, 10))
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return r.n, r.more, classify(fmt.Errorf("publish changes: %w", err))
		}
		published = true
	}
	if published {
		s.feed.wake()
	}
	return r.n, r.more, nil
}

// sequenced is what a sequencer run did: n changes numbered, last and
// visible of change_counter after it, and whether it published them.
type sequenced struct {
	n             int
	more          bool
	last, visible int64
	published     bool
}

// sequenceOn runs sequenceOnce's transaction on conn, reading up to limit
// rows of each kind, leaving it open when it fails.
func (s *Store) sequenceOn(ctx context.Context, conn *pgx.Conn, wait bool, limit int) (sequenced, error) {
	var r sequenced
	distributed := s.distributed.Load()
	lock := sqlLockFeed
	if wait {
		lock = sqlLockFeedWait
	}
	// On Citus every change row takes this way (changes_citus.go):
	// every run adopts, before its scan of the pending rows. On one
	// PostgreSQL in a transaction of its own, committed before the run's
	// begins: the adoption writes, and a run must not have its
	// transaction id before its scan's snapshot.
	adopt := wait || distributed || s.feed.adoptDue()
	b := &pgx.Batch{}
	if adopt && !distributed {
		b.Queue("BEGIN")
		b.Queue(sqlAdoptChanges)
		b.Queue("COMMIT")
	}
	b.Queue("BEGIN")
	// The scan's estimates grow with changes, which it reads a few rows
	// of by the primary key: past jit_above_cost PostgreSQL compiled it
	// on every run, seconds of CPU each (pgtables-bench, 50k changes).
	// And it does not know how few: estimating a third of changes above
	// the watermark, fewer than its limit, it planned a sequential scan
	// of all of them and a sort, on most runs while changes held some
	// 10,000 to 30,000 rows (1,442 buffers a run over a bench's 945 runs,
	// 10 with the index), as a bench's fresh database does.
	b.Queue(sqlRunSettings)
	head := b.Len() // statements before the lock's, without results
	b.Queue(lock)
	b.Queue(sqlFeedNumbering)
	if adopt && distributed {
		b.Queue(sqlAdoptChanges)
	}
	queueScan(b, limit, distributed)
	if !distributed {
		b.Queue(sqlRunXid)
	}
	br := conn.SendBatch(ctx, b)
	var w watermark
	var sc scan
	var locked bool
	var err error
	for range head {
		if err == nil {
			_, err = br.Exec()
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(&locked)
		if err == nil && !locked {
			err = errSequencerBusy
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(&r.last, &r.visible, &w.scanned, &w.gaps, &w.gapXmax)
	}
	if err == nil && adopt && distributed {
		_, err = br.Exec()
	}
	if err == nil {
		sc, err = readScan(br, w, limit, distributed)
	}
	if err == nil && !distributed {
		err = br.QueryRow().Scan(&sc.bound)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}
	if len(sc.pending) == limit {
		if err := extendPending(ctx, conn, &sc, distributed); err != nil {
			return r, err
		}
	}
	take, next := w.plan(sc)
	cut := sc.full || len(sc.pending) >= limit
	if cut && len(take) == 0 {
		return r, errPageCut
	}
	r.more = cut
	b = &pgx.Batch{}
	direct, pending, last := numberChanges(take, r.last)
	if p := pending; len(p.ids) > 0 {
		b.Queue(sqlNumberChanges, p.dkeys, p.ids, p.pos, p.txns)
	}
	r.n = int(last - r.last)
	r.last = last
	switch {
	case distributed:
		if r.n > 0 {
			b.Queue(sqlSetLast, r.last)
		}
	case r.n > 0 || next.scanned != w.scanned || !slices.Equal(next.gaps, w.gaps):
		// One PostgreSQL commits the numbering at once: it may publish
		// it in the same transaction.
		d := direct
		b.Queue(sqlNumberDirect, d.dkeys, d.ids, d.tables, d.pos, d.txns, d.ats, d.ns, r.last, next.scanned, next.gaps, next.gapXmax, r.n > 0)
		r.visible = r.last
		r.published = r.n > 0
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return r, err
	}
	return r, nil
}

// queueScan queues the statement that reads what a run may number (see
// readScan).
func queueScan(b *pgx.Batch, limit int, distributed bool) {
	if distributed {
		b.Queue(sqlUnsequenced, limit)
		return
	}
	b.Queue(sqlScanChanges, limit)
}

// readScan reads what queueScan queued: up to limit pending rows and, on
// one PostgreSQL, the change rows above the watermark w (up to limit) and
// in its gaps.
func readScan(br pgx.BatchResults, w watermark, limit int, distributed bool) (scan, error) {
	var sc scan
	rows, err := br.Query()
	if err != nil {
		return sc, err
	}
	if distributed {
		sc.pending, err = collectUnsequenced(rows)
		return sc, err
	}
	// Nullable values, not pointers: a pointer destination allocates
	// its value on every row.
	var (
		pending, last          pgtype.Bool
		id, dkey, tableID, tag pgtype.Int8
		at                     pgtype.Int8
		n                      pgtype.Int4
		above                  int
	)
	_, err = pgx.ForEachRow(rows, []any{&sc.xmin, &pending, &id, &dkey, &tableID, &tag, &at, &last, &n}, func() error {
		if !id.Valid {
			return nil // none: the snapshot alone
		}
		r := unsequenced{dkey: dkey.Int64, id: id.Int64, tag: tag.Int64, at: at.Int64, tableID: tableID.Int64, n: n.Int32}
		switch {
		case pending.Bool:
			sc.pending = append(sc.pending, r)
			return nil
		case last.Valid:
			r.direct, r.last = true, last.Bool
		}
		if r.id > w.scanned {
			above++
		}
		sc.direct = append(sc.direct, r)
		return nil
	})
	if err != nil {
		return sc, err
	}
	byID := func(a, b unsequenced) int { return cmp.Compare(a.id, b.id) }
	slices.SortFunc(sc.direct, byID)
	slices.SortFunc(sc.pending, byID)
	sc.full = above == limit
	return sc, nil
}

// extendPending adds to a full page of pending rows the rest of the
// transactions it has begun. On one PostgreSQL they only show plan which
// transactions to leave for a later run: nothing after the page is read.
func extendPending(ctx context.Context, conn *pgx.Conn, sc *scan, distributed bool) error {
	end := sc.pending[len(sc.pending)-1].id
	if !distributed {
		sc.pendingEnd = end
	}
	tags := make([]int64, 0, 64)
	seen := make(map[int64]bool)
	for _, r := range sc.pending {
		if !seen[r.tag] {
			seen[r.tag] = true
			tags = append(tags, r.tag)
		}
	}
	rows, err := conn.Query(ctx, sqlUnsequencedOfTags, tags, end)
	if err != nil {
		return err
	}
	more, err := collectUnsequenced(rows)
	sc.pending = append(sc.pending, more...)
	return err
}

func collectUnsequenced(rows pgx.Rows) ([]unsequenced, error) {
	r := unsequenced{n: 1}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (unsequenced, error) {
		err := row.Scan(&r.dkey, &r.id, &r.tag, &r.at, &r.tableID)
		return r, err
	})
}

// positionColumns are the columns of the positions of some rows: those
// of sqlNumberDirect, and of sqlNumberChanges (without tables, ats and
// ns, whose rows hold one change each).
type positionColumns struct {
	dkeys, ids, pos, txns, tables []int64
	ats                           []int64
	ns                            []int32
}

func (c *positionColumns) add(r unsequenced, pos, txn int64) {
	c.dkeys, c.ids, c.pos, c.txns = append(c.dkeys, r.dkey), append(c.ids, r.id), append(c.pos, pos), append(c.txns, txn)
	c.tables, c.ats, c.ns = append(c.tables, r.tableID), append(c.ats, r.at), append(c.ns, r.n)
}

// numberChanges gives rows, ordered by id, the positions after last: the
// rows of one tag together, tags in the order of their first row in
// feedOrder, a row of n changes n positions (it gets the last of them).
// It returns the positions of the direct rows and of the others (with
// pending rows), each in position order, and the last position given.
func numberChanges(rows []unsequenced, last int64) (direct, pending positionColumns, end int64) {
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
	for _, tag := range tags {
		first := last + 1
		for _, i := range byTag[tag] {
			last += int64(max(rows[i].n, 1))
			if rows[i].direct {
				direct.add(rows[i], last, first)
			} else {
				pending.add(rows[i], last, first)
			}
		}
	}
	return direct, pending, last
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
			if best < 0 || rows[s[0]].at < rows[streams[best][0]].at {
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
		_, more, err := s.sequenceOnce(ctx, wait)
		if errors.Is(err, errSequencerBusy) {
			return nil
		}
		if err != nil || !more {
			return err
		}
	}
}

// anyUnsequenced is the statement that tells whether changes wait for
// the sequencer.
func (s *Store) anyUnsequenced() string {
	if s.distributed.Load() {
		return sqlAnyUnsequencedCitus
	}
	return sqlAnyUnsequenced
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
			if err := s.pool.QueryRow(ctx, s.anyUnsequenced()).Scan(&work); err != nil && ctx.Err() == nil {
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
