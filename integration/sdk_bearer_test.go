package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pgtables/pgtables/internal/testissuer"
)

// TestJSBearer runs testdata/js/bearer.js: the JavaScript SDK with
// credential objects of its own, whose tokens the test issuer signed,
// against a server over TLS that trusts the issuer. It creates a table,
// writes, queries and runs batches as a Storage Table Data Contributor,
// gets 403 where a Reader or an identity without a role may not go, and
// follows the 401 challenge to the issuer's tenant. Like TestJSInterop it
// needs Node (required in CI).
func TestJSBearer(t *testing.T) {
	t.Parallel()
	runNode(t, "bearer.js", bearerScriptEnv(t)...)
}

// TestPythonBearer runs testdata/python/bearer.py, the checks of
// TestJSBearer with the Python SDK (azure-data-tables, required in CI).
func TestPythonBearer(t *testing.T) {
	t.Parallel()
	runPython(t, "bearer.py", bearerScriptEnv(t)...)
}

// bearerScriptEnv starts an issuer and a server over TLS that trusts it,
// and returns the environment of the bearer.* scripts: the endpoint, the
// issuer's tenant, the server's certificate (PGTABLES_CA, and
// NODE_EXTRA_CA_CERTS for Node), and tokens in JSON: contributor, reader,
// none (no role) and foreign (an untrusted issuer's).
func bearerScriptEnv(t *testing.T) []string {
	t.Helper()
	e, iss := newBearerEnv(t)
	untrusted := testissuer.New(t)
	ca := filepath.Join(t.TempDir(), "pgtables.pem")
	if err := os.WriteFile(ca, e.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{
		"contributor": iss.Token(t, iss.StandardClaims("script-writer", roleContributor)),
		"reader":      iss.Token(t, iss.StandardClaims("script-reader", roleReader)),
		"none":        iss.Token(t, iss.StandardClaims("script-nobody")),
		"foreign":     untrusted.Token(t, untrusted.StandardClaims("script-writer", roleContributor)),
	}
	return []string{
		"PGTABLES_CA=" + ca,
		"NODE_EXTRA_CA_CERTS=" + ca,
		"PGTABLES_ENDPOINT=" + e.svcURL,
		"PGTABLES_TENANT=" + testissuer.TenantID,
		"PGTABLES_TOKENS=" + jsonString(t, tokens),
	}
}
