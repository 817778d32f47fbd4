package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A page's statement runs in a transaction between two counts of the rows
// examined so far: PostgreSQL's statistics of the current transaction
// (pg_stat_xact_*) hold the rows that its scans of entities returned
// (sequential scans) and fetched (index scans), which is what the filter
// was evaluated on. Those statistics also hold the counts of earlier
// transactions of the session that were not flushed yet, hence the count
// before (no flush happens inside a transaction). Not a batch: a batch
// runs its statements in the connection's default mode, and a statement
// that may use a property index must be planned for its values
// (customPlan). On Citus the rows are read on the shards' nodes, which
// hide their shards from pg_class and so from these views: only chunked
// scans count there. Rows read by parallel workers are not in the
// leader's statistics.
const sqlExamined = `
SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)::bigint
FROM pg_stat_xact_user_tables
WHERE relname = 'entities' OR relname LIKE 'entities\_%'`

// runPageCounted is runPageOn that also counts the rows the statement
// examined, into the page's Examined.
func runPageCounted(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, top int, sql string, args []any) (*EntityPage, error) {
	page := &EntityPage{}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var before, after int64
		if err := tx.QueryRow(ctx, sqlExamined).Scan(&before); err != nil {
			return fmt.Errorf("count examined rows: %w", err)
		}
		rows, err := tx.Query(ctx, sql, args...)
		if page, err = collectPage(rows, err, top); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, sqlExamined).Scan(&after); err != nil {
			return fmt.Errorf("count examined rows: %w", err)
		}
		page.Examined, page.Counted = after-before, true
		return nil
	})
	if err != nil {
		return page, classify(fmt.Errorf("query entities: %w", err))
	}
	return page, nil
}
