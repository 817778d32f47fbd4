package httpapi

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pgtables/pgtables/odata"
)

// serviceURL is {svc}: the base URL the client addressed, from which
// odata.metadata, odata.id and Location are built. Behind a trusted proxy
// the scheme and host are the ones it forwarded (proxy.go).
func (rq *request) serviceURL() string {
	r := rq.r()
	scheme := "http"
	if requestOrigin(r).https {
		scheme = "https"
	}
	u := scheme + "://" + r.Host
	if rq.t.pathStyle {
		u += "/" + rq.t.account
		if rq.t.secondary {
			u += "-secondary"
		}
	}
	return u
}

func (rq *request) encoder(table string) *odata.Encoder { return rq.encoderAs(rq.format, table) }

// encoderAs is encoder in another format: a batch operation's own.
func (rq *request) encoderAs(format odata.Format, table string) *odata.Encoder {
	return &odata.Encoder{Format: format, ServiceURL: rq.serviceURL(), Account: rq.t.account, Table: table,
		WholeDoubleTypes: !goSDK(rq.r().Header)}
}

// readJSONBody reads a JSON request body within the size limit.
func (rq *request) readJSONBody() ([]byte, error) {
	r := rq.r()
	if ct := headerValue(r.Header, "Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return nil, odata.Detailf(odata.ErrMediaTypeNotSupported, "The Content-Type '%s' is not valid.", odata.Truncate(ct, 100))
		case mt == "application/atom+xml":
			return nil, odata.ErrAtomFormatNotSupported
		case mt != "application/json":
			return nil, odata.Detailf(odata.ErrMediaTypeNotSupported, "The Content-Type '%s' is not supported; send application/json.", odata.Truncate(mt, 100))
		}
	}
	return rq.readBody(odata.ErrInvalidInput)
}

// readBody reads the whole request body within the size limit; a body that
// cannot be read is unreadable, which is reported as the given sentinel.
func (rq *request) readBody(unreadable error) ([]byte, error) {
	r := rq.r()
	body, err := readAllSized(http.MaxBytesReader(rq.c.Response(), r.Body, rq.srv.cfg.MaxBodyBytes), min(r.ContentLength, rq.srv.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errBodyTooLarge
		}
		return nil, odata.Detailf(unreadable, "The request body could not be read.")
	}
	rq.bodyRead = true
	return body, nil
}

// readAllSized is io.ReadAll for a body whose length is announced: it
// reads into one buffer of that size (plus the byte that lets it see the
// end) instead of growing one from 512 bytes, which for a batch of 100
// entities means a dozen allocations and copies. The announcement is only
// a hint: a shorter or longer body is read whole all the same.
func readAllSized(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as append does
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// preference reads the Prefer header: return-content, return-no-content,
// or "" when neither is asked for.
func (rq *request) preference() string { return preference(rq.r().Header) }

func preference(h http.Header) string {
	for _, v := range h.Values("Prefer") {
		for p := range strings.SplitSeq(v, ",") {
			switch p = strings.ToLower(strings.TrimSpace(p)); p {
			case "return-content", "return-no-content":
				return p
			}
		}
	}
	return ""
}

// maxPooledBody bounds the response buffers kept for reuse, so that one
// large page does not stay in memory for good.
const maxPooledBody = 4 << 20

// writeBody sends the JSON body that fill appends to a buffer, which is
// reused across requests: a page of entities is hundreds of kilobytes,
// and growing a fresh buffer for each would allocate about twice that.
func (rq *request) writeBody(status int, fill func([]byte) []byte) error {
	bp, _ := rq.srv.bodies.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	body := fill((*bp)[:0])
	err := rq.writeJSON(status, body)
	if cap(body) <= maxPooledBody {
		*bp = body[:0]
		rq.srv.bodies.Put(bp)
	}
	return err
}

// dataServiceVersionKey is http.CanonicalHeaderKey("DataServiceVersion"),
// the key Header.Set would use (and net/http writes).
const dataServiceVersionKey = "Dataserviceversion"

// writeJSON sends a JSON body in the negotiated format.
func (rq *request) writeJSON(status int, body []byte) error {
	// The key in the canonical form Header.Set would make of
	// DataServiceVersion, without the work and the allocation of making it.
	rq.setHeader(dataServiceVersionKey, "3.0;")
	// The length, known here, rather than the chunks net/http sends a body
	// of more than its buffer in: a client then reads a page of entities
	// into one buffer of its size instead of growing one chunk by chunk.
	rq.setHeader("Content-Length", strconv.Itoa(len(body)))
	// Set here as Blob would (when absent), Content-Type costs no
	// Header.Set.
	ctype := rq.format.ContentType()
	if _, ok := rq.header()[echo.HeaderContentType]; !ok {
		rq.setHeader(echo.HeaderContentType, ctype)
	}
	return rq.c.Blob(status, ctype, body)
}

// writeNoContent sends a bodyless answer.
func (rq *request) writeNoContent(status int) error {
	rq.setHeader("Content-Length", "0")
	rq.c.Response().WriteHeader(status)
	return nil
}

// checkQueryOptions rejects the OData system query options the Table
// service does not implement (501, rest-protocol.md §5.6), and any other
// name starting with '$', which is no option at all: the client's error.
func checkQueryOptions(query url.Values) error {
	for name := range query {
		if strings.HasPrefix(name, "$") {
			switch name {
			case "$filter", "$select", "$top", "$format":
			case "$orderby", "$skip", "$expand", "$count", "$inlinecount", "$skiptoken", "$search":
				return odata.Detailf(odata.ErrNotImplemented, "The query option %s is not supported.", name)
			default:
				return odata.Detailf(odata.ErrInvalidInput, "The query parameter '%s' begins with a system-reserved '$' character but is not recognized.", odata.Truncate(name, 40))
			}
		}
	}
	return nil
}

// setRaw sets a header in Azure's spelling. Header.Set would canonicalize
// ETag to Etag; clients match names case-insensitively, but Azure's
// spelling is what byte-level comparisons and some tools expect.
func setRaw(h http.Header, name, value string) { h[name] = []string{value} }

// created answers a Create Table or Insert Entity: 201 with the new
// resource's document, or 204 when the client prefers no content; either
// way with its Location.
func (rq *request) created(location string, fill func([]byte) []byte) error {
	// Canonical keys, as commonHeaders.
	set := rq.setHeader
	set("Location", location)
	switch rq.preference() {
	case "return-no-content":
		set("Preference-Applied", "return-no-content")
		set(dataServiceIDKey, location)
		return rq.writeNoContent(http.StatusNoContent)
	case "return-content":
		set("Preference-Applied", "return-content")
	}
	return rq.writeBody(http.StatusCreated, fill)
}

// dataServiceIDKey is http.CanonicalHeaderKey("DataServiceId"), the key
// Header.Set would use (and net/http writes).
const dataServiceIDKey = "Dataserviceid"

// headerValue is h.Get(key) for a key given in canonical form: a map
// lookup, without Get's canonicalization of the key, which costs a share
// of every request and allocates for a key given in lower case.
func headerValue(h http.Header, canonicalKey string) string {
	if v := h[canonicalKey]; len(v) > 0 {
		return v[0]
	}
	return ""
}
