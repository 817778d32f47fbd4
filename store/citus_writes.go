package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// On Citus a single write by table id (tableids.go) that goes to the node
// of its partition's shard (route.go) writes the shard's placement there
// as the plain table it is, as a point read does (citus_reads.go): through
// Citus, even on its fast path, the node plans the statement, deparses it
// for the shard and plans and runs that again on every call, about twice
// the CPU of the write itself (pg_stat_statements on a worker, upserts:
// 253 µs a call through Citus, of which about 125 for the shard's
// statement it runs locally).
//
// What Citus does for a write that matters here is to hold its shard's
// metadata lock in share mode, which a shard move or split takes in
// exclusive mode on every node while it stops the writes, catches up and
// changes the placements. A direct write takes the same lock first
// (lock_shard_metadata, the function a move calls on the workers), in the
// statement of its table's guard, then checks in a later statement, and
// so in a snapshot taken with the lock held, that the placement still is
// the node's. A write that committed before a move stopped the writes was
// copied by the move (by its logical replication, or it waited for the
// lock); one that comes after finds the placement gone from the node's
// metadata, the check fails with undefined_table, the implicit
// transaction with it, and the write goes through Citus instead, as it
// does when the placement's table is gone or the lock is refused (a user
// that does not own entities, a shard that a split removed). The direct writes of a table that share a
// round trip to a node share these two statements, which lock and check
// all their shards at once, in the order of their ids (the order in which
// a move locks its shards): the writes of one shard rarely share a round
// trip, and the two cost the node about as much as a write.

// sqlShareLock is lock_shard_metadata's lock mode of a write: ShareLock.
const sqlShareLock = "5"

// sqlPlacementsHere fails with undefined_table unless every shard of $1
// has its placement on this node: a name cast to regclass fails so when it
// names no relation, and the CASE keeps it from being cast at plan time.
const sqlPlacementsHere = `
SELECT (CASE WHEN (SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_local_group l ON l.groupid = p.groupid
  WHERE p.shardid = ANY ($1::bigint[]) AND p.shardstate = 1) = cardinality($1::bigint[])
  THEN NULL ELSE 'pgtables_placement_moved' END)::regclass`

// directWrites holds the statements of the direct writes of one shard
// (see above).
type directWrites struct {
	id       int64
	lockLive string // lock the shards' metadata; the table guard
	// changes is the node's placement of the shard of changes colocated
	// with the shard: a write records its change row there, in its own
	// statement (see recordedHere); "": none known.
	changes string
	stmts   sync.Map // a write's statement through Citus -> on the placement
}

func newDirectWrites(id int64, tables string) *directWrites {
	return &directWrites{
		id:       id,
		lockLive: `SELECT lock_shard_metadata(` + sqlShareLock + `, $2::bigint[]), 1 / count(*) FROM ` + tables + ` WHERE id = $1 AND deleted_at IS NULL`,
	}
}

// guard is the guard of a direct write of table id. The direct writes of
// one round trip to a node share it: it locks all their shards, in order,
// then checks all their placements.
func (d *directWrites) guard(id int64) *guard {
	return &guard{key: strconv.FormatInt(id, 10) + "/direct", sql: d.lockLive, args: []any{id}, check: sqlPlacementsHere, shard: d.id}
}

// statement returns sql, a write of entities, as a write of the shard's
// placement, which it names entities; the insert of its change row, if
// any (recordChange), goes to the placement of changes.
func (d *directWrites) statement(sql, shard string) string {
	if v, ok := d.stmts.Load(sql); ok {
		return v.(string)
	}
	on := sql
	for _, verb := range [...]string{"INSERT INTO entities ", "UPDATE entities ", "DELETE FROM entities "} {
		if i := strings.Index(on, verb); i >= 0 {
			head := verb[:len(verb)-len("entities ")]
			on = on[:i] + head + shard + " AS entities " + on[i+len(verb):]
			break
		}
	}
	if d.changes != "" {
		on = strings.Replace(on, "INSERT INTO changes ", "INSERT INTO "+d.changes+" ", 1)
	}
	d.stmts.Store(sql, on)
	return on
}

// recordedHere returns the statement, arguments and destinations of a
// direct write whose change row goes in its own statement, to the
// placement of changes on the same node (recordChange's form, a plain
// statement there): none of the second statement through Citus, nor
// the explicit transaction, that a change row takes after a write through
// Citus (changes_citus.go). ok is false when the write has no change, or
// no such placement is known, or it is a delete (whose statement answers
// the change's columns alone).
func (d *directWrites) recordedHere(c *pendingChange, sql string, args, dest []any) (string, []any, []any, bool) {
	if c == nil || c.here == "" || d.changes == "" {
		return sql, args, dest, false
	}
	return c.here, append(args[:len(args):len(args)], c.tag), dest[:len(dest)-len(c.dest())], true
}

// directRefused reports the failure of a direct write that changed
// nothing and may go through Citus: its guard failed other than on its
// table (the placement is not the node's, the lock was refused, its shard
// is no longer in the node's metadata after a split), or the placement's
// table is gone.
func directRefused(err error) bool {
	var guardErr *shardGuardError
	if errors.As(err, &guardErr) {
		return !tableGone(err) && !unavailable(err)
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable
}

// writeGuarded runs a single write by table id, whose statement takes the
// id as $1 (args[0], set here), after its table's guard: on the placement
// of the partition's shard when its node has it (see above), else through
// Citus. With dest nil it is an Exec, whose command tag it returns.
func (s *Store) writeGuarded(ctx context.Context, account, lt string, w *Write, sql string, args []any, dest []any) (pgconn.CommandTag, error) {
	var n *node
	var sr shardRange
	if rt := s.router.Load(); rt != nil {
		n, sr, _ = rt.placeRange(distributionKey(account, lt, w.PartitionKey))
	}
	key := writeKey(account, lt, w)
	var tag pgconn.CommandTag
	err := s.withTableID(ctx, account, lt, n, func(_, writes *combiner, id int64) error {
		args[0] = id
		submit := func(sql string, args, dest []any, g *guard, change *pendingChange) error {
			op := &combined{key: key, sql: sql, args: args, scan: dest, guard: g, change: change, done: make(chan struct{})}
			err := writes.submit(ctx, op)
			tag = op.tag
			return err
		}
		if d := sr.direct; d != nil && n != nil && writes == n.writes {
			sql, args, dest, here := d.writes.recordedHere(w.change, sql, args, dest)
			change := w.change
			if here {
				change = nil
			}
			if err := submit(d.writes.statement(sql, d.shard), args, dest, d.writes.guard(id), change); !directRefused(err) {
				return err
			}
		}
		return submit(sql, args, dest, writes.tableGuard(id), w.change)
	})
	return tag, err
}
