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
	python := findPython()
	if python == "" {
		missingClient(t, "PGTABLES_REQUIRE_PYTHON", "no Python that can import azure.data.tables was found (set PGTABLES_PYTHON)")
		return
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "python"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, python, "interop.py")
	cmd.Dir = dir
	// An IP address, never "localhost": with it some SDKs turn to Cosmos DB.
	cmd.Env = append(os.Environ(),
		"PGTABLES_ENDPOINT="+e.svcURL,
		"PGTABLES_ACCOUNT="+httpapi.DevAccount,
		"PGTABLES_KEY="+httpapi.DevKey,
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONIOENCODING=utf-8",
		"PYTHONUNBUFFERED=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s interop.py (%v):\n%s", python, time.Since(start).Round(time.Millisecond), out)
	if ctx.Err() != nil {
		t.Errorf("the Python SDK checks did not finish in time: %v", ctx.Err())
	} else if err != nil {
		t.Errorf("the Python SDK checks failed: %v", err)
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
