package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testdb"
)

// TestMain lets a test run this very binary as the pgtables command, so
// that real signals and exit codes can be checked without building it.
func TestMain(m *testing.M) {
	if os.Getenv("PGTABLES_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// syncBuffer collects the server's log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is run serving in the background.
type testServer struct {
	addr   string
	base   string
	cancel context.CancelFunc // what SIGTERM does
	done   chan error         // run's result
	logs   *syncBuffer
}

// startServer runs the server with the settings in vars (and a free
// listen address) until the test ends or stop is called.
func startServer(t *testing.T, vars map[string]string) *testServer {
	t.Helper()
	s := &testServer{addr: freeAddr(t), done: make(chan error, 1), logs: &syncBuffer{}}
	s.base = "http://" + s.addr
	all := map[string]string{"PGTABLES_LISTEN": s.addr, "PGTABLES_LOG_LEVEL": "info", "PGTABLES_LOG_FORMAT": "text"}
	for k, v := range vars {
		all[k] = v
	}
	if all["PGTABLES_TLS_CERT"] != "" {
		s.base = "https://" + s.addr
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- run(ctx, nil, env(all), io.Discard, s.logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	return s
}

// wait polls url until it answers want, for up to 20 s.
func waitStatus(t *testing.T, client *http.Client, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		status := 0
		if resp, err := client.Get(url); err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		if status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answers %d, want %d", url, status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serviceClient is an aztables client for the development account of base
// with retries off, so that every answer shows.
func serviceClient(t *testing.T, base string, hc *http.Client) *aztables.ServiceClient {
	t.Helper()
	return accountClient(t, base, hc, httpapi.DevAccount, httpapi.DevKey)
}

// accountClient is serviceClient for another account and key.
func accountClient(t *testing.T, base string, hc *http.Client, account, key string) *aztables.ServiceClient {
	t.Helper()
	cred, err := aztables.NewSharedKeyCredential(account, key)
	if err != nil {
		t.Fatal(err)
	}
	opts := &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}
	if hc != nil {
		opts.Transport = hc
	}
	svc, err := aztables.NewServiceClientWithSharedKey(base+"/"+account, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	if err != nil {
		return -1
	}
	return 0
}

func randomName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// withParam returns the connection string dsn with a parameter added.
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// Requests in flight when the server is told to stop complete with 2xx;
// /-/ready turns 503 at once; after the shutdown delay new connections are
// refused; run returns nil once the requests are done.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.New(t)
	app := randomName("pgt_shutdown_")
	s := startServer(t, map[string]string{
		"PGTABLES_DATABASE_URL":   withParam(t, dsn, "application_name", app),
		"PGTABLES_SHUTDOWN_DELAY": "700ms",
		"PGTABLES_SHUTDOWN_GRACE": "20s",
	})
	waitStatus(t, http.DefaultClient, s.base+"/-/ready", http.StatusOK)
	svc := serviceClient(t, s.base, nil)
	if _, err := svc.CreateTable(ctx, "drain", nil); err != nil {
		t.Fatal(err)
	}
	const inFlight = 5
	updates := heldUpdates(t, dsn, svc.NewClient("drain"), inFlight)
	watch, err := pgx.Connect(ctx, dsn) // outside the transaction, whose view of pg_stat_activity stands still
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	// The store may combine concurrent writes into one round trip, so the
	// database sees between one and inFlight waiting backends; the server's
	// own gauge says that every request is in flight.
	waitFor(t, "updates waiting on the row locks", func() bool {
		select {
		case err := <-updates.results:
			t.Fatalf("update did not wait: %v", err)
		default:
		}
		var n int
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n)
		return err == nil && n >= 1 && requestsInFlight(t, s.base) == inFlight
	})

	s.cancel() // what SIGTERM does
	waitStatus(t, http.DefaultClient, s.base+"/-/ready", http.StatusServiceUnavailable)
	waitFor(t, "new connections refused", func() bool {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case err := <-s.done:
		t.Fatalf("run returned before the requests in flight finished: %v", err)
	default:
	}
	updates.release(t, "shutdown")
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
		s.done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return")
	}
	if logs := s.logs.String(); !strings.Contains(logs, "msg=stopped") {
		t.Errorf("no stop in the log:\n%s", logs)
	}
	// Without PGTABLES_ACCOUNTS the start-up log warns of the development
	// account.
	if logs := s.logs.String(); !strings.Contains(logs, "level=WARN msg=\"PGTABLES_ACCOUNTS is not set") {
		t.Errorf("no warning of the development account in the log:\n%s", logs)
	}
}

// held is n updates kept in flight by row locks: results gets each
// update's outcome once release has ended the locking transaction.
type held struct {
	results <-chan error
	tx      pgx.Tx // its connection closes when the test ends
	n       int
}

// release ends the locking transaction and checks that every update
// succeeded.
func (h *held) release(t *testing.T, when string) {
	t.Helper()
	if err := h.tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range h.n {
		if err := <-h.results; err != nil {
			t.Errorf("request in flight at %s: %v", when, err)
		}
	}
}

// heldUpdates inserts n entities into client's table, then holds their
// rows locked in a transaction of its own and starts a replace of each:
// n requests that stay in flight until release.
func heldUpdates(t *testing.T, dsn string, client *aztables.Client, n int) *held {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := client.AddEntity(ctx, fmt.Appendf(nil, `{"PartitionKey":"p","RowKey":"r%d","N":0}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close(ctx) })
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM entities FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	results := make(chan error, n)
	for i := range n {
		go func() {
			_, err := client.UpdateEntity(ctx, fmt.Appendf(nil, `{"PartitionKey":"p","RowKey":"r%d","N":1}`, i),
				&aztables.UpdateEntityOptions{IfMatch: new(azcore.ETagAny), UpdateMode: aztables.UpdateModeReplace})
			results <- err
		}()
	}
	return &held{results: results, tx: tx, n: n}
}

// requestsInFlight reads the server's gauge of API requests in flight.
func requestsInFlight(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/-/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "pgtables_http_requests_in_flight "); ok {
			var n int
			if _, err := fmt.Sscan(v, &n); err == nil {
				return n
			}
		}
	}
	t.Fatalf("no pgtables_http_requests_in_flight in /-/metrics:\n%s", body)
	return -1
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// /-/ready answers 503 while the database refuses the server, requests get
// a quick 503 ServerBusy meanwhile, and both recover on their own once the
// database takes the server again. The database is made unreachable by
// terminating the server's connections and forbidding its role new ones.
func TestReadinessFollowsDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.New(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	role := randomName("pgt_ready_")
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, sql := range []string{
		"CREATE ROLE " + role + " LOGIN PASSWORD 'pgtables'",
		"ALTER SCHEMA " + schema + " OWNER TO " + role,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	terminate := func() {
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, testdb.ServerURL(t))
		if err != nil {
			t.Log(err)
			return
		}
		defer c.Close(ctx)
		for _, sql := range []string{
			"ALTER ROLE " + role + " NOLOGIN",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + role + "'",
			"REASSIGN OWNED BY " + role + " TO CURRENT_USER",
			"DROP OWNED BY " + role,
			"DROP ROLE " + role,
		} {
			if _, err := c.Exec(ctx, sql); err != nil {
				t.Logf("cleanup %s: %v", sql, err)
			}
		}
	})
	u.User = url.UserPassword(role, "pgtables")
	s := startServer(t, map[string]string{
		"PGTABLES_DATABASE_URL":       u.String(),
		"PGTABLES_DB_ACQUIRE_TIMEOUT": "500ms",
		"PGTABLES_LOG_LEVEL":          "error",
	})
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs.String())
		}
	}()
	ready := s.base + "/-/ready"
	waitStatus(t, http.DefaultClient, ready, http.StatusOK)
	svc := serviceClient(t, s.base, nil)
	if _, err := svc.CreateTable(ctx, "flaky", nil); err != nil {
		t.Fatal(err)
	}
	client := svc.NewClient("flaky")
	if _, err := client.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"r"}`), nil); err != nil {
		t.Fatal(err)
	}

	if _, err := admin.Exec(ctx, "ALTER ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	terminate()
	waitStatus(t, http.DefaultClient, ready, http.StatusServiceUnavailable)
	start := time.Now()
	_, err = client.GetEntity(ctx, "p", "r", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusServiceUnavailable || re.ErrorCode != "ServerBusy" {
		t.Errorf("request while the database refuses us: %v", err)
	} else if re.RawResponse.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	t.Logf("503 ServerBusy after %v", time.Since(start))

	if _, err := admin.Exec(ctx, "ALTER ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, http.DefaultClient, ready, http.StatusOK)
	if _, err := client.GetEntity(ctx, "p", "r", nil); err != nil {
		t.Errorf("after the database came back: %v", err)
	}
}

// The command, run as its own process with accounts from
// PGTABLES_ACCOUNTS, serves them (either key of an account, not the
// development account) and, on a real SIGTERM with requests in flight,
// turns /-/ready to 503, lets those requests finish with 2xx, and exits 0.
func TestSIGTERMExitsZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := freeAddr(t)
	base := "http://" + addr
	dsn := testdb.New(t)
	app := randomName("pgt_sigterm_")
	key1 := base64.StdEncoding.EncodeToString([]byte("first key of the prod account, 48 bytes long.."))
	key2 := base64.StdEncoding.EncodeToString([]byte("second key of the prod account, 48 bytes long."))
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		"PGTABLES_TEST_RUN_MAIN=1",
		"PGTABLES_DATABASE_URL="+withParam(t, dsn, "application_name", app),
		"PGTABLES_LISTEN="+addr,
		"PGTABLES_ACCOUNTS=prod:"+key1+":"+key2+";other:"+key2,
		"PGTABLES_SHUTDOWN_DELAY=300ms",
		"PGTABLES_SHUTDOWN_GRACE=20s",
		"PGTABLES_LOG_FORMAT=text",
	)
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	waitStatus(t, http.DefaultClient, base+"/-/ready", http.StatusOK)
	if strings.Contains(logs.String(), "PGTABLES_ACCOUNTS is not set") {
		t.Errorf("warned of the development account with accounts configured:\n%s", logs.String())
	}

	// Either key of prod works; the development account is not served.
	first := accountClient(t, base, nil, "prod", key1)
	second := accountClient(t, base, nil, "prod", key2)
	if _, err := first.CreateTable(ctx, "drain", nil); err != nil {
		t.Fatalf("create table with prod's first key: %v", err)
	}
	if _, err := serviceClient(t, base, nil).CreateTable(ctx, "dev", nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("the development account: %v, want 403", err)
	}
	if _, err := accountClient(t, base, nil, "other", key1).CreateTable(ctx, "wrongkey", nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("another account's key: %v, want 403", err)
	}

	// Updates, signed with prod's second key, wait on row locks the test
	// holds: requests in flight.
	const inFlight = 4
	updates := heldUpdates(t, dsn, second.NewClient("drain"), inFlight)
	waitFor(t, "updates in flight", func() bool {
		select {
		case err := <-updates.results:
			t.Fatalf("update did not wait: %v", err)
		default:
		}
		return requestsInFlight(t, base) == inFlight
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, http.DefaultClient, base+"/-/ready", http.StatusServiceUnavailable)
	select {
	case err := <-exited:
		t.Fatalf("exited with requests in flight: %v\n%s", err, logs.String())
	default:
	}
	updates.release(t, "SIGTERM")
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v\n%s", err, logs.String())
		}
		exited <- err
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after SIGTERM\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "msg=stopped") {
		t.Errorf("no stop in the log:\n%s", logs.String())
	}
	// The updates were applied: the data outlived the process.
	var n int
	if err := updates.tx.Conn().QueryRow(ctx, `SELECT count(*) FROM entities WHERE props->'N'->>1 = '1'`).Scan(&n); err != nil || n != inFlight {
		t.Errorf("%d updated entities after the exit (%v), want %d", n, err, inFlight)
	}
}

// With a certificate the server speaks HTTPS, and `pgtables healthcheck`
// checks it over loopback.
func TestTLSAndHealthcheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	certFile, keyFile, pool := selfSignedCert(t)
	vars := map[string]string{
		"PGTABLES_DATABASE_URL": testdb.New(t),
		"PGTABLES_TLS_CERT":     certFile,
		"PGTABLES_TLS_KEY":      keyFile,
		"PGTABLES_LOG_LEVEL":    "error",
	}
	s := startServer(t, vars)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitStatus(t, hc, s.base+"/-/ready", http.StatusOK)

	svc := serviceClient(t, s.base, hc)
	if _, err := svc.CreateTable(ctx, "secure", nil); err != nil {
		t.Fatalf("create table over https: %v", err)
	}
	if resp, err := http.Get("http://" + s.addr + "/-/ready"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain http answered on the TLS listener")
		}
	}

	vars["PGTABLES_LISTEN"] = s.addr
	var out bytes.Buffer
	if err := run(ctx, []string{"healthcheck"}, env(vars), &out, io.Discard); err != nil || !strings.Contains(out.String(), "ready") {
		t.Errorf("healthcheck: %v %q", err, out.String())
	}
	if err := run(ctx, []string{"healthcheck", "-listen", freeAddr(t)}, env(nil), io.Discard, io.Discard); err == nil {
		t.Error("healthcheck of nothing succeeded")
	}
	if err := run(ctx, []string{"healthcheck", "-tls-key", ""}, env(vars), io.Discard, io.Discard); err == nil {
		t.Error("healthcheck accepted a certificate without key")
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key, and
// returns the files and a pool that trusts the certificate.
func selfSignedCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pgtables test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pool
}

// The log settings decide which access lines are written (info: every
// request; warn: only 5xx answers; access log off: none), and the header
// limit is enforced by the listener with 431.
func TestLogAndHeaderSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	down := "postgres://postgres@127.0.0.1:1/none?connect_timeout=1" // answers 503 ServerBusy
	for _, tc := range []struct {
		name       string
		vars       map[string]string
		up         bool
		wantAccess bool // a line for the request
		wantLevel  string
	}{
		{"info", map[string]string{"PGTABLES_LOG_LEVEL": "info"}, true, true, "INFO"},
		{"debug", map[string]string{"PGTABLES_LOG_LEVEL": "debug"}, true, true, "INFO"},
		{"warn", map[string]string{"PGTABLES_LOG_LEVEL": "warn"}, true, false, ""},
		{"access log off", map[string]string{"PGTABLES_LOG_LEVEL": "info", "PGTABLES_ACCESS_LOG": "false"}, true, false, ""},
		{"warn 5xx", map[string]string{"PGTABLES_LOG_LEVEL": "warn", "PGTABLES_DATABASE_URL": down}, false, true, "WARN"},
		{"error 5xx", map[string]string{"PGTABLES_LOG_LEVEL": "error", "PGTABLES_DATABASE_URL": down}, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{"PGTABLES_DATABASE_URL": testdb.New(t), "PGTABLES_MAX_HEADER_BYTES": "4096"}
			for k, v := range tc.vars {
				vars[k] = v
			}
			s := startServer(t, vars)
			waitStatus(t, http.DefaultClient, s.base+"/-/healthy", http.StatusOK)
			if tc.up {
				waitStatus(t, http.DefaultClient, s.base+"/-/ready", http.StatusOK)
			}
			clientID := randomName("logcheck-")
			hc := &http.Client{Transport: &clientIDTransport{id: clientID}}
			_, err := serviceClient(t, s.base, hc).CreateTable(ctx, "logged", nil)
			if wantStatus := map[bool]int{true: 0, false: http.StatusServiceUnavailable}[tc.up]; statusOf(err) != wantStatus {
				t.Fatalf("create table: %v, want status %d", err, wantStatus)
			}
			var line string
			find := func() bool {
				for l := range strings.Lines(s.logs.String()) {
					if strings.Contains(l, "client_request_id="+clientID) {
						line = l
					}
				}
				return line != ""
			}
			if tc.wantAccess {
				waitFor(t, "the request's access line", find)
			} else {
				// The line would be written as the answer goes out.
				time.Sleep(300 * time.Millisecond)
				find()
			}
			switch {
			case !tc.wantAccess && line != "":
				t.Errorf("an access line was written: %s", line)
			case tc.wantAccess && !strings.Contains(line, "level="+tc.wantLevel+" msg=request"):
				t.Errorf("access line %q, want level %s", line, tc.wantLevel)
			case tc.wantAccess && !strings.Contains(line, "operation=create_table") && tc.up:
				t.Errorf("access line %q does not name the operation", line)
			}

			req, err := http.NewRequest(http.MethodGet, s.base+"/devstoreaccount1/Tables", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("x-ms-padding", strings.Repeat("x", 16<<10))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("16 KiB of headers over a 4 KiB limit: %d, want 431", resp.StatusCode)
			}
		})
	}
}

// clientIDTransport marks every request with an x-ms-client-request-id, so
// that its access line can be found.
type clientIDTransport struct{ id string }

func (c *clientIDTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req.Header.Set("x-ms-client-request-id", c.id)
	return http.DefaultTransport.RoundTrip(req)
}
