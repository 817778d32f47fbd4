package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgtables/pgtables/httpapi"
)

// TestJSInterop runs testdata/js/interop.js, which drives the server with the
// JavaScript SDK (@azure/data-tables, the version pinned in package.json and
// package-lock.json): single-entity operations and submitTransaction, both
// successful and failing. It needs Node: without it the test says so and
// passes, unless PGTABLES_REQUIRE_NODE is set, as CI (.ci/run) sets it.
// node_modules is installed with npm ci on first use and kept, with npm's
// download cache, under testdata/js.
func TestJSInterop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// An IP address, never "localhost": with it the SDK turns to Cosmos DB.
	runNode(t, "interop.js",
		"PGTABLES_ENDPOINT="+e.svcURL,
		"PGTABLES_ACCOUNT="+httpapi.DevAccount,
		"PGTABLES_KEY="+httpapi.DevKey)
}

// runNode runs script of testdata/js with node, its packages installed,
// and env added to the environment; the script's checks failing fail t.
// Without node it says so and returns, unless PGTABLES_REQUIRE_NODE is set.
func runNode(t *testing.T, script string, env ...string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missingClient(t, "PGTABLES_REQUIRE_NODE", "node is not installed")
		return
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "js"))
	if err != nil {
		t.Fatal(err)
	}
	npmCI(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", script, out)
	if err != nil {
		t.Errorf("the JavaScript SDK checks of %s failed: %v", script, err)
	}
}

// npmCI installs the packages of dir's package-lock.json under dir, unless
// they are there. npm writes node_modules/.package-lock.json once an
// install is complete; without it (never installed, or interrupted), or
// when the lock file has changed since, it installs anew. Within 15
// minutes: Azurite's install from an empty cache outlasted 5 on a busy
// machine.
func npmCI(t *testing.T, dir string) {
	t.Helper()
	if installed(dir) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("node is installed but npm is not: cannot install %s", dir)
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline",
		"--cache", filepath.Join(dir, ".npm-cache"))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}

// missingClient reports that the client of an interop test is not
// installed: a failure when the environment variable require is set, as
// CI (.ci/run) sets it, else a log line, and the test passes.
func missingClient(t *testing.T, require, why string) {
	t.Helper()
	if os.Getenv(require) != "" {
		t.Fatalf("%s, and %s asks for this interop test", why, require)
	}
	t.Logf("%s: this interop test did not run", why)
}

// installed reports whether node_modules under dir holds a complete
// install of the current package-lock.json.
func installed(dir string) bool {
	done, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil {
		return false
	}
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	return err == nil && !lock.ModTime().After(done.ModTime())
}
