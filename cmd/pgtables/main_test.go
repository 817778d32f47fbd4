package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/migrations"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	t.Parallel()
	c, rest, err := parseConfig("x", nil, env(nil), io.Discard)
	if err != nil || len(rest) != 0 {
		t.Fatal(err, rest)
	}
	if c.listen != "127.0.0.1:10002" || c.dbMaxConns != 20 || c.dbCombine != 0 || c.shutdownGrace != 30*time.Second || c.logLevel != "info" {
		t.Errorf("defaults: %+v", c)
	}
	c, _, err = parseConfig("x", []string{"-listen", "127.0.0.1:1"}, env(map[string]string{
		"PGTABLES_LISTEN": "127.0.0.1:2", "PGTABLES_DB_MAX_CONNS": "7", "PGTABLES_ACCOUNTS": "a", "PGTABLES_DB_COMBINE": "3",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.listen != "127.0.0.1:1" || c.dbMaxConns != 7 || c.accounts != "a" || c.dbCombine != 3 {
		t.Errorf("flag over env: %+v", c)
	}
	for _, bad := range []map[string]string{
		{"PGTABLES_DB_MAX_CONNS": "0"},
		{"PGTABLES_DB_COMBINE": "-1"},
		{"PGTABLES_SHUTDOWN_GRACE": "soon"},
		{"PGTABLES_DB_ACQUIRE_TIMEOUT": "-1s"},
		{"PGTABLES_MAX_CONCURRENT_REQUESTS": "many"},
		{"PGTABLES_MAX_HEADER_BYTES": "100"},
		{"PGTABLES_ACCESS_LOG": "perhaps"},
		{"PGTABLES_TLS_CERT": "cert.pem"},
	} {
		if _, _, err := parseConfig("x", nil, env(bad), io.Discard); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

func TestParseConfigOperations(t *testing.T) {
	t.Parallel()
	c, _, err := parseConfig("x", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.dbAcquireTimeout != 2*time.Second || c.shutdownDelay != 0 || c.readHeaderTimeout != 10*time.Second ||
		c.readTimeout != time.Minute || c.writeTimeout != time.Minute || c.idleTimeout != 2*time.Minute ||
		c.requestTimeout != 30*time.Second || c.maxHeaderBytes != 64<<10 || c.maxBodyBytes != 4<<20 ||
		c.maxConcurrent != 512 || !c.accessLog || c.tlsCert != "" || c.trustedProxies != "" {
		t.Errorf("defaults: %+v", c)
	}
	c, _, err = parseConfig("x", []string{"-max-concurrent-requests", "0", "-access-log=false", "-request-timeout", "5s"}, env(map[string]string{
		"PGTABLES_MAX_CONCURRENT_REQUESTS": "7",
		"PGTABLES_REQUEST_TIMEOUT":         "bad", // replaced by the flag: no error
		"PGTABLES_DB_ACQUIRE_TIMEOUT":      "1500ms",
		"PGTABLES_TRUSTED_PROXIES":         "10.0.0.0/8",
		"PGTABLES_TLS_CERT":                "c.pem",
		"PGTABLES_TLS_KEY":                 "k.pem",
		"PGTABLES_SHUTDOWN_DELAY":          "5s",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.maxConcurrent != 0 || c.accessLog || c.requestTimeout != 5*time.Second || c.dbAcquireTimeout != 1500*time.Millisecond ||
		c.trustedProxies != "10.0.0.0/8" || c.tlsCert != "c.pem" || c.tlsKey != "k.pem" || c.shutdownDelay != 5*time.Second {
		t.Errorf("env and flags: %+v", c)
	}
	if _, _, err := parseConfig("x", []string{"-read-timeout", "later"}, env(nil), io.Discard); err == nil {
		t.Error("bad flag value accepted")
	}
}

func TestReadyURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ listen, cert, want string }{
		{"127.0.0.1:10002", "", "http://127.0.0.1:10002/-/ready"},
		{"0.0.0.0:10002", "", "http://127.0.0.1:10002/-/ready"},
		{":8080", "c.pem", "https://127.0.0.1:8080/-/ready"},
		{"[::]:10002", "", "http://127.0.0.1:10002/-/ready"},
		{"[::1]:10002", "", "http://[::1]:10002/-/ready"},
	} {
		got, err := readyURL(&config{listen: tc.listen, tlsCert: tc.cert})
		if err != nil || got != tc.want {
			t.Errorf("readyURL(%q) = %q, %v; want %q", tc.listen, got, err, tc.want)
		}
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, env(nil), &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "pgtables ") {
		t.Errorf("version: %q %v", out.String(), err)
	}
	if err := run(context.Background(), []string{"frobnicate"}, env(nil), io.Discard, io.Discard); err == nil {
		t.Error("unknown command accepted")
	}
	// A malformed PGTABLES_ACCOUNTS stops the server before it listens.
	for _, bad := range []string{"UPPER:" + httpapi.DevKey, "acct1:not base64!", "acct1", "a:" + httpapi.DevKey} {
		err := run(context.Background(), nil, env(map[string]string{"PGTABLES_ACCOUNTS": bad, "PGTABLES_LISTEN": freeAddr(t), "PGTABLES_LOG_LEVEL": "error"}), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "accounts") {
			t.Errorf("PGTABLES_ACCOUNTS=%q: %v, want an accounts error", bad, err)
		}
	}
	dsn := testdb.New(t)
	if err := run(context.Background(), []string{"migrate"}, env(map[string]string{"PGTABLES_DATABASE_URL": dsn}), io.Discard, io.Discard); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	v, dirty, err := migrations.Version(dsn)
	latest, _ := migrations.Latest()
	if err != nil || dirty || v != latest {
		t.Errorf("after migrate: version %d dirty %v err %v", v, dirty, err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The server answers /-/healthy at once, /-/ready only once its database
// is migrated, and stops cleanly when its context ends.
func TestServeReadiness(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		dsn       string
		wantReady int
	}{
		{"database up", testdb.New(t), http.StatusOK},
		{"database down", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1", http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, nil, env(map[string]string{"PGTABLES_DATABASE_URL": tc.dsn, "PGTABLES_LISTEN": addr, "PGTABLES_LOG_LEVEL": "error"}), io.Discard, io.Discard)
			}()
			base := "http://" + addr
			deadline := time.Now().Add(20 * time.Second)
			for get(base+"/-/healthy") != http.StatusOK {
				if time.Now().After(deadline) {
					t.Fatal("never healthy")
				}
				time.Sleep(20 * time.Millisecond)
			}
			ready := get(base + "/-/ready")
			if tc.wantReady == http.StatusOK {
				for ready != http.StatusOK && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
					ready = get(base + "/-/ready")
				}
			} else {
				time.Sleep(time.Second) // long enough for a first migration attempt to fail
				ready = get(base + "/-/ready")
			}
			if ready != tc.wantReady {
				t.Errorf("/-/ready = %d, want %d", ready, tc.wantReady)
			}
			if tc.wantReady != http.StatusOK {
				// Protocol requests are refused as retryable until migrated.
				resp, err := http.Get(base + "/devstoreaccount1/Tables")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("x-ms-error-code") != "ServerBusy" {
					t.Errorf("request before migration: %d %s", resp.StatusCode, resp.Header.Get("x-ms-error-code"))
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not stop")
			}
		})
	}
}

func TestPurgeGraceOutlastsRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{30 * time.Second, 2 * time.Minute},
		{5 * time.Minute, 10 * time.Minute},
		{0, 10 * time.Minute},
	} {
		if got := purgeConfig(&config{requestTimeout: tc.timeout}).Grace; got != tc.want {
			t.Errorf("request timeout %v: grace %v, want %v", tc.timeout, got, tc.want)
		}
	}
}

func TestParseConfigBearer(t *testing.T) {
	t.Parallel()
	c, _, err := parseConfig("x", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := bearerConfig(c); b != nil || err != nil {
		t.Fatalf("without issuers: %v, %v", b, err)
	}
	if c.oidcAudiences != "https://storage.azure.com,https://storage.azure.com/" || c.oidcLeeway != time.Minute || c.oidcFetchTimeout != 10*time.Second || c.oidcAllowHTTP {
		t.Errorf("defaults: %+v", c)
	}
	c, _, err = parseConfig("x", []string{"-oidc-allow-http"}, env(map[string]string{
		"PGTABLES_OIDC_ISSUERS":        "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0, https://keycloak.example.com/realms/apps",
		"PGTABLES_OIDC_GRANTS":         `[{"claim":"oid","value":"x","account":"*","permissions":["read"]}]`,
		"PGTABLES_DISALLOW_SHARED_KEY": "devstoreaccount1",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bearerConfig(c)
	if err != nil || b == nil || !b.AllowHTTP || len(b.Verifier.Issuers()) != 2 {
		t.Fatalf("bearer configuration: %+v, %v", b, err)
	}
	for _, bad := range []map[string]string{
		{"PGTABLES_OIDC_GRANTS": `[{"claim":"oid","value":"x","account":"*","permissions":["read"]}]`},
		{"PGTABLES_DISALLOW_SHARED_KEY": "devstoreaccount1"},
		{"PGTABLES_OIDC_LEEWAY": "a while"},
		{"PGTABLES_OIDC_ALLOW_HTTP": "maybe"},
	} {
		if _, _, err := parseConfig("x", nil, env(bad), io.Discard); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
	for _, bad := range []map[string]string{
		{"PGTABLES_OIDC_ISSUERS": "http://idp.example.com"},
		{"PGTABLES_OIDC_ISSUERS": "https://idp.example.com", "PGTABLES_OIDC_GRANTS": `[{"claim":"oid"}]`},
		{"PGTABLES_OIDC_ISSUERS": "https://idp.example.com", "PGTABLES_OIDC_CA_FILE": "/nonexistent/ca.pem"},
	} {
		c, _, err := parseConfig("x", nil, env(bad), io.Discard)
		if err == nil {
			_, err = bearerConfig(c)
		}
		if err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}
