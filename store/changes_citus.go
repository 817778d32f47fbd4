package store

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Capturing changes on Citus. recordChange's single statement, a
// data-modifying CTE that writes the entity and inserts its change row,
// is never router-planned by Citus, even with both rows on one shard: the
// CTE runs as a subplan whose result is broadcast to every node, the
// change row's INSERT ... SELECT reads it back, and the write becomes a
// distributed transaction with a two-phase commit on all three nodes.
// That tripled the nodes' CPU per write (pgbench on a worker: 2,900 µs
// against 365 for the bare insert) and gave the coordinator work on every
// write.
//
// So on Citus a write returns what its change row needs (the write's
// RETURNING, extended) and the change rows are inserted after it, in the
// same transaction on the same node: the write, in an explicit
// transaction, goes in one round trip, and the change rows of every write
// of that round trip (see combiner) go in one statement with the COMMIT in
// a second one. Both are statements on the node's own shards, executed
// locally: no other node takes part. One multi-row insert for the round
// trip's writes costs the node about 100 µs a write; a change row per
// write, as its own statement, about 200 (pgbench on a worker, four writes
// a round trip).
//
// A single write that runs on its shard's placement (citus_writes.go),
// where statements are plain PostgreSQL ones on the node's own tables,
// records its change row as on one PostgreSQL, in the write's statement,
// into the colocated placement of changes (pendingChange.here): no second
// statement through Citus, no explicit transaction. Deletes, batches and
// writes through Citus keep the row after the write.
//
// The change rows take migration 0006's form, with the transaction's tag
// and no pending row, which the sequencer adopts on every run on Citus
// (sqlAdoptChanges) as it adopts an older release's rows. A pending row
// beside each change row needs the change row's id, which the node's
// sequence gives only as the row is inserted: written in the same
// statement it is a data-modifying CTE again, and after it, a third round
// trip per write.

// The change rows of a round trip go in one multi-row INSERT ... VALUES,
// rows in write order (their ids follow it). Citus routes each row to its
// shard; an INSERT ... SELECT FROM unnest of arrays, one statement for any
// number of rows, runs its SELECT and then a COPY into the shards, and
// cost a worker about three times as much for one row.
const (
	insertChangesHead = `INSERT INTO changes (dkey, table_id, tag, op, pk, rk, ts, xid, props) VALUES `
	changeColumns     = 9
)

// insertChangesSQL is the statement for n change rows, built once for
// each n.
func insertChangesSQL(n int) string {
	if n < len(insertChangesSQLs) {
		if v := insertChangesSQLs[n].Load(); v != nil {
			return *v
		}
	}
	var b strings.Builder
	b.WriteString(insertChangesHead)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range changeColumns {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(i*changeColumns + j + 1))
			b.WriteString(changeColumnTypes[j])
		}
		b.WriteByte(')')
	}
	v := b.String()
	if n < len(insertChangesSQLs) {
		insertChangesSQLs[n].Store(&v)
	}
	return v
}

// changeColumnTypes are the casts of the VALUES' parameters.
var changeColumnTypes = [changeColumns]string{"::bigint", "::bigint", "::bigint", "::smallint", "", "", "::bigint", "::bigint", "::jsonb"}

// insertChangesSQLs caches insertChangesSQL's statements for up to a
// batch's rows (immutable strings, shared by every store).
var insertChangesSQLs [101]atomic.Pointer[string]

// What a captured write returns beyond its own RETURNING, for its change
// row: the row's table, distribution key, whether ON CONFLICT updated it
// (xmax), and the entity after the change; a delete only the first two.
const (
	citusChangeReturning       = `, table_id, dkey, xmax::text::bigint, ts, xmin::text::bigint, props`
	citusChangeReturningDelete = ` RETURNING table_id, dkey`
)

// A pendingChange is the change row of one write on Citus, filled from
// the write's RETURNING (dest) and inserted once the write succeeded.
type pendingChange struct {
	tag    int64
	op     int16 // for an upsert, the op when the entity existed
	upsert bool  // an insert when the row was new (xmax 0)
	pk, rk string

	tableID, dkey, xmax, ts, xid int64
	props                        []byte

	// here is the write with its change row recorded in the same
	// statement, in 0006's form (last NULL, adopted by the sequencer),
	// for a direct write (citus_writes.go: recordedHere), taking the
	// tag as its last argument; "": none (a delete).
	here string
}

// dest returns the scan destinations of the columns the write returns for
// its change row (after its own).
func (c *pendingChange) dest() []any {
	if c.op == 4 {
		return []any{&c.tableID, &c.dkey}
	}
	return []any{&c.tableID, &c.dkey, &c.xmax, &c.ts, &c.xid, &c.props}
}

// changeOps maps recordChange's op expressions to the change row's op.
var changeOps = map[string]struct {
	op     int16
	upsert bool
}{
	changeInsert:        {1, false},
	changeReplace:       {2, false},
	changeMerge:         {3, false},
	changeDelete:        {4, false},
	changeUpsertReplace: {2, true},
	changeUpsertMerge:   {3, true},
}

// citusCaptured returns sql extended to return its change row's columns,
// and the change to fill from them.
func (s *Store) citusCaptured(w *Write, op, sql string, nargs int) (string, *pendingChange) {
	o := changeOps[op]
	c := &pendingChange{tag: w.txn, op: o.op, upsert: o.upsert, pk: w.PartitionKey, rk: w.RowKey}
	if c.tag == 0 {
		c.tag = newChangeTag()
	}
	if op != changeDelete {
		c.here = s.changeStatementHere(sql, op, nargs+1)
	}
	key := "citus\x00" + op + "\x00" + sql
	if v, ok := s.changeSQL.Load(key); ok {
		return v.(string), c
	}
	// Every write but a delete ends in its RETURNING.
	v := strings.TrimRight(sql, " \n") + citusChangeReturning
	if c.op == 4 {
		v = strings.TrimRight(sql, " \n") + citusChangeReturningDelete
	}
	s.changeSQL.Store(key, v)
	return v, c
}

// changeStatementHere is changeStatement's statement in 0006's form
// (last NULL), for a direct write (pendingChange.here): with the change
// row's id from the node's sequence and its at, which the placement's
// table, unlike changes, has no defaults for.
func (s *Store) changeStatementHere(sql, op string, tagArg int) string {
	key := "here\x00" + op + "\x00" + strconv.Itoa(tagArg) + "\x00" + sql
	if v, ok := s.changeSQL.Load(key); ok {
		return v.(string)
	}
	v := recordChange(sql, op, tagArg, "NULL::boolean")
	v = strings.Replace(v, "INSERT INTO changes (dkey, ", "INSERT INTO changes (id, at, dkey, ", 1)
	v = strings.Replace(v, "\nSELECT dkey, table_id, $", "\nSELECT nextval('changes_id_seq'), now(), dkey, table_id, $", 1)
	s.changeSQL.Store(key, v)
	return v
}

// insertChangesArgs returns insertChangesSQL's statement and arguments
// for changes.
func insertChangesArgs(changes []*pendingChange) (string, []any) {
	args := make([]any, 0, len(changes)*changeColumns)
	for _, c := range changes {
		op := c.op
		if c.upsert && c.xmax == 0 {
			op = 1
		}
		if op == 4 {
			args = append(args, c.dkey, c.tableID, c.tag, op, c.pk, c.rk, nil, nil, nil)
		} else {
			args = append(args, c.dkey, c.tableID, c.tag, op, c.pk, c.rk, c.ts, c.xid, c.props)
		}
	}
	return insertChangesSQL(len(changes)), args
}

// sqlInsertManyChanges inserts a batch's change rows, given as arrays in
// write order: for a hundred rows this costs the node less than VALUES
// (pgtables-bench batch-insert on the 3-node cluster: 140 µs of CPU an
// entity against 166), where for one it costs three times as much.
const sqlInsertManyChanges = `
INSERT INTO changes (dkey, table_id, tag, op, pk, rk, ts, xid, props)
SELECT $1::bigint, $2::bigint, $3::bigint, 1::smallint, $4, r.rk, $5::bigint, r.xid, r.props
FROM unnest($6::text[], $7::bigint[], $8::jsonb[]) WITH ORDINALITY AS r(rk, xid, props, i)
ORDER BY r.i`

// insertManyChanges inserts the change rows of a batch of inserts of one
// partition and transaction (insertMany), in their order.
func insertManyChanges(ctx context.Context, q querier, changes []*pendingChange) error {
	if len(changes) < 10 {
		return insertChanges(ctx, q, changes...)
	}
	c := changes[0]
	rks, xids, props := make([]string, len(changes)), make([]int64, len(changes)), make([][]byte, len(changes))
	for i, c := range changes {
		rks[i], xids[i], props[i] = c.rk, c.xid, c.props
	}
	_, err := q.Exec(ctx, sqlInsertManyChanges, c.dkey, c.tableID, c.tag, c.pk, c.ts, rks, xids, props)
	return err
}

// insertChanges inserts the changes of writes that ran in q's transaction.
func insertChanges(ctx context.Context, q querier, changes ...*pendingChange) error {
	sql, args := insertChangesArgs(changes)
	_, err := q.Exec(ctx, sql, args...)
	return err
}

// citusSpacingFactor spaces the sequencer's runs on Citus by their cost:
// the pause after a run is at least this many times the run's duration,
// so that runs take at most a twentieth of the time. A run there is a
// statement on every shard and a commit on every node however few changes
// it numbers (each took 10-25 ms under load, at 13 runs a second), so
// fewer, larger runs cost less per change; on one PostgreSQL a run is
// cheap and Spacing alone applies.
const citusSpacingFactor = 19

// runSpacing is the least time between two sequencer runs while writes
// keep coming, after a run that took cost: Spacing, and on Citus
// citusSpacingFactor times cost, up to Poll.
func (s *Store) runSpacing(timing ChangeFeedTiming, cost time.Duration) time.Duration {
	if !s.distributed.Load() {
		return timing.Spacing
	}
	return max(timing.Spacing, min(timing.Poll, citusSpacingFactor*cost))
}
