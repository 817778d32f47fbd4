package migrations

import (
	"context"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testdb"
)

// Migration 0003 on a database that already holds entities: each gets its
// distribution key, entities whose table row is gone are dropped, and the
// primary key takes the new column.
func TestUpgradeFillsDistributionKey(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t)
	ctx := context.Background()
	cfg, m := migratedTo(t, dsn, 2)
	m.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
INSERT INTO tables (account, name, lname) VALUES ('acct', 'MyTable', 'mytable'), ('acct', 'Other', 'other');
INSERT INTO entities (table_id, pk, rk, ts, size, props)
SELECT t.id, p, 'r', 1, 1, '{}' FROM tables t, unnest(ARRAY['a', 'it''s é', '']) p;
INSERT INTO entities (table_id, pk, rk, ts, size, props) VALUES (999, 'orphan', 'r', 1, 1, '{}')`); err != nil {
		t.Fatal(err)
	}
	if err := Up(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	var n, wrong, orphans int
	if err := conn.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE e.dkey IS DISTINCT FROM
           ('x' || left(md5(t.account || '/' || t.lname || '/' || e.pk), 16))::bit(64)::bigint),
       count(*) FILTER (WHERE t.id IS NULL)
FROM entities e LEFT JOIN tables t ON t.id = e.table_id`).Scan(&n, &wrong, &orphans); err != nil {
		t.Fatal(err)
	}
	if n != 6 || wrong != 0 || orphans != 0 {
		t.Fatalf("%d entities, %d with a wrong key, %d orphans; want 6, 0, 0", n, wrong, orphans)
	}
	var cols []string
	if err := conn.QueryRow(ctx, `
SELECT array_agg(a.attname ORDER BY k.ord) FROM pg_index i
CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = 'entities'::regclass AND i.indisprimary`).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if want := []string{"table_id", "pk", "rk", "dkey"}; len(cols) != len(want) || cols[0] != want[0] || cols[3] != want[3] {
		t.Fatalf("primary key %v, want %v", cols, want)
	}
	// Down and up again.
	m, err = open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Migrate(2); err != nil {
		t.Fatalf("down to 2: %v", err)
	}
	if err := m.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// migratedTo migrates the database at dsn to version, and returns its
// connection settings and the migration, open.
func migratedTo(t *testing.T, dsn string, version uint) (*pgx.ConnConfig, *migrate.Migrate) {
	t.Helper()
	cfg, err := connConfig(dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(version); err != nil {
		m.Close()
		t.Fatal(err)
	}
	return cfg, m
}
