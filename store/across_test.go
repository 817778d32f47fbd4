package store

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/odata/filter"
)

// statementTracer counts the statements on entities a store runs, by kind.
type statementTracer struct{ across, nodes, other atomic.Int64 }

func (s *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	switch {
	case strings.HasPrefix(data.SQL, sqlAcrossPage):
		s.across.Add(1)
	case strings.HasPrefix(data.SQL, sqlAcrossNodesHead):
		s.nodes.Add(1)
	case strings.Contains(data.SQL, "FROM entities"):
		s.other.Add(1)
	}
	return ctx
}

func (s *statementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// On Citus a page of a non-key filter across partitions is one statement
// (across.go), or one a node on the nodes' placements (across_nodes.go),
// and it reads the live table only: a table deleted and created again
// under the same name shows none of the old one's entities, though both
// share keys and the old one's rows may not be purged yet.
func TestCitusFilterAcrossPartitionsIsOneStatement(t *testing.T) {
	newCitusStore(t) // skips on PostgreSQL
	dsn := migratedDB(t)
	ctx := context.Background()
	writer := newStoreOn(t, dsn, nil)
	fill(t, writer, "t", []int{4, 4, 4})
	if err := writer.DeleteTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	fill(t, writer, "t", []int{3, 5})
	tracer := &statementTracer{}
	reader := newStoreOn(t, dsn, tracer)
	if !reader.Distributed() {
		t.Fatal("entities are not distributed")
	}
	// Every shard on a node with a placement read directly: a statement
	// a node; else one through Citus.
	nodes, _ := nodeShards(reader.router.Load().cur.Load(), time.Now().UnixNano())
	for _, tc := range []struct {
		filter string
		top    int
		want   string
	}{
		{"N ne 2", 1000, "p00/r000 p00/r001 p01/r000 p01/r001 p01/r002 p01/r003 p01/r004"},
		{"N ne 2", 3, "p00/r000 p00/r001 p01/r000 | p01/r001 p01/r002 p01/r003 | p01/r004"},
		{"N ge 6 or RowKey eq 'r000'", 2, "p00/r000 p01/r000 | p01/r003 p01/r004"},
		{"N gt 100", 5, ""},
	} {
		tracer.across.Store(0)
		tracer.nodes.Store(0)
		tracer.other.Store(0)
		e := mustParse(t, tc.filter)
		all := follow(t, reader, "t", EntityQuery{Filter: e, Top: tc.top})
		var pages []string
		for _, p := range all {
			pages = append(pages, strings.Join(p, " "))
		}
		if got := strings.Join(pages, " | "); got != tc.want {
			t.Errorf("%s, top %d: pages\n%s\nwant\n%s", tc.filter, tc.top, got, tc.want)
		}
		wantAcross, wantNodes := len(all), 0
		if nodes != nil {
			wantAcross, wantNodes = 0, len(all)*len(nodes)
		}
		if n, m := tracer.across.Load(), tracer.nodes.Load(); n != int64(wantAcross) || m != int64(wantNodes) || tracer.other.Load() != 0 {
			t.Errorf("%s, top %d: %d pages ran %d statements across partitions through Citus, %d on nodes and %d others, want %d, %d and 0",
				tc.filter, tc.top, len(all), n, m, tracer.other.Load(), wantAcross, wantNodes)
		}
	}
	// Each shard walks its primary key index in order and stops at the
	// page's end, rather than reading all its rows and sorting them.
	tx, err := reader.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: sqlAcrossBegin + sqlAcrossSettings})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	var id int64
	if err := tx.QueryRow(ctx, sqlLiveTableID, acct, "t").Scan(&id); err != nil {
		t.Fatal(err)
	}
	sql, args, err := acrossSQL(id, EntityQuery{Filter: mustParse(t, "N ne 2"), Top: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if p := plan.String(); !strings.Contains(p, "Index Scan using entities_pkey") || strings.Contains(p, "Seq Scan") || strings.Contains(p, "Sort Key: pk") {
		t.Errorf("a shard does not walk its primary key in order:\n%s", p)
	}
	if _, err := reader.QueryEntities(ctx, acct, "never", EntityQuery{Filter: mustParse(t, "N eq 1"), Top: 5}); err != ErrTableNotFound {
		t.Errorf("missing table: %v, want ErrTableNotFound", err)
	}
}

func mustParse(t *testing.T, f string) *filter.Expr {
	t.Helper()
	e, err := filter.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
