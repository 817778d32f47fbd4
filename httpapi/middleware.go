package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// retryAfterSeconds is the Retry-After sent with 503 ServerBusy.
const retryAfterSeconds = "1"

// opsState is the operational side of a Server: metrics, the limit on
// concurrent requests, and the shutdown state.
type opsState struct {
	metrics  *metrics
	slots    chan struct{} // one per request being answered; nil: no limit
	draining atomic.Bool   // shutting down: /-/ready answers 503
	drained  chan struct{} // closed by Drain: long-polls and streams end
	drain    sync.Once
}

func newOpsState(cfg Config, st *store.Store) *opsState {
	o := &opsState{drained: make(chan struct{})}
	if st != nil {
		o.metrics = newMetrics(cfg.Version, st.Pool())
		st.SetObserver(o.metrics)
	} else {
		o.metrics = newMetrics(cfg.Version, nil)
	}
	if cfg.MaxConcurrentRequests > 0 {
		o.slots = make(chan struct{}, cfg.MaxConcurrentRequests)
	}
	return o
}

// Drain marks the server as shutting down: from now on /-/ready answers
// 503 so that load balancers stop sending requests, while requests still
// get answered until the HTTP server itself shuts down; change feed
// long-polls answer at once and change streams end.
func (s *Server) Drain() {
	s.ops.draining.Store(true)
	s.ops.drain.Do(func() { close(s.ops.drained) })
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.ops.draining.Load() }

func (s *Server) handleMetrics(c echo.Context) error {
	s.ops.metrics.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// isOpsPath reports the operational endpoints (/-/...), which no account
// name can collide with: they bypass metrics, access logs and limits.
func isOpsPath(path string) bool { return strings.HasPrefix(path, "/-/") }

// observe wraps every request: it resolves the client's origin through
// trusted proxies, bounds the request's time, enforces the limit of
// concurrent requests, and records metrics and the access log line.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if isOpsPath(r.URL.Path) {
			if len(r.TransferEncoding) > 0 {
				// framing.go: never a body by Transfer-Encoding, and
				// nothing more from this connection.
				c.Response().Header().Set("Connection", "close")
				return c.NoContent(http.StatusBadRequest)
			}
			return s.serveOps(c)
		}
		start := time.Now()
		// The time bound and the request's state share one copy of r.
		ctx := r.Context()
		if s.cfg.RequestTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
			defer cancel()
		}
		r, st := withOrigin(ctx, r, s.cfg.TrustedProxies)
		c.SetRequest(r)

		resp := c.Response()
		m := s.ops.metrics
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		if s.acquireSlot() {
			err := next(c)
			s.releaseSlot()
			if err != nil {
				c.Error(err)
			}
		} else {
			m.rejected.Inc()
			rq := &request{srv: s, c: c, id: newRequestID()}
			rq.commonHeaders()
			rq.fail(odata.Detailf(store.ErrUnavailable, "The server is answering too many requests at once. Please retry your request."))
			if t, err := route(r.Host, r.RequestURI, s.knownAccount, s.cfg.ServiceDomains); err == nil {
				query, _ := parseQuery(t.rawQuery)
				recordTarget(r, t, query)
			}
		}
		op, account, table := st.op, st.account, st.table
		elapsed := time.Since(start)
		status := resp.Status
		m.request(op, status, elapsed.Seconds())
		if s.cfg.AccessLog {
			s.accessLog(r, resp, st, op, account, table, elapsed)
		}
		return nil
	}
}

func (s *Server) acquireSlot() bool {
	if s.ops.slots == nil {
		return true
	}
	select {
	case s.ops.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) releaseSlot() {
	if s.ops.slots != nil {
		<-s.ops.slots
	}
}

// accessLog writes the request's line: at info, or at warn for a 5xx.
// The fields are ordered and named for people and log pipelines alike;
// the same line goes to whatever handler the process configured.
func (s *Server) accessLog(r *http.Request, resp *echo.Response, st *reqState, op, account, table string, elapsed time.Duration) {
	level := slog.LevelInfo
	if resp.Status >= 500 {
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, level) {
		return
	}
	h := resp.Header()
	rec := accessRecord{
		level:     level,
		operation: op,
		method:    r.Method,
		account:   account,
		table:     table,
		status:    resp.Status,
		errorCode: headerValue(h, "X-Ms-Error-Code"),
		elapsed:   elapsed,
		requestID: headerValue(h, "X-Ms-Request-Id"),
		clientID:  odata.Truncate(headerValue(r.Header, "X-Ms-Client-Request-Id"), 256),
		bytesIn:   max(r.ContentLength, 0),
		bytesOut:  resp.Size,
		userAgent: odata.Truncate(headerValue(r.Header, "User-Agent"), 256),
	}
	if o := requestOrigin(r); o.ip.IsValid() {
		rec.remoteIP = o.ip
	}
	if st != nil {
		rec.auth = st.auth
		// Who a bearer token speaks for; a key or SAS has no subject.
		rec.subject = odata.Truncate(st.subject, 256)
	}
	if s.cfg.AccessLogJSON != nil {
		bp, _ := s.lines.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		line := rec.appendJSON((*bp)[:0], time.Now())
		_, _ = s.cfg.AccessLogJSON.Write(line)
		*bp = line[:0]
		s.lines.Put(bp)
		return
	}
	// The record goes to the handler directly: Logger.LogAttrs would walk
	// the stack for the caller's position on every line (a third of the
	// line's cost), which no handler of ours prints.
	_ = s.log.Handler().Handle(ctx, rec.record(time.Now()))
}

// recordTarget notes what the routed request r asks for, for the metrics
// and the access log the middleware writes when it is answered.
func recordTarget(r *http.Request, t *target, query url.Values) {
	if st := stateOf(r); st != nil {
		st.account, st.table = t.account, t.table
		st.op = labelUnknown
		if r.Method == http.MethodOptions {
			st.op = labelPreflight
		} else if m, err := effectiveMethod(r.Method, r.Header); err == nil {
			st.op = classifyOperation(t, m, query, r.Header).label()
		}
	}
}

// label names the operation in metrics and access logs.
func (op authOp) label() string {
	switch op {
	case authQueryTables:
		return labelQueryTables
	case authGetTable:
		return labelGetTable
	case authCreateTable:
		return labelCreateTable
	case authDeleteTable:
		return labelDeleteTable
	case authGetACL, authSetACL:
		return labelACL
	case authGetServiceProperties, authSetServiceProperties, authGetServiceStats:
		return labelService
	case authQueryEntities:
		return labelQueryEntities
	case authGetEntity:
		return labelGetEntity
	case authInsertEntity:
		return labelInsertEntity
	case authUpdateEntity:
		return labelUpdateEntity
	case authMergeEntity:
		return labelMergeEntity
	case authUpsertReplace:
		return labelUpsertReplace
	case authUpsertMerge:
		return labelUpsertMerge
	case authDeleteEntity:
		return labelDeleteEntity
	case authBatch:
		return labelBatch
	}
	return labelUnknown
}
