package integration

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/internal/testserver"
	"github.com/pgtables/pgtables/store"
)

// env is one pgtables server on its own database schema.
type env struct {
	t       testing.TB
	baseURL string // http://127.0.0.1:port
	svcURL  string // baseURL + "/devstoreaccount1"
	pool    *pgxpool.Pool
	store   *store.Store
	srv     *httpapi.Server
	service *aztables.ServiceClient
	// client sends raw requests; over TLS it trusts the server's
	// certificate.
	client *http.Client
	// certPEM is the server's certificate when it serves TLS.
	certPEM []byte

	// what restart needs to start the same server again
	dsn      string
	opts     store.Options
	cfg      httpapi.Config
	tlsServe bool
	stop     func()
}

var tableSeq atomic.Int64

// newEnv starts pgtables on a fresh schema and returns clients for it.
func newEnv(t testing.TB) *env {
	t.Helper()
	if testdb.Local() {
		return newLocalEnv(t)
	}
	return newEnvWith(t, store.Options{})
}

// newEnvWith is newEnv with a store tuned by opts (zero fields: defaults).
func newEnvWith(t testing.TB, opts store.Options) *env {
	t.Helper()
	return newEnvConfig(t, opts, httpapi.Config{Version: "test"})
}

// newEnvConfig is newEnvWith with a server configured by cfg. Its service
// client signs as the development account, which cfg.Accounts may lack.
func newEnvConfig(t testing.TB, opts store.Options, cfg httpapi.Config) *env {
	t.Helper()
	needInProcess(t)
	return startEnv(t, testserver.Database(t), opts, cfg, false)
}

// newTLSEnv is newEnvConfig with the server on HTTPS (a certificate of
// its own, which e.client and e.service trust): the SDKs send bearer
// tokens over HTTPS only.
func newTLSEnv(t testing.TB, cfg httpapi.Config) *env {
	t.Helper()
	needInProcess(t)
	return startEnv(t, testserver.Database(t), store.Options{}, cfg, true)
}

// restart stops e's server and its pool and starts a new pgtables process,
// as far as a test can have one, on the same database: a new pool, store
// and server on a new port. It returns the new env; e must not be used.
func (e *env) restart() *env {
	e.t.Helper()
	needInProcess(e.t)
	e.stop()
	return startEnv(e.t, e.dsn, e.opts, e.cfg, e.tlsServe)
}

// startEnv serves pgtables on the migrated database dsn, over TLS when
// tlsServe is set.
func startEnv(t testing.TB, dsn string, opts store.Options, cfg httpapi.Config, tlsServe bool) *env {
	t.Helper()
	s := testserver.Start(t, dsn, testserver.Config{Store: opts, HTTP: cfg, TLS: tlsServe})
	e := &env{t: t, pool: s.Pool, store: s.Store, srv: s.HTTP, baseURL: s.URL, stop: s.Stop,
		dsn: dsn, opts: opts, cfg: cfg, tlsServe: tlsServe}
	if tlsServe {
		e.client, e.certPEM = s.Client, s.CertPEM
	}
	e.connect()
	return e
}

// connect sets e's service URL and its client, which signs as the
// development account, from e.baseURL.
func (e *env) connect() {
	e.t.Helper()
	e.svcURL = e.baseURL + "/" + httpapi.DevAccount
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		e.t.Fatal(err)
	}
	e.service, err = aztables.NewServiceClientWithSharedKey(e.svcURL, cred, e.clientOptions())
	if err != nil {
		e.t.Fatal(err)
	}
}

// clientOptions turns off SDK retries so that a failure shows at once.
func clientOptions() *aztables.ClientOptions {
	return &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}
}

// httpClient is the client for raw requests to e's server.
func (e *env) httpClient() *http.Client {
	if e.client == nil {
		return http.DefaultClient
	}
	return e.client
}

// clientOptions are clientOptions() for e's server: over TLS, with a
// transport that trusts its certificate.
func (e *env) clientOptions() *aztables.ClientOptions {
	o := clientOptions()
	if e.tlsServe {
		o.Transport = e.httpClient()
	}
	return o
}

// newTable creates a table with a unique name and returns its client.
func (e *env) newTable() (*aztables.Client, string) {
	e.t.Helper()
	name := fmt.Sprintf("t%d%d", time.Now().UnixNano()%1e9, tableSeq.Add(1))
	if _, err := e.service.CreateTable(context.Background(), name, nil); err != nil {
		e.t.Fatalf("create table %s: %v", name, err)
	}
	return e.service.NewClient(name), name
}

// rawResponse is a response read whole.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request signed with Shared Key Lite for the development
// account. path is what follows the host (it starts with /devstoreaccount1
// for path-style requests) and goes on the wire unchanged.
func (e *env) do(method, path string, header map[string]string, body []byte) *rawResponse {
	e.t.Helper()
	req := e.signedRequest(method, path, body)
	req.Header.Set("x-ms-version", "2019-02-02")
	req.Header.Set("Accept", "application/json;odata=minimalmetadata")
	req.Header.Set("DataServiceVersion", "3.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := e.httpClient().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

// signedRequest is a request of path (as e.do takes it) with its date
// and a Shared Key Lite signature of the development account.
func (e *env) signedRequest(method, path string, body []byte) *http.Request {
	e.t.Helper()
	req, err := http.NewRequest(method, e.baseURL+"/", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	rawPath, rawQuery, _ := strings.Cut(path, "?")
	req.URL.Opaque = rawPath
	req.URL.RawQuery = rawQuery
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", "SharedKeyLite "+httpapi.DevAccount+":"+signLite(date, rawPath, rawQuery))
	return req
}

func signLite(date, rawPath, rawQuery string) string {
	res := "/" + httpapi.DevAccount + rawPath
	for _, kv := range strings.Split(rawQuery, "&") {
		if v, ok := strings.CutPrefix(kv, "comp="); ok {
			res += "?comp=" + v
		}
	}
	key, _ := base64.StdEncoding.DecodeString(httpapi.DevKey)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(date + "\n" + res))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}
