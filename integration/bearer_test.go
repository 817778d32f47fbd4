package integration

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testissuer"
	"github.com/pgtables/pgtables/store"
	"github.com/pgtables/pgtables/tokenauth"
)

// The bearer token suites: the Go SDK with a TokenCredential against a
// server that trusts a test issuer (over TLS, as the SDK demands), the
// tokens a careful resource server refuses, key rotation under load, and
// Shared Key beside tokens.

const (
	roleReader      = tokenauth.RoleTableDataReader
	roleContributor = tokenauth.RoleTableDataContributor
)

// wantChallenge asserts Azure's 401 for a bearer token: the code, and the
// challenge from which the SDKs learn the tenant and the resource.
func wantChallenge(t testing.TB, r *rawResponse, code string, iss *testissuer.Issuer) {
	t.Helper()
	wantError(t, r, http.StatusUnauthorized, code)
	want := "Bearer authorization_uri=" + iss.URL + " resource_id=https://storage.azure.com"
	if got := r.header.Get("WWW-Authenticate"); got != want {
		t.Errorf("WWW-Authenticate %q, want %q", got, want)
	}
}

// TestBearerGoSDKByRole drives the server with the Go SDK and a
// TokenCredential: a Storage Table Data Contributor creates tables, writes,
// queries and runs batches; a Reader reads but gets 403
// AuthorizationPermissionMismatch on writes; an identity without a role
// gets 403 on everything.
func TestBearerGoSDKByRole(t *testing.T) {
	t.Parallel()
	e, iss := newBearerEnv(t)
	contributorCred := roleCredential(t, iss, "app-writer", roleContributor)
	contributor := e.tokenServiceClient(contributorCred)
	reader := e.tokenServiceClient(roleCredential(t, iss, "app-reader", roleReader))
	nobody := e.tokenServiceClient(roleCredential(t, iss, "app-none", "Storage Blob Data Owner"))
	name := fmt.Sprintf("bearer%d", time.Now().UnixNano()%1e9)

	if _, err := contributor.CreateTable(bg, name, nil); err != nil {
		t.Fatalf("contributor creates a table: %v", err)
	}
	c := contributor.NewClient(name)
	entity := func(pk, rk string, n int) []byte {
		return mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": rk, "N": n})
	}
	if _, err := c.AddEntity(bg, entity("p", "1", 1), nil); err != nil {
		t.Fatalf("contributor adds: %v", err)
	}
	if _, err := c.UpsertEntity(bg, entity("p", "2", 2), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeMerge}); err != nil {
		t.Fatalf("contributor upserts: %v", err)
	}
	got, err := c.GetEntity(bg, "p", "1", nil)
	if err != nil {
		t.Fatalf("contributor reads: %v", err)
	}
	if _, err := c.UpdateEntity(bg, entity("p", "1", 10), &aztables.UpdateEntityOptions{IfMatch: &got.ETag, UpdateMode: aztables.UpdateModeReplace}); err != nil {
		t.Fatalf("contributor updates: %v", err)
	}
	actions := []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeAdd, Entity: entity("p", "3", 3)},
		{ActionType: aztables.TransactionTypeInsertReplace, Entity: entity("p", "4", 4)},
		{ActionType: aztables.TransactionTypeDelete, Entity: entity("p", "2", 0)},
	}
	if _, err := c.SubmitTransaction(bg, actions, nil); err != nil {
		t.Fatalf("contributor's batch: %v", err)
	}
	if keys := listKeys(t, c); !slices.Equal(keys, []string{"p/1", "p/3", "p/4"}) {
		t.Fatalf("after the batch: %v", keys)
	}
	filter := "N ge 4"
	pager := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
	page, err := pager.NextPage(bg)
	if err != nil || len(page.Entities) != 2 {
		t.Fatalf("contributor queries N ge 4: %d entities, %v", len(page.Entities), err)
	}

	r := reader.NewClient(name)
	t.Run("reader", func(t *testing.T) {
		if _, err := r.GetEntity(bg, "p", "1", nil); err != nil {
			t.Errorf("reads an entity: %v", err)
		}
		if keys := listKeys(t, r); len(keys) != 3 {
			t.Errorf("queries: %v", keys)
		}
		if _, err := reader.NewListTablesPager(nil).NextPage(bg); err != nil {
			t.Errorf("lists tables: %v", err)
		}
		_, err := r.AddEntity(bg, entity("p", "9", 9), nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthorizationPermissionMismatch")
		_, err = r.DeleteEntity(bg, "p", "1", nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthorizationPermissionMismatch")
		_, err = reader.CreateTable(bg, name+"r", nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthorizationPermissionMismatch")
		_, err = r.SubmitTransaction(bg, []aztables.TransactionAction{{ActionType: aztables.TransactionTypeAdd, Entity: entity("p", "8", 8)}}, nil)
		if err == nil || !strings.Contains(err.Error(), "AuthorizationPermissionMismatch") {
			t.Errorf("a reader's batch: got %v, want AuthorizationPermissionMismatch", err)
		}
		_, err = r.GetAccessPolicy(bg, nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthorizationPermissionMismatch")
	})
	t.Run("no role", func(t *testing.T) {
		n := nobody.NewClient(name)
		_, err := n.GetEntity(bg, "p", "1", nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthorizationPermissionMismatch")
		_, err = nobody.NewListTablesPager(nil).NextPage(bg)
		wantRespErr(t, err, http.StatusForbidden, "AuthorizationPermissionMismatch")
		_, err = nobody.CreateTable(bg, name+"n", nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthorizationPermissionMismatch")
	})
	if keys := listKeys(t, c); len(keys) != 3 {
		t.Fatalf("refused writes changed the table: %v", keys)
	}
	if _, err := c.DeleteEntity(bg, "p", "1", nil); err != nil {
		t.Fatalf("contributor deletes an entity: %v", err)
	}
	if _, err := contributor.DeleteTable(bg, name, nil); err != nil {
		t.Fatalf("contributor deletes the table: %v", err)
	}
	contributorCred.mu.Lock()
	defer contributorCred.mu.Unlock()
	for _, s := range contributorCred.scopes {
		if !slices.Equal(s, []string{"https://storage.azure.com/.default"}) {
			t.Errorf("the SDK asked for scopes %q", s)
		}
	}
}

// TestBearerRefusedTokens: each token a careful resource server refuses
// gets 401 InvalidAuthenticationInfo with the challenge, as from Azure; no
// credential at all gets 401 NoAuthenticationInformation.
func TestBearerRefusedTokens(t *testing.T) {
	t.Parallel()
	e, iss := newBearerEnv(t)
	other := testissuer.New(t)
	key := iss.SigningKey()
	stranger := iss.NewKey(t, "RS256")
	claims := func(mod func(testissuer.Claims)) testissuer.Claims {
		c := iss.StandardClaims("mallory", roleContributor)
		mod(c)
		return c
	}
	keep := func(testissuer.Claims) {}
	now := time.Now()
	valid := iss.Token(t, claims(keep))
	tests := []struct {
		name  string
		token string
	}{
		{"expired", iss.Token(t, claims(func(c testissuer.Claims) { c["exp"] = now.Add(-time.Hour).Unix() }))},
		{"not yet valid", iss.Token(t, claims(func(c testissuer.Claims) { c["nbf"] = now.Add(time.Hour).Unix() }))},
		{"wrong audience", iss.Token(t, claims(func(c testissuer.Claims) { c["aud"] = "https://vault.azure.net" }))},
		{"wrong issuer", other.Token(t, claims(func(c testissuer.Claims) { c["iss"] = other.URL }))},
		{"issuer claimed, other issuer's key", other.Token(t, claims(keep))},
		{"bad signature", testissuer.Tamper(t, valid, claims(func(c testissuer.Claims) { c["sub"] = "root" }))},
		{"alg none", testissuer.Unsigned(t, claims(keep))},
		{"HMAC-signed with the issuer's public key", testissuer.HMACWithPublicKey(t, key, claims(keep))},
		{"unknown kid", testissuer.Sign(t, stranger, map[string]any{"alg": "RS256", "kid": stranger.ID}, claims(keep))},
		{"oversize", iss.Token(t, claims(func(c testissuer.Claims) { c["pad"] = strings.Repeat("x", 20000) }))},
		{"not a JWT", "opaque-token"},
	}
	path := "/" + httpapi.DevAccount + "/Tables"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.send(rawReq{method: "GET", path: path, authz: bearer(tt.token)})
			wantChallenge(t, r, "InvalidAuthenticationInfo", iss)
		})
	}
	t.Run("no credential", func(t *testing.T) {
		r := e.send(rawReq{method: "GET", path: path, authz: strp("")})
		wantChallenge(t, r, "NoAuthenticationInformation", iss)
	})
	t.Run("valid token", func(t *testing.T) {
		if r := e.send(rawReq{method: "GET", path: path, authz: bearer(valid)}); r.status != http.StatusOK {
			t.Fatalf("got %d %s", r.status, trunc(r.body))
		}
	})
	t.Run("old x-ms-version", func(t *testing.T) {
		r := e.send(rawReq{method: "GET", path: path, authz: bearer(valid), header: map[string]string{"x-ms-version": "2015-12-11"}})
		wantError(t, r, http.StatusForbidden, "AuthenticationFailed")
	})
	t.Run("the Go SDK with an expired token", func(t *testing.T) {
		cred := &tokenCredential{t: t, iss: iss, claims: func() testissuer.Claims {
			return claims(func(c testissuer.Claims) { c["exp"] = now.Add(-time.Hour).Unix() })
		}}
		_, err := e.tokenServiceClient(cred).CreateTable(bg, "expiredtoken", nil)
		wantRespErr(t, err, http.StatusUnauthorized, "InvalidAuthenticationInfo")
	})
	m := e.metrics(t)
	if m[`pgtables_authentications_total{outcome="failure",scheme="bearer"}`] < float64(len(tests)) ||
		m[`pgtables_authentications_total{outcome="failure",scheme="none"}`] != 1 ||
		m[`pgtables_authentications_total{outcome="success",scheme="bearer"}`] < 1 {
		t.Errorf("authentication metrics: %v", m)
	}
}

// TestBearerKeyRotationUnderLoad rotates the issuer's signing key while
// clients keep sending requests with fresh tokens, the new key signing
// at once when it is published (the server has not seen it yet): no
// request with a valid token fails.
func TestBearerKeyRotationUnderLoad(t *testing.T) {
	t.Parallel()
	e, iss := newBearerEnv(t)
	c, table := e.newTable()
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r"}), nil); err != nil {
		t.Fatal(err)
	}
	cred := roleCredential(t, iss, "rotating", roleReader)
	var stop atomic.Bool
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				// A new client gets a new token, signed with the key
				// that signs now: the SDK keeps a token for its
				// client's life.
				client := e.tokenServiceClient(cred).NewClient(table)
				if _, err := client.GetEntity(bg, "p", "r", nil); err != nil {
					failed.Add(1)
					select {
					case errs <- err:
					default:
					}
				}
				done.Add(1)
			}
		})
	}
	waitFor := func(n int64) {
		for deadline := time.Now().Add(30 * time.Second); done.Load() < n && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(20)
	old := iss.SigningKey()
	for _, alg := range []string{"ES256", "RS256", "ES256"} {
		next := iss.NewKey(t, alg)
		iss.Publish(next)
		iss.SignWith(next)
		waitFor(done.Load() + 20)
		// Tokens of the old key are no longer made and those in flight
		// have been answered: it may go.
		iss.Retire(old)
		old = next
		waitFor(done.Load() + 20)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests with valid tokens failed during the rotations, e.g. %v", n, done.Load(), <-errs)
	}
	if n := iss.JWKSFetches(); n < 4 {
		t.Errorf("the JWKS was fetched %d times: the rotations were not noticed", n)
	}
	if cred.calls < int(done.Load()) {
		t.Errorf("the SDK asked for %d tokens for %d requests: they did not all carry fresh ones", cred.calls, done.Load())
	}
}

// TestBearerBesideSharedKey: with tokens on, Shared Key and SAS keep
// working; an account set to refuse Shared Key refuses them with 403
// KeyBasedAuthenticationNotPermitted and still takes tokens.
func TestBearerBesideSharedKey(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	cfg := bearerConfig(t, iss)
	accts, err := httpapi.ParseAccounts(httpapi.DevAccount + ":" + httpapi.DevKey + ";tokensonly:" + httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := accts.RefuseSharedKey([]string{"tokensonly"}); err != nil {
		t.Fatal(err)
	}
	cfg.Accounts = accts
	e := newTLSEnv(t, cfg)
	_, table := e.newTable() // Shared Key Lite, through the SDK
	sas := svcSAS{tn: table, sp: "r", se: inAnHour()}.encode()
	if _, err := e.sasTableClient(table, sas).GetEntity(bg, "none", "none", nil); err == nil || !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Fatalf("a SAS beside tokens: %v", err)
	}
	for _, scheme := range []string{"SharedKey", "SharedKeyLite"} {
		r := e.send(rawReq{method: "GET", path: "/tokensonly/Tables", account: "tokensonly", scheme: scheme})
		wantError(t, r, http.StatusForbidden, "KeyBasedAuthenticationNotPermitted")
	}
	// Refused before its signature counts, so the account it is signed
	// for does not matter.
	acctSASQuery := acctSAS{ss: "t", srt: "sco", sp: "rl", se: inAnHour()}.encode()
	r := e.send(rawReq{method: "GET", path: "/tokensonly/Tables?" + acctSASQuery, authz: strp("")})
	wantError(t, r, http.StatusForbidden, "KeyBasedAuthenticationNotPermitted")
	token := iss.Token(t, iss.StandardClaims("svc", roleContributor))
	if r := e.send(rawReq{method: "POST", path: "/tokensonly/Tables", authz: bearer(token), body: []byte(`{"TableName":"viatoken"}`)}); r.status != http.StatusCreated {
		t.Fatalf("a token on the keyless account: %d %s", r.status, trunc(r.body))
	}
}

// TestBearerOverPlainHTTP: a token sent over plain http is refused (403
// AuthenticationFailed), unless a trusted proxy says the client used https,
// or the operator allows it.
func TestBearerOverPlainHTTP(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	token := iss.Token(t, iss.StandardClaims("svc", roleReader))
	path := "/" + httpapi.DevAccount + "/Tables"

	e := newEnvConfig(t, store.Options{}, bearerConfig(t, iss))
	r := e.send(rawReq{method: "GET", path: path, authz: bearer(token)})
	wantError(t, r, http.StatusForbidden, "AuthenticationFailed")
	// Not believed from a client that is no trusted proxy.
	r = e.send(rawReq{method: "GET", path: path, authz: bearer(token), header: map[string]string{"X-Forwarded-Proto": "https"}})
	wantError(t, r, http.StatusForbidden, "AuthenticationFailed")

	proxied := bearerConfig(t, iss)
	proxied.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	e = newEnvConfig(t, store.Options{}, proxied)
	if r := e.send(rawReq{method: "GET", path: path, authz: bearer(token), header: map[string]string{"X-Forwarded-Proto": "https"}}); r.status != http.StatusOK {
		t.Errorf("behind a trusted TLS proxy: %d %s", r.status, trunc(r.body))
	}

	allowed := bearerConfig(t, iss)
	allowed.Bearer.AllowHTTP = true
	e = newEnvConfig(t, store.Options{}, allowed)
	if r := e.send(rawReq{method: "GET", path: path, authz: bearer(token)}); r.status != http.StatusOK {
		t.Errorf("with http allowed: %d %s", r.status, trunc(r.body))
	}
}

// TestBearerAccessLogAndGrantRules: configured rules grant by claim on
// named tables, and the access log names the token's subject.
func TestBearerAccessLogAndGrantRules(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	rules, err := tokenauth.ParseRules(`[
		{"claim": "groups", "value": "loggers", "account": "` + httpapi.DevAccount + `", "table": "logs*", "permissions": ["read", "write"]}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	cfg := bearerConfig(t, iss, rules...)
	cfg.Bearer.AllowHTTP = true
	cfg.AccessLog = true
	e := newOpsEnv(t, opsConfig{http: cfg})
	claims := iss.StandardClaims("logger-7")
	claims["groups"] = []string{"loggers"}
	token := bearer(iss.Token(t, claims))
	acct := "/" + httpapi.DevAccount
	r := e.send(rawReq{method: "POST", path: acct + "/Tables", authz: token, body: []byte(`{"TableName":"logs2026"}`)})
	if r.status != http.StatusCreated {
		t.Fatalf("creating a table of the prefix: %d %s", r.status, trunc(r.body))
	}
	rec := e.logs.line(t, r.header.Get("x-ms-request-id"))
	if rec["subject"] != "logger-7" || rec["auth"] != "bearer" {
		t.Errorf("access log: subject %v, auth %v", rec["subject"], rec["auth"])
	}
	if r := e.send(rawReq{method: "POST", path: acct + "/logs2026", authz: token, body: []byte(`{"PartitionKey":"a","RowKey":"b"}`)}); r.status != http.StatusCreated {
		t.Errorf("inserting into it: %d %s", r.status, trunc(r.body))
	}
	r = e.send(rawReq{method: "POST", path: acct + "/Tables", authz: token, body: []byte(`{"TableName":"orders"}`)})
	wantError(t, r, http.StatusForbidden, "AuthorizationPermissionMismatch")
	r = e.send(rawReq{method: "DELETE", path: acct + "/logs2026(PartitionKey='a',RowKey='b')", authz: token, header: map[string]string{"If-Match": "*"}})
	wantError(t, r, http.StatusForbidden, "AuthorizationPermissionMismatch")
	r = e.send(rawReq{method: "GET", path: acct + "/Tables", authz: token})
	wantError(t, r, http.StatusForbidden, "AuthorizationPermissionMismatch")
}

var _ azcore.TokenCredential = (*tokenCredential)(nil)
