package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/odata/filter"
)

// pageOf runs the statements of one query page: one on a single node or
// when the filter pins a partition, a statement per node (acrossNodes) or
// else the steps of spreadPage when the page may span the shards of
// distributed entities.
func (s *Store) pageOf(ctx context.Context, account, table string, q EntityQuery) (*EntityPage, error) {
	distributed := s.distributed.Load()
	if _, pinned := filter.Partition(q.Filter, "PartitionKey"); !distributed || pinned {
		sql, args, err := queryEntitiesSQL(distributed, account, table, q)
		if err != nil {
			return nil, err
		}
		if pk, ok := filter.Partition(q.Filter, "PartitionKey"); ok && distributed {
			if page, ok, err := s.partitionOnNode(ctx, account, table, pk, q, pageStatement{}); ok {
				return page, err
			}
			var page *EntityPage
			err := s.routed(account, tableKey(table), pk, func(_, _ *combiner, pool *pgxpool.Pool) (err error) {
				// Not counted: the coordinator reads no rows of a shard
				// itself, and a node hides its shards from pg_class, and
				// so from the statistics views.
				page, err = runPageOn(ctx, pool, q.rows(), sql, args)
				return err
			})
			return page, err
		}
		if q.count && !distributed {
			return runPageCounted(ctx, s.pool, q.rows(), sql, args)
		}
		return s.runPage(ctx, q.rows(), sql, args)
	}
	if page, ok, err := s.acrossNodes(ctx, account, table, q); ok {
		return page, err
	}
	return s.spreadPage(ctx, account, table, q)
}

// spreadPage runs a page across partitions on distributed entities, when
// the nodes' placements cannot be read directly (acrossNodes).
//
// Citus runs a statement that no partition pins on every shard, each with
// the statement's LIMIT: with n shards, n pages of entities would cross
// the network, and be parsed, to keep one. So a page is found in steps
// that move little more than the page:
//
//  1. The rest of the continuation's partition, on its shard alone. A scan
//     of large partitions mostly ends here.
//  2. The keys of the rest of the page, on every shard: keys are small.
//  3. The entities between the first and the last of those keys, on every
//     shard, or on one when they all lie in one partition: together the
//     shards return the page and no more.
//
// Each step is a statement of its own, so a write may commit between two:
// step 3 applies the filter again and bounds its rows by $top, so the page
// is still a page of the query, in order, with the right continuation.
func (s *Store) spreadPage(ctx context.Context, account, table string, q EntityQuery) (*EntityPage, error) {
	page := &EntityPage{}
	st := q.statement()
	if q.HasFromPK {
		head := st
		head.pin, head.hasPin = q.FromPK, true
		p, err := s.runStatement(ctx, account, table, q, head)
		if err != nil || p.More {
			return p, err
		}
		page = p
		st = pageStatement{afterPK: q.FromPK, hasAfterPK: true}
	}
	need := q.Top - len(page.Entities)
	keys, err := s.pageKeys(ctx, account, table, q, st, need+1)
	if err != nil || len(keys) == 0 {
		return page, err
	}
	if need == 0 {
		page.More, page.NextPK, page.NextRK = true, keys[0].PK, keys[0].RK
		return page, nil
	}
	// The page ends at its own last key, not at the key after it, which a
	// row deleted in the meantime would otherwise let into the page.
	first, last := keys[0], keys[min(need, len(keys))-1]
	st.toPK, st.toRK, st.hasTo = last.PK, last.RK, true
	st.limit = need + 1
	if first.PK == last.PK {
		st.pin, st.hasPin = first.PK, true
	}
	rest, err := s.runStatement(ctx, account, table, q, st)
	page.Entities = append(page.Entities, rest.Entities...)
	if err != nil {
		return page, err
	}
	switch {
	case rest.More:
		page.More, page.NextPK, page.NextRK = true, rest.NextPK, rest.NextRK
	case len(keys) > need:
		// The key after the page left the table in the meantime: the next
		// page still starts there.
		page.More, page.NextPK, page.NextRK = true, keys[need].PK, keys[need].RK
	}
	return page, nil
}

// runStatement runs one statement of a page of entities.
func (s *Store) runStatement(ctx context.Context, account, table string, q EntityQuery, st pageStatement) (*EntityPage, error) {
	sql, args, err := pageSQL(account, table, q, st)
	if err != nil {
		return &EntityPage{}, err
	}
	return s.runPage(ctx, pageRows{top: st.limit - 1, encode: q.Encode}, sql, args)
}

// entityKey is the key of one entity.
type entityKey struct{ PK, RK string }

// pageKeys returns up to n keys of the entities that st selects, in order.
func (s *Store) pageKeys(ctx context.Context, account, table string, q EntityQuery, st pageStatement, n int) ([]entityKey, error) {
	st.keysOnly, st.limit = true, n
	sql, args, err := pageSQL(account, table, q, st)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(fmt.Errorf("query entity keys: %w", err))
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[entityKey])
	if err != nil {
		return nil, classify(fmt.Errorf("query entity keys: %w", err))
	}
	return keys, nil
}
