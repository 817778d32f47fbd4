package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/odata"
)

// sqlBackend is the ceiling: the same operations as plain SQL with pgx on
// a relation of the same shape as pgtables' (same key, same jsonb stored
// form, same sizes), so that the ratio shows what pgtables adds on top of
// PostgreSQL: HTTP, authentication, JSON and SQL building.
type sqlBackend struct {
	pool    *pgxpool.Pool
	tableID int64
}

const sqlCeilingSchema = `
CREATE SCHEMA IF NOT EXISTS pgtables_ceiling;
CREATE TABLE IF NOT EXISTS pgtables_ceiling.entities (
    table_id bigint NOT NULL,
    pk       text COLLATE "C" NOT NULL,
    rk       text COLLATE "C" NOT NULL,
    ts       bigint NOT NULL,
    size     integer NOT NULL,
    props    jsonb NOT NULL,
    PRIMARY KEY (table_id, pk, rk)
) WITH (fillfactor = 90)`

func newSQLBackend(ctx context.Context, url string, conns int) (*sqlBackend, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("sql url: %w", err)
	}
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, sqlCeilingSchema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("create ceiling schema: %w", err)
	}
	if _, err := pool.Exec(ctx, sqlCeilingDistribute); err != nil {
		pool.Close()
		return nil, fmt.Errorf("distribute ceiling table: %w", err)
	}
	return &sqlBackend{pool: pool}, nil
}

// sqlCeilingDistribute distributes the ceiling's relation on Citus as
// pgtables distributes its entities: by partition key (pgtables hashes it
// with the table into its own column, which places partitions alike), over
// as many shards as pgtables' entities have (pgtables' default, 8, when
// they are not there yet), every statement going through the coordinator.
// Elsewhere it does nothing.
const sqlCeilingDistribute = `
DO $$
DECLARE n int;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN RETURN; END IF;
    IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pgtables_ceiling.entities'::regclass) THEN RETURN; END IF;
    SELECT shard_count INTO n FROM citus_tables t JOIN pg_class c ON c.oid = t.table_name
        WHERE c.relname = 'entities' AND t.citus_table_type = 'distributed' LIMIT 1;
    PERFORM create_distributed_table('pgtables_ceiling.entities', 'pk', shard_count => coalesce(n, 8));
END $$`

func (b *sqlBackend) name() string { return "sql" }

func (b *sqlBackend) sibling() backend { return &sqlBackend{pool: b.pool} }

// settle vacuums and analyzes the whole database: the ceiling's relation
// and, when pgtables uses the same database, pgtables' own.
func (b *sqlBackend) settle(ctx context.Context) error {
	_, err := b.pool.Exec(ctx, "VACUUM (ANALYZE)")
	return err
}

func now() int64 { return odata.Ticks(time.Now()) }

func (b *sqlBackend) prepare(ctx context.Context, data dataSet, preload bool) error {
	b.tableID = rand.Int64()
	if !preload {
		return nil
	}
	// Copied in chunks, so that large data sets need little memory here.
	const chunk = 10_000
	total := data.total()
	for start := 0; start < total; start += chunk {
		rows := make([][]any, 0, chunk)
		for i := start; i < min(start+chunk, total); i++ {
			pk, rk := data.key(i)
			rows = append(rows, b.row(pk, rk, i))
		}
		_, err := b.pool.CopyFrom(ctx, pgx.Identifier{"pgtables_ceiling", "entities"},
			[]string{"table_id", "pk", "rk", "ts", "size", "props"}, pgx.CopyFromRows(rows))
		if err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	return nil
}

// cleanup empties the ceiling's relation. TRUNCATE, not DELETE: the
// write scenarios leave millions of dead rows, whose space VACUUM frees
// but does not give back, and a plan that reads the relation sequentially
// (the planner's choice for filter-scan) would then read all of it, which
// makes the ceiling slow and flatters the ratio.
func (b *sqlBackend) cleanup(ctx context.Context) error {
	_, err := b.pool.Exec(ctx, "TRUNCATE pgtables_ceiling.entities")
	return err
}

func (b *sqlBackend) row(pk, rk string, i int) []any {
	props := entityProps(i)
	return []any{b.tableID, pk, rk, now(), odata.EntitySize(pk, rk, props), odata.AppendStored(nil, props)}
}

func (b *sqlBackend) insert(ctx context.Context, w *worker) error {
	pk, rk := w.newKey()
	tag, err := b.pool.Exec(ctx, `INSERT INTO pgtables_ceiling.entities (table_id, pk, rk, ts, size, props) VALUES ($1, $2, $3, $4, $5, $6)`, b.row(pk, rk, w.n)...)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("insert wrote nothing")
	}
	return err
}

func (b *sqlBackend) upsert(ctx context.Context, w *worker) error {
	i, pk, rk := w.ownedKey()
	_, err := b.pool.Exec(ctx, `
INSERT INTO pgtables_ceiling.entities (table_id, pk, rk, ts, size, props) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (table_id, pk, rk) DO UPDATE SET props = excluded.props, size = excluded.size, ts = excluded.ts`, b.row(pk, rk, i)...)
	return err
}

func (b *sqlBackend) merge(ctx context.Context, w *worker) error {
	i, pk, rk := w.ownedKey()
	row := b.row(pk, rk, i)
	tag, err := b.pool.Exec(ctx, `UPDATE pgtables_ceiling.entities SET props = props || $4, size = $5, ts = GREATEST($6, ts + 1)
WHERE table_id = $1 AND pk = $2 AND rk = $3`, row[0], row[1], row[2], row[5], row[4], row[3])
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("merge matched nothing")
	}
	return err
}

func (b *sqlBackend) insertDelete(ctx context.Context, w *worker) error {
	pk, rk := w.newKey()
	tag, err := b.pool.Exec(ctx, `INSERT INTO pgtables_ceiling.entities (table_id, pk, rk, ts, size, props) VALUES ($1, $2, $3, $4, $5, $6)`, b.row(pk, rk, w.n)...)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("insert wrote nothing")
	}
	if err != nil {
		return err
	}
	tag, err = b.pool.Exec(ctx, `DELETE FROM pgtables_ceiling.entities WHERE table_id = $1 AND pk = $2 AND rk = $3`, b.tableID, pk, rk)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("delete matched nothing")
	}
	return err
}

func (b *sqlBackend) pointRead(ctx context.Context, w *worker) error {
	pk, rk := w.data.key(w.rng.IntN(w.data.total()))
	var ts int64
	var xmin uint32
	var props []byte
	return b.pool.QueryRow(ctx, `SELECT ts, xmin, props FROM pgtables_ceiling.entities WHERE table_id = $1 AND pk = $2 AND rk = $3`,
		b.tableID, pk, rk).Scan(&ts, &xmin, &props)
}

func (b *sqlBackend) batchInsert(ctx context.Context, w *worker) error {
	w.n++
	pk := fmt.Sprintf("w%03d-%s-%09d", w.id, w.run, w.n)
	var rks []string
	var sizes []int32
	var props [][]byte
	stored := batchStored()
	for j := range batchSize {
		rk := fmt.Sprintf("r%03d", j)
		rks = append(rks, rk)
		sizes = append(sizes, int32(odata.EntitySize(pk, rk, entityProps(j))))
		props = append(props, stored[j])
	}
	return pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
INSERT INTO pgtables_ceiling.entities (table_id, pk, rk, ts, size, props)
SELECT $1, $2, r.rk, $3, r.size, r.props FROM unnest($4::text[], $5::int[], $6::jsonb[]) AS r(rk, size, props)`,
			b.tableID, pk, now(), rks, sizes, props)
		if err == nil && tag.RowsAffected() != batchSize {
			err = fmt.Errorf("batch wrote %d rows", tag.RowsAffected())
		}
		return err
	})
}

func (b *sqlBackend) count(ctx context.Context, want int, sql string, args ...any) error {
	rows, err := b.pool.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	var pk, rk string
	var ts int64
	var xmin uint32
	var props []byte
	n := 0
	_, err = pgx.ForEachRow(rows, []any{&pk, &rk, &ts, &xmin, &props}, func() error { n++; return nil })
	if err == nil && n != want {
		err = fmt.Errorf("query returned %d rows, want %d", n, want)
	}
	return err
}

func (b *sqlBackend) partitionScan(ctx context.Context, w *worker) error {
	pk, _ := w.data.key(w.rng.IntN(w.data.partitions) * preloadRows)
	return b.count(ctx, preloadRows, `SELECT pk, rk, ts, xmin, props FROM pgtables_ceiling.entities
WHERE table_id = $1 AND pk = $2 ORDER BY pk, rk LIMIT 1001`, b.tableID, pk)
}

// tableScan reads the whole table in keyset pages of 1000, as a client
// following continuations does.
func (b *sqlBackend) tableScan(ctx context.Context, w *worker) error {
	var pk, rk string
	var ts int64
	var xmin uint32
	var props []byte
	total := 0
	for {
		rows, err := b.pool.Query(ctx, `SELECT pk, rk, ts, xmin, props FROM pgtables_ceiling.entities
WHERE table_id = $1 AND (pk, rk) > ($2, $3) ORDER BY pk, rk LIMIT 1000`, b.tableID, pk, rk)
		if err != nil {
			return err
		}
		n := 0
		if _, err := pgx.ForEachRow(rows, []any{&pk, &rk, &ts, &xmin, &props}, func() error { n++; return nil }); err != nil {
			return err
		}
		total += n
		if n < 1000 {
			break
		}
	}
	if total != w.data.total() {
		return fmt.Errorf("table scan returned %d rows, want %d", total, w.data.total())
	}
	return nil
}

func (b *sqlBackend) filterScan(ctx context.Context, w *worker) error {
	return b.count(ctx, w.data.total()/categories, `SELECT pk, rk, ts, xmin, props FROM pgtables_ceiling.entities
WHERE table_id = $1 AND props -> 'Cat' ->> 0 = 'i32' AND (props -> 'Cat' ->> 1)::int = $2 ORDER BY pk, rk LIMIT 1001`,
		b.tableID, w.rng.IntN(categories))
}

func (b *sqlBackend) updateIfMatch(ctx context.Context, w *worker) error {
	i, pk, rk := w.ownedKey()
	var ts int64
	var xmin uint32
	var props []byte
	if err := b.pool.QueryRow(ctx, `SELECT ts, xmin, props FROM pgtables_ceiling.entities WHERE table_id = $1 AND pk = $2 AND rk = $3`,
		b.tableID, pk, rk).Scan(&ts, &xmin, &props); err != nil {
		return err
	}
	row := b.row(pk, rk, i)
	tag, err := b.pool.Exec(ctx, `UPDATE pgtables_ceiling.entities SET props = $4, size = $5, ts = GREATEST($6, ts + 1)
WHERE table_id = $1 AND pk = $2 AND rk = $3 AND ts = $7 AND xmin = $8`, row[0], row[1], row[2], row[5], row[4], row[3], ts, xmin)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("conditional update matched nothing")
	}
	return err
}
