package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/odata"
)

// Every statement finds its table through the live name, or by an id that
// a guard in the same transaction finds live (tableids.go), so an entity
// of a deleted (still purging) table can never be read or written.
const liveTable = `(SELECT id FROM tables WHERE account = $1 AND lname = $2 AND deleted_at IS NULL)`

// Statements on one entity take account, table (lower case) and the
// partition's distribution key as $1, $2, $3 (distribution.go), then the
// PartitionKey and RowKey as $4, $5.
//
// The inserts and upserts find their table's id in one of three ways. On
// a single node, INSERT ... SELECT FROM tables: no row when the table is
// missing. On Citus that form runs in two steps through the coordinator,
// about ten times slower than an INSERT ... VALUES, which goes straight to
// the partition's shard: a single write there names the id, cached and
// guarded (tableids.go); a write of a batch, in its transaction, takes it
// from live_table_id (migration 0004), and a missing table makes it NULL,
// which the NOT NULL column refuses (isMissingTableID). Insert Or Merge
// keeps the first form on Citus too.
const (
	insertHead = `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)`
	fromLiveTable = `
SELECT id, $3, $4, $5, $6, $7, $8 FROM tables WHERE account = $1 AND lname = $2 AND deleted_at IS NULL`
	valuesLiveTable = `
VALUES (live_table_id($1, $2), $3, $4, $5, $6, $7, $8)`

	insertTail = `
ON CONFLICT (table_id, pk, rk, dkey) DO NOTHING
RETURNING xmin`

	upsertReplaceTail = `
ON CONFLICT (table_id, pk, rk, dkey) DO UPDATE
SET props = excluded.props, size = excluded.size, ts = GREATEST(excluded.ts, entities.ts + 1)
RETURNING xmin, ts`

	// The merged size is bounded by old size + added size; when that bound
	// or the property count would break a limit, the statement changes
	// nothing and the exact check runs in mergeSlow. The added size is
	// excluded.size less the keys' part of it, which is counted here in
	// code points, never more than the UTF-16 units of EntitySize: the
	// bound can only be high. (A parameter in DO UPDATE would be lost on
	// Citus, which runs an INSERT ... SELECT in two steps.)
	upsertMergeTail = `
ON CONFLICT (table_id, pk, rk, dkey) DO UPDATE
SET props = entities.props || excluded.props,
    size = entities.size + excluded.size - (4 + 2 * (length(excluded.pk) + length(excluded.rk))),
    ts = GREATEST(excluded.ts, entities.ts + 1)
WHERE entities.size + excluded.size - (4 + 2 * (length(excluded.pk) + length(excluded.rk))) <= 1048576
  AND (SELECT count(*) FROM jsonb_object_keys(entities.props || excluded.props)) <= 252
RETURNING xmin, ts`
)

// insertStatements are the inserts and upserts of one way of finding the
// table's id.
type insertStatements struct{ insert, upsertReplace, upsertMerge string }

var (
	singleNodeInserts = insertStatements{
		insert:        insertHead + fromLiveTable + insertTail,
		upsertReplace: insertHead + fromLiveTable + upsertReplaceTail,
		upsertMerge:   insertHead + fromLiveTable + upsertMergeTail,
	}
	// Citus refuses the merge's subquery in an INSERT ... VALUES; that
	// one keeps the two steps. Only a batch's writes use these (see
	// writesByID).
	citusInserts = insertStatements{
		insert:        insertHead + valuesLiveTable + insertTail,
		upsertReplace: insertHead + valuesLiveTable + upsertReplaceTail,
		upsertMerge:   insertHead + fromLiveTable + upsertMergeTail,
	}
)

// inserts returns the statements for the schema's layout.
func (s *Store) inserts() *insertStatements {
	if s.distributed.Load() {
		return &citusInserts
	}
	return &singleNodeInserts
}

// The inserts of a single write on Citus, by the table's id ($1; see
// tableids.go), in the order of sqlInsertByID's parameters.
const (
	valuesTableID = `
VALUES ($1, $2, $3, $4, $5, $6, $7)`
	sqlUpsertReplaceByID = insertHead + valuesTableID + upsertReplaceTail
)

// isMissingTableID reports the error of a Citus insert into a missing
// table: live_table_id gave NULL. No other column of those statements can
// be NULL (their values are Go values), so the code alone tells.
func isMissingTableID(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.NotNullViolation
}

const (
	sqlReplace = `
UPDATE entities SET props = $6, size = $7, ts = GREATEST($8, ts + 1)
WHERE table_id = ` + liveTable + ` AND dkey = $3 AND pk = $4 AND rk = $5`

	sqlMerge = `
UPDATE entities SET props = props || $6, size = size + $7, ts = GREATEST($8, ts + 1)
WHERE table_id = ` + liveTable + ` AND dkey = $3 AND pk = $4 AND rk = $5
  AND size + $7 <= 1048576
  AND (SELECT count(*) FROM jsonb_object_keys(props || $6)) <= 252`

	sqlDelete = `
DELETE FROM entities WHERE table_id = ` + liveTable + ` AND dkey = $3 AND pk = $4 AND rk = $5`

	// Appended to sqlReplace, sqlMerge (after $8) and sqlDelete (after $5)
	// for If-Match with an ETag: the version check is part of the write.
	sqlVersionReplace = ` AND ts = $9 AND xmin = $10`
	sqlVersionDelete  = ` AND ts = $6 AND xmin = $7`
	sqlReturning      = ` RETURNING xmin, ts`

	// One round trip tells a missing table from a missing entity.
	sqlGet = `
SELECT t.id, e.ts, e.xmin, e.props FROM tables t
LEFT JOIN entities e ON e.table_id = t.id AND e.dkey = $3 AND e.pk = $4 AND e.rk = $5
WHERE t.account = $1 AND t.lname = $2 AND t.deleted_at IS NULL`

	// sqlGetMany is sqlGet for many keys of one table, position first.
	// The arrays sit in scalar subqueries, which hide their length from the
	// planner: every call then gets the same estimates and PostgreSQL keeps
	// one generic plan, where a visible length would make it plan each
	// call anew.
	sqlGetMany = `
SELECT k.i, t.id, e.ts, e.xmin, e.props FROM tables t
CROSS JOIN unnest((SELECT $3::bigint[]), (SELECT $4::text[]), (SELECT $5::text[])) WITH ORDINALITY AS k(dkey, pk, rk, i)
LEFT JOIN entities e ON e.table_id = t.id AND e.dkey = k.dkey AND e.pk = k.pk AND e.rk = k.rk
WHERE t.account = $1 AND t.lname = $2 AND t.deleted_at IS NULL`

	sqlLockEntity = `
SELECT ts, xmin, props FROM entities WHERE table_id = $1 AND dkey = $2 AND pk = $3 AND rk = $4 FOR UPDATE`

	sqlLiveTableID = `
SELECT id FROM tables WHERE account = $1 AND lname = $2 AND deleted_at IS NULL`

	sqlInsertByID = insertHead + valuesTableID + insertTail

	// The updates and deletes of a single write on Citus, by the table's
	// id ($1; see tableids.go), then the distribution key, PartitionKey
	// and RowKey: statements of entities alone, which take Citus's fast
	// path, where the subquery on tables of sqlReplace and the others is
	// planned anew on every call. The version check of If-Match with an
	// ETag follows the other parameters.
	sqlReplaceByID = `
UPDATE entities SET props = $5, size = $6, ts = GREATEST($7, ts + 1)
WHERE table_id = $1 AND dkey = $2 AND pk = $3 AND rk = $4`
	sqlMergeByID = `
UPDATE entities SET props = props || $5, size = size + $6, ts = GREATEST($7, ts + 1)
WHERE table_id = $1 AND dkey = $2 AND pk = $3 AND rk = $4
  AND size + $6 <= 1048576
  AND (SELECT count(*) FROM jsonb_object_keys(props || $5)) <= 252`
	sqlDeleteByID = `
DELETE FROM entities WHERE table_id = $1 AND dkey = $2 AND pk = $3 AND rk = $4`
	sqlVersionUpdateByID = ` AND ts = $8 AND xmin = $9`
	sqlVersionDeleteByID = ` AND ts = $5 AND xmin = $6`

	sqlUpdateByID = sqlReplaceByID + sqlReturning
)

// Op is the kind of an entity write.
type Op uint8

// The entity writes. Replace and Merge without a condition are the upserts
// (Insert Or Replace, Insert Or Merge).
const (
	OpInsert Op = iota + 1
	OpReplace
	OpMerge
	OpDelete
)

// Write is one entity write: an operation on one entity of a table.
type Write struct {
	Op           Op
	PartitionKey string
	RowKey       string
	Properties   []odata.Property // Insert, Replace, Merge; validated by the caller
	Match        Match            // If-Match; required (not matchNone) for Delete
	// txn tags the change-feed rows of the writes of one transaction (a
	// batch's); 0: a tag of the write's own (changes.go).
	txn int64
	// more: writes of the transaction follow this one, and so do their
	// change rows (the sequencer's "last", changes_sequence.go).
	more bool
	// change is the write's change row on Citus, set with its statement
	// by captured (changes_citus.go); nil: none, or recorded by the
	// statement.
	change *pendingChange
}

// Result is what a successful write produced.
type Result struct {
	Timestamp int64 // ticks
	ETag      string
}

// writeOne performs one entity write in account's table.
func (s *Store) writeOne(ctx context.Context, account, table string, w *Write) (Result, error) {
	res, err := s.write(ctx, s.pool, account, table, w, s.ticks())
	if err == nil {
		s.changeWritten(account)
	}
	return res, err
}

func (s *Store) write(ctx context.Context, q querier, account, table string, wr *Write, now int64) (Result, error) {
	lt := tableKey(table)
	w := *wr
	w.Match = w.Match.forKeys(w.PartitionKey, w.RowKey)
	switch w.Op {
	case OpInsert:
		return s.insert(ctx, q, account, lt, &w, now)
	case OpReplace:
		return s.replace(ctx, q, account, lt, &w, now)
	case OpMerge:
		return s.merge(ctx, q, account, lt, &w, now)
	case OpDelete:
		return s.delete(ctx, q, account, lt, &w)
	}
	return Result{}, fmt.Errorf("write: unknown op %d", w.Op)
}

func (s *Store) insert(ctx context.Context, q querier, account, lt string, w *Write, now int64) (Result, error) {
	props := odata.AppendStored(nil, w.Properties)
	size := odata.EntitySize(w.PartitionKey, w.RowKey, w.Properties)
	var xmin uint32
	var err error
	dkey := distributionKey(account, lt, w.PartitionKey)
	if s.writesByID(q) {
		sql, args := s.captured(account, w, changeInsert, sqlInsertByID, []any{nil, dkey, w.PartitionKey, w.RowKey, now, size, props})
		err = s.writeByID(ctx, account, lt, w, sql, args, &xmin)
	} else {
		sql, args := s.captured(account, w, changeInsert, s.inserts().insert, []any{account, lt, dkey, w.PartitionKey, w.RowKey, now, size, props})
		err = s.writeRow(ctx, q, account, lt, w, sql, args, &xmin)
	}
	if isMissingTableID(err) || errors.Is(err, ErrTableNotFound) {
		return Result{}, ErrTableNotFound
	}
	if errors.Is(err, pgx.ErrNoRows) {
		ok, err := s.tableExists(ctx, q, account, lt)
		switch {
		case err != nil:
			return Result{}, err
		case !ok:
			return Result{}, ErrTableNotFound
		}
		return Result{}, ErrEntityExists
	}
	if err != nil {
		return Result{}, classify(fmt.Errorf("insert entity: %w", err))
	}
	return Result{Timestamp: now, ETag: formatETag(now, xmin, w.PartitionKey, w.RowKey)}, nil
}

func (s *Store) replace(ctx context.Context, q querier, account, lt string, w *Write, now int64) (Result, error) {
	props := odata.AppendStored(nil, w.Properties)
	size := odata.EntitySize(w.PartitionKey, w.RowKey, w.Properties)
	var sql string
	op := changeReplace
	args := []any{account, lt, distributionKey(account, lt, w.PartitionKey), w.PartitionKey, w.RowKey}
	byID := s.writesByID(q)
	switch w.Match.kind {
	case matchNone:
		if byID {
			var xmin uint32
			var ts int64
			sql, args := s.captured(account, w, changeUpsertReplace, sqlUpsertReplaceByID, []any{nil, args[2], w.PartitionKey, w.RowKey, now, size, props})
			err := s.writeByID(ctx, account, lt, w, sql, args, &xmin, &ts)
			if errors.Is(err, ErrTableNotFound) {
				return Result{}, err
			}
			if err != nil {
				return Result{}, classify(fmt.Errorf("replace entity: %w", err))
			}
			return Result{Timestamp: ts, ETag: formatETag(ts, xmin, w.PartitionKey, w.RowKey)}, nil
		}
		sql, args, op = s.inserts().upsertReplace, append(args, now, size, props), changeUpsertReplace
	case matchAny:
		sql, args = sqlReplace+sqlReturning, append(args, props, size, now)
		if byID {
			sql, args = sqlReplaceByID+sqlReturning, []any{nil, args[2], w.PartitionKey, w.RowKey, props, size, now}
		}
	case matchETag:
		sql, args = sqlReplace+sqlVersionReplace+sqlReturning, append(args, props, size, now, w.Match.ts, w.Match.xmin)
		if byID {
			sql, args = sqlReplaceByID+sqlVersionUpdateByID+sqlReturning, []any{nil, args[2], w.PartitionKey, w.RowKey, props, size, now, w.Match.ts, w.Match.xmin}
		}
	default:
		return Result{}, s.whyNot(ctx, q, account, lt, w.PartitionKey, w.RowKey)
	}
	sql, args = s.captured(account, w, op, sql, args)
	res, err := s.writeResultMaybeByID(ctx, q, byID, account, lt, w, sql, args)
	if isMissingTableID(err) || errors.Is(err, ErrTableNotFound) {
		return Result{}, ErrTableNotFound
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Result{}, s.whyNot(ctx, q, account, lt, w.PartitionKey, w.RowKey)
	}
	if err != nil {
		return Result{}, classify(fmt.Errorf("replace entity: %w", err))
	}
	return res, nil
}

func (s *Store) merge(ctx context.Context, q querier, account, lt string, w *Write, now int64) (Result, error) {
	props := odata.AppendStored(nil, w.Properties)
	added := odata.PropertiesSize(w.Properties)
	var sql string
	op := changeMerge
	args := []any{account, lt, distributionKey(account, lt, w.PartitionKey), w.PartitionKey, w.RowKey}
	byID := s.writesByID(q) && w.Match.kind != matchNone
	switch w.Match.kind {
	case matchNone:
		size := odata.EntitySize(w.PartitionKey, w.RowKey, w.Properties)
		sql, args, op = s.inserts().upsertMerge, append(args, now, size, props), changeUpsertMerge
	case matchAny:
		sql, args = sqlMerge+sqlReturning, append(args, props, added, now)
		if byID {
			sql, args = sqlMergeByID+sqlReturning, []any{nil, args[2], w.PartitionKey, w.RowKey, props, added, now}
		}
	case matchETag:
		sql, args = sqlMerge+sqlVersionReplace+sqlReturning, append(args, props, added, now, w.Match.ts, w.Match.xmin)
		if byID {
			sql, args = sqlMergeByID+sqlVersionUpdateByID+sqlReturning, []any{nil, args[2], w.PartitionKey, w.RowKey, props, added, now, w.Match.ts, w.Match.xmin}
		}
	default:
		return Result{}, s.whyNot(ctx, q, account, lt, w.PartitionKey, w.RowKey)
	}
	sql, args = s.captured(account, w, op, sql, args)
	res, err := s.writeResultMaybeByID(ctx, q, byID, account, lt, w, sql, args)
	if isMissingTableID(err) || errors.Is(err, ErrTableNotFound) {
		return Result{}, ErrTableNotFound
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// Missing table or entity, a stale ETag, or a merged entity that
		// may break a limit: the careful path tells which.
		return s.mergeSlow(ctx, q, account, lt, w, now)
	}
	if err != nil {
		return Result{}, classify(fmt.Errorf("merge entity: %w", err))
	}
	return res, nil
}

// mergeSlow merges under a row lock, checking the merged entity exactly.
func (s *Store) mergeSlow(ctx context.Context, q querier, account, lt string, w *Write, now int64) (Result, error) {
	var res Result
	err := s.routed(account, lt, w.PartitionKey, func(_, _ *combiner, pool *pgxpool.Pool) error {
		return inTx(ctx, pool, q, func(tx pgx.Tx) error {
			var tableID int64
			if err := tx.QueryRow(ctx, sqlLiveTableID, account, lt).Scan(&tableID); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return ErrTableNotFound
				}
				return err
			}
			dkey := distributionKey(account, lt, w.PartitionKey)
			for {
				var ts int64
				var xmin uint32
				var stored []byte
				err := tx.QueryRow(ctx, sqlLockEntity, tableID, dkey, w.PartitionKey, w.RowKey).Scan(&ts, &xmin, &stored)
				if errors.Is(err, pgx.ErrNoRows) {
					if w.Match.Conditional() {
						return ErrEntityNotFound
					}
					if err := odata.CheckEntity(w.PartitionKey, w.RowKey, w.Properties); err != nil {
						return err
					}
					size := odata.EntitySize(w.PartitionKey, w.RowKey, w.Properties)
					sql, args := s.captured(account, w, changeInsert, sqlInsertByID, []any{tableID, dkey, w.PartitionKey, w.RowKey, now, size, odata.AppendStored(nil, w.Properties)})
					err := s.writeRow(ctx, tx, account, lt, w, sql, args, &xmin)
					if errors.Is(err, pgx.ErrNoRows) {
						continue // inserted meanwhile by someone else: merge into it
					}
					if err != nil {
						return err
					}
					res = Result{Timestamp: now, ETag: formatETag(now, xmin, w.PartitionKey, w.RowKey)}
					return nil
				}
				if err != nil {
					return err
				}
				switch w.Match.kind {
				case matchNever:
					return ErrConditionNotMet
				case matchETag:
					if w.Match.ts != ts || w.Match.xmin != xmin {
						return ErrConditionNotMet
					}
				}
				merged, err := odata.DecodeStored(stored, nil)
				if err != nil {
					return fmt.Errorf("decode stored entity: %w", err)
				}
				merged = mergeProperties(merged, w.Properties)
				if err := odata.CheckEntity(w.PartitionKey, w.RowKey, merged); err != nil {
					return err
				}
				size := odata.EntitySize(w.PartitionKey, w.RowKey, merged)
				sql, args := s.captured(account, w, changeMerge, sqlUpdateByID, []any{tableID, dkey, w.PartitionKey, w.RowKey, odata.AppendStored(nil, merged), size, now})
				res, err = s.writeResult(ctx, tx, account, lt, w, sql, args)
				return err
			}
		})
	})
	if err != nil {
		return Result{}, classify(fmt.Errorf("merge entity: %w", err))
	}
	return res, nil
}

// mergeProperties overlays add on props: same names are replaced, new names
// appended.
func mergeProperties(props, add []odata.Property) []odata.Property {
	for _, p := range add {
		found := false
		for i := range props {
			if props[i].Name == p.Name {
				props[i].Value = p.Value
				found = true
				break
			}
		}
		if !found {
			props = append(props, p)
		}
	}
	return props
}

func (s *Store) delete(ctx context.Context, q querier, account, lt string, w *Write) (Result, error) {
	var sql string
	args := []any{account, lt, distributionKey(account, lt, w.PartitionKey), w.PartitionKey, w.RowKey}
	byID := s.writesByID(q)
	if byID {
		args = []any{nil, args[2], w.PartitionKey, w.RowKey}
	}
	switch {
	case w.Match.kind == matchAny && byID:
		sql = sqlDeleteByID
	case w.Match.kind == matchAny:
		sql = sqlDelete
	case w.Match.kind == matchETag && byID:
		sql = sqlDeleteByID + sqlVersionDeleteByID
		args = append(args, w.Match.ts, w.Match.xmin)
	case w.Match.kind == matchETag:
		sql = sqlDelete + sqlVersionDelete
		args = append(args, w.Match.ts, w.Match.xmin)
	default:
		return Result{}, s.whyNot(ctx, q, account, lt, w.PartitionKey, w.RowKey)
	}
	sql, args = s.captured(account, w, changeDelete, sql, args)
	var tag pgconn.CommandTag
	var err error
	if w.change != nil {
		// The delete returns its change row's columns: a row is a delete.
		if byID {
			err = s.writeByID(ctx, account, lt, w, sql, args)
		} else {
			err = s.writeRow(ctx, q, account, lt, w, sql, args)
		}
		switch {
		case errors.Is(err, ErrTableNotFound):
			return Result{}, err
		case errors.Is(err, pgx.ErrNoRows):
			return Result{}, s.whyNot(ctx, q, account, lt, w.PartitionKey, w.RowKey)
		case err != nil:
			return Result{}, classify(fmt.Errorf("delete entity: %w", err))
		}
		return Result{}, nil
	}
	switch {
	case byID:
		tag, err = s.writeGuarded(ctx, account, lt, w, sql, args, nil)
		if errors.Is(err, ErrTableNotFound) {
			return Result{}, err
		}
	case q == querier(s.pool):
		err = s.routed(account, lt, w.PartitionKey, func(_, writes *combiner, _ *pgxpool.Pool) (err error) {
			tag, err = writes.exec(ctx, writeKey(account, lt, w), sql, args)
			return err
		})
	default:
		tag, err = q.Exec(ctx, sql, args...)
	}
	if err != nil {
		return Result{}, classify(fmt.Errorf("delete entity: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return Result{}, s.whyNot(ctx, q, account, lt, w.PartitionKey, w.RowKey)
	}
	return Result{}, nil
}

// whyNot explains a conditional write that changed nothing: the table is
// missing, the entity is missing, or the ETag did not match.
func (s *Store) whyNot(ctx context.Context, q querier, account, lt, pk, rk string) error {
	var tableID int64
	var ts *int64
	var xmin *uint32
	var props []byte
	err := q.QueryRow(ctx, sqlGet, account, lt, distributionKey(account, lt, pk), pk, rk).Scan(&tableID, &ts, &xmin, &props)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrTableNotFound
	case err != nil:
		return classify(fmt.Errorf("check entity: %w", err))
	case ts == nil:
		return ErrEntityNotFound
	}
	return ErrConditionNotMet
}

// writeRow runs a single-statement write and scans its row. Outside a
// transaction it shares a round trip and a commit with concurrent writes
// (see combiner); inside one it runs there.
// With w.change (Citus), the write also returns its change row's columns,
// and the change row is inserted after it in its transaction.
func (s *Store) writeRow(ctx context.Context, q querier, account, lt string, w *Write, sql string, args []any, dest ...any) error {
	if w.change != nil {
		dest = append(dest[:len(dest):len(dest)], w.change.dest()...)
	}
	if q == querier(s.pool) {
		return s.routed(account, lt, w.PartitionKey, func(_, writes *combiner, _ *pgxpool.Pool) error {
			return writes.queryRowChange(ctx, writeKey(account, lt, w), nil, w.change, sql, args, dest...)
		})
	}
	if err := q.QueryRow(ctx, sql, args...).Scan(dest...); err != nil || w.change == nil {
		return err
	}
	return insertChanges(ctx, q, w.change)
}

// writeResult runs a write that returns (xmin, ts).
func (s *Store) writeResult(ctx context.Context, q querier, account, lt string, w *Write, sql string, args []any) (Result, error) {
	var xmin uint32
	var ts int64
	if err := s.writeRow(ctx, q, account, lt, w, sql, args, &xmin, &ts); err != nil {
		return Result{}, err
	}
	return Result{Timestamp: ts, ETag: formatETag(ts, xmin, w.PartitionKey, w.RowKey)}, nil
}

// writeResultMaybeByID is writeResult, or with byID, writeByID for a
// write that returns (xmin, ts).
func (s *Store) writeResultMaybeByID(ctx context.Context, q querier, byID bool, account, lt string, w *Write, sql string, args []any) (Result, error) {
	if !byID {
		return s.writeResult(ctx, q, account, lt, w, sql, args)
	}
	var xmin uint32
	var ts int64
	if err := s.writeByID(ctx, account, lt, w, sql, args, &xmin, &ts); err != nil {
		return Result{}, err
	}
	return Result{Timestamp: ts, ETag: formatETag(ts, xmin, w.PartitionKey, w.RowKey)}, nil
}

// writeKey orders the writes of a combined round trip (see combiner).
func writeKey(account, lt string, w *Write) string {
	return account + "\x00" + lt + "\x00" + w.PartitionKey + "\x00" + w.RowKey
}

// getEntity reads one entity.
func (s *Store) getEntity(ctx context.Context, account, table, pk, rk string) (*odata.Entity, error) {
	lt := tableKey(table)
	if !s.distributed.Load() {
		r := newPointRead(account, lt, pk, rk)
		return r.entity(s.reads.submit(ctx, &r.op))
	}
	return s.getEntityByID(ctx, account, lt, pk, rk)
}

// A pointRead is GetEntity's statement with its destinations, in one
// allocation.
type pointRead struct {
	op      combined
	dest    [5]any
	args    [5]any // op.args
	tableID int64
	// byID: the statement names the table by id (sqlGetByID or a
	// directRead's), and a missing row is a missing entity.
	byID bool
	// A directRead's: its guard's 1, and whether the shard's placement is
	// on the node.
	live int64
	here bool
	// Value types, not pointers, for the nullable columns of the outer
	// join: pgx scans pointers through reflection, allocating each time.
	ts    pgtype.Int8
	xmin  pgtype.Uint32
	props []byte
}

func newPointRead(account, lt, pk, rk string) *pointRead {
	r := &pointRead{}
	r.dest = [5]any{&r.tableID, &r.ts, &r.xmin, &r.props}
	r.args = [5]any{account, lt, distributionKey(account, lt, pk), pk, rk}
	r.op = combined{
		sql: sqlGet, args: r.args[:], scan: r.dest[:4],
		group: account + "\x00" + lt, merge: mergeGets, done: make(chan struct{}),
	}
	return r
}

// entity is the read's outcome, given its statement's error.
func (r *pointRead) entity(err error) (*odata.Entity, error) {
	switch {
	case errors.Is(err, pgx.ErrNoRows) && r.byID:
		return nil, ErrEntityNotFound
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrTableNotFound
	case err != nil:
		return nil, classify(fmt.Errorf("get entity: %w", err))
	case !r.ts.Valid:
		return nil, ErrEntityNotFound
	}
	pk, rk := r.op.args[len(r.op.args)-2].(string), r.op.args[len(r.op.args)-1].(string)
	// The properties stay in their stored form: the encoder writes them
	// from it (see odata.Entity).
	return &odata.Entity{PartitionKey: pk, RowKey: rk, Timestamp: r.ts.Int64, ETag: formatETag(r.ts.Int64, r.xmin.Uint32, pk, rk), Stored: r.props}, nil
}

// inTx runs fn in q if q already is a transaction, else in a new
// transaction on pool.
func inTx(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, q querier, fn func(pgx.Tx) error) error {
	if tx, ok := q.(pgx.Tx); ok {
		return fn(tx)
	}
	return pgx.BeginFunc(ctx, pool, fn)
}

// mergeGets answers the point reads of one table that share a round trip
// with one statement (see merger): sqlGet's arguments, keys as arrays.
func mergeGets(ops []*combined) (string, []any) {
	dkeys := make([]int64, len(ops))
	pks, rks := make([]string, len(ops)), make([]string, len(ops))
	for i, op := range ops {
		dkeys[i], pks[i], rks[i] = op.args[2].(int64), op.args[3].(string), op.args[4].(string)
	}
	return sqlGetMany, []any{ops[0].args[0], ops[0].args[1], dkeys, pks, rks}
}
