package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// Entity group transactions: POST /$batch with a multipart/mixed body that
// holds one changeset of up to 100 writes to one partition (or a single
// GET). The reader is lenient about each SDK's variant of the format
// (rest-protocol.md §6.2, §6.3); the response is written as raw text in the
// exact shape the SDKs parse (§6.5, §6.6).

var (
	errBatchPartitions = errors.New("commands act on different partitions")
	errBatchDuplicate  = errors.New("duplicate row in batch")
)

// maxBatchOps is Azure's limit of operations per changeset.
const maxBatchOps = 100

// subRequest is one HTTP request inside a batch body.
type subRequest struct {
	method string
	target string // request-target as written: absolute URL or path
	header http.Header
	body   []byte
}

// batchRequest is a parsed $batch body: a changeset of writes, or one query.
type batchRequest struct {
	changeset []*subRequest
	query     *subRequest // a GET sent as the batch's only part
}

// readBatch parses a $batch body. Its errors make the whole request fail
// with a plain (non-multipart) 400.
func readBatch(contentType string, body []byte) (*batchRequest, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/mixed" || params["boundary"] == "" {
		return nil, odata.Detailf(odata.ErrInvalidInput, "A batch request must have Content-Type multipart/mixed with a boundary.")
	}
	parts, err := splitMultipart(body, params["boundary"])
	if err != nil {
		return nil, odata.Detailf(odata.ErrInvalidInput, "The batch body is not valid multipart/mixed: %v.", err)
	}
	switch {
	case len(parts) == 0:
		return nil, odata.Detailf(odata.ErrInvalidInput, "The batch holds no changeset.")
	case len(parts) > 1:
		return nil, odata.Detailf(odata.ErrInvalidInput, "A batch may hold only one changeset or one query.")
	}
	br := &batchRequest{}
	part := parts[0]
	pmt, pparams, _ := mime.ParseMediaType(part.contentType)
	switch {
	case pmt == "multipart/mixed" && pparams["boundary"] != "":
		if br.changeset, err = readChangeset(part.content, pparams["boundary"]); err != nil {
			return nil, err
		}
	case pmt == "application/http":
		if br.query, err = parseSubRequest(part.content); err != nil {
			return nil, err
		}
		if br.query.method != http.MethodGet {
			return nil, odata.Detailf(odata.ErrInvalidInput, "A request outside a changeset must be a GET.")
		}
	default:
		return nil, odata.Detailf(odata.ErrInvalidInput, "A batch part must be a changeset (multipart/mixed) or application/http.")
	}
	return br, nil
}

// readChangeset reads the operations of a changeset; their bodies are
// slices of b.
func readChangeset(b []byte, boundary string) ([]*subRequest, error) {
	parts, err := splitMultipart(b, boundary)
	if err != nil {
		return nil, odata.Detailf(odata.ErrInvalidInput, "The changeset is not valid multipart/mixed: %v.", err)
	}
	ops := make([]*subRequest, 0, min(len(parts), maxBatchOps+2))
	for _, part := range parts {
		if mt, _, _ := mime.ParseMediaType(part.contentType); mt != "application/http" {
			return nil, odata.Detailf(odata.ErrInvalidInput, "A changeset part must have Content-Type application/http.")
		}
		op, err := parseSubRequest(part.content)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		if len(ops) > maxBatchOps+1 {
			// Enough to report the excess; do not parse what cannot run.
			return ops, nil
		}
	}
	return ops, nil
}

// maxSubHeaderBytes bounds the header block of a batch part and of the
// request in it, as PGTABLES_MAX_HEADER_BYTES bounds a request's by default.
const maxSubHeaderBytes = 64 << 10

// parseSubRequest reads a request line, headers and body written by hand.
// http.ReadRequest is not used: it takes a request without Content-Length
// to have no body, which would drop every body the JS SDK sends. The body
// is what follows the header block, trimmed: JS adds a blank line before
// it, and the part's own line ending follows it. A Content-Length, when
// there is one, must agree with that: a body that holds more, or less,
// than it announces is a framing error, and so is a header block over
// maxSubHeaderBytes.
func parseSubRequest(b []byte) (*subRequest, error) {
	sr := &subRequest{header: make(http.Header, 8)}
	values := make([]string, 0, 8) // backs the header's one-value slices
	// The request line and the headers are read from one string, which
	// their strings share: a string each would cost an allocation each.
	rest := string(b[:headerBlockLen(b)])
	line := func() (string, bool) {
		if len(rest) == 0 {
			return "", false
		}
		l, after, _ := strings.Cut(rest, "\n")
		rest = after
		return strings.TrimSuffix(l, "\r"), true
	}
	var reqLine string
	for {
		l, ok := line()
		if !ok {
			return nil, odata.Detailf(odata.ErrInvalidInput, "A batch operation has no request line.")
		}
		if strings.TrimSpace(l) != "" {
			reqLine = l
			break
		}
	}
	var fields [3]string
	n := 0
	for f := range strings.FieldsSeq(reqLine) {
		if n == len(fields) {
			n++
			break
		}
		fields[n] = f
		n++
	}
	if n != 3 || !strings.HasPrefix(fields[2], "HTTP/1.") {
		return nil, odata.Detailf(odata.ErrInvalidInput, "A batch operation has a malformed request line.")
	}
	sr.method, sr.target = fields[0], fields[1]
	for {
		l, ok := line()
		if !ok || l == "" {
			break
		}
		name, value, found := strings.Cut(l, ":")
		name = strings.TrimSpace(name)
		if !found || name == "" || strings.ContainsAny(name, " \t") {
			return nil, odata.Detailf(odata.ErrInvalidInput, "A batch operation has a malformed header line.")
		}
		// Go's SDK writes DataServiceVersion and x-ms-version with empty
		// values inside batches: empty means absent. Not for If-Match, whose
		// mere presence makes a write an update rather than an upsert.
		key := textproto.CanonicalMIMEHeaderKey(name)
		if value = strings.TrimSpace(value); value != "" || key == "If-Match" {
			if vs, ok := sr.header[key]; ok {
				sr.header[key] = append(vs, value)
			} else {
				values = append(values, value)
				sr.header[key] = values[len(values)-1 : len(values) : len(values)]
			}
		}
	}
	body := b[headerBlockLen(b)-len(rest):]
	if len(b)-len(body) > maxSubHeaderBytes {
		return nil, odata.Detailf(odata.ErrInvalidInput, "A batch operation's headers exceed %d bytes.", maxSubHeaderBytes)
	}
	sr.body = bytes.TrimSpace(body)
	if cl := sr.header.Values("Content-Length"); cl != nil {
		n, err := strconv.ParseUint(cl[0], 10, 31)
		if len(cl) != 1 || err != nil || int(n) < len(sr.body) || int(n) > len(body) {
			return nil, odata.Detailf(odata.ErrInvalidInput, "A batch operation's Content-Length (%s) does not match its body of %d bytes.", odata.Truncate(strings.Join(cl, ", "), 40), len(sr.body))
		}
	}
	return sr, nil
}

// headerBlockLen is the length of what parseSubRequest reads as the
// request line and headers of b: blank lines, the request line, header
// lines, and the empty line after them (all of b when there is none).
func headerBlockLen(b []byte) int {
	n, requestLine := 0, false
	for n < len(b) {
		l, _, found := bytes.Cut(b[n:], []byte("\n"))
		n += len(l)
		if found {
			n++
		}
		l = bytes.TrimSuffix(l, []byte("\r"))
		switch {
		case !requestLine:
			requestLine = len(bytes.TrimSpace(l)) != 0
		case len(l) == 0:
			return n
		}
	}
	return n
}

// batchOp is a validated operation of a changeset.
type batchOp struct {
	sub    *subRequest
	t      *target
	format odata.Format
	prefer string
	entity *odata.EntityBody // insert: the body, for a 201 answer
}

func (rq *request) batch() error {
	r := rq.r()
	body, err := rq.readBody(odata.ErrInvalidInput)
	if err != nil {
		return err
	}
	br, err := readBatch(r.Header.Get("Content-Type"), body)
	if err != nil {
		return err
	}
	w := newBatchWriter()
	if err := rq.answerBatch(w, br, rq.srv.store); err != nil {
		return err
	}
	return rq.sendBatch(w)
}

// batchStore is what answering a batch needs of the store. Tests answer
// batches without a database through it.
type batchStore interface {
	Batch(ctx context.Context, account, table string, writes []store.Write) ([]store.Result, error)
	GetEntity(ctx context.Context, account, table, pk, rk string) (*odata.Entity, error)
	QueryEntities(ctx context.Context, account, table string, q store.EntityQuery) (*store.EntityPage, error)
}

// answerBatch runs a parsed batch on db and writes the multipart answer
// to w. An error means there is no multipart answer: the whole request
// fails with it.
func (rq *request) answerBatch(w *batchWriter, br *batchRequest, db batchStore) error {
	if br.query != nil {
		rq.batchQuery(w, br.query, db)
		return nil
	}
	ops, writes, table, failed, err := rq.prepareChangeset(br.changeset)
	if err != nil {
		w.fail(rq, failed, ops[failed].format, err)
		return nil
	}
	if len(writes) == 0 {
		w.emptyChangeset()
		return nil
	}
	results, err := db.Batch(rq.r().Context(), rq.t.account, table, writes)
	if be, ok := store.IsBatchError(err); ok {
		w.fail(rq, be.Index, ops[be.Index].format, be.Err)
		return nil
	}
	if err != nil {
		return err
	}
	w.succeed(rq, ops, writes, results)
	return nil
}

// prepareChangeset validates every operation before anything is written.
// On failure it returns the index of the first failing operation.
func (rq *request) prepareChangeset(subs []*subRequest) (ops []batchOp, writes []store.Write, table string, failed int, err error) {
	ops = make([]batchOp, len(subs))
	writes = make([]store.Write, 0, len(subs))
	type key struct{ pk, rk string }
	seen := make(map[key]bool, len(subs))
	for i, sub := range subs {
		ops[i].sub = sub
		if i == maxBatchOps {
			return ops, nil, "", i, odata.Detailf(odata.ErrInvalidInput, "The batch request operation exceeds the maximum 100 changes per change set.")
		}
		w, err := rq.prepareOp(&ops[i])
		if err == nil {
			err = rq.authorizeBatchWrite(ops[i].t.table, &w)
		}
		if err != nil {
			return ops, nil, "", i, err
		}
		if i == 0 {
			table = ops[0].t.table
		} else if !strings.EqualFold(ops[i].t.table, table) || w.PartitionKey != writes[0].PartitionKey {
			return ops, nil, "", i, errBatchPartitions
		}
		k := key{w.PartitionKey, w.RowKey}
		if seen[k] {
			return ops, nil, "", i, errBatchDuplicate
		}
		seen[k] = true
		writes = append(writes, w)
	}
	return ops, writes, table, 0, nil
}

// prepareOp routes and validates one changeset operation.
func (rq *request) prepareOp(op *batchOp) (store.Write, error) {
	sub := op.sub
	host, reqURI := splitAbsolute(sub.target, rq.r().Host)
	t, err := routeKeys(host, reqURI, rq.srv.knownAccount, rq.srv.cfg.ServiceDomains, goSDK(rq.r().Header))
	if err != nil {
		return store.Write{}, odata.Detailf(odata.ErrInvalidInput, "The batch operation's URL does not address an entity.")
	}
	if err := missingTable(t); err != nil {
		return store.Write{}, err
	}
	if t.account != rq.t.account {
		return store.Write{}, odata.Detailf(odata.ErrInvalidInput, "The batch operation addresses another account.")
	}
	op.t = t
	query, err := parseQuery(t.rawQuery)
	if err != nil {
		return store.Write{}, odata.Detailf(errInvalidQueryParam, "The batch operation's query string is not well formed.")
	}
	if op.format, err = odata.NegotiateFormat(query.Get("$format"), sub.header.Get("Accept")); err != nil {
		return store.Write{}, err
	}
	op.prefer = preference(sub.header)
	method, err := effectiveMethod(sub.method, sub.header)
	if err != nil {
		return store.Write{}, err
	}
	switch {
	case t.kind == resEntitySet && method == http.MethodPost:
		eb, err := decodeBatchEntity(sub)
		if err != nil {
			return store.Write{}, err
		}
		if !eb.HasPartitionKey || !eb.HasRowKey {
			return store.Write{}, odata.ErrPropertiesNeedValue
		}
		if err := odata.CheckEntity(eb.PartitionKey, eb.RowKey, eb.Properties); err != nil {
			return store.Write{}, err
		}
		op.entity = eb
		return store.Write{Op: store.OpInsert, PartitionKey: eb.PartitionKey, RowKey: eb.RowKey, Properties: eb.Properties}, nil
	case t.kind == resEntity:
		if err := odata.ValidateKey("PartitionKey", t.pk); err != nil {
			return store.Write{}, err
		}
		if err := odata.ValidateKey("RowKey", t.rk); err != nil {
			return store.Write{}, err
		}
		ifMatch := sub.header.Values("If-Match")
		match, err := store.ParseMatch(ifMatch)
		if err != nil {
			return store.Write{}, err
		}
		w := store.Write{PartitionKey: t.pk, RowKey: t.rk, Match: match}
		switch method {
		case http.MethodDelete:
			if ifMatch == nil {
				return store.Write{}, errDeleteNeedsMatch
			}
			w.Op = store.OpDelete
			return w, nil
		case http.MethodPut:
			w.Op = store.OpReplace
		case "MERGE", http.MethodPatch:
			w.Op = store.OpMerge
		default:
			return store.Write{}, odata.Detailf(odata.ErrInvalidInput, "A changeset may hold only inserts, updates, merges and deletes.")
		}
		eb, err := decodeBatchEntity(sub)
		if err != nil {
			return store.Write{}, err
		}
		if err := odata.CheckEntity(t.pk, t.rk, eb.Properties); err != nil {
			return store.Write{}, err
		}
		w.Properties = eb.Properties
		return w, nil
	}
	return store.Write{}, odata.Detailf(odata.ErrInvalidInput, "A changeset may hold only inserts, updates, merges and deletes of entities.")
}

func decodeBatchEntity(sub *subRequest) (*odata.EntityBody, error) {
	// Most SDKs send exactly this; only other values need parsing.
	if ct := sub.header.Get("Content-Type"); ct != "" && ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, odata.Detailf(odata.ErrMediaTypeNotSupported, "A batch operation's body must be application/json.")
		}
	}
	return odata.DecodeEntity(sub.body)
}

// splitAbsolute returns the host and the request-target (path and query)
// of a sub-request's target, which SDKs write as an absolute URL.
func splitAbsolute(target, defaultHost string) (host, requestURI string) {
	if rest, ok := strings.CutPrefix(target, "http://"); ok {
		target = rest
	} else if rest, ok := strings.CutPrefix(target, "https://"); ok {
		target = rest
	} else {
		return defaultHost, target
	}
	i := strings.IndexAny(target, "/?")
	if i < 0 {
		return target, "/"
	}
	if target[i] == '?' {
		return target[:i], "/" + target[i:]
	}
	return target[:i], target[i:]
}

// batchQuery answers a batch whose only request is a GET.
func (rq *request) batchQuery(w *batchWriter, sub *subRequest, db batchStore) {
	host, reqURI := splitAbsolute(sub.target, rq.r().Host)
	t, err := routeKeys(host, reqURI, rq.srv.knownAccount, rq.srv.cfg.ServiceDomains, goSDK(rq.r().Header))
	if err == nil && (t.account != rq.t.account || (t.kind != resEntity && t.kind != resEntitySet)) {
		err = errInvalidURI
	}
	format := odata.MinimalMetadata
	var query url.Values
	if err == nil {
		if query, err = parseQuery(t.rawQuery); err == nil {
			format, err = odata.NegotiateFormat(query.Get("$format"), sub.header.Get("Accept"))
		}
	}
	if err == nil {
		err = missingTable(t)
	}
	if err == nil {
		err = rq.authorizeBatchRead(t)
	}
	if err != nil {
		w.queryFail(rq, format, err)
		return
	}
	ctx := rq.r().Context()
	enc := rq.encoderAs(format, t.table)
	if t.kind == resEntity {
		e, err := db.GetEntity(ctx, t.account, t.table, t.pk, t.rk)
		if err != nil {
			w.queryFail(rq, format, err)
			return
		}
		if enc.Select, err = odata.ParseSelect(query.Get("$select")); err != nil {
			w.queryFail(rq, format, err)
			return
		}
		w.queryOK(format, e.ETag, enc.AppendEntity(nil, e), nil)
		return
	}
	q, sel, err := entityQuery(query)
	if err != nil {
		w.queryFail(rq, format, err)
		return
	}
	rq.clipQuery(&q)
	enc.Select = sel
	q.Encode = enc.AppendEntityObject
	page, err := db.QueryEntities(ctx, t.account, t.table, q)
	if err != nil {
		w.queryFail(rq, format, err)
		return
	}
	h := http.Header{}
	setContinuation(h, page)
	w.queryOK(format, "", enc.AppendEntities(nil, page.Entities), h)
}

func (rq *request) sendBatch(w *batchWriter) error {
	return rq.c.Blob(http.StatusAccepted, "multipart/mixed; boundary="+w.batchBoundary, w.finish())
}

// batchWriter builds the multipart response text.
type batchWriter struct {
	buf               []byte
	loc               []byte // a sub-response's Location, reused
	batchBoundary     string
	changesetBoundary string
	open              bool // a changeset response is open
}

func newBatchWriter() *batchWriter {
	return &batchWriter{batchBoundary: "batchresponse_" + newRequestID(), changesetBoundary: "changesetresponse_" + newRequestID()}
}

// lineBytes is line(name, string(value)).
func (w *batchWriter) lineBytes(name string, value []byte) {
	w.buf = append(append(append(w.buf, name...), value...), "\r\n"...)
}

func (w *batchWriter) line(s ...string) {
	for _, p := range s {
		w.buf = append(w.buf, p...)
	}
	w.buf = append(w.buf, "\r\n"...)
}

// The JS SDK finds sub-responses by splitting the answer's text on
// "--changesetresponse_", whatever the boundary. Text from the request
// (keys in Location, values in entities and quoted in error messages) must
// not contain it, or JS sees a sub-response that is not there: in URLs the
// second '-' is percent-encoded, in JSON every "--" is written "-\u002d"
// (in valid JSON "--" occurs only inside strings, so this changes no
// value).
const (
	jsSplitToken   = "--changesetresponse_"
	jsSplitEscaped = "-%2Dchangesetresponse_"
)

// json appends a JSON document with no "--" in its text.
func (w *batchWriter) json(b []byte) {
	for {
		i := bytes.Index(b, []byte("--"))
		if i < 0 {
			w.buf = append(w.buf, b...)
			return
		}
		w.buf = append(w.buf, b[:i+1]...)
		w.buf = append(w.buf, `\u002d`...)
		b = b[i+2:]
	}
}

func (w *batchWriter) openChangeset() {
	w.line("--", w.batchBoundary)
	w.line("Content-Type: multipart/mixed; boundary=", w.changesetBoundary)
	w.line()
	w.open = true
}

// part starts one sub-response: the part headers and the status line,
// followed by the headers every table response carries.
func (w *batchWriter) part(boundary string, status int) {
	w.line("--", boundary)
	w.line("Content-Type: application/http")
	w.line("Content-Transfer-Encoding: binary")
	w.line()
	w.buf = strconv.AppendInt(append(w.buf, "HTTP/1.1 "...), int64(status), 10)
	w.line(" ", http.StatusText(status))
	w.line("X-Content-Type-Options: nosniff")
	w.line("Cache-Control: no-cache")
	w.line("DataServiceVersion: 3.0;")
}

func (w *batchWriter) emptyChangeset() { w.openChangeset() }

// succeed writes one sub-response per operation, in request order. The
// ETag header is spelled exactly "ETag": the JS SDK finds it with a
// case-sensitive match.
func (w *batchWriter) succeed(rq *request, ops []batchOp, writes []store.Write, results []store.Result) {
	// About 400 bytes of headers a sub-response, and the entity of a 201:
	// grown once, not by doubling.
	size := 0
	for i := range writes {
		size += 400
		if writes[i].Op == store.OpInsert && ops[i].prefer != "return-no-content" {
			size += len(ops[i].sub.body) + 400
		}
	}
	w.buf = slices.Grow(w.buf, size)
	var entity []byte // one buffer for the entities of 201s
	w.openChangeset()
	svc := rq.serviceURL()
	for i := range writes {
		op, wr, res := &ops[i], &writes[i], &results[i]
		switch wr.Op {
		case store.OpInsert:
			w.loc = odata.AppendEntityPath(append(append(w.loc[:0], svc...), '/'), op.t.table, wr.PartitionKey, wr.RowKey)
			if bytes.Contains(w.loc, []byte(jsSplitToken)) {
				w.loc = bytes.ReplaceAll(w.loc, []byte(jsSplitToken), []byte(jsSplitEscaped))
			}
			loc := w.loc
			if op.prefer == "return-no-content" {
				w.part(w.changesetBoundary, http.StatusNoContent)
				w.line("Preference-Applied: return-no-content")
				w.lineBytes("Location: ", loc)
				w.lineBytes("DataServiceId: ", loc)
				w.line("ETag: ", res.ETag)
				w.line()
				w.line()
				continue
			}
			enc := rq.encoderAs(op.format, op.t.table)
			e := odata.Entity{PartitionKey: wr.PartitionKey, RowKey: wr.RowKey, Timestamp: res.Timestamp, ETag: res.ETag, Properties: op.entity.Properties}
			w.part(w.changesetBoundary, http.StatusCreated)
			if op.prefer == "return-content" {
				w.line("Preference-Applied: return-content")
			}
			w.line("Content-Type: ", op.format.ContentType())
			w.lineBytes("Location: ", loc)
			w.line("ETag: ", res.ETag)
			w.line()
			entity = enc.AppendEntity(entity[:0], &e)
			w.json(entity)
			w.line()
		case store.OpDelete:
			w.part(w.changesetBoundary, http.StatusNoContent)
			w.line()
			w.line()
		default:
			w.part(w.changesetBoundary, http.StatusNoContent)
			w.line("ETag: ", res.ETag)
			w.line()
			w.line()
		}
	}
}

// fail writes the single sub-response of a failed changeset: the failing
// operation's error, its message prefixed with "<index>:", which the .NET
// and Python SDKs read to report which operation failed.
func (w *batchWriter) fail(rq *request, index int, format odata.Format, err error) {
	w.openChangeset()
	w.errorPart(rq, w.changesetBoundary, fmt.Sprintf("%d:", index), format, err)
}

func (w *batchWriter) errorPart(rq *request, boundary, prefix string, format odata.Format, err error) {
	ae, detail, known := lookupError(err)
	if !known {
		rq.srv.log.Error("internal error in batch", "request_id", rq.id, "err", err)
	}
	msg := ae.message
	if detail != "" && !errors.Is(err, errAuthFailed) {
		msg = detail
	}
	// Azure sends the code only inside the body, but the Go SDK reports a
	// failed batch with the outer response, whose code it reads from this
	// header; no SDK objects to it on a 202.
	rq.header().Set("x-ms-error-code", ae.code)
	w.part(boundary, ae.status)
	w.line("Content-Type: ", format.ContentType())
	w.line()
	w.json(appendJSONError(nil, ae.code, errorMessage(prefix+msg, rq.id, odata.Ticks(rq.srv.now()))))
	w.line()
}

func (w *batchWriter) queryOK(format odata.Format, etag string, body []byte, extra http.Header) {
	w.part(w.batchBoundary, http.StatusOK)
	w.line("Content-Type: ", format.ContentType())
	if etag != "" {
		w.line("ETag: ", etag)
	}
	for name, vals := range extra {
		for _, v := range vals {
			w.line(name, ": ", v)
		}
	}
	w.line()
	w.json(body)
	w.line()
}

func (w *batchWriter) queryFail(rq *request, format odata.Format, err error) {
	w.errorPart(rq, w.batchBoundary, "0:", format, err)
}

func (w *batchWriter) finish() []byte {
	if w.open {
		w.line("--", w.changesetBoundary, "--")
	}
	w.line("--", w.batchBoundary, "--")
	return w.buf
}
