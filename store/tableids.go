package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// On Citus a single write outside a batch (insert, Insert Or Replace,
// and Replace, Merge and Delete with If-Match) names its table by id, a
// statement of entities alone that Citus routes straight to the
// partition's shard on its fast path, where the subquery on tables by name
// took its full planner on every call. The id comes from a cache of this
// process, and a guard, sent just before the write in the same implicit
// transaction to the same node, checks that it still is a live table's: it
// reads the node's own placement of tables (a reference table, with a
// placement on every node), as the plain table it is there when the node
// has one (shardGuard: PostgreSQL plans it once per connection, where
// Citus's fast path costs about as much as the read it guards), else
// through Citus. When the table has been deleted the guard fails, the
// write with it, and the write runs again with the id of the live table
// of that name, if there is one now. A point read does the same in one
// statement (citus_reads.go).
//
// So a write never lands in a table that was already deleted when it
// began (the guard's snapshot is later than that), and a table created
// again under the same name, which has a new id, never gets a write meant
// for the one before or the reverse: ids are never reused, and the purger
// removes the straggling writes that committed while their table was
// being deleted (PurgeConfig.Grace). TestTableRecreatedUnderConcurrency
// fails with the guard left out.
//
// Resolving the id inside the write instead, through live_table_id
// (migration 0004), made the node run a second distributed statement
// nested in the write, each time planned anew: twice the node's CPU of
// the same INSERT with its id given (pgbench on a worker: 385-440 µs
// against 165-180, and 70-120 µs for the guard through Citus; about 20
// for the guard on the placement). The writes of one round trip to a
// node share the guard of their table (see guard).

// sqlGuardTableLive fails with division_by_zero when table $1 is no
// longer live: a failure, not an empty answer, is what stops the write
// sent after it in the same implicit transaction.
const sqlGuardTableLive = `SELECT 1 / count(*) FROM tables WHERE id = $1 AND deleted_at IS NULL`

// maxTableIDs bounds the cache of table ids: when full, it starts again
// empty.
const maxTableIDs = 10000

// tableIDs caches the ids of live tables by account and lower-cased name.
// An entry only goes stale one way, its table deleted, which the guard of
// the next write that uses it finds out (see above).
type tableIDs struct {
	mu  sync.Mutex
	ids map[string]int64
}

func tableIDKey(account, lt string) string { return account + "\x00" + lt }

func (c *tableIDs) get(account, lt string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[tableIDKey(account, lt)]
	return id, ok
}

func (c *tableIDs) put(account, lt string, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil || len(c.ids) >= maxTableIDs {
		c.ids = map[string]int64{}
	}
	c.ids[tableIDKey(account, lt)] = id
}

// forget drops the entry of account's table lt if it still is id (-1:
// whatever it is).
func (c *tableIDs) forget(account, lt string, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := tableIDKey(account, lt); id < 0 || c.ids[k] == id {
		delete(c.ids, k)
	}
}

// liveTableID returns the id of account's live table lt, from the cache
// or else the database: ErrTableNotFound when there is none.
func (s *Store) liveTableID(ctx context.Context, account, lt string) (int64, error) {
	if id, ok := s.tableIDs.get(account, lt); ok {
		return id, nil
	}
	var id int64
	err := s.pool.QueryRow(ctx, sqlLiveTableID, account, lt).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrTableNotFound
	}
	if err != nil {
		return 0, classify(fmt.Errorf("find table: %w", err))
	}
	s.tableIDs.put(account, lt, id)
	return id, nil
}

// writesByID reports whether a write in q names its table by a cached id
// (see above): on Citus, outside a transaction.
func (s *Store) writesByID(q querier) bool {
	return q == querier(s.pool) && s.distributed.Load()
}

// writeByID runs a single write whose statement takes its table's id as
// $1 (args[0], set here) and scans its row into dest, guarded (see
// above). It returns ErrTableNotFound when there is no live table of that
// name, or it was deleted while the write ran.
func (s *Store) writeByID(ctx context.Context, account, lt string, w *Write, sql string, args []any, dest ...any) error {
	if w.change != nil {
		dest = append(dest[:len(dest):len(dest)], w.change.dest()...)
	}
	_, err := s.writeGuarded(ctx, account, lt, w, sql, args, dest)
	return err
}

// withTableID runs fn, guarded statements on table id through the
// combiners of node n (nil: the coordinator), with the id of account's
// live table lt; once more with the id of the table of that name now
// when fn's guard found its id deleted. It returns ErrTableNotFound when
// there is no live table of that name, or it was deleted while fn ran.
func (s *Store) withTableID(ctx context.Context, account, lt string, n *node, fn func(reads, writes *combiner, id int64) error) error {
	for retried := false; ; retried = true {
		id, err := s.liveTableID(ctx, account, lt)
		if err != nil {
			return err
		}
		err = s.routedTo(n, func(reads, writes *combiner, _ *pgxpool.Pool) error {
			return fn(reads, writes, id)
		})
		if !tableGone(err) {
			return err
		}
		s.tableIDs.forget(account, lt, id)
		if retried {
			return ErrTableNotFound
		}
	}
}

// tableGuard is the guard of a statement on table id, sent through c.
func (c *combiner) tableGuard(id int64) *guard {
	sql := sqlGuardTableLive
	if c.live != nil {
		if p := c.live.Load(); p != nil {
			sql = *p
		}
	}
	return &guard{key: strconv.FormatInt(id, 10), sql: sql, args: []any{id}}
}

// shardGuard is sqlGuardTableLive on a node's placement of tables, its
// shard named as such: a plain PostgreSQL statement that Citus leaves
// alone (see above).
func shardGuard(shard string) string {
	return `SELECT 1 / count(*) FROM ` + shard + ` WHERE id = $1 AND deleted_at IS NULL`
}

// tableGone reports the failure of sqlGuardTableLive.
func tableGone(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.DivisionByZero
}
