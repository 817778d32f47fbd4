package store

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtables/pgtables/odata"
)

// On Citus a point read names its table by the cached id (tableids.go)
// and goes to the node of its partition's shard (route.go), where it
// reads the shard's placement and the node's placement of tables as the
// plain tables they are there: one statement that PostgreSQL plans once
// per connection, which Citus leaves alone. Through Citus, even on its
// fast path, the same read costs the node about three times as much
// (pgbench on a worker, one client: 120 µs a read by id against 36 for
// the placements read directly, 250 for the join with tables by name):
// Citus plans, deparses and plans again the statement on every call.
//
// The statement checks in the same snapshot that its table id is live
// (the guard of tableids.go, failing with division_by_zero, so that the
// read goes again with the id of the table of that name now) and that the
// shard's placement is still the node's in Citus's metadata, which every
// node keeps. A shard moved or split since the placements were loaded is
// no longer the node's there, and the read goes through Citus instead
// (sqlGetByID, after the guard), as it does when the placement's table is
// gone: a placement that Citus keeps for a while after a move, no longer
// written to, is never read. Single writes run on the placement too,
// under the shard's metadata lock that keeps them from being lost in a
// move (citus_writes.go).

const (
	// sqlGetByID is a point read by the table's id through Citus, after
	// the table's guard: a statement of entities alone with the
	// distribution key, which takes Citus's fast path.
	sqlGetByID = `
SELECT ts, xmin, props FROM entities WHERE table_id = $1 AND dkey = $2 AND pk = $3 AND rk = $4`
)

// A directRead holds the statements of point reads on one shard's
// placement, on its node (see above).
type directRead struct {
	id      int64  // the shard's
	shard   string // its placement's table on the node
	tables  string // the node's placement of tables
	get     string // one key: live, here, ts, xmin, props
	getMany string // keys as arrays: position, then get's columns
	group   string // the merge group's prefix
	merge   merger
	writes  *directWrites // the single writes on the placement (citus_writes.go)
}

// newDirectRead is the directRead of shard id, named shard, on a node
// whose placement of tables is named tables.
func newDirectRead(id int64, shard, tables string) *directRead {
	// live is an output, or the planner would drop its division.
	const head = `
FROM (SELECT 1 / count(*) AS live FROM `
	here := `EXISTS (SELECT 1 FROM pg_dist_placement p JOIN pg_dist_local_group l ON l.groupid = p.groupid
  WHERE p.shardid = ` + strconv.FormatInt(id, 10) + ` AND p.shardstate = 1)`
	guard := tables + ` WHERE id = $1 AND deleted_at IS NULL) g`
	d := &directRead{
		id: id, shard: shard, tables: tables,
		get: `
SELECT g.live, ` + here + `, e.ts, e.xmin, e.props` + head + guard + `
LEFT JOIN ` + shard + ` e ON e.table_id = $1 AND e.dkey = $2 AND e.pk = $3 AND e.rk = $4`,
		// As sqlGetMany, the arrays in scalar subqueries keep one generic
		// plan. Each key is looked up by the primary key in a subquery
		// that OFFSET 0 keeps apart: joined, the planner may hash the
		// table's every row in the shard instead (seen with statistics
		// from before a load: thousands of rows read for a few keys).
		getMany: `
SELECT k.i, g.live, ` + here + `, e.ts, e.xmin, e.props` + head + guard + `
CROSS JOIN unnest((SELECT $2::bigint[]), (SELECT $3::text[]), (SELECT $4::text[])) WITH ORDINALITY AS k(dkey, pk, rk, i)
LEFT JOIN LATERAL (SELECT ts, xmin, props FROM ` + shard + `
  WHERE table_id = $1 AND dkey = k.dkey AND pk = k.pk AND rk = k.rk OFFSET 0) e ON true`,
		group:  "d" + strconv.FormatInt(id, 10) + "\x00",
		writes: newDirectWrites(id, tables),
	}
	d.merge = func(ops []*combined) (string, []any) {
		dkeys := make([]int64, len(ops))
		pks, rks := make([]string, len(ops)), make([]string, len(ops))
		for i, op := range ops {
			dkeys[i], pks[i], rks[i] = op.args[1].(int64), op.args[2].(string), op.args[3].(string)
		}
		return d.getMany, []any{ops[0].args[0], dkeys, pks, rks}
	}
	return d
}

// getEntityByID reads one entity on Citus (see above).
func (s *Store) getEntityByID(ctx context.Context, account, lt, pk, rk string) (*odata.Entity, error) {
	r := newPointReadByID(account, lt, pk, rk)
	var n *node
	var sr shardRange
	if rt := s.router.Load(); rt != nil {
		n, sr, _ = rt.placeRange(r.args[1].(int64))
	}
	err := s.withTableID(ctx, account, lt, n, func(reads, _ *combiner, id int64) error {
		if n != nil && reads == n.reads && sr.direct != nil {
			r.onShard(sr.direct, id)
			err := reads.submit(ctx, &r.op)
			if err == nil && r.here || err != nil && !shardGone(err) {
				return err
			}
			// The shard is no longer the node's: through Citus, which
			// knows where it is, until the placements are loaded again
			// (routeRefresh).
		}
		r.throughCitus(reads.tableGuard(id), id)
		return reads.submit(ctx, &r.op)
	})
	if errors.Is(err, ErrTableNotFound) {
		return nil, err
	}
	return r.entity(err)
}

// newPointReadByID is a read by table id, to be set up by onShard or
// throughCitus.
func newPointReadByID(account, lt, pk, rk string) *pointRead {
	r := &pointRead{byID: true}
	r.args = [5]any{nil, distributionKey(account, lt, pk), pk, rk}
	return r
}

// onShard sets r up as d's read of table id; the reads of one shard and
// table that share a round trip merge into one statement.
func (r *pointRead) onShard(d *directRead, id int64) {
	r.args[0] = id
	r.dest = [5]any{&r.live, &r.here, &r.ts, &r.xmin, &r.props}
	r.op = combined{sql: d.get, args: r.args[:4], scan: r.dest[:5], group: d.group + strconv.FormatInt(id, 10), merge: d.merge, done: make(chan struct{})}
}

// throughCitus sets r up as sqlGetByID of table id after guard g.
func (r *pointRead) throughCitus(g *guard, id int64) {
	r.args[0] = id
	r.dest = [5]any{&r.ts, &r.xmin, &r.props}
	r.op = combined{sql: sqlGetByID, args: r.args[:4], scan: r.dest[:3], guard: g, done: make(chan struct{})}
}

// shardGone reports the failure of a directRead whose shard's placement
// is no longer on the node.
func shardGone(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable
}
