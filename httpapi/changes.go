package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// The change feed of a table, an extension of pgtables under /-/
// (docs/changefeed.md):
//
//	GET /-/accounts/{account}/tables/{table}/changes?cursor=C&limit=N&wait=D
//
// answers a page of changes in JSON, holding the request up to wait while
// there are none, or, with Accept: text/event-stream, streams them as
// Server-Sent Events. Authenticated as every request of the account:
// Shared Key (Lite) over "/" + account + the path as sent, a SAS that may
// read the table's entities, or a bearer token with read on the table.

// Limits of the parameters.
const (
	maxChangesLimit = 1000
	maxChangesWait  = 60 * time.Second
	// changesRecheck is how often a waiting request reads again when no
	// wake-up came: the store wakes waiting readers on every change, and
	// polls for them while its notifications do not come; this catches
	// a table deleted through another replica, which sends none.
	changesRecheck = 5 * time.Second
	// sseKeepalive is the interval of the stream's comment lines, which
	// keep proxies from closing an idle stream.
	sseKeepalive = 15 * time.Second
)

// parseChangesPath parses the raw path of a change feed request.
func parseChangesPath(rawPath string) (account, table string, ok bool) {
	rest, ok := strings.CutPrefix(rawPath, indexesPrefix)
	if !ok {
		return "", "", false
	}
	segs := strings.Split(rest, "/")
	if len(segs) != 4 || segs[1] != "tables" || segs[3] != "changes" {
		return "", "", false
	}
	a, err1 := url.PathUnescape(segs[0])
	t, err2 := url.PathUnescape(segs[2])
	if err1 != nil || err2 != nil || a == "" || t == "" {
		return "", "", false
	}
	return a, t, true
}

// isChangesPath reports a path of the change feed (else: the index API).
func isChangesPath(path string) bool {
	rest, _ := strings.CutPrefix(path, indexesPrefix)
	return strings.Count(rest, "/") == 3 && strings.HasSuffix(rest, "/changes")
}

// changesParams are a request's parameters.
type changesParams struct {
	cursor string
	limit  int
	wait   time.Duration
	sse    bool
}

func parseChangesParams(q url.Values, h http.Header) (changesParams, error) {
	p := changesParams{cursor: store.CursorNow, limit: maxChangesLimit}
	p.sse = strings.Contains(h.Get("Accept"), "text/event-stream")
	if v, ok := q["cursor"]; ok {
		if len(v) != 1 || v[0] == "" {
			return p, odata.Detailf(errInvalidQueryParam, "cursor must be now, oldest or a cursor of an earlier answer.")
		}
		p.cursor = v[0]
	}
	if p.sse {
		if id := h.Get("Last-Event-ID"); id != "" {
			p.cursor = id
		}
		return p, nil
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(strings.Join(v, ","))
		if err != nil || n < 1 || n > maxChangesLimit {
			return p, odata.Detailf(errInvalidQueryParam, "limit must be a whole number from 1 to %d.", maxChangesLimit)
		}
		p.limit = n
	}
	if v, ok := q["wait"]; ok {
		d, err := time.ParseDuration(strings.Join(v, ","))
		if err != nil || d < 0 || d > maxChangesWait {
			return p, odata.Detailf(errInvalidQueryParam, "wait must be a duration from 0s to %s, such as 30s.", maxChangesWait)
		}
		p.wait = d
	}
	return p, nil
}

// serveChanges answers a request of the change feed.
func (s *Server) serveChanges(c echo.Context) error {
	rq := &request{srv: s, c: c, id: newRequestID(), format: odata.MinimalMetadata}
	defer rq.recoverPanic()
	r := c.Request()
	rq.commonHeaders()
	rawPath, rawQuery := splitRequestTarget(r.RequestURI)
	account, table, ok := parseChangesPath(rawPath)
	switch {
	case !ok:
		rq.fail(errResourceNotFound)
		return nil
	case !s.serving.Load():
		rq.fail(odata.Detailf(store.ErrUnavailable, "The service is starting and its database is not ready yet."))
		return nil
	case r.Method != http.MethodGet:
		rq.header().Set("Allow", http.MethodGet)
		rq.fail(errMethodNotAllowed)
		return nil
	}
	if err := rq.authorizeExtension(account, table, rawPath, rawQuery, authQueryEntities); err != nil {
		rq.fail(err)
		return nil
	}
	p, err := parseChangesParams(rq.query, r.Header)
	if err != nil {
		rq.fail(err)
		return nil
	}
	if !s.store.ChangeFeedOn(account) {
		rq.fail(store.ErrChangeFeedOff)
		return nil
	}
	// A long-poll or a stream outlives the server's write timeout.
	_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Time{})
	if p.sse {
		err = rq.streamChanges(account, table, p.cursor)
	} else {
		err = rq.pollChanges(account, table, p)
	}
	if err != nil {
		rq.failChanges(err)
	}
	return nil
}

// failChanges answers a failed read of the feed.
func (rq *request) failChanges(err error) {
	if exp := (*store.CursorExpiredError)(nil); errors.As(err, &exp) {
		rq.header().Set("x-pgtables-oldest-cursor", exp.Oldest)
		err = odata.Detailf(store.ErrCursorExpired, "The changes after the cursor are past retention; the oldest retained cursor is %s.", exp.Oldest)
	}
	if errors.Is(err, store.ErrInvalidCursor) {
		err = odata.Detailf(errInvalidQueryParam, "The cursor is not one of this table's; pass now, oldest or a cursor of an earlier answer for this table.")
	}
	rq.fail(err)
}

// pollChanges answers one page of changes, waiting up to p.wait for one.
func (rq *request) pollChanges(account, table string, p changesParams) error {
	ctx := rq.r().Context()
	st := rq.srv.store
	deadline := time.Now().Add(p.wait)
	cursor := p.cursor
	read := st.Changes // the first read sees every change committed before
	for {
		wake, stopped := st.ChangeSignal()
		page, err := read(ctx, account, table, cursor, p.limit)
		if err != nil {
			return err
		}
		left := time.Until(deadline)
		if len(page.Changes) > 0 || left <= 0 {
			return rq.writeChanges(page)
		}
		// From now on "now" is where the first read found it.
		cursor, read = page.Cursor, st.ChangesWoken
		timer := time.NewTimer(min(left, changesRecheck))
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil // the client is gone
		case <-stopped:
			timer.Stop()
			return rq.writeChanges(page)
		case <-rq.srv.ops.drained:
			timer.Stop()
			return rq.writeChanges(page)
		}
		timer.Stop()
	}
}

// writeChanges sends a page as the feed's JSON.
func (rq *request) writeChanges(page *store.ChangePage) error {
	enc := rq.changeEncoder()
	b := make([]byte, 0, 256*len(page.Changes)+64)
	b = append(b, `{"changes":[`...)
	for i := range page.Changes {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendChange(b, enc, &page.Changes[i])
	}
	b = append(b, `],"cursor":`...)
	b = odata.AppendJSONString(b, page.Cursor)
	b = append(b, '}')
	return rq.c.Blob(http.StatusOK, "application/json", b)
}

// changeEncoder writes the entities of changes as a read with
// Accept: application/json;odata=minimalmetadata would: with type
// annotations, without the document's metadata.
func (rq *request) changeEncoder() *odata.Encoder {
	return &odata.Encoder{Format: odata.MinimalMetadata, Account: rq.t.account, Table: rq.t.table}
}

// appendChange appends one change's JSON object (docs/changefeed.md).
func appendChange(b []byte, enc *odata.Encoder, c *store.Change) []byte {
	b = append(b, `{"cursor":`...)
	b = odata.AppendJSONString(b, c.Cursor)
	b = append(b, `,"op":`...)
	b = odata.AppendJSONString(b, c.Op.String())
	b = append(b, `,"txn":`...)
	b = odata.AppendJSONString(b, c.Txn)
	b = append(b, `,"PartitionKey":`...)
	b = odata.AppendJSONString(b, c.PartitionKey)
	b = append(b, `,"RowKey":`...)
	b = odata.AppendJSONString(b, c.RowKey)
	b = append(b, `,"Timestamp":"`...)
	b = odata.AppendDateTime(b, c.Timestamp, true)
	b = append(b, `","etag":`...)
	if c.Entity == nil {
		b = append(b, `null,"entity":null}`...)
		return b
	}
	b = odata.AppendJSONString(b, c.ETag)
	b = append(b, `,"entity":`...)
	b = enc.AppendEntityObject(b, c.Entity)
	return append(b, '}')
}

// streamChanges streams changes as Server-Sent Events until the client
// goes, the table is deleted (event end) or the server shuts down.
func (rq *request) streamChanges(account, table, cursor string) error {
	ctx := rq.r().Context()
	st := rq.srv.store
	w := rq.c.Response()
	rc := http.NewResponseController(w.Writer)
	enc := rq.changeEncoder()
	keepalive := time.NewTicker(sseKeepalive)
	defer keepalive.Stop()
	started := false
	var b []byte
	read := st.Changes
	for {
		wake, stopped := st.ChangeSignal()
		page, err := read(ctx, account, table, cursor, maxChangesLimit)
		switch {
		case err == nil:
		case !started:
			return err
		case errors.Is(err, store.ErrTableNotFound):
			_, _ = w.Write([]byte("event: end\ndata: {}\n\n"))
			_ = rc.Flush()
			return nil
		case ctx.Err() != nil:
			return nil
		default:
			// The stream has begun: the client resumes from the last id.
			rq.srv.log.Warn("change stream ended by an error", "request_id", rq.id, "err", err)
			return nil
		}
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
			w.WriteHeader(http.StatusOK)
			started = true
		}
		b = b[:0]
		for i := range page.Changes {
			c := &page.Changes[i]
			b = append(b, "id: "...)
			b = append(b, c.Cursor...)
			b = append(b, "\nevent: change\ndata: "...)
			b = appendChange(b, enc, c)
			b = append(b, "\n\n"...)
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		cursor, read = page.Cursor, st.ChangesWoken
		if len(page.Changes) == maxChangesLimit {
			continue // more are there
		}
		timer := time.NewTimer(changesRecheck)
	wait:
		for {
			select {
			case <-wake:
				break wait
			case <-timer.C:
				break wait
			case <-keepalive.C:
				if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
					timer.Stop()
					return nil
				}
				if err := rc.Flush(); err != nil {
					timer.Stop()
					return nil
				}
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-stopped:
				timer.Stop()
				return nil
			case <-rq.srv.ops.drained:
				timer.Stop()
				return nil
			}
		}
		timer.Stop()
	}
}
