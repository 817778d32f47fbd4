package integration

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// This file holds the helpers the integration suites share: checks of
// Azure errors (from the SDK and on the wire), a raw request builder with
// full control over signing, and database snapshots.

var bg = context.Background()

// wantRespErr asserts that err is an *azcore.ResponseError with the given
// status and error code.
func wantRespErr(t testing.TB, err error, status int, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %d %s", status, code)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("got %T %v, want *azcore.ResponseError %d %s", err, err, status, code)
	}
	if re.StatusCode != status || re.ErrorCode != code {
		t.Fatalf("got %d %s, want %d %s (%v)", re.StatusCode, re.ErrorCode, status, code, err)
	}
}

// respStatus returns the status and code of an SDK error, or 0 and "" for
// success; any other error fails the test.
func respStatus(t testing.TB, err error) (int, string) {
	t.Helper()
	if err == nil {
		return 0, ""
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Errorf("got %T %v, want *azcore.ResponseError", err, err)
		return -1, ""
	}
	return re.StatusCode, re.ErrorCode
}

// mustJSON marshals v or fails.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawReq is a raw HTTP request with every detail under the test's control.
// By default it is signed with Shared Key Lite for the development account
// with the current date in x-ms-date.
type rawReq struct {
	method string
	path   string // request-target after the host, sent unchanged
	body   []byte
	// header values are set after the defaults; "" removes a header.
	header map[string]string
	// add appends header values, for repeated headers.
	add [][2]string
	// date is the signing date; zero means now.
	date time.Time
	// account and key sign the request; defaults: the development account.
	account, key string
	// scheme is SharedKeyLite (default) or SharedKey.
	scheme string
	// authz, when non-nil, is sent verbatim as Authorization ("" = none).
	authz *string
	// host, when set, is sent as the Host header (host-style addressing).
	host string
}

func strp(s string) *string { return &s }

// send performs r against e and reads the whole response.
func (e *env) send(r rawReq) *rawResponse {
	e.t.Helper()
	req, err := http.NewRequest(r.method, e.baseURL+"/", bytes.NewReader(r.body))
	if err != nil {
		e.t.Fatal(err)
	}
	if r.body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	rawPath, rawQuery, _ := strings.Cut(r.path, "?")
	req.URL.Opaque = rawPath
	req.URL.RawQuery = rawQuery
	req.Host = r.host
	date := r.date
	if date.IsZero() {
		date = time.Now()
	}
	h := req.Header
	h.Set("x-ms-date", date.UTC().Format(http.TimeFormat))
	h.Set("x-ms-version", "2019-02-02")
	h.Set("Accept", "application/json;odata=minimalmetadata")
	h.Set("DataServiceVersion", "3.0")
	if r.body != nil {
		h.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
	}
	for _, kv := range r.add {
		h.Add(kv[0], kv[1])
	}
	switch {
	case r.authz != nil && *r.authz == "":
		h.Del("Authorization")
	case r.authz != nil:
		h.Set("Authorization", *r.authz)
	default:
		account, key, scheme := r.account, r.key, r.scheme
		if account == "" {
			account = httpapi.DevAccount
		}
		if key == "" {
			key = httpapi.DevKey
		}
		if scheme == "" {
			scheme = "SharedKeyLite"
		}
		d := h.Get("x-ms-date")
		if d == "" {
			d = h.Get("Date")
		}
		resource := canonicalResource(account, rawPath, rawQuery)
		toSign := d + "\n" + resource
		if scheme == "SharedKey" {
			toSign = r.method + "\n" + h.Get("Content-MD5") + "\n" + h.Get("Content-Type") + "\n" + d + "\n" + resource
		}
		h.Set("Authorization", scheme+" "+account+":"+hmacSign(key, toSign))
	}
	resp, err := e.httpClient().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

// canonicalResource is Shared Key's "/" + account + raw path [+ ?comp=].
func canonicalResource(account, rawPath, rawQuery string) string {
	res := "/" + account + rawPath
	for _, kv := range strings.Split(rawQuery, "&") {
		if v, ok := strings.CutPrefix(kv, "comp="); ok {
			res += "?comp=" + v
		}
	}
	return res
}

func hmacSign(key64, toSign string) string {
	key, err := base64.StdEncoding.DecodeString(key64)
	if err != nil {
		panic(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(toSign))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

var errorValuePattern = regexp.MustCompile(`^(?s:.+)\nRequestId:([^\n]+)\nTime:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z$`)

// checkStdHeaders asserts the headers every response carries.
func checkStdHeaders(t testing.TB, r *rawResponse) {
	t.Helper()
	if r.header.Get("x-ms-request-id") == "" {
		t.Errorf("no x-ms-request-id")
	}
	if r.header.Get("x-ms-version") == "" {
		t.Errorf("no x-ms-version")
	}
	d := r.header.Get("Date")
	if _, err := time.Parse(time.RFC1123, d); err != nil || !strings.HasSuffix(d, " GMT") {
		t.Errorf("Date %q is not RFC 1123 GMT (%v)", d, err)
	}
}

// odataError is the JSON error body.
type odataError struct {
	Error struct {
		Code    string `json:"code"`
		Message struct {
			Lang  string `json:"lang"`
			Value string `json:"value"`
		} `json:"message"`
	} `json:"odata.error"`
}

// wantError asserts that r is Azure's JSON error with status and code: the
// x-ms-error-code header and the body agree, the message has the RequestId
// and Time lines, and the standard headers are there.
func wantError(t testing.TB, r *rawResponse, status int, code string) {
	t.Helper()
	if r.status != status || r.header.Get("x-ms-error-code") != code {
		t.Errorf("got %d %q, want %d %q; body %s", r.status, r.header.Get("x-ms-error-code"), status, code, trunc(r.body))
		return
	}
	checkStdHeaders(t, r)
	var oe odataError
	if err := json.Unmarshal(r.body, &oe); err != nil {
		t.Errorf("error body is not JSON: %v: %s", err, trunc(r.body))
		return
	}
	if oe.Error.Code != code {
		t.Errorf("body code %q, header %q", oe.Error.Code, code)
	}
	if oe.Error.Message.Lang != "en-US" {
		t.Errorf("message lang %q", oe.Error.Message.Lang)
	}
	m := errorValuePattern.FindStringSubmatch(oe.Error.Message.Value)
	if m == nil {
		t.Errorf("message value %q lacks the RequestId and Time lines", oe.Error.Message.Value)
	} else if m[1] != r.header.Get("x-ms-request-id") {
		t.Errorf("message RequestId %q, header %q", m[1], r.header.Get("x-ms-request-id"))
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type %q", ct)
	}
	// Azure's JSON error holds code and message only; the Python SDK
	// cannot decode one with any other member.
	var members struct {
		Error map[string]json.RawMessage `json:"odata.error"`
	}
	if err := json.Unmarshal(r.body, &members); err != nil || len(members.Error) != 2 || members.Error["code"] == nil || members.Error["message"] == nil {
		t.Errorf("odata.error has members other than code and message: %s", trunc(r.body))
	}
}

// wantStatus asserts a successful status and the standard headers.
func wantStatus(t testing.TB, r *rawResponse, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %d %s, want %d; body %s", r.status, r.header.Get("x-ms-error-code"), status, trunc(r.body))
	}
	checkStdHeaders(t, r)
}

func trunc(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// rawObject decodes a JSON object keeping each member's raw text, so that
// number spellings (5.0 vs 5) can be checked. Duplicate members fail.
func rawObject(t testing.TB, b []byte) map[string]json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", trunc(b))
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		name := k.(string)
		if _, dup := m[name]; dup {
			t.Fatalf("member %q appears twice in %s", name, trunc(b))
		}
		m[name] = v
	}
	return m
}

// rawValue decodes the "value" array of a collection into raw objects.
func rawValue(t testing.TB, b []byte) []map[string]json.RawMessage {
	t.Helper()
	var doc struct {
		Value []json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("collection: %v: %s", err, trunc(b))
	}
	out := make([]map[string]json.RawMessage, len(doc.Value))
	for i, v := range doc.Value {
		out[i] = rawObject(t, v)
	}
	return out
}

// str decodes a JSON string member.
func str(t testing.TB, m map[string]json.RawMessage, name string) string {
	t.Helper()
	raw, ok := m[name]
	if !ok {
		t.Fatalf("member %q missing", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("member %q = %s is not a string", name, raw)
	}
	return s
}

// snapshot is the content of the schema's tables and entities relations,
// row versions included, for "nothing changed" checks.
func (e *env) snapshot() string {
	e.t.Helper()
	e.wantPool()
	var s string
	err := e.pool.QueryRow(bg, `
SELECT coalesce((SELECT string_agg(format('%s|%s|%s|%s|%s', id, account, name, lname, deleted_at), E'\n' ORDER BY id) FROM tables), '')
    || E'\n--\n' ||
       coalesce((SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s', table_id, pk, rk, ts, size, xmin, props), E'\n' ORDER BY table_id, pk, rk) FROM entities), '')`).Scan(&s)
	if err != nil {
		e.t.Fatalf("snapshot: %v", err)
	}
	return s
}

// tableSnapshot is like snapshot for the rows of one table only, for tests
// that share an env with parallel subtests.
func (e *env) tableSnapshot(table string) string {
	e.t.Helper()
	if e.pool == nil {
		return strings.Join(sortedValues(e.servedRows(table)), "\n")
	}
	var s string
	err := e.pool.QueryRow(bg, `
SELECT coalesce((SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s', table_id, pk, rk, ts, size, xmin, props), E'\n' ORDER BY pk, rk)
    FROM entities WHERE table_id IN (SELECT id FROM tables WHERE lname = lower($1))), '')`, table).Scan(&s)
	if err != nil {
		e.t.Fatalf("snapshot: %v", err)
	}
	return s
}

// entityCount counts the stored entities of all tables.
func (e *env) entityCount() int {
	e.t.Helper()
	e.wantPool()
	var n int
	if err := e.pool.QueryRow(bg, `SELECT count(*) FROM entities`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// tablePath is the raw path of a table's entity set.
func (e *env) tablePath(table string) string { return "/" + httpapi.DevAccount + "/" + table }

// entityPath is the raw path of one entity, keys escaped the way the Go
// SDK does it (quotes doubled, then url.PathEscape).
func (e *env) entityPath(table, pk, rk string) string {
	return fmt.Sprintf("/%s/%s(PartitionKey='%s',RowKey='%s')", httpapi.DevAccount, table, pathEscape(pk), pathEscape(rk))
}

// pathEscape is the Go SDK's key escaping: quotes doubled, then
// url.PathEscape (which also escapes the quotes as %27).
func pathEscape(s string) string { return url.PathEscape(strings.ReplaceAll(s, "'", "''")) }

// getRaw reads one entity over raw HTTP in minimal metadata.
func (e *env) getRaw(table, pk, rk string) (*rawResponse, map[string]json.RawMessage) {
	e.t.Helper()
	r := e.send(rawReq{method: "GET", path: e.entityPath(table, pk, rk)})
	if r.status != 200 {
		e.t.Fatalf("get %s/%s: %d %s", pk, rk, r.status, trunc(r.body))
	}
	return r, rawObject(e.t, r.body)
}

// getEDM reads one entity through the SDK.
func getEDM(t testing.TB, c *aztables.Client, pk, rk string) (aztables.EDMEntity, azcore.ETag) {
	t.Helper()
	resp, err := c.GetEntity(bg, pk, rk, nil)
	if err != nil {
		t.Fatalf("get %q/%q: %v", pk, rk, err)
	}
	var ent aztables.EDMEntity
	if err := json.Unmarshal(resp.Value, &ent); err != nil {
		t.Fatal(err)
	}
	return ent, resp.ETag
}

// listAll pages through a table with the SDK and returns the raw entities
// and the size of each page.
func listAll(t testing.TB, c *aztables.Client, opts *aztables.ListEntitiesOptions) ([]map[string]any, []int) {
	t.Helper()
	var all []map[string]any
	var pages []int
	p := c.NewListEntitiesPager(opts)
	for p.More() {
		page, err := p.NextPage(bg)
		if err != nil {
			t.Fatalf("list page %d: %v", len(pages), err)
		}
		pages = append(pages, len(page.Entities))
		for _, b := range page.Entities {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			all = append(all, m)
		}
	}
	return all, pages
}

// listTableNames lists every table through the SDK.
func listTableNames(t testing.TB, s *aztables.ServiceClient) []string {
	t.Helper()
	var names []string
	p := s.NewListTablesPager(nil)
	for p.More() {
		page, err := p.NextPage(bg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range page.Tables {
			names = append(names, *tp.Name)
		}
	}
	sort.Strings(names)
	return names
}

// parallel runs fn(i) for i in [0,n) on workers goroutines.
func parallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

// azureSize is the entity size by Azure's documented formula, computed
// independently of the server's code: 4 + 2×(len(PK)+len(RK)) + Σ(8 +
// 2×len(name) + value size), lengths in UTF-16 units.
func azureSize(pk, rk string, props map[string]any) int {
	n := 4 + 2*(utf16Len(pk)+utf16Len(rk))
	for name, v := range props {
		n += 8 + 2*utf16Len(name)
		switch v := v.(type) {
		case string:
			n += 4 + 2*utf16Len(v)
		case aztables.EDMBinary:
			n += 4 + len(v)
		case bool:
			n++
		case int32:
			n += 4
		case aztables.EDMInt64, float64, aztables.EDMDateTime:
			n += 8
		case aztables.EDMGUID:
			n += 16
		default:
			panic(fmt.Sprintf("azureSize: %T", v))
		}
	}
	return n
}
