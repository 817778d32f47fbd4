package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/odata/filter"
)

const (
	sqlCreateTable = `
INSERT INTO tables (account, name, lname) VALUES ($1, $2, $3)
ON CONFLICT (account, lname) WHERE deleted_at IS NULL DO NOTHING`

	// Deleting only detaches the name; the purger removes the entities.
	sqlDeleteTable = `
UPDATE tables SET deleted_at = now()
WHERE account = $1 AND lname = $2 AND deleted_at IS NULL`

	sqlTableExists = `
SELECT EXISTS (SELECT 1 FROM tables WHERE account = $1 AND lname = $2 AND deleted_at IS NULL)`

	// Query Tables: listing order is the lower-cased name, which is also
	// what a continuation token names.
	sqlQueryTables = `
SELECT t.name, t.lname FROM tables t
WHERE t.account = $1 AND t.deleted_at IS NULL AND t.lname >= $2`
	sqlQueryTablesOrder = `
ORDER BY t.lname LIMIT `
)

// tableKey is how a table name is matched: case-insensitively. Table names
// are ASCII, so ASCII lower-casing is exact.
func tableKey(name string) string { return strings.ToLower(name) }

// CreateTable creates a table in account. The name must be valid.
func (s *Store) CreateTable(ctx context.Context, account, name string) error {
	tag, err := s.pool.Exec(ctx, sqlCreateTable, account, name, tableKey(name))
	if err != nil {
		if isUniqueViolation(err) {
			return ErrTableExists
		}
		return classify(fmt.Errorf("create table: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return ErrTableExists
	}
	return nil
}

// DeleteTable deletes a table. It returns at once; the entities are purged
// in the background (see Purger) and the name is free immediately.
func (s *Store) DeleteTable(ctx context.Context, account, name string) error {
	tag, err := s.pool.Exec(ctx, sqlDeleteTable, account, tableKey(name))
	if err != nil {
		return classify(fmt.Errorf("delete table: %w", err))
	}
	s.indexCache.forget(account, name) // the name may soon be a new table's
	// Other replicas find out by the guard of their next statement on it
	// (tableids.go); this one need not.
	s.tableIDs.forget(account, tableKey(name), -1)
	if tag.RowsAffected() == 0 {
		return ErrTableNotFound
	}
	s.feed.wake() // the table's change streams end (changes_sequence.go)
	return nil
}

func (s *Store) tableExists(ctx context.Context, q querier, account, name string) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, sqlTableExists, account, tableKey(name)).Scan(&ok); err != nil {
		return false, classify(fmt.Errorf("check table: %w", err))
	}
	return ok, nil
}

// TableQuery selects a page of tables.
type TableQuery struct {
	Filter *filter.Expr // nil: all tables
	Top    int          // page size, 0..1000; 0 returns no tables
	From   string       // continuation: the lower-cased name to start at
}

// TablePage is one page of a table listing.
type TablePage struct {
	Names []string // as created
	Next  string   // continuation for the next page; "" when done
}

// queryTables lists the tables of account in name order.
func (s *Store) queryTables(ctx context.Context, account string, q TableQuery) (*TablePage, error) {
	sql := sqlQueryTables
	args := []any{account, q.From}
	if q.Filter != nil {
		cond, fargs, err := filter.Compile(q.Filter, filter.Schema{Strings: map[string]string{"TableName": "t.name"}}, len(args)+1)
		if err != nil {
			return nil, err
		}
		sql += " AND (" + cond + ")"
		args = append(args, fargs...)
	}
	if q.Top == 0 {
		return &TablePage{}, nil // no continuation, as for entities
	}
	sql += fmt.Sprintf("%s%d", sqlQueryTablesOrder, q.Top+1)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(fmt.Errorf("query tables: %w", err))
	}
	page := &TablePage{}
	var name, lname string
	_, err = pgx.ForEachRow(rows, []any{&name, &lname}, func() error {
		if len(page.Names) == q.Top {
			page.Next = lname
			return errPageFull
		}
		page.Names = append(page.Names, name)
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, classify(fmt.Errorf("query tables: %w", err))
	}
	return page, nil
}

var errPageFull = errors.New("page full")
