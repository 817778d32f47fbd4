package integration

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testissuer"
	"github.com/pgtables/pgtables/tokenauth"
)

// Helpers of the bearer token suites: a pgtables server that trusts a test
// issuer, and a TokenCredential of the Go SDK that gets its tokens there.

// bearerConfig is a server configuration that trusts iss, with the
// default grants (Azure's built-in role names) unless rules are given.
func bearerConfig(t testing.TB, iss *testissuer.Issuer, rules ...tokenauth.Rule) httpapi.Config {
	t.Helper()
	v, err := tokenauth.NewVerifier(tokenauth.Config{
		Issuers:    []string{iss.URL},
		HTTPClient: iss.Client(),
		// Short, so that a rotation test does not wait long for a new
		// kid to be learnt.
		MinRefreshInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tokenauth.NewMapper(rules)
	if err != nil {
		t.Fatal(err)
	}
	return httpapi.Config{Version: "test", Bearer: &httpapi.BearerConfig{Verifier: v, Mapper: m}}
}

// newBearerEnv starts an issuer and a pgtables server over TLS trusting it.
func newBearerEnv(t *testing.T) (*env, *testissuer.Issuer) {
	t.Helper()
	iss := testissuer.New(t)
	return newTLSEnv(t, bearerConfig(t, iss)), iss
}

// tokenCredential is an azcore.TokenCredential whose tokens the test
// issuer signs, with the claims claims returns; it notes the scopes the SDK
// asks for.
type tokenCredential struct {
	t      testing.TB
	iss    *testissuer.Issuer
	claims func() testissuer.Claims

	mu     sync.Mutex
	scopes [][]string
	calls  int
}

func (c *tokenCredential) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.mu.Lock()
	c.scopes = append(c.scopes, o.Scopes)
	c.calls++
	c.mu.Unlock()
	claims := c.claims()
	exp, _ := claims["exp"].(int64)
	return azcore.AccessToken{Token: c.iss.Token(c.t, claims), ExpiresOn: time.Unix(exp, 0)}, nil
}

// roleCredential is a credential for subject with roles, its tokens valid
// for an hour (the SDK keeps and reuses them).
func roleCredential(t testing.TB, iss *testissuer.Issuer, subject string, roles ...string) *tokenCredential {
	return &tokenCredential{t: t, iss: iss, claims: func() testissuer.Claims { return iss.StandardClaims(subject, roles...) }}
}

// tokenServiceClient is a Go SDK service client of e that authenticates
// with cred.
func (e *env) tokenServiceClient(cred azcore.TokenCredential) *aztables.ServiceClient {
	e.t.Helper()
	c, err := aztables.NewServiceClient(e.svcURL, cred, e.clientOptions())
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// bearer is an Authorization header value for token.
func bearer(token string) *string { return strp("Bearer " + token) }

// jsonString renders v as JSON, for environment variables of scripts.
func jsonString(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
