package migrations

import (
	"context"
	"io/fs"
	"net/url"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testdb"
)

// TestDistributeInPlace: a schema that holds data and is not distributed,
// as a single node's database is once Citus is installed in it, or as a
// single node's dump restored on a coordinator, is distributed by the next
// Up, its rows kept; the shard count is the option's.
func TestDistributeInPlace(t *testing.T) {
	testdb.NeedCitus(t)
	t.Parallel()
	dsn := testdb.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The schema of a single node, as its migrations left it and a dump
	// restores it: the migration files themselves, and golang-migrate's
	// version table.
	names, err := fs.Glob(files, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	for _, name := range names {
		sql, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	latest, err := Latest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations VALUES ($1, false)`, int64(latest)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
INSERT INTO tables (account, name, lname) VALUES ('acct', 'T', 't');
INSERT INTO table_acls (table_id, policy_id, pos, permission) SELECT id, 'p', 0, 'r' FROM tables;
INSERT INTO service_properties VALUES ('acct', '{}');
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT t.id, entity_dkey(t.account, t.lname, 'p' || g % 10), 'p' || g % 10, 'r' || g, 1, 1, '{}'
FROM tables t, generate_series(1, 100) g`); err != nil {
		t.Fatal(err)
	}
	if err := UpWith(ctx, dsn, Options{CitusShardCount: 6}); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	rows, err := conn.Query(ctx, `
SELECT logicalrelid::text, CASE WHEN repmodel = 't' THEN 'reference' ELSE partmethod::text END
FROM pg_dist_partition WHERE logicalrelid = ANY(ARRAY['tables', 'table_acls', 'service_properties', 'entities']::regclass[])`)
	if err != nil {
		t.Fatal(err)
	}
	var rel, kind string
	if _, err := pgx.ForEachRow(rows, []any{&rel, &kind}, func() error { kinds[rel] = kind; return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tables": "reference", "table_acls": "reference", "service_properties": "reference", "entities": "h"}
	for r, k := range want {
		if kinds[r] != k {
			t.Errorf("%s is %q, want %q", r, kinds[r], k)
		}
	}
	var shards, entities, acls int
	if err := conn.QueryRow(ctx, `
SELECT (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'entities'::regclass),
       (SELECT count(*) FROM entities), (SELECT count(*) FROM table_acls)`).Scan(&shards, &entities, &acls); err != nil {
		t.Fatal(err)
	}
	if shards != 6 || entities != 100 || acls != 1 {
		t.Errorf("%d shards, %d entities, %d policies; want 6, 100, 1", shards, entities, acls)
	}
	// Again: nothing to do.
	if err := UpWith(ctx, dsn, Options{CitusShardCount: 6}); err != nil {
		t.Fatal(err)
	}
}

// Without a shard count of the option, the session or the server's
// configuration, entities get 4 shards per worker, at least 8.
func TestDistributeDefaultShardCount(t *testing.T) {
	testdb.NeedCitus(t)
	t.Parallel()
	u, err := url.Parse(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("citus.shard_count") // the test databases' own few shards
	u.RawQuery = q.Encode()
	dsn := u.String()
	ctx := context.Background()
	if err := Up(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var source string
	var workers, shards int
	if err := conn.QueryRow(ctx, `
SELECT (SELECT source FROM pg_settings WHERE name = 'citus.shard_count'),
       (SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive AND shouldhaveshards),
       (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'entities'::regclass)`).Scan(&source, &workers, &shards); err != nil {
		t.Fatal(err)
	}
	if source != "default" {
		t.Skipf("the server's configuration sets citus.shard_count (%s): it decides", source)
	}
	if want := max(8, 4*workers); shards != want {
		t.Errorf("%d shards with %d workers, want %d", shards, workers, want)
	}
}
