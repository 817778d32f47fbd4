// Package testlocalpg helps tests run local mode's private PostgreSQL.
package testlocalpg

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgtables/pgtables/localpg"
)

// Finder finds this machine's PostgreSQL server binaries as local mode
// does. Without them the test skips, unless PGTABLES_REQUIRE_PG_SERVER is
// set (as in CI), where it fails.
func Finder(tb testing.TB) localpg.Finder {
	tb.Helper()
	f := localpg.Finder{Path: os.Getenv("PATH"), Patterns: localpg.DefaultPatterns()}
	if _, err := f.Find(context.Background(), 0); err != nil {
		if os.Getenv("PGTABLES_REQUIRE_PG_SERVER") != "" {
			tb.Fatalf("PGTABLES_REQUIRE_PG_SERVER is set: %v", err)
		}
		tb.Skipf("no PostgreSQL server binaries: %v", err)
	}
	return f
}

// Dir is a new empty directory, removed when the test ends, that the
// server's user can reach when the test runs as root (TempDir's
// directories are private to their owner).
func Dir(tb testing.TB) string {
	tb.Helper()
	d := tb.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return d
}
