package store

import (
	"context"
)

// A page's statement is counted by wrapping it between two counts of the
// rows examined so far, in one statement: PostgreSQL's statistics of the
// current transaction (pg_stat_xact_*) hold the rows that its scans of
// entities returned (sequential scans) and fetched (index scans), which is
// what the filter was evaluated on, as they happen. They also hold the
// counts of earlier transactions of the session that were not flushed
// yet, hence the count before; none are flushed while a statement runs.
// The three parts are the branches of a UNION ALL, which PostgreSQL runs
// one after the other, in order (an Append; never a parallel one here,
// since the counts are parallel restricted), so a page costs no round
// trip more than the page's statement: no transaction, no batch (a batch
// runs its statements in the connection's default mode, and a statement
// that may use a property index must be planned for its values,
// customPlan). The counts come as rows whose key is NULL, first and
// last. On Citus the rows are read on the shards' nodes, whose counts the
// coordinator does not see: only chunked scans count there. Rows read by
// parallel workers are not in the leader's statistics.
const (
	// The rows entities' scans returned (sequential scans) plus those its
	// indexes and bitmap scans fetched: pg_stat_xact_user_tables's
	// seq_tup_read + idx_tup_fetch, read from the functions under that
	// view, which take a fraction of the view's planning.
	sqlExamined = `
SELECT (pg_stat_get_xact_tuples_returned(t.r) + pg_stat_get_xact_tuples_fetched(t.r)
	+ (SELECT coalesce(sum(pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0) FROM pg_index i WHERE i.indrelid = t.r))::bigint
FROM (SELECT 'entities'::regclass::oid) t(r)`
	sqlExaminedBefore = `SELECT NULL::text COLLATE "C", NULL::text COLLATE "C", (` + sqlExamined + `), NULL::xid, NULL::jsonb
UNION ALL (`
	sqlExaminedAfter = `)
UNION ALL SELECT NULL, NULL, (` + sqlExamined + `), NULL, NULL`
)

// runPageCounted is runPageOn that also counts the rows the statement
// examined, into the page's Examined (collectPage reads the counts).
func runPageCounted(ctx context.Context, db querier, rows pageRows, sql string, args []any) (*EntityPage, error) {
	return runPageOn(ctx, db, rows, sqlExaminedBefore+sql+sqlExaminedAfter, args)
}
