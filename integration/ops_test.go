package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testserver"
	"github.com/pgtables/pgtables/store"
)

// opsConfig tunes newOpsEnv.
type opsConfig struct {
	appName     string         // application_name of the server's database connections
	maxConns    int32          // pool size; 0: 16
	acquireWait time.Duration  // wait for a free connection (store.LimitAcquireWait); 0: unbounded
	http        httpapi.Config // the server's configuration; Version is "test"
	scanFirst   time.Duration  // store.Options.ScanFirst; 0: the default
}

// opsEnv is an env whose server is configured for operational tests.
type opsEnv struct {
	*env
	dsn  string     // the schema's connection string, for the test's own connections
	app  string     // application_name of the server's connections
	logs *logBuffer // the server's JSON log
}

func (o *opsEnv) appName() string { return o.app }

func randHex() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newOpsEnv starts pgtables on a fresh schema the way the command does:
// bounded connection waits, the given limits, a JSON log the test can read.
func newOpsEnv(t testing.TB, oc opsConfig) *opsEnv {
	t.Helper()
	needInProcess(t) // a server of its own configuration
	dsn := testserver.Database(t)
	logs := &logBuffer{}
	// The tests find the server's sessions by application_name on the
	// server its pool connects to: on Citus no routing to the shards'
	// nodes, whose pools the faults would miss.
	s := testserver.Start(t, dsn, testserver.Config{
		MaxConns: oc.maxConns, AppName: oc.appName, ConnectTimeout: 5 * time.Second,
		AcquireWait: oc.acquireWait, HTTP: oc.http,
		Store: store.Options{RouteConns: -1, ScanFirst: oc.scanFirst},
		Log:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	e := &env{t: t, baseURL: s.URL, pool: s.Pool, store: s.Store, srv: s.HTTP, stop: s.Stop}
	e.connect()
	return &opsEnv{env: e, dsn: dsn, app: oc.appName, logs: logs}
}

// logBuffer keeps what the server logs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// line returns the log record whose request_id is id.
func (l *logBuffer) line(t testing.TB, id string) map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["request_id"] == id {
			return rec
		}
	}
	t.Fatalf("no log line for request %s in:\n%s", id, l.b.String())
	return nil
}

// connect opens a connection of the test's own to the env's schema.
func (o *opsEnv) connect(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), o.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// metrics scrapes /-/metrics into "name{labels}" → value.
func (e *env) metrics(t testing.TB) map[string]float64 {
	t.Helper()
	resp, err := e.httpClient().Get(e.baseURL + "/-/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/-/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// Request counters after a known sequence of requests are exact, by
// operation and status; the operational endpoints are not counted; the
// access log line of a failed request carries the request id the client
// got.
func TestMetricsAfterKnownRequests(t *testing.T) {
	t.Parallel()
	e := newOpsEnv(t, opsConfig{http: httpapi.Config{AccessLog: true}})
	ctx := context.Background()
	acct := "/" + httpapi.DevAccount
	ent := func(rk string) string { return acct + "/metrics1(PartitionKey='p',RowKey='" + rk + "')" }
	anyETag := map[string]string{"If-Match": "*"}
	steps := []struct {
		method, path string
		header       map[string]string
		body         string
		want         int
	}{
		{"POST", acct + "/Tables", nil, `{"TableName":"metrics1"}`, 201},
		{"POST", acct + "/Tables", nil, `{"TableName":"metrics1"}`, 409},
		{"POST", acct + "/metrics1", nil, `{"PartitionKey":"p","RowKey":"1"}`, 201},
		{"POST", acct + "/metrics1", nil, `{"PartitionKey":"p","RowKey":"2"}`, 201},
		{"POST", acct + "/metrics1", nil, `{"PartitionKey":"p","RowKey":"1"}`, 409},
		{"GET", ent("1"), nil, "", 200},
		{"GET", ent("x"), nil, "", 404},
		{"GET", acct + "/metrics1()", nil, "", 200},
		{"GET", acct + "/metrics1()?$top=1", nil, "", 200},
		{"PUT", ent("1"), anyETag, `{"A":1}`, 204},
		{"PUT", ent("3"), nil, `{"A":1}`, 204},
		{"MERGE", ent("4"), nil, `{"A":1}`, 204},
		{"MERGE", ent("1"), anyETag, `{"B":1}`, 204},
		{"DELETE", ent("2"), anyETag, "", 204},
		{"DELETE", ent("2"), anyETag, "", 404},
		{"GET", acct + "/Tables", nil, "", 200},
		{"GET", acct + "/nosuchtable()", nil, "", 404},
		{"BREW", acct + "/Tables", nil, "", 405},
	}
	var conflictID string
	for i, s := range steps {
		var body []byte
		if s.body != "" {
			body = []byte(s.body)
		}
		r := e.do(s.method, s.path, s.header, body)
		if r.status != s.want {
			t.Fatalf("step %d %s %s: %d, want %d: %s", i, s.method, s.path, r.status, s.want, r.body)
		}
		if i == 1 {
			conflictID = r.header.Get("x-ms-request-id")
		}
	}
	c := e.service.NewClient("metrics1")
	var actions []aztables.TransactionAction
	for _, rk := range []string{"b1", "b2", "b3"} {
		actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
			Entity: []byte(`{"PartitionKey":"q","RowKey":"` + rk + `"}`)})
	}
	if _, err := c.SubmitTransaction(ctx, actions, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.service.DeleteTable(ctx, "metrics1", nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/-/ready", "/-/healthy"} {
		resp, err := http.Get(e.baseURL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	m := e.metrics(t)
	want := map[string]float64{
		`create_table,201`: 1, `create_table,409`: 1,
		`insert_entity,201`: 2, `insert_entity,409`: 1,
		`get_entity,200`: 1, `get_entity,404`: 1,
		`query_entities,200`: 2, `query_entities,404`: 1,
		`update_entity,204`: 1, `upsert_replace,204`: 1, `upsert_merge,204`: 1, `merge_entity,204`: 1,
		`delete_entity,204`: 1, `delete_entity,404`: 1,
		`query_tables,200`: 1, `batch,202`: 1, `delete_table,204`: 1, `unknown,405`: 1,
	}
	got := map[string]float64{}
	for k, v := range m {
		if rest, ok := strings.CutPrefix(k, "pgtables_http_requests_total{"); ok {
			var code, op string
			for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				name, val, _ := strings.Cut(kv, "=")
				val = strings.Trim(val, `"`)
				switch name {
				case "code":
					code = val
				case "operation":
					op = val
				}
			}
			got[op+","+code] = v
			if d := m[`pgtables_http_request_duration_seconds_count{code="`+code+`",operation="`+op+`"}`]; d != v {
				t.Errorf("duration count for %s %s = %v, want %v", op, code, d, v)
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("requests %s = %v, want %v", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected requests %s = %v", k, v)
		}
	}
	for name, v := range map[string]float64{
		"pgtables_batch_operations_count":            1,
		"pgtables_batch_operations_sum":              3,
		"pgtables_query_entities_returned_count":     2,
		"pgtables_query_entities_returned_sum":       3,
		"pgtables_http_requests_in_flight":           0,
		"pgtables_http_requests_rejected_total":      0,
		"pgtables_batch_serialization_retries_total": 0,
		`pgtables_build_info{version="test"}`:        1,
		"pgtables_db_pool_max_connections":           16,
	} {
		if got, ok := m[name]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, v)
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "pgtables_db_pool_acquires_total", "pgtables_purge_entities_total"} {
		if _, ok := m[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}

	rec := e.logs.line(t, conflictID)
	for k, v := range map[string]any{"msg": "request", "operation": "create_table", "status": float64(409),
		"error_code": "TableAlreadyExists", "account": httpapi.DevAccount, "remote_ip": "127.0.0.1", "level": "INFO"} {
		if rec[k] != v {
			t.Errorf("access log %s = %v, want %v (%v)", k, rec[k], v, rec)
		}
	}
}

// Behind a trusted proxy the forwarded scheme, host and client address
// are used for {svc} URLs and logs, host-style addressing included; from
// anyone else they are ignored.
func TestForwardedHeaders(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	trusted, err := httpapi.ParseTrustedProxies("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	fwd := func(host string) map[string]string {
		return map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": host, "X-Forwarded-For": "203.0.113.9, 198.51.100.7"}
	}
	acct := "/" + httpapi.DevAccount
	t.Run("trusted", func(t *testing.T) {
		t.Parallel()
		e := newOpsEnv(t, opsConfig{http: httpapi.Config{AccessLog: true, TrustedProxies: trusted}})
		r := e.do("POST", acct+"/Tables", fwd("tables.example.com"), []byte(`{"TableName":"fwd1"}`))
		wantStatus(t, r, 201)
		if loc := r.header.Get("Location"); loc != "https://tables.example.com/devstoreaccount1/Tables('fwd1')" {
			t.Errorf("Location = %q", loc)
		}
		if !bytes.Contains(r.body, []byte(`"odata.metadata":"https://tables.example.com/devstoreaccount1/$metadata#Tables`)) {
			t.Errorf("body: %s", r.body)
		}
		if ip := e.logs.line(t, r.header.Get("x-ms-request-id"))["remote_ip"]; ip != "198.51.100.7" {
			t.Errorf("logged client %v, want the one the proxy saw", ip)
		}
		// Host-style: the account is in the forwarded host.
		r = e.do("POST", "/Tables", fwd("devstoreaccount1.table.example.com"), []byte(`{"TableName":"fwd2"}`))
		wantStatus(t, r, 201)
		if loc := r.header.Get("Location"); loc != "https://devstoreaccount1.table.example.com/Tables('fwd2')" {
			t.Errorf("host-style Location = %q", loc)
		}
		r = e.do("GET", "/Tables('fwd2')", fwd("devstoreaccount1.table.example.com"), nil)
		wantStatus(t, r, 200)
	})
	t.Run("untrusted", func(t *testing.T) {
		t.Parallel()
		e := newOpsEnv(t, opsConfig{http: httpapi.Config{AccessLog: true}})
		r := e.do("POST", acct+"/Tables", fwd("tables.example.com"), []byte(`{"TableName":"fwd3"}`))
		wantStatus(t, r, 201)
		if loc, want := r.header.Get("Location"), e.svcURL+"/Tables('fwd3')"; loc != want {
			t.Errorf("Location = %q, want %q", loc, want)
		}
		if ip := e.logs.line(t, r.header.Get("x-ms-request-id"))["remote_ip"]; ip != "127.0.0.1" {
			t.Errorf("logged client %v, want the connection's", ip)
		}
	})
	// A SAS's sip and spr see the client's address and scheme as a trusted
	// proxy reports them, and the connection's own from anyone else, so
	// that forged headers cannot widen a SAS.
	t.Run("sas", func(t *testing.T) {
		t.Parallel()
		behindProxy := newOpsEnv(t, opsConfig{http: httpapi.Config{TrustedProxies: trusted}})
		direct := newOpsEnv(t, opsConfig{})
		for _, e := range []*opsEnv{behindProxy, direct} {
			if _, err := e.service.CreateTable(bg, "fwdsas", nil); err != nil {
				t.Fatal(err)
			}
			sasAdd(t, e.service.NewClient("fwdsas"), "p", "r")
		}
		point := acct + "/fwdsas(PartitionKey='p',RowKey='r')?"
		onlyProxyClient := svcSAS{tn: "fwdsas", sp: "r", se: inAnHour(), sip: "198.51.100.7"}.encode()
		onlyHTTPS := svcSAS{tn: "fwdsas", sp: "r", se: inAnHour(), spr: "https"}.encode()
		loopbackHTTPS := svcSAS{tn: "fwdsas", sp: "r", se: inAnHour(), sip: "127.0.0.1", spr: "https"}.encode()
		for _, c := range []struct {
			name   string
			e      *opsEnv
			sas    string
			header map[string]string
			status int
			code   string
		}{
			{"trusted sip", behindProxy, onlyProxyClient, fwd("tables.example.com"), 200, ""},
			{"trusted spr", behindProxy, onlyHTTPS, fwd("tables.example.com"), 200, ""},
			{"trusted sip without forwarding", behindProxy, onlyProxyClient, nil, 403, "AuthorizationSourceIPMismatch"},
			{"trusted spr without forwarding", behindProxy, onlyHTTPS, nil, 403, "AuthorizationProtocolMismatch"},
			{"trusted forwarded client is not loopback", behindProxy, loopbackHTTPS, fwd("tables.example.com"), 403, "AuthorizationSourceIPMismatch"},
			{"forged sip", direct, onlyProxyClient, fwd("tables.example.com"), 403, "AuthorizationSourceIPMismatch"},
			{"forged spr", direct, onlyHTTPS, fwd("tables.example.com"), 403, "AuthorizationProtocolMismatch"},
		} {
			r := c.e.send(rawReq{method: "GET", path: point + c.sas, header: c.header, authz: strp("")})
			if c.status == 200 {
				if r.status != 200 {
					t.Errorf("%s: got %d %s", c.name, r.status, trunc(r.body))
				}
				continue
			}
			if r.status != c.status || r.header.Get("x-ms-error-code") != c.code {
				t.Errorf("%s: got %d %s, want %d %s", c.name, r.status, r.header.Get("x-ms-error-code"), c.status, c.code)
			}
		}
	})
}

// Overload answers 503 ServerBusy with Retry-After, fast: when no database
// connection frees up within the wait, when too many requests run at once,
// and when a request outlives its time.
func TestOverloadServerBusy(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	ctx := context.Background()
	// blocked starts an update that waits on a row lock the test holds; it
	// returns the update's outcome and the function that releases the lock.
	blocked := func(t *testing.T, e *opsEnv, app string) (<-chan error, func()) {
		t.Helper()
		c, table := e.newTable()
		if _, err := c.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"r"}`), nil); err != nil {
			t.Fatal(err)
		}
		lock := e.connect(t)
		tx, err := lock.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lockEntity(t, tx, table, "p", "r")
		done := make(chan error, 1)
		go func() {
			_, err := c.UpdateEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"r","N":1}`),
				&aztables.UpdateEntityOptions{IfMatch: new(azcore.ETagAny), UpdateMode: aztables.UpdateModeReplace})
			done <- err
		}()
		watch := e.connect(t)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if waitingOnLock(t, watch, app) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the update never waited on the lock")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return done, func() { _ = tx.Rollback(ctx) }
	}
	busy := func(t *testing.T, r *rawResponse) {
		t.Helper()
		wantError(t, r, http.StatusServiceUnavailable, "ServerBusy")
		if r.header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
	}

	t.Run("pool exhausted", func(t *testing.T) {
		t.Parallel()
		e := newOpsEnv(t, opsConfig{appName: "pgt_pool_" + randHex(), maxConns: 1, acquireWait: 300 * time.Millisecond})
		done, release := blocked(t, e, e.appName())
		start := time.Now()
		r := e.do("GET", "/"+httpapi.DevAccount+"/Tables", nil, nil)
		t.Logf("answered after %v with every connection busy", time.Since(start))
		busy(t, r)
		release()
		if err := <-done; err != nil {
			t.Errorf("the blocked update: %v", err)
		}
		wantStatus(t, e.do("GET", "/"+httpapi.DevAccount+"/Tables", nil, nil), 200)
	})
	t.Run("too many requests", func(t *testing.T) {
		t.Parallel()
		e := newOpsEnv(t, opsConfig{appName: "pgt_cap_" + randHex(), http: httpapi.Config{MaxConcurrentRequests: 1}})
		done, release := blocked(t, e, e.appName())
		busy(t, e.do("GET", "/"+httpapi.DevAccount+"/Tables", nil, nil))
		release()
		if err := <-done; err != nil {
			t.Errorf("the blocked update: %v", err)
		}
		wantStatus(t, e.do("GET", "/"+httpapi.DevAccount+"/Tables", nil, nil), 200)
		if n := e.metrics(t)["pgtables_http_requests_rejected_total"]; n != 1 {
			t.Errorf("rejected = %v, want 1", n)
		}
	})
	t.Run("request timeout", func(t *testing.T) {
		t.Parallel()
		e := newOpsEnv(t, opsConfig{appName: "pgt_timeout_" + randHex(), http: httpapi.Config{RequestTimeout: time.Second}})
		done, release := blocked(t, e, e.appName())
		defer release()
		var err error
		select {
		case err = <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("the update outlived its timeout")
		}
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusServiceUnavailable || re.ErrorCode != "ServerBusy" {
			t.Errorf("update past the request timeout: %v", err)
		}
	})
}
