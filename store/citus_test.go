package store

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/odata/filter"
)

// On a Citus cluster (PGTABLES_TEST_BACKEND=citus; CI runs this file's
// tests there), the statements of one partition run on one shard: the
// point reads and writes name the distribution key, and so do queries
// whose filter pins the partition; other queries run on every shard.
func TestCitusPartitionStatementsRunOnOneShard(t *testing.T) {
	testdb.NeedCitus(t)
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.DetectDistribution(ctx); err != nil || !s.Distributed() {
		t.Fatalf("entities are not distributed: %v", err)
	}
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	tasks := func(t *testing.T, sql string, args ...any) string {
		t.Helper()
		rows, err := s.pool.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			if _, n, ok := strings.Cut(line, "Task Count: "); ok {
				return n
			}
		}
		t.Fatalf("no Citus plan for %s", sql)
		return ""
	}
	dk := distributionKey(acct, "t", "p")
	if n := tasks(t, sqlGet, acct, "t", dk, "p", "r"); n != "1" {
		t.Errorf("point read: %s tasks", n)
	}
	if n := tasks(t, sqlMerge+sqlReturning, acct, "t", dk, "p", "r", []byte(`{}`), 0, int64(1)); n != "1" {
		t.Errorf("merge: %s tasks", n)
	}
	for _, tc := range []struct {
		filter string
		one    bool
	}{
		{"PartitionKey eq 'p'", true},
		{"PartitionKey eq 'p' and (RowKey ge 'a' or N eq 1)", true},
		{"PartitionKey ge 'p'", false},
		{"PartitionKey eq 'p' or PartitionKey eq 'q'", false},
		{"N eq 1", false},
	} {
		e, err := filter.Parse(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		sql, args, err := queryEntitiesSQL(true, acct, "t", EntityQuery{Filter: e, Top: 10})
		if err != nil {
			t.Fatal(err)
		}
		if n := tasks(t, sql, args...); (n == "1") != tc.one {
			t.Errorf("%s: %s tasks", tc.filter, n)
		}
	}
}
