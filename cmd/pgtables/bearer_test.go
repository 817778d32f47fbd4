package main

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/internal/testissuer"
	"github.com/pgtables/pgtables/tokenauth"
)

// The command serves bearer tokens as its settings say: the issuer's keys
// fetched through PGTABLES_OIDC_CA_FILE, the grant rules of
// PGTABLES_OIDC_GRANTS, the 401 challenge, and an account that refuses
// Shared Key.
func TestServeBearerTokens(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "issuer-ca.pem")
	if err := os.WriteFile(ca, iss.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, pool := selfSignedCert(t)
	s := startServer(t, map[string]string{
		"PGTABLES_DATABASE_URL":        testdb.New(t),
		"PGTABLES_TLS_CERT":            certFile,
		"PGTABLES_TLS_KEY":             keyFile,
		"PGTABLES_LOG_LEVEL":           "error",
		"PGTABLES_OIDC_ISSUERS":        iss.URL,
		"PGTABLES_OIDC_CA_FILE":        ca,
		"PGTABLES_OIDC_GRANTS":         `[{"claim":"groups","value":"writers","account":"*","permissions":["read","write"]}]`,
		"PGTABLES_DISALLOW_SHARED_KEY": httpapi.DevAccount,
	})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitStatus(t, hc, s.base+"/-/ready", http.StatusOK)

	writer := iss.StandardClaims("writer")
	writer["groups"] = []string{"writers"}
	builtin := iss.StandardClaims("contributor", tokenauth.RoleTableDataContributor)
	for _, tc := range []struct {
		name, authz, wantCode string
		want                  int
	}{
		{"a token the rules grant", "Bearer " + iss.Token(t, writer), "", http.StatusCreated},
		{"built-in role names are replaced by the rules", "Bearer " + iss.Token(t, builtin), "AuthorizationPermissionMismatch", http.StatusForbidden},
		{"no credential", "", "NoAuthenticationInformation", http.StatusUnauthorized},
		{"Shared Key on a keyless account", "SharedKeyLite " + httpapi.DevAccount + ":c2lnbmF0dXJl", "KeyBasedAuthenticationNotPermitted", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", s.base+"/"+httpapi.DevAccount+"/Tables", strings.NewReader(`{"TableName":"`+randomName("bearer")+`"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-ms-version", "2019-02-02")
			if tc.authz != "" {
				req.Header.Set("Authorization", tc.authz)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want || resp.Header.Get("x-ms-error-code") != tc.wantCode {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, resp.Header.Get("x-ms-error-code"), tc.want, tc.wantCode)
			}
			if tc.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer authorization_uri="+iss.URL+" ") {
				t.Errorf("challenge %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}
