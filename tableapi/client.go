package tableapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client speaks the Azure Table protocol over keep-alive HTTP with
// Shared Key Lite signing. It works against any endpoint: pgtables, Azurite
// or Azure itself.
type Client struct {
	endpoint string // e.g. http://127.0.0.1:10002/devstoreaccount1
	account  string
	key      []byte
	macs     sync.Pool // HMAC-SHA256 under key, for signing
	conns    *connPool
	pathBase string // the endpoint's path, signed as part of every resource
	sas      string // a shared access signature's query, sent instead of signing
}

// NewSASClient returns a client of the endpoint that authenticates with a
// shared access signature, its query string (sv=...&sig=...).
func NewSASClient(endpoint, sas string) (*Client, error) {
	c, err := NewClient(endpoint, "", "")
	if err != nil {
		return nil, err
	}
	c.sas = strings.TrimPrefix(sas, "?")
	return c, nil
}

// NewClient returns a client of the endpoint (path-style, such as
// http://127.0.0.1:10002/devstoreaccount1, or host-style) that signs as
// account with key, base64 as Azure shows it.
func NewClient(endpoint, account, key string) (*Client, error) {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("account key: %w", err)
	}
	u, err := url.Parse(strings.TrimSuffix(endpoint, "/"))
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	conns, err := newConnPool(u.Scheme, u.Host)
	if err != nil {
		return nil, err
	}
	return &Client{
		endpoint: strings.TrimSuffix(endpoint, "/"),
		account:  account,
		key:      k,
		conns:    conns,
		pathBase: u.EscapedPath(),
	}, nil
}

// Response is a whole response.
type Response struct {
	Status int
	Header Header
	Body   []byte
}

// Header is a response's header block as received, one field per line.
// A caller asks for one or two of its dozen fields, so scanning them costs
// less than building a map.
type Header []byte

// Get returns the value of the first field named name, in any case.
func (h Header) Get(name string) string {
	for rest := []byte(h); len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && strings.EqualFold(string(k), name) {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

// Do sends one request. path is relative to the endpoint, already escaped
// (it is signed and sent as is); query is appended raw.
func (c *Client) Do(ctx context.Context, method, path, query string, header map[string]string, body []byte) (*Response, error) {
	return c.do(ctx, method, c.pathBase, path, query, header, body)
}

// do sends one request to base+path, signed as such.
func (c *Client) do(ctx context.Context, method, base, path, query string, header map[string]string, body []byte) (*Response, error) {
	target := base + path
	if c.sas != "" {
		query = strings.TrimPrefix(query+"&"+c.sas, "&")
	}
	if query != "" {
		target += "?" + query
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	h := make([][2]string, 0, 8+len(header))
	h = append(h,
		[2]string{"x-ms-date", date},
		[2]string{"x-ms-version", "2019-02-02"},
		[2]string{"DataServiceVersion", "3.0"},
	)
	if c.sas == "" {
		mac, _ := c.macs.Get().(hash.Hash)
		if mac == nil {
			mac = hmac.New(sha256.New, c.key)
		}
		mac.Reset()
		for _, s := range [...]string{date, "\n/", c.account, base, path, compOf(query)} {
			io.WriteString(mac, s)
		}
		var sum [sha256.Size]byte
		sig := base64.StdEncoding.EncodeToString(mac.Sum(sum[:0]))
		c.macs.Put(mac)
		h = append(h, [2]string{"Authorization", "SharedKeyLite " + c.account + ":" + sig})
	}
	if header["Accept"] == "" {
		h = append(h, [2]string{"Accept", "application/json;odata=minimalmetadata"})
	}
	if body != nil && header["Content-Type"] == "" {
		h = append(h, [2]string{"Content-Type", "application/json"})
	}
	for k, v := range header {
		h = append(h, [2]string{k, v})
	}
	resp, err := c.conns.roundTrip(ctx, method, target, h, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, nil
}

// compOf is the part of the resource that Shared Key Lite signs of a
// request's query: "?comp=" and the comp parameter, when there is one.
func compOf(query string) string {
	for _, kv := range strings.Split(query, "&") {
		if v, ok := strings.CutPrefix(kv, "comp="); ok {
			return "?comp=" + v
		}
	}
	return ""
}

// Call sends a request and turns an unexpected status into an error that
// names the server's error code.
func (c *Client) Call(ctx context.Context, method, path, query string, header map[string]string, body []byte, want ...int) (*Response, error) {
	r, err := c.Do(ctx, method, path, query, header, body)
	if err != nil {
		return nil, err
	}
	return checkStatus(r, want)
}

// checkStatus returns r if its status is one of want, else an error that
// names the server's error code.
func checkStatus(r *Response, want []int) (*Response, error) {
	for _, s := range want {
		if r.Status == s {
			return r, nil
		}
	}
	msg := string(r.Body)
	if len(msg) > 300 {
		msg = msg[:300]
	}
	return nil, fmt.Errorf("status %d (%s): %s", r.Status, r.Header.Get("x-ms-error-code"), msg)
}

// EntityPath addresses one entity: quotes doubled, then escaped.
func EntityPath(table, pk, rk string) string {
	lit := func(s string) string { return url.PathEscape(strings.ReplaceAll(s, "'", "''")) }
	return "/" + table + "(PartitionKey='" + lit(pk) + "',RowKey='" + lit(rk) + "')"
}

// CreateTable creates table name.
func (c *Client) CreateTable(ctx context.Context, name string) error {
	_, err := c.Call(ctx, http.MethodPost, "/Tables", "", map[string]string{"Prefer": "return-no-content"}, []byte(`{"TableName":"`+name+`"}`), 201, 204)
	return err
}

// DeleteTable deletes table name; a table that is not there is no error.
func (c *Client) DeleteTable(ctx context.Context, name string) error {
	_, err := c.Call(ctx, http.MethodDelete, "/Tables('"+name+"')", "", nil, nil, 204, 404)
	return err
}

// BatchOp is one operation of an entity group transaction: a method on
// a path relative to the endpoint, already escaped (as EntityPath makes
// it), with a JSON body.
type BatchOp struct {
	Method, Path string
	Body         []byte
}

// batchBoundary and changesetBoundary frame every batch this client sends.
const batchBoundary, changesetBoundary = "batch_5e1d6f0c-0bd4-4a3d-9f44-1d1c0f1c2a7e", "changeset_0f0c5a2b-3c3e-4d6f-8a7b-6c5d4e3f2a1b"

// BatchRequest returns the body of an entity group transaction of ops and
// the headers to post it to /$batch with.
func (c *Client) BatchRequest(ops []BatchOp) (body []byte, header map[string]string) {
	const partHead = "--" + changesetBoundary + "\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
	const subHead = " HTTP/1.1\r\nAccept: application/json;odata=minimalmetadata\r\n" +
		"Content-Type: application/json\r\nPrefer: return-no-content\r\nDataServiceVersion: 3.0\r\nContent-Length: "
	size := 256
	for _, op := range ops {
		size += len(partHead) + len(c.endpoint) + len(op.Path) + len(subHead) + len(op.Body) + 32
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString("--" + batchBoundary + "\r\nContent-Type: multipart/mixed; boundary=" + changesetBoundary + "\r\n\r\n")
	for _, op := range ops {
		b.WriteString(partHead)
		b.WriteString(op.Method + " " + c.endpoint + op.Path)
		b.WriteString(subHead)
		b.WriteString(strconv.Itoa(len(op.Body)))
		b.WriteString("\r\n\r\n")
		b.Write(op.Body)
		b.WriteString("\r\n")
	}
	b.WriteString("--" + changesetBoundary + "--\r\n--" + batchBoundary + "--\r\n")
	return b.Bytes(), map[string]string{"Content-Type": "multipart/mixed; boundary=" + batchBoundary}
}

// BatchError reports the failure of a batch of n operations whose
// response r answered 202: a failed changeset still does, and its one
// sub-response carries the error status.
func BatchError(r *Response, n int) error {
	if ok := bytes.Count(r.Body, []byte("HTTP/1.1 204")); ok != n {
		msg := string(r.Body)
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return fmt.Errorf("batch: %d of %d operations succeeded: %s", ok, n, msg)
	}
	return nil
}

// BatchInsert sends one entity group transaction that inserts the
// entities bodies, JSON objects of one partition.
func (c *Client) BatchInsert(ctx context.Context, table string, bodies [][]byte) error {
	ops := make([]BatchOp, len(bodies))
	for i, body := range bodies {
		ops[i] = BatchOp{Method: http.MethodPost, Path: "/" + table, Body: body}
	}
	body, header := c.BatchRequest(ops)
	r, err := c.Call(ctx, http.MethodPost, "/$batch", "", header, body, http.StatusAccepted)
	if err != nil {
		return err
	}
	return BatchError(r, len(ops))
}

// Query runs a query, following continuations, and returns the number of
// entities and, for error reports, a word on each page; check, if set,
// sees each page body.
func (c *Client) Query(ctx context.Context, table, filter string, check func([]byte) error) (int, []string, error) {
	total := 0
	next := ""
	var pages []string
	for {
		q := "$filter=" + url.QueryEscape(filter)
		if filter == "" {
			q = ""
		}
		if next != "" {
			if q != "" {
				q += "&"
			}
			q += next
		}
		r, err := c.Call(ctx, http.MethodGet, "/"+table+"()", q, nil, nil, 200)
		if err != nil {
			return total, pages, err
		}
		n := bytes.Count(r.Body, []byte(`"odata.etag"`))
		total += n
		pages = append(pages, fmt.Sprintf("[%s: %d]", next, n))
		if check != nil {
			if err := check(r.Body); err != nil {
				return total, pages, err
			}
		}
		npk, nrk := r.Header.Get("x-ms-continuation-NextPartitionKey"), r.Header.Get("x-ms-continuation-NextRowKey")
		if npk == "" && nrk == "" {
			return total, pages, nil
		}
		next = "NextPartitionKey=" + url.QueryEscape(npk)
		if nrk != "" {
			next += "&NextRowKey=" + url.QueryEscape(nrk)
		}
	}
}
