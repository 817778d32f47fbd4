package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/odata/filter"
)

// A page of a filter that spans partitions on distributed entities is a
// statement per node on the nodes' placements where they can be read
// directly (across_nodes.go). Where they cannot, it is the one statement
// here, through Citus, which pushes ORDER BY pk, rk LIMIT down to every shard and
// merges their ordered answers. For the shards to stop after $top matches
// rather than read and sort all their rows, each must walk its primary key
// index in order, which the planner seldom picks for a filter it cannot
// estimate: the settings below leave it no other plan, for this
// transaction only (propagated to the workers' shard queries). One
// connection per worker bounds the fan-out of one request, so that 16
// clients do not open 16 x shards connections at once.
//
// The table's id is looked up first, on the coordinator's copy of the
// reference table, rather than joined into the statement: a join with a
// reference table is planned by Citus as a subquery on every shard, which
// costs more planning on the coordinator than the round trip (a page of
// an indexed filter took about twice as long). Looked up in the same
// transaction as the page, the id is that of the live table, so a table
// deleted and created again under the same name never shows the old
// table's rows. The transaction's settings go with its BEGIN, in one
// round trip.
const (
	sqlAcrossBegin    = `BEGIN READ ONLY;`
	sqlAcrossSettings = `
SET LOCAL citus.propagate_set_commands = 'local';
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL enable_sort = off;
SET LOCAL citus.max_adaptive_executor_pool_size = 1`
	// With a property index the filter can use, the planner has the
	// index's statistics and a range of it to read: its choice stands,
	// and no setting needs to reach the workers.
	sqlAcrossIndexed = `
SET LOCAL citus.max_adaptive_executor_pool_size = 1`
	// The properties travel as text: a jsonb column would be printed on
	// each shard, parsed on the coordinator to merge the shards' rows,
	// and printed there again (about 6 ms of the coordinator's CPU for a
	// page of 1,000 entities of 600 bytes, of the 10 ms the page cost
	// it); as text the coordinator only copies them. The bytes are those
	// of the jsonb's output, as pgtables would have read them.
	sqlAcrossPage = `
SELECT e.pk, e.rk, e.ts, e.xmin, e.props::text FROM entities e
WHERE e.table_id = $1`
)

// acrossPartitions reports whether a query page is one statement on every
// shard: a filter the primary key cannot serve alone, over distributed
// entities, pinning no partition.
func (s *Store) acrossPartitions(q EntityQuery) bool {
	if !s.distributed.Load() || q.Filter == nil {
		return false
	}
	_, pinned := filter.Partition(q.Filter, "PartitionKey")
	return !pinned
}

// acrossPage runs one page of such a query. A page that runs out of ctx's
// time fails as any statement does; the caller's budget decides what then.
func (s *Store) acrossPage(ctx context.Context, account, table string, q EntityQuery) (*EntityPage, error) {
	if page, ok, err := s.acrossNodes(ctx, account, table, q); ok {
		return page, err
	}
	settings := sqlAcrossSettings
	if len(q.indexes) > 0 && filter.UsesIndex(q.Filter, q.schema()) {
		settings = sqlAcrossIndexed
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: sqlAcrossBegin + settings})
	if err != nil {
		return &EntityPage{}, classify(fmt.Errorf("query entities: %w", err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to keep
	var tableID int64
	if err := tx.QueryRow(ctx, sqlLiveTableID, account, tableKey(table)).Scan(&tableID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return &EntityPage{}, ErrTableNotFound
		}
		return &EntityPage{}, classify(fmt.Errorf("query entities: %w", err))
	}
	sql, args, err := acrossSQL(tableID, q)
	if err != nil {
		return &EntityPage{}, err
	}
	return runPageOn(ctx, tx, q.rows(), sql, args)
}

// acrossSQL builds the statement of a page across partitions.
func acrossSQL(tableID int64, q EntityQuery) (string, []any, error) {
	where, args, err := acrossWhere(tableID, q)
	return sqlAcrossPage + where, args, err
}

// acrossWhere is what follows sqlAcrossPage in acrossSQL's statement: the
// conditions after the table's, the order and the limit.
func acrossWhere(tableID int64, q EntityQuery) (string, []any, error) {
	return acrossWhereOf(tableID, q, pageStatement{}, false)
}

// acrossWhereOf is acrossWhere for one statement of a page that starts
// after every key of st.afterPK instead of at q's continuation, when that
// is set, and reads partition st.pin alone, when that is (the key as a
// continuation gives it: stored). With generic, the filter's index
// conditions name their indexes with literals (filter.Schema's
// IndexLiterals) and the statement is planned as any other (see
// genericIndexPlan); the caller names the table's id as a literal too.
func acrossWhereOf(tableID int64, q EntityQuery, st pageStatement, generic bool) (string, []any, error) {
	sql := ""
	args := []any{tableID}
	switch {
	case st.hasAfterPK:
		sql += ` AND e.pk > $2`
		args = append(args, st.afterPK)
	case q.HasFromPK && q.HasFromRK:
		sql += ` AND (e.pk, e.rk) >= ($2, $3)`
		args = append(args, q.FromPK, q.FromRK)
	case q.HasFromPK:
		sql += ` AND e.pk >= $2`
		args = append(args, q.FromPK)
	}
	if st.hasPin {
		args = append(args, st.pin)
		sql += ` AND e.pk = $` + strconv.Itoa(len(args))
	}
	sql, args = q.Range.appendSQL(sql, args)
	if q.Filter != nil { // none: a page of the whole table (acrossNodes)
		schema := q.schema()
		schema.IndexLiterals = generic
		cond, fargs, err := filter.Compile(q.Filter, schema, len(args)+1)
		if err != nil {
			return "", nil, err
		}
		sql += " AND (" + cond + ")"
		args = append(args, fargs...)
	}
	sql += sqlOrderPage + strconv.Itoa(q.Top+1)
	if len(q.indexes) > 0 && !generic {
		args = customPlan(args)
	}
	return sql, args, nil
}
