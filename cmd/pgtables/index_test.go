package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testserver"
)

// `pgtables index` on the database directly and through a server's index
// API: create waits for the build, list shows it, drop drops it.
func TestIndexCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testserver.Database(t)
	srv := testserver.Start(t, dsn, testserver.Config{})
	st := srv.Store
	for _, table := range []string{"Direct", "Remote"} {
		if err := st.CreateTable(ctx, httpapi.DevAccount, table); err != nil {
			t.Fatal(err)
		}
	}
	connStr := "AccountName=" + httpapi.DevAccount + ";AccountKey=" + httpapi.DevKey + ";TableEndpoint=" + srv.URL + "/" + httpapi.DevAccount

	ways := []struct {
		table string
		flags []string
	}{
		{"Direct", []string{"-database-url", dsn}},
		{"Remote", []string{"-connection-string", connStr}},
	}
	for _, w := range ways {
		cmd := func(args ...string) (string, error) {
			var out bytes.Buffer
			err := run(ctx, append(append([]string{"index"}, args...), w.flags...), env(nil), &out, io.Discard)
			return out.String(), err
		}
		out, err := cmd("create", "-table", w.table, "-property", "Age", "-type", "Edm.Int64", "-after-partition-key")
		if err != nil || !strings.Contains(out, ": ready\n") {
			t.Fatalf("%s: create: %q %v", w.table, out, err)
		}
		name := strings.Fields(out)[1]
		out, err = cmd("list", "-table", w.table)
		if err != nil || !strings.Contains(out, name) || !strings.Contains(out, "Edm.Int64") || !strings.Contains(out, "PartitionKey, value, RowKey") || !strings.Contains(out, "ready") {
			t.Fatalf("%s: list: %q %v", w.table, out, err)
		}
		if _, err := cmd("create", "-table", w.table, "-property", "Age", "-type", "Edm.Double", "-after-partition-key"); err == nil || !strings.Contains(strings.ToLower(err.Error()), "exists") {
			t.Errorf("%s: a second numeric index: %v", w.table, err)
		}
		if out, err := cmd("drop", "-table", w.table, "-name", name); err != nil || !strings.Contains(out, "dropped") {
			t.Fatalf("%s: drop: %q %v", w.table, out, err)
		}
		if out, err := cmd("list", "-table", w.table); err != nil || strings.Contains(out, name) {
			t.Fatalf("%s: list after drop: %q %v", w.table, out, err)
		}
		for _, args := range [][]string{
			{"create", "-table", w.table, "-property", "Age", "-type", "Edm.Decimal"},
			{"create", "-table", w.table, "-property", "Age"},
			{"drop", "-table", w.table},
			{"list"},
			{"list", "-table", "NoSuchTable"},
			{"rebuild", "-table", w.table},
		} {
			if _, err := cmd(args...); err == nil {
				t.Errorf("%s: %q: no error", w.table, args)
			}
		}
	}
}
