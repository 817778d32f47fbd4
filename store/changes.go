package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The change feed: every entity write of an account whose feed is on
// records a change row (migration 0006) in the statement that writes the
// entity, so that the change commits, or rolls back, with the write and
// costs no round trip. On Citus, where that statement is not routed, the
// change row follows the write in its transaction instead
// (changes_citus.go). The sequencer (changes_sequence.go) later gives the
// committed rows their feed positions, in change_positions (0007), never
// touching the change rows again (on one PostgreSQL; 0008); readers
// (changes_read.go) page through the positions and join the rows.

// ChangeFeedConfig configures the change feed; the zero value has the
// feed on for every account with DefaultChangeRetention.
type ChangeFeedConfig struct {
	// Off switches the feed off for every account: no change rows are
	// written and reads answer ErrChangeFeedOff.
	Off bool
	// OffOnCitus switches the feed off where entities are distributed
	// (Citus): there the change rows of batches, deletes and writes
	// through the coordinator are statements of their own after the
	// writes, and the sequencer's runs are statements on every shard and
	// a distributed commit: a quarter to four fifths more CPU a single write, twice
	// a batch's (README: Change feed).
	OffOnCitus bool
	// OffAccounts are accounts whose feed is off.
	OffAccounts []string
	// Retention is how long changes are kept (default
	// DefaultChangeRetention); older ones are purged in the background.
	Retention time.Duration
}

// DefaultChangeRetention is how long changes are kept unless configured.
const DefaultChangeRetention = 24 * time.Hour

// Errors of the change feed.
var (
	// ErrChangeFeedOff: the feed is switched off for the account.
	ErrChangeFeedOff = errors.New("change feed is off for the account")
	// ErrInvalidCursor: a cursor that is malformed or of another table.
	ErrInvalidCursor = errors.New("invalid change feed cursor")
	// ErrCursorExpired: the changes after the cursor are past retention;
	// see CursorExpiredError.
	ErrCursorExpired = errors.New("change feed cursor expired")
)

// CursorExpiredError is ErrCursorExpired with the oldest cursor that
// still reads every retained change of the table.
type CursorExpiredError struct{ Oldest string }

func (e *CursorExpiredError) Error() string {
	return fmt.Sprintf("%v: the oldest retained cursor is %s", ErrCursorExpired, e.Oldest)
}

// Unwrap returns ErrCursorExpired.
func (e *CursorExpiredError) Unwrap() error { return ErrCursorExpired }

// feedOn reports whether the account's writes record changes.
func (s *Store) feedOn(account string) bool {
	return s.ChangeFeedAnywhere() && !s.feedOff[account]
}

// ChangeFeedAnywhere reports whether the feed may be on for some account,
// so that the sequencer (RunChangeFeed) has work; known once the schema is
// migrated. When it is off everywhere, as on Citus by default, the server
// does not run the sequencer: on Citus its once-a-second look for changes
// is a statement on every shard of two tables, through the coordinator,
// which opens connections to the workers for it, and it cost the three
// nodes about 40 ms of CPU a second with no change to find.
func (s *Store) ChangeFeedAnywhere() bool {
	c := s.opts.ChangeFeed
	return !c.Off && !(c.OffOnCitus && s.distributed.Load())
}

// ChangeFeedOn reports whether the account's change feed is on.
func (s *Store) ChangeFeedOn(account string) bool { return s.feedOn(account) }

// What a write did to its entity, as the change rows' op column holds it
// (the values of Op). An upsert tells an insert from an update by the new
// row version's xmax, which only ON CONFLICT DO UPDATE sets.
const (
	changeInsert        = `1`
	changeReplace       = `2`
	changeMerge         = `3`
	changeDelete        = `4`
	changeUpsertReplace = `CASE WHEN xmax::text = '0' THEN 1 ELSE 2 END`
	changeUpsertMerge   = `CASE WHEN xmax::text = '0' THEN 1 ELSE 3 END`
)

// recordChange turns an entity write statement into one that also records
// its change: the write runs in a CTE returning the entity row, and the
// statement inserts the change row from it, with the transaction's tag
// (argument tagArg) and last, the expression that tells whether the row is
// its transaction's last change (changes_sequence.go), then answers what
// the write's own RETURNING did (1 for a write without one, whose rows are
// counted).
func recordChange(sql, op string, tagArg int, last string) string {
	body, out := sql, "1"
	if i := strings.LastIndex(sql, "RETURNING"); i >= 0 {
		body, out = sql[:i], strings.TrimSpace(sql[i+len("RETURNING"):])
	}
	values := `ts, xmin::text::bigint, props`
	if op == changeDelete {
		values = `NULL::bigint, NULL::bigint, NULL::jsonb`
	}
	var b strings.Builder
	b.WriteString("WITH w AS (")
	b.WriteString(strings.TrimRight(body, " \n"))
	b.WriteString("\nRETURNING xmin, xmax, ts, table_id, dkey, pk, rk, props),\nc AS (\nINSERT INTO changes (dkey, table_id, tag, last, op, pk, rk, ts, xid, props)\nSELECT dkey, table_id, $")
	b.WriteString(strconv.Itoa(tagArg))
	b.WriteString("::bigint, ")
	b.WriteString(last)
	b.WriteString(", ")
	b.WriteString(op)
	b.WriteString(", pk, rk, ")
	b.WriteString(values)
	b.WriteString(" FROM w)\nSELECT ")
	b.WriteString(out)
	b.WriteString(" FROM w")
	return b.String()
}

// changeStatement is a statement with its change recorded, built once per
// statement, op and number of arguments.
func (s *Store) changeStatement(sql, op string, tagArg int, last string) string {
	key := sql + "\x00" + op + "\x00" + strconv.Itoa(tagArg) + "\x00" + last
	if v, ok := s.changeSQL.Load(key); ok {
		return v.(string)
	}
	v := recordChange(sql, op, tagArg, last)
	s.changeSQL.Store(key, v)
	return v
}

// captured returns the statement and arguments of an entity write of
// account: with its change recorded when the account's feed is on.
// On Citus the change row is inserted after the write instead, from what
// the write returns (changes_citus.go): w.change.
func (s *Store) captured(account string, w *Write, op, sql string, args []any) (string, []any) {
	w.change = nil
	if s.distributed.Load() && s.feedOn(account) {
		sql, w.change = s.citusCaptured(w, op, sql, len(args))
		return sql, args
	}
	if !s.feedOn(account) {
		return sql, args
	}
	tag := w.txn
	if tag == 0 {
		tag = newChangeTag()
	}
	last := "$" + strconv.Itoa(len(args)+2) + "::boolean"
	return s.changeStatement(sql, op, len(args)+1, last), append(args, tag, !w.more)
}

// capturedBatch returns sqlInsertMany's statement and arguments for
// account, with the batch's changes recorded in one change row when the
// account's feed is on (sqlInsertManyCaptured).
func (s *Store) capturedBatch(account string, tag int64, args []any) (string, []any) {
	if !s.feedOn(account) {
		return sqlInsertMany, args
	}
	return sqlInsertManyCaptured, append(args, tag)
}

// sqlInsertManyCaptured is sqlInsertMany recording the batch's changes in
// one change row (migration 0009): the row keys and entities as the batch
// holds them ($6, $8, in its order), with the pk, ts, xid and table of
// every one of them, and no row when nothing was inserted. A row per
// entity cost the feed more than the insert itself: a heap row with the
// entity again and an index entry each, and a position row with two
// index entries each.
const sqlInsertManyCaptured = `
WITH w AS (` + sqlInsertManyBody + `
RETURNING rk, xmin, table_id),
c AS (
INSERT INTO changes (dkey, table_id, tag, last, op, pk, rk, ts, xid, rks, entities)
SELECT $3, table_id, $9::bigint, true, ` + changeInsert + `, $4, '', $5, xmin::text::bigint, $6::text[], $8::jsonb[]
FROM w LIMIT 1)
SELECT rk, xmin FROM w`

// newChangeTag returns the tag of a transaction's changes: the sequencer
// keeps the changes of one tag together. Random, so that replicas need no
// coordination; a collision of two concurrent transactions would only put
// their changes next to each other.
func newChangeTag() int64 { return rand.Int64() | 1 }
