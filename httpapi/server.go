package httpapi

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// Config is the HTTP layer's configuration.
type Config struct {
	Accounts Accounts
	// ServiceDomains, when set, limits host-style addressing
	// (<account>.<domain>) to these domains, e.g. "table.example.com".
	ServiceDomains []string
	// MaxBodyBytes bounds request bodies (Azure's limit is 4 MiB).
	MaxBodyBytes int64
	// ClockSkew is how far a signed request's date may be from now.
	ClockSkew time.Duration
	// Version is reported in the Server header.
	Version string
	// TrustedProxies are the proxies whose X-Forwarded-For,
	// X-Forwarded-Proto and X-Forwarded-Host are believed (proxy.go);
	// empty: nobody's.
	TrustedProxies []netip.Prefix
	// MaxConcurrentRequests bounds the protocol requests answered at once;
	// beyond it a request gets 503 ServerBusy at once. 0: no limit.
	MaxConcurrentRequests int
	// RequestTimeout bounds the work of one protocol request; 0: none.
	RequestTimeout time.Duration
	// AccessLog writes a log line per protocol request.
	AccessLog bool
	// AccessLogJSON, when set, receives the access log's lines directly,
	// as JSON lines in the shape slog's JSONHandler writes (time, level,
	// msg, then the fields), rather than through the logger, which spends
	// more on a line than on the request's JSON answer. Set it only to the
	// writer of a JSON logger without attributes of its own; the logger's
	// level still decides which lines are written.
	AccessLogJSON io.Writer
	// Console, when set, is served at /-/console/ (package console); it
	// sees paths relative to that root.
	Console http.Handler
	// Bearer, when set, accepts bearer tokens (bearer.go); nil: they are
	// refused as an unknown scheme.
	Bearer *BearerConfig
	// ScanLogRows: a query page that examined at least this many rows and
	// returned under 1% of them is logged with the properties an index
	// would serve (examined.go); 0: DefaultScanLogRows, negative: never.
	ScanLogRows int
}

// DefaultMaxBodyBytes is Azure's request body limit.
const DefaultMaxBodyBytes = 4 << 20

// newestVersion is the x-ms-version answered when a request sends none.
const newestVersion = "2026-06-06"

// Server answers the Azure Table REST protocol from a store.
type Server struct {
	cfg   Config
	store *store.Store
	log   *slog.Logger
	now   func() time.Time
	echo  *echo.Echo
	// ready reports whether the service can take requests (database
	// reachable and migrated); set by the caller.
	ready        func(context.Context) error
	serverHeader string    // the Server header's value
	bodies       sync.Pool // *[]byte response buffers, see writeBody
	lines        sync.Pool // *[]byte access log lines, see accessLog
	signBufs     sync.Pool // *[]byte strings to sign, see authenticate
	dates        dateCache // the last date header parsed, see authenticate
	// serving is false until the schema is known to be migrated; until
	// then protocol requests get a retryable 503.
	serving atomic.Bool
	ops     *opsState // metrics, limits, shutdown state (middleware.go)
}

// StartServing lets protocol requests through; call it once migrations
// have been applied.
func (s *Server) StartServing() { s.serving.Store(true) }

// New returns a Server. ready is consulted by /-/ready.
func New(cfg Config, st *store.Store, log *slog.Logger, ready func(context.Context) error) *Server {
	if cfg.ScanLogRows == 0 {
		cfg.ScanLogRows = DefaultScanLogRows
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = defaultClockSkew
	}
	if len(cfg.Accounts) == 0 {
		cfg.Accounts = DevAccounts()
	}
	s := &Server{cfg: cfg, store: st, log: log, now: time.Now, ready: ready, serverHeader: "pgtables/" + cfg.Version}
	s.ops = newOpsState(cfg, st)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleEchoError
	e.Use(s.observe)
	// Paths under /-/ (healthy, live, ready, metrics, the console) are
	// answered by serveOps (ops.go), from observe, for every method.
	e.Any("/*", s.handle)
	e.Add("MERGE", "/*", s.handle)
	e.Any("/", s.handle)
	e.Add("MERGE", "/", s.handle)
	s.echo = e
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

func (s *Server) handleReady(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if s.Draining() {
		return c.String(http.StatusServiceUnavailable, "not ready: shutting down\n")
	}
	if s.ready != nil {
		if err := s.ready(ctx); err != nil {
			return c.String(http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
		}
	}
	return c.String(http.StatusOK, "ready\n")
}

// handleEchoError answers what Echo's router rejects (unknown methods) in
// Azure's shape.
func (s *Server) handleEchoError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	rq := &request{srv: s, c: c, id: newRequestID()}
	rq.commonHeaders()
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusMethodNotAllowed {
		err = errMethodNotAllowed
	} else if errors.As(err, &he) && he.Code == http.StatusNotFound {
		err = errInvalidURI
	}
	rq.fail(err)
}

// request is the state of one protocol request.
type request struct {
	srv    *Server
	c      echo.Context
	id     string
	t      *target
	acct   *Account
	query  url.Values
	format odata.Format
	xml    bool  // an XML operation: errors are XML too
	grant  grant // what the request's SAS or token allows; nil with an account key
	// bodyRead is set once the whole body has been read.
	bodyRead bool
	// hvals backs the values of the response headers setHeader sets, so
	// that they come with the request's own allocation.
	hvals [12]string
	nh    int
}

// setHeader sets a response header to one value. key goes on the wire as
// given: the canonical form, or Azure's spelling (see setRaw).
func (rq *request) setHeader(key, v string) {
	h := rq.header()
	if rq.nh == len(rq.hvals) {
		h[key] = []string{v}
		return
	}
	i := rq.nh
	rq.nh++
	rq.hvals[i] = v
	h[key] = rq.hvals[i : i+1 : i+1]
}

func (rq *request) r() *http.Request { return rq.c.Request() }

func (rq *request) header() http.Header { return rq.c.Response().Header() }

// handle is the single entry for protocol requests: it routes on the raw
// request-target, sets the common headers, authenticates and dispatches.
func (s *Server) handle(c echo.Context) (err error) {
	rq := &request{srv: s, c: c, id: newRequestID()}
	defer rq.recoverPanic()
	r := c.Request()
	if !rq.commonHeaders() {
		rq.fail(odata.Detailf(errInvalidHeader, "x-ms-version"))
		return nil
	}
	if err := checkFraming(r); err != nil {
		rq.fail(err)
		return nil
	}

	if !s.serving.Load() {
		rq.fail(odata.Detailf(store.ErrUnavailable, "The service is starting and its database is not ready yet."))
		return nil
	}
	t, err := route(r.Host, r.RequestURI, s.knownAccount, s.cfg.ServiceDomains)
	if err != nil {
		rq.fail(err)
		return nil
	}
	rq.t = t
	rq.xml = t.kind == resService || (t.kind == resEntitySet && strings.Contains(t.rawQuery, "comp="))
	if rq.query, err = parseQuery(t.rawQuery); err != nil {
		rq.fail(odata.Detailf(errInvalidQueryParam, "The query string is not well formed."))
		return nil
	}
	recordTarget(r, t, rq.query)
	if rq.xml {
		rq.xml = t.kind == resService || rq.query.Get("comp") != ""
	}
	if r.Method == http.MethodOptions {
		if err := rq.preflight(); err != nil {
			rq.fail(err)
		}
		return nil
	}
	if rq.acct = s.cfg.Accounts[t.account]; rq.acct == nil {
		rq.fail(authFailed("The account %q does not exist.", t.account))
		return nil
	}
	rq.corsHeaders()
	if rq.grant, err = s.authenticateRequest(rq); err != nil {
		rq.fail(err)
		return nil
	}
	if tm := rq.query.Get("timeout"); tm != "" {
		if n, err := strconv.Atoi(tm); err != nil || n < 0 {
			rq.fail(odata.Detailf(errInvalidQueryParam, "timeout"))
			return nil
		}
	}
	if !rq.xml {
		if rq.format, err = odata.NegotiateFormat(rq.query.Get("$format"), headerValue(r.Header, "Accept")); err != nil {
			rq.fail(err)
			return nil
		}
	}
	if err := rq.dispatch(); err != nil {
		rq.fail(err)
	}
	return nil
}

// recoverPanic, deferred, answers a request whose handler panicked with a
// 500, and logs the panic: one request's bug must not end the server.
func (rq *request) recoverPanic() {
	if p := recover(); p != nil {
		rq.srv.log.Error("panic", "request_id", rq.id, "panic", p, "stack", string(debug.Stack()))
		rq.fail(fmt.Errorf("%w: panic: %v", errInternal, p))
	}
}

// commonHeaders sets the headers every response carries and reports
// whether the request's x-ms-version is well-formed (absent counts as
// well-formed).
func (rq *request) commonHeaders() bool {
	r := rq.r()
	// Every answer carries these; the keys are written in canonical form,
	// which spares Header.Set's work on each request.
	set := rq.setHeader
	set("X-Ms-Request-Id", rq.id)
	set("Cache-Control", "no-cache")
	set("X-Content-Type-Options", "nosniff")
	set("Server", rq.srv.serverHeader)
	if id := headerValue(r.Header, "X-Ms-Client-Request-Id"); id != "" && len(id) <= 1024 && visibleASCII(id) {
		set("X-Ms-Client-Request-Id", id)
	}
	version := headerValue(r.Header, "X-Ms-Version")
	switch {
	case version == "":
		set("X-Ms-Version", newestVersion)
	case validVersion(version):
		set("X-Ms-Version", version)
	default:
		set("X-Ms-Version", newestVersion)
		return false
	}
	return true
}

// validVersion accepts an x-ms-version of the form YYYY-MM-DD.
func validVersion(v string) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if i != 4 && i != 7 && (v[i] < '0' || v[i] > '9') {
			return false
		}
	}
	return true
}

func (s *Server) knownAccount(name string) bool { _, ok := s.cfg.Accounts[name]; return ok }

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// method returns the effective method of the request.
func (rq *request) method() (string, error) {
	r := rq.r()
	return effectiveMethod(r.Method, r.Header)
}

// effectiveMethod resolves X-HTTP-Method: on POST it tunnels MERGE, PUT or
// DELETE (SDKs use it against Cosmos-like endpoints).
func effectiveMethod(method string, h http.Header) (string, error) {
	vals := h.Values("X-HTTP-Method")
	if len(vals) == 0 {
		return method, nil
	}
	if len(vals) > 1 {
		return "", errXMethodIncorrectCount
	}
	if method != http.MethodPost {
		return "", errXMethodNotUsingPost
	}
	switch m := strings.ToUpper(strings.TrimSpace(vals[0])); m {
	case "MERGE", http.MethodPut, http.MethodDelete:
		return m, nil
	}
	return "", errXMethodIncorrectValue
}

func (rq *request) dispatch() error {
	m, err := rq.method()
	if err != nil {
		return err
	}
	if err := rq.authorize(m); err != nil {
		return err
	}
	t := rq.t
	if t.secondary && m != http.MethodGet && m != http.MethodHead {
		// The secondary location is read-only, as in Azure.
		return odata.Detailf(errAuthorizationFailure, "Write operations are not allowed on the secondary location.")
	}
	if err := missingTable(t); err != nil {
		return err
	}
	switch t.kind {
	case resTables:
		switch m {
		case http.MethodGet:
			return rq.queryTables()
		case http.MethodPost:
			return rq.createTable()
		}
	case resTable:
		switch m {
		case http.MethodGet:
			return rq.getTable()
		case http.MethodDelete:
			return rq.deleteTable()
		}
	case resEntitySet:
		if rq.query.Has("comp") {
			return rq.tableACL(m)
		}
		switch m {
		case http.MethodGet:
			return rq.queryEntities()
		case http.MethodPost:
			return rq.insertEntity()
		}
	case resEntity:
		switch m {
		case http.MethodGet:
			return rq.getEntity()
		case http.MethodPut:
			return rq.updateEntity(store.OpReplace)
		case "MERGE", http.MethodPatch:
			return rq.updateEntity(store.OpMerge)
		case http.MethodDelete:
			return rq.deleteEntity()
		}
	case resBatch:
		if m == http.MethodPost {
			return rq.batch()
		}
	case resService:
		if rq.query.Get("restype") == "service" {
			return rq.serviceOperation(m)
		}
		return errInvalidURI
	}
	return errMethodNotAllowed
}

// fail writes the Azure error response for err.
func (rq *request) fail(err error) {
	ae, detail, known := lookupError(err)
	if !known {
		rq.srv.log.Error("internal error", "request_id", rq.id, "err", err)
	}
	msg := ae.message
	authDetail := ""
	if detail != "" {
		if authErr := (*authError)(nil); errors.As(err, &authErr) {
			authDetail = detail
		} else {
			msg = detail
		}
	}
	h := rq.header()
	if ae.status == http.StatusUnauthorized && rq.srv.cfg.Bearer != nil {
		h.Set("WWW-Authenticate", rq.srv.cfg.Bearer.challenge())
	}
	if headerValue(h, "X-Ms-Request-Id") == "" {
		h.Set("x-ms-request-id", rq.id)
	}
	h.Set("x-ms-error-code", ae.code)
	if ae.status == http.StatusServiceUnavailable && headerValue(h, "Retry-After") == "" {
		// Every 503 of the protocol is written here: ServerBusy and the
		// database's unavailability alike tell the client when to retry.
		h.Set("Retry-After", retryAfterSeconds)
	}
	delete(h, "ETag")
	h.Del("ETag")
	// A request refused before its body was read may be malformed beyond
	// what was read of it: do not read another request from this
	// connection. One whose body was read whole leaves it clean.
	if ae.status >= 400 && ae.status < 500 && !rq.bodyRead && rq.r().ContentLength != 0 {
		h.Set("Connection", "close")
	}
	now := odata.Ticks(rq.srv.now())
	var body []byte
	var ctype string
	if rq.xml {
		body, ctype = appendXMLError(nil, ae.code, errorMessage(msg, rq.id, now), authDetail), "application/xml"
	} else {
		// Azure's JSON errors hold code and message only, and the Python
		// SDK cannot decode a body with any other member: the detail goes
		// into the message.
		if authDetail != "" {
			msg += "\nAuthenticationErrorDetail:" + authDetail
		}
		body, ctype = appendJSONError(nil, ae.code, errorMessage(msg, rq.id, now)), rq.format.ContentType()
		h.Set("DataServiceVersion", "3.0;")
	}
	if rq.r().Method == http.MethodHead {
		body = nil
	}
	_ = rq.c.Blob(ae.status, ctype, body)
}

// newRequestID returns a random (version 4) UUID. Its bits come from the
// runtime's generator (ChaCha8, seeded from the system's entropy, one state
// per thread) rather than crypto/rand: a request id identifies, it guards
// nothing, and every request takes one.
func newRequestID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// missingTable answers for a request that names a table no table can have
// (a name outside [A-Za-z0-9]{1,63}: anything else, U+0000 included, must
// not reach the database): the table does not exist.
func missingTable(t *target) error {
	if t.kind != resTable && t.kind != resEntitySet && t.kind != resEntity {
		return nil
	}
	if possibleTableName(t.table) {
		return nil
	}
	if t.kind == resTable {
		return errResourceNotFound
	}
	return store.ErrTableNotFound
}

func possibleTableName(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// parseQuery decodes a raw query string. A ';' separates nothing in Azure
// query strings: it is part of a value, as in
// $format=application/json;odata=nometadata (unencoded in Microsoft's own
// examples), which url.ParseQuery would refuse.
func parseQuery(raw string) (url.Values, error) {
	if raw == "" {
		return nil, nil // read-only: no map to make for the many requests without a query
	}
	return url.ParseQuery(strings.ReplaceAll(raw, ";", "%3B"))
}
