package store

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/odata"
)

const (
	sqlFeedState   = `SELECT visible, purged FROM change_counter`
	sqlUnpublished = `SELECT visible < last FROM change_counter`

	// A row of a batch's changes (migration 0009) holds n of them, at the
	// positions up to its pos: each comes with its row key and entity
	// from the row's arrays, in their order. Positions after $2 are in
	// rows whose last position is: found in the index's order.
	sqlReadChanges = `
SELECT p.pos - p.n + coalesce(b.i, 1), p.txn, c.op, c.pk, coalesce(b.rk, c.rk), c.ts, c.xid, coalesce(b.props, c.props), p.at
FROM change_positions p JOIN changes c ON c.dkey = p.dkey AND c.id = p.id
LEFT JOIN LATERAL unnest(c.rks, c.entities) WITH ORDINALITY AS b(rk, props, i) ON true
WHERE p.table_id = $1 AND p.pos > $2 AND p.pos <= $3 AND p.pos - p.n + coalesce(b.i, 1) > $2
ORDER BY p.pos, b.i LIMIT $4`

	// The last of the expired positions that precede every unexpired
	// one among the next $4 after $1. A change's at is its write's, so a
	// long transaction's changes, numbered when it commits, can be older
	// than changes before them: purging up to the last expired position
	// would take those younger changes before their retention ends. The
	// condition on at outside the LIMIT: inside, a purge that has caught
	// up (no expired row left) read every retained position to find
	// none, once a minute, planned as a scan of the whole table.
	sqlExpiredEnd = `
WITH s AS MATERIALIZED (
  SELECT pos, at < now() - make_interval(secs => $3) AS expired FROM change_positions
  WHERE pos > $1 AND pos <= $2 ORDER BY pos LIMIT $4)
SELECT max(pos) FROM s
WHERE expired AND pos < coalesce((SELECT min(pos) FROM s WHERE NOT expired), $2 + 1)`
	// By the ids, through the primary key: a join would be planned as
	// a hash join over all of changes.
	sqlPurgeChanges = `
DELETE FROM changes
WHERE id = ANY(ARRAY(SELECT id FROM change_positions WHERE pos > $1 AND pos <= $2))`
	sqlPurgePositions = `DELETE FROM change_positions WHERE pos > $1 AND pos <= $2`
	sqlSetPurged      = `UPDATE change_counter SET purged = $1 WHERE purged < $1`
	sqlFeedPurged     = `SELECT purged, visible FROM change_counter`
	// A deleted table's changes go with its tombstone (purge.go).
	sqlPurgeTableChanges   = `DELETE FROM changes WHERE table_id = $1`
	sqlPurgeTablePositions = `DELETE FROM change_positions WHERE table_id = $1`
	sqlPurgeTablePending   = `DELETE FROM change_pending WHERE table_id = $1`
	changePurgeChunk       = 5000
	cursorVersion          = 1
	maxChangesPerRead      = 1000
)

// The cursors of the feed, what readers pass back to resume.
const (
	CursorNow    = "now"    // changes committed after the read
	CursorOldest = "oldest" // the oldest retained change
)

// Change is one entity change of the feed.
type Change struct {
	Cursor       string // resumes after this change
	Op           Op
	Txn          string // shared by the changes of one transaction
	PartitionKey string
	RowKey       string
	Timestamp    int64  // ticks: the entity's; for a delete, when it was written
	ETag         string // "" for a delete
	// Entity is the entity after the change, nil for a delete; its
	// properties in stored form.
	Entity *odata.Entity
}

// ChangePage is what a read of the feed returns.
type ChangePage struct {
	Changes []Change
	Cursor  string // resumes after the page
}

// String returns the feed's name of the operation: insert, replace,
// merge, delete.
func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpReplace:
		return "replace"
	case OpMerge:
		return "merge"
	case OpDelete:
		return "delete"
	}
	return "op" + strconv.Itoa(int(o))
}

// encodeCursor makes the token of position pos of table id: URL-safe
// base64 of a version byte and two varints, never "now" or "oldest".
func encodeCursor(tableID, pos int64) string {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64)
	b = append(b, cursorVersion)
	b = binary.AppendUvarint(b, uint64(tableID))
	b = binary.AppendUvarint(b, uint64(pos))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a token of encodeCursor.
func decodeCursor(s string) (tableID, pos int64, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 3 || b[0] != cursorVersion {
		return 0, 0, false
	}
	b = b[1:]
	t, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, false
	}
	b = b[n:]
	p, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) || t > 1<<62 || p > 1<<62 {
		return 0, 0, false
	}
	// One token per position: no padded varints, no stray bits.
	if encodeCursor(int64(t), int64(p)) != s {
		return 0, 0, false
	}
	return int64(t), int64(p), true
}

// Changes reads up to limit changes of account's table after cursor
// (CursorNow, CursorOldest or a token of an earlier page), in feed order.
// Errors: ErrChangeFeedOff, ErrTableNotFound, ErrInvalidCursor (malformed,
// or of another table), *CursorExpiredError. The read holds a connection
// only while it runs. Every change committed before the call is in the
// page or before the cursor: a reader reads its own writes.
func (s *Store) Changes(ctx context.Context, account, table, cursor string, limit int) (*ChangePage, error) {
	return s.changes(ctx, account, table, cursor, limit, true)
}

// ChangesWoken is Changes for a reader that waited and was woken
// (ChangeSignal): changes that a sequencer at work is numbering are left
// to it, which wakes the reader again when they are visible, so that the
// readers woken together do not queue for the sequencer one after another.
func (s *Store) ChangesWoken(ctx context.Context, account, table, cursor string, limit int) (*ChangePage, error) {
	return s.changes(ctx, account, table, cursor, limit, false)
}

func (s *Store) changes(ctx context.Context, account, table, cursor string, limit int, fresh bool) (*ChangePage, error) {
	if !s.feedOn(account) {
		return nil, ErrChangeFeedOff
	}
	if limit <= 0 || limit > maxChangesPerRead {
		limit = maxChangesPerRead
	}
	lt := tableKey(table)
	if fresh {
		// Every change committed before the read is in the page or
		// before the cursor ("now" included), which may wait for the
		// sequencer.
		if _, err := s.sequenceWaiting(ctx, true); err != nil {
			return nil, err
		}
		page, _, err := s.readChanges(ctx, account, lt, cursor, limit)
		return page, err
	}
	page, empty, err := s.readChanges(ctx, account, lt, cursor, limit)
	if err != nil || !empty {
		return page, err
	}
	// Nothing visible: changes may be waiting for a sequencer (none may
	// run in this process).
	if waited, err := s.sequenceWaiting(ctx, false); err != nil || !waited {
		return page, err
	}
	// The page's cursor, not the request's: "now" stays where it was.
	page, _, err = s.readChanges(ctx, account, lt, page.Cursor, limit)
	return page, err
}

// sequenceWaiting makes the committed changes visible, if some are not
// (not numbered yet, or numbered by a sequencer that has not published
// them yet), and reports whether some were not. With wait it waits for a
// sequencer at work, and then every change committed before the call is
// visible; without, it leaves the work to that one (which wakes the
// waiting readers when done), so that readers woken together do not queue
// for the sequencer's lock.
func (s *Store) sequenceWaiting(ctx context.Context, wait bool) (bool, error) {
	b := &pgx.Batch{}
	b.Queue(s.anyUnsequenced())
	b.Queue(sqlUnpublished)
	br := s.pool.SendBatch(ctx, b)
	var unsequenced, unpublished bool
	err := br.QueryRow().Scan(&unsequenced)
	if err == nil {
		err = br.QueryRow().Scan(&unpublished)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, classify(fmt.Errorf("read changes: %w", err))
	}
	if !unsequenced && !unpublished {
		return false, nil
	}
	return true, s.sequence(ctx, wait)
}

// readChanges reads a page in one snapshot: the table, the feed's state
// and the changes agree, and retention cannot purge changes between the
// check of the cursor and the read.
func (s *Store) readChanges(ctx context.Context, account, lt, cursor string, limit int) (page *ChangePage, empty bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(sqlLiveTableID, account, lt)
		b.Queue(sqlFeedState)
		br := tx.SendBatch(ctx, b)
		var tableID, visible, purged int64
		err := br.QueryRow().Scan(&tableID)
		if errors.Is(err, pgx.ErrNoRows) {
			br.Close()
			return ErrTableNotFound
		}
		if err == nil {
			err = br.QueryRow().Scan(&visible, &purged)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		var after int64
		switch cursor {
		case CursorNow, "":
			after = visible
		case CursorOldest:
			after = purged
		default:
			id, pos, ok := decodeCursor(cursor)
			if !ok || id != tableID {
				return ErrInvalidCursor
			}
			if pos < purged {
				return &CursorExpiredError{Oldest: encodeCursor(tableID, purged)}
			}
			after = pos
		}
		page = &ChangePage{Cursor: encodeCursor(tableID, after)}
		rows, err := tx.Query(ctx, sqlReadChanges, tableID, after, visible, limit)
		if err != nil {
			return err
		}
		var (
			pos, txn int64
			op       int16
			pk, rk   string
			ts, xid  *int64
			props    []byte
			at       time.Time
			scanInto = []any{&pos, &txn, &op, &pk, &rk, &ts, &xid, &props, &at}
		)
		_, err = pgx.ForEachRow(rows, scanInto, func() error {
			c := Change{Cursor: encodeCursor(tableID, pos), Op: Op(op), Txn: strconv.FormatInt(txn, 10), PartitionKey: pk, RowKey: rk, Timestamp: odata.Ticks(at)}
			if ts != nil && xid != nil && Op(op) != OpDelete {
				c.Timestamp = *ts
				c.ETag = formatETag(*ts, uint32(*xid), pk, rk)
				c.Entity = &odata.Entity{PartitionKey: pk, RowKey: rk, Timestamp: *ts, ETag: c.ETag, Stored: append([]byte(nil), props...)}
			}
			page.Changes = append(page.Changes, c)
			page.Cursor = c.Cursor
			return nil
		})
		return err
	})
	if err != nil {
		var expired *CursorExpiredError
		if errors.Is(err, ErrTableNotFound) || errors.Is(err, ErrInvalidCursor) || errors.As(err, &expired) {
			return nil, false, err
		}
		return nil, false, classify(fmt.Errorf("read changes: %w", err))
	}
	return page, len(page.Changes) == 0, nil
}

// PurgeChanges deletes changes past retention, a chunk per transaction,
// and returns how many it deleted.
func (s *Store) PurgeChanges(ctx context.Context) (int64, error) {
	var total int64
	for {
		var purged, visible int64
		if err := s.pool.QueryRow(ctx, sqlFeedPurged).Scan(&purged, &visible); err != nil {
			return total, classify(fmt.Errorf("purge changes: %w", err))
		}
		var end *int64
		if err := s.pool.QueryRow(ctx, sqlExpiredEnd, purged, visible, s.opts.ChangeFeed.Retention.Seconds(), changePurgeChunk).Scan(&end); err != nil {
			return total, classify(fmt.Errorf("purge changes: %w", err))
		}
		if end == nil {
			return total, nil
		}
		var n int64
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			// purged first: a reader that sees rows gone sees why.
			if _, err := tx.Exec(ctx, sqlSetPurged, *end); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, sqlPurgeChanges, purged, *end)
			if err != nil {
				return err
			}
			n = tag.RowsAffected()
			_, err = tx.Exec(ctx, sqlPurgePositions, purged, *end)
			return err
		})
		if err != nil {
			return total, classify(fmt.Errorf("purge changes: %w", err))
		}
		total += n
	}
}
