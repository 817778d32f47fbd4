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

// TestPythonInterop runs testdata/python/interop.py, which drives the server
// with the Python SDK (azure-data-tables 12.4.x, as Debian's python3-azure
// ships it): tables (create, list, query by name, delete, errors) through a
// connection string and through an endpoint with AzureNamedKeyCredential;
// every entity operation with and without ETag conditions and their 404,
// 409 and 412 errors; every EDM type read back with the right Python type
// by get_entity and by queries; keys with awkward characters; queries with
// parameters, select and paging past 1000 entities; submit_transaction,
// successful and failing; table and account SASes, also expired ones and
// in connection strings; table access policies; service properties and
// statistics. The script reports each check and exits non-zero if any
// failed.
//
// It needs a Python that can import azure.data.tables: $PGTABLES_PYTHON,
// else /usr/bin/python3, else python3 on PATH. Without one the test says so
// and passes, unless PGTABLES_REQUIRE_PYTHON is set.
func TestPythonInterop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// An IP address, never "localhost": with it some SDKs turn to Cosmos DB.
	runPython(t, "interop.py",
		"PGTABLES_ENDPOINT="+e.svcURL,
		"PGTABLES_ACCOUNT="+httpapi.DevAccount,
		"PGTABLES_KEY="+httpapi.DevKey)
}

// runPython runs script of testdata/python with env added to the
// environment; the script's checks failing fail t. Without a Python that
// can import azure.data.tables it says so and returns, unless
// PGTABLES_REQUIRE_PYTHON is set.
func runPython(t *testing.T, script string, env ...string) {
	t.Helper()
	python := findPython()
	if python == "" {
		missingClient(t, "PGTABLES_REQUIRE_PYTHON", "no Python that can import azure.data.tables was found (set PGTABLES_PYTHON)")
		return
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "python"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, python, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8", "PYTHONUNBUFFERED=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s (%v):\n%s", python, script, time.Since(start).Round(time.Millisecond), out)
	if ctx.Err() != nil {
		t.Errorf("the Python SDK checks of %s did not finish in time: %v", script, ctx.Err())
	} else if err != nil {
		t.Errorf("the Python SDK checks of %s failed: %v", script, err)
	}
}

// findPython returns the first of $PGTABLES_PYTHON, /usr/bin/python3 and
// python3 on PATH that can import azure.data.tables, or "" if none can.
func findPython() string {
	var candidates []string
	if p := os.Getenv("PGTABLES_PYTHON"); p != "" {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, "/usr/bin/python3")
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := exec.CommandContext(ctx, p, "-c", "import azure.data.tables").Run()
		cancel()
		if err == nil {
			return p
		}
	}
	return ""
}
