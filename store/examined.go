package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A page's statement and the count of the rows it examined go in one
// round trip, one implicit transaction: PostgreSQL's statistics of the
// current transaction (pg_stat_xact_*) hold the rows that its scans of
// entities returned (sequential scans) and fetched (index scans), which is
// what the filter was evaluated on. On Citus the rows are read on the
// shard's node, so only a statement sent there is counted; rows read by
// parallel workers are not in the leader's statistics. Those statistics
// also hold the counts of earlier transactions of the session that were
// not flushed yet, so the count is taken before and after the statement,
// in the same transaction (no flush happens inside one).
const sqlExamined = `
SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)::bigint
FROM pg_stat_xact_user_tables
WHERE relname = 'entities' OR relname LIKE 'entities\_%'`

// batcher sends a batch of statements: a pool, a connection or a
// transaction.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// runPageCounted is runPageOn that also counts the rows the statement
// examined, into the page's Examined.
func runPageCounted(ctx context.Context, db batcher, top int, sql string, args []any) (*EntityPage, error) {
	b := &pgx.Batch{}
	b.Queue(sqlExamined)
	b.Queue(sql, args...)
	b.Queue(sqlExamined)
	br := db.SendBatch(ctx, b)
	defer br.Close()
	var before, after int64
	if err := br.QueryRow().Scan(&before); err != nil {
		return &EntityPage{}, classify(fmt.Errorf("count examined rows: %w", err))
	}
	rows, err := br.Query()
	page, err := collectPage(rows, err, top)
	if err != nil {
		return page, err
	}
	if err := br.QueryRow().Scan(&after); err != nil {
		return page, classify(fmt.Errorf("count examined rows: %w", err))
	}
	page.Examined, page.Counted = after-before, true
	if err := br.Close(); err != nil {
		return page, classify(fmt.Errorf("query entities: %w", err))
	}
	return page, nil
}
