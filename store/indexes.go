package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/odata/filter"
)

// Errors of property indexes; httpapi maps each to one error code.
var (
	ErrIndexExists   = errors.New("index already exists")
	ErrIndexNotFound = errors.New("index not found")
	// ErrTooManyIndexes: the table has Options.MaxIndexes indexes.
	ErrTooManyIndexes = errors.New("too many indexes on the table")
	// ErrIndexType: the type is not one of the eight EDM types, or the
	// property name is not one an entity can have.
	ErrIndexType = errors.New("unsupported index type or property")
)

// DefaultMaxIndexes is Options.MaxIndexes's default.
const DefaultMaxIndexes = 10

// States of an index.
const (
	IndexBuilding = "building"
	IndexReady    = "ready"
	IndexFailed   = "failed"
)

// IndexSpec is what an index serves: comparisons of Property with literals
// of Type in $filter. AfterPartitionKey orders the index by PartitionKey
// first, for filters that name one partition (PartitionKey eq 'x' and
// Age gt 30); otherwise it is ordered by the value, then the keys.
type IndexSpec struct {
	Property          string
	Type              odata.EdmType
	AfterPartitionKey bool
}

// Index is a declared property index of a table.
type Index struct {
	Name  string // of the PostgreSQL index; stable for a table and spec
	Table string // as created
	IndexSpec
	State string // IndexBuilding, IndexReady or IndexFailed
	// Progress of a build, while building and when PostgreSQL reports it
	// (pg_stat_progress_create_index; not on Citus, whose shards build
	// on the workers); nil otherwise.
	Progress *IndexProgress
	Error    string // why the build failed
	Created  time.Time
}

// IndexProgress is where a build is, as PostgreSQL reports it.
type IndexProgress struct {
	Phase                   string
	BlocksDone, BlocksTotal int64
	TuplesDone, TuplesTotal int64
}

const (
	sqlCountIndexes = `SELECT count(*) FROM property_indexes WHERE table_id = $1`
	sqlInsertIndex  = `
INSERT INTO property_indexes (table_id, name, property, type, after_pk) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING`

	sqlListIndexes = `
SELECT i.table_id, t.name, i.name, i.property, i.type, i.after_pk, i.state, i.error, i.created_at
FROM property_indexes i JOIN tables t ON t.id = i.table_id
WHERE t.account = $1 AND t.lname = $2 AND t.deleted_at IS NULL
ORDER BY i.property, i.type, i.after_pk`
	// Progress is read apart from the catalog: on Citus the catalog is a
	// reference table, which does not join a local view.
	sqlIndexProgress = `
SELECT p.phase, p.blocks_done, p.blocks_total, p.tuples_done, p.tuples_total
FROM pg_stat_progress_create_index p WHERE p.index_relid = to_regclass($1)`

	// Ready indexes of a live table, for a query: the table's id goes into
	// the query, where it lets the planner prove the partial index's
	// predicate.
	sqlReadyIndexes = `
SELECT t.id, i.property, i.type FROM tables t
LEFT JOIN property_indexes i ON i.table_id = t.id AND i.state = 'ready'
WHERE t.account = $1 AND t.lname = $2 AND t.deleted_at IS NULL`

	sqlFindIndex = `
SELECT i.table_id, i.state FROM property_indexes i JOIN tables t ON t.id = i.table_id
WHERE t.account = $1 AND t.lname = $2 AND t.deleted_at IS NULL AND i.name = $3`
	// Only a build still recorded as building ends: a build whose
	// process was taken for stopped (buildOrphaned) may end twice, by its
	// own process and by the one that found it, and the first one counts.
	sqlSetIndexState = `
UPDATE property_indexes SET state = $3, error = $4, updated_at = now() WHERE table_id = $1 AND name = $2 AND state = 'building'`
	sqlIndexState   = `SELECT state FROM property_indexes WHERE table_id = $1 AND name = $2`
	sqlDeleteIndex  = `DELETE FROM property_indexes WHERE table_id = $1 AND name = $2`
	sqlTableIndexes = `SELECT name FROM property_indexes WHERE table_id = $1`
	sqlDropIndex    = `DROP INDEX CONCURRENTLY IF EXISTS `
)

// indexName names the PostgreSQL index of spec on table id: the same spec
// on the same table always gets the same name, and the name says nothing
// that needs quoting. Types of one family (the numeric ones) make one
// index, so they get one name.
func indexName(tableID int64, spec IndexSpec) string {
	h := sha256.Sum256([]byte(spec.Property + "\x00" + strconv.Itoa(filter.Family(spec.Type)) + "\x00" + strconv.FormatBool(spec.AfterPartitionKey)))
	return "pi_" + strconv.FormatInt(tableID, 10) + "_" + hex.EncodeToString(h[:6])
}

// checkSpec rejects specs that no index can serve.
func checkSpec(spec IndexSpec) error {
	if spec.Type < odata.EdmString || spec.Type > odata.EdmBinary {
		return fmt.Errorf("%w: type %d", ErrIndexType, spec.Type)
	}
	switch spec.Property {
	case "PartitionKey", "RowKey", "Timestamp":
		return fmt.Errorf("%w: %s is always indexed", ErrIndexType, spec.Property)
	}
	if err := odata.CheckPropertyName(spec.Property); err != nil {
		return fmt.Errorf("%w: %w", ErrIndexType, err)
	}
	return nil
}

// CreateIndex declares an index on a table's property and starts its
// build. It returns at once with the index building; the build runs in
// the background on a connection of its own (CREATE INDEX CONCURRENTLY,
// which never blocks writes), then the index is ready, or failed with the
// error and nothing of it left in the database. Close cancels builds.
func (s *Store) CreateIndex(ctx context.Context, account, table string, spec IndexSpec) (Index, error) {
	if err := checkSpec(spec); err != nil {
		return Index{}, err
	}
	var (
		ix      = Index{Table: table, IndexSpec: spec, State: IndexBuilding}
		tableID int64
	)
	err := s.inConflictRetry(ctx, func(tx pgx.Tx) error {
		// The table's row lock serializes the creates of one table, so
		// that the limit holds.
		if err := tx.QueryRow(ctx, sqlLockLiveTable, account, tableKey(table)).Scan(&tableID); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrTableNotFound
			}
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, sqlCountIndexes, tableID).Scan(&n); err != nil {
			return err
		}
		ix.Name = indexName(tableID, spec)
		tag, err := tx.Exec(ctx, sqlInsertIndex, tableID, ix.Name, spec.Property, spec.Type.String(), spec.AfterPartitionKey)
		switch {
		case err != nil:
			return err
		case tag.RowsAffected() == 0:
			return ErrIndexExists
		case n >= s.opts.MaxIndexes:
			return ErrTooManyIndexes
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrTableNotFound) || errors.Is(err, ErrIndexExists) || errors.Is(err, ErrTooManyIndexes) {
			return Index{}, err
		}
		return Index{}, classify(fmt.Errorf("create index: %w", err))
	}
	ix.Created = s.now()
	s.startBuild(tableID, ix)
	return ix, nil
}

// Indexes lists the indexes of a table, ordered by property, type and
// ordering.
func (s *Store) Indexes(ctx context.Context, account, table string) ([]Index, error) {
	rows, err := s.pool.Query(ctx, sqlListIndexes, account, tableKey(table))
	if err != nil {
		return nil, classify(fmt.Errorf("list indexes: %w", err))
	}
	var (
		out     []Index
		ids     []int64
		ix      Index
		tableID int64
		typ     string
	)
	_, err = pgx.ForEachRow(rows, []any{&tableID, &ix.Table, &ix.Name, &ix.Property, &typ, &ix.AfterPartitionKey, &ix.State, &ix.Error, &ix.Created}, func() error {
		ix.Type, _ = odata.ParseEdmType(typ)
		out = append(out, ix)
		ids = append(ids, tableID)
		return nil
	})
	if err != nil {
		return nil, classify(fmt.Errorf("list indexes: %w", err))
	}
	if len(out) == 0 {
		ok, err := s.tableExists(ctx, s.pool, account, table)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, ErrTableNotFound
		}
	}
	for i := range out {
		if out[i].State != IndexBuilding {
			continue
		}
		var p IndexProgress
		err := s.pool.QueryRow(ctx, sqlIndexProgress, out[i].Name).Scan(&p.Phase, &p.BlocksDone, &p.BlocksTotal, &p.TuplesDone, &p.TuplesTotal)
		switch {
		case err == nil:
			out[i].Progress = &p
			continue
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, classify(fmt.Errorf("index progress: %w", err))
		}
		// No progress: waiting for its turn, or nobody builds it any more.
		// One of this process's builds is not orphaned, even when its lock
		// is gone: it ended and is being recorded.
		if s.buildRunsHere(out[i].Name) {
			continue
		}
		orphaned, err := s.buildOrphaned(ctx, out[i])
		if err != nil {
			return nil, err
		}
		if orphaned {
			s.recoverBuild(ids[i], out[i])
			out[i].State, out[i].Error = IndexFailed, errInterrupted.Error()
		}
	}
	return out, nil
}

// DropIndex drops an index of a table, whatever its state; a build in
// progress is cancelled.
func (s *Store) DropIndex(ctx context.Context, account, table, name string) error {
	var (
		tableID int64
		state   string
	)
	if err := s.pool.QueryRow(ctx, sqlFindIndex, account, tableKey(table), name).Scan(&tableID, &state); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			ok, err := s.tableExists(ctx, s.pool, account, table)
			switch {
			case err != nil:
				return err
			case !ok:
				return ErrTableNotFound
			}
			return ErrIndexNotFound
		}
		return classify(fmt.Errorf("drop index: %w", err))
	}
	s.cancelBuild(name)
	return s.dropIndex(ctx, tableID, name)
}

// dropIndex drops the PostgreSQL index and then its catalog row: a
// catalog row without its index is harmless (its build failed, or it is
// gone next time), an index without its row would never be dropped.
func (s *Store) dropIndex(ctx context.Context, tableID int64, name string) error {
	if err := s.indexDDL(ctx, sqlDropIndex+name); err != nil {
		return classify(fmt.Errorf("drop index %s: %w", name, err))
	}
	_, err := s.pool.Exec(ctx, sqlDeleteIndex, tableID, name)
	s.indexCache.clear()
	if err != nil {
		return classify(fmt.Errorf("drop index %s: %w", name, err))
	}
	return nil
}

// dropTableIndexes drops the indexes of deleted table id, for the purger.
func (s *Store) dropTableIndexes(ctx context.Context, tableID int64) error {
	rows, err := s.pool.Query(ctx, sqlTableIndexes, tableID)
	if err != nil {
		return classify(fmt.Errorf("list indexes: %w", err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return classify(fmt.Errorf("list indexes: %w", err))
	}
	for _, name := range names {
		s.cancelBuild(name)
		if err := s.dropIndex(ctx, tableID, name); err != nil {
			return err
		}
	}
	return nil
}

// usableIndexes returns the id of the live table and its ready indexes,
// for a filter that compares properties; ErrTableNotFound when there is no
// such table.
func (s *Store) usableIndexes(ctx context.Context, account, table string) (int64, []filter.Index, error) {
	rows, err := s.pool.Query(ctx, sqlReadyIndexes, account, tableKey(table))
	if err != nil {
		return 0, nil, classify(fmt.Errorf("read indexes: %w", err))
	}
	var (
		id    int64
		prop  *string
		typ   *string
		found bool
		out   []filter.Index
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &prop, &typ}, func() error {
		found = true
		if prop != nil && typ != nil {
			if t, ok := odata.ParseEdmType(*typ); ok {
				out = append(out, filter.Index{Property: *prop, Type: t})
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, classify(fmt.Errorf("read indexes: %w", err))
	}
	if !found {
		return 0, nil, ErrTableNotFound
	}
	return id, out, nil
}

// sqlIndexedTable names the table's id in a query that may use its
// property indexes, whose predicates name it.
const sqlIndexedTable = ` AND e.table_id = $%d`

// sqlIndexedTableID is sqlIndexedTable for a generic plan
// (genericIndexPlan): the id follows, as a literal.
const sqlIndexedTableID = ` AND e.table_id = `

// customPlan makes the statement with args planned for the values of
// its parameters, every time: an index's predicate and key name the
// property and its type tags, which the statement holds as parameters, so
// a plan for any values (what a prepared statement gets after a few runs)
// could never use the index. The statement is still described once and
// cached, so this costs no round trip.
func customPlan(args []any) []any {
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}

// genericIndexPlan reports whether a statement of q's page may be planned
// once for all values of its parameters, as statements are unless
// customPlan says otherwise: when its index conditions bound the key by
// equalities alone (filter.IndexEqualities), the plan is the index's walk
// of one value's entries in key order for any value, and a custom plan
// only costs its planning again on every page (on Citus about a third of
// each node's CPU for a page of 500 of its rows). For such a plan to use
// an index at all, the statement names the index's property, type tags and
// table id as the index's definition does, as literals (from the catalog,
// not the filter's text); the compared values stay parameters.
func genericIndexPlan(q EntityQuery) bool {
	return len(q.indexes) > 0 && filter.IndexEqualities(q.Filter, q.schema())
}

// comparesProperties reports whether e compares a user property, which an
// index may serve.
func comparesProperties(e *filter.Expr) bool {
	if e.Op.IsComparison() {
		switch e.Name {
		case "PartitionKey", "RowKey", "Timestamp":
			return false
		}
		return true
	}
	for _, a := range e.Args {
		if comparesProperties(a) {
			return true
		}
	}
	return false
}

// indexDDL is the statement that builds index name of spec on table id.
// The key and the predicate are written exactly as the filter compiler
// writes them for a comparison with an indexed property (see
// filter.Index): the predicate keeps the index to the table's entities
// whose property has a type of the family, and the key is a CASE on the
// type tag, so that computing it never fails on a value of another type.
// The three numeric types are one family, keyed as float8: an Int32
// literal matches values of all three.
func indexDDL(tableID int64, name string, spec IndexSpec) string {
	prop := filter.QuoteLiteral(spec.Property)
	pred := "props -> " + prop + " ->> 0 = " + filter.QuoteLiteral(spec.Type.StoredTag())
	value := "props -> " + prop + " ->> 1"
	opclass := ""
	switch spec.Type {
	case odata.EdmString, odata.EdmDateTime, odata.EdmGuid:
		opclass = " text_pattern_ops" // the compiler compares with ~<~ and kin
	case odata.EdmInt32, odata.EdmInt64, odata.EdmDouble:
		pred = "props -> " + prop + " ->> 0 IN ('i32', 'i64', 'dbl')"
		value = "(" + value + ")::float8"
	case odata.EdmBoolean:
		value = "(" + value + ")::boolean"
	case odata.EdmBinary:
		value = "decode(" + value + ", 'base64')"
	}
	key := "(CASE WHEN " + pred + " THEN " + value + " END)" + opclass
	cols := key + ", pk, rk"
	if spec.AfterPartitionKey {
		cols = "pk, " + key + ", rk"
	}
	return "CREATE INDEX CONCURRENTLY " + name + " ON entities (" + cols + ") WHERE table_id = " +
		strconv.FormatInt(tableID, 10) + " AND " + pred
}
