package integration

import (
	"encoding/xml"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// Helpers of the SAS, ACL, service properties and CORS suites.

// svcSAS is a service (table) SAS built by hand, for what the Go SDK cannot
// build: key ranges (GetTableSASURL drops them from the URL), sip, spr,
// stored policies and odd versions.
type svcSAS struct {
	sv, tn, sp, st, se, sip, spr, si, spk, srk, epk, erk string
	// signedTable is the table name in the string to sign; default
	// lower(tn), as JS, Python and Go sign it.
	signedTable string
	key         string // default: the development key
}

// encode returns the SAS query string.
func (s svcSAS) encode() string {
	if s.sv == "" {
		s.sv = "2019-02-02"
	}
	if s.signedTable == "" {
		s.signedTable = strings.ToLower(s.tn)
	}
	if s.key == "" {
		s.key = httpapi.DevKey
	}
	toSign := strings.Join([]string{s.sp, s.st, s.se, "/table/" + httpapi.DevAccount + "/" + s.signedTable,
		s.si, s.sip, s.spr, s.sv, s.spk, s.srk, s.epk, s.erk}, "\n")
	v := url.Values{}
	for _, kv := range [][2]string{{"sv", s.sv}, {"tn", s.tn}, {"sp", s.sp}, {"st", s.st}, {"se", s.se}, {"sip", s.sip},
		{"spr", s.spr}, {"si", s.si}, {"spk", s.spk}, {"srk", s.srk}, {"epk", s.epk}, {"erk", s.erk}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	v.Set("sig", hmacSign(s.key, toSign))
	return v.Encode()
}

// acctSAS is an account SAS built by hand: the Go SDK's GetAccountSASURL
// always demands HTTPS (spr=https), which a plain-HTTP test server cannot
// satisfy.
type acctSAS struct {
	sv, ss, srt, sp, st, se, sip, spr, ses string
	key                                    string
}

func (s acctSAS) encode() string {
	if s.sv == "" {
		s.sv = "2019-02-02"
	}
	if s.ss == "" {
		s.ss = "t"
	}
	if s.key == "" {
		s.key = httpapi.DevKey
	}
	fields := []string{httpapi.DevAccount, s.sp, s.ss, s.srt, s.st, s.se, s.sip, s.spr, s.sv}
	if s.sv >= "2020-12-06" {
		fields = append(fields, s.ses)
	}
	v := url.Values{}
	for _, kv := range [][2]string{{"sv", s.sv}, {"ss", s.ss}, {"srt", s.srt}, {"sp", s.sp}, {"st", s.st}, {"se", s.se},
		{"sip", s.sip}, {"spr", s.spr}, {"ses", s.ses}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	v.Set("sig", hmacSign(s.key, strings.Join(fields, "\n")+"\n"))
	return v.Encode()
}

// sasTime formats a time as the SDKs put it in st and se.
func sasTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// inAnHour is a SAS expiry that outlasts any test.
func inAnHour() string { return sasTime(time.Now().Add(time.Hour)) }

// sasTableClient returns a client of table that authenticates with the
// SAS query string, as an application given a SAS URL makes it.
func (e *env) sasTableClient(table, query string) *aztables.Client {
	e.t.Helper()
	c, err := aztables.NewClientWithNoCredential(e.svcURL+"/"+table+"?"+query, e.clientOptions())
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// sasServiceClient returns a service client that authenticates with the
// SAS query string.
func (e *env) sasServiceClient(query string) *aztables.ServiceClient {
	e.t.Helper()
	c, err := aztables.NewServiceClientWithNoCredential(e.svcURL+"/?"+query, e.clientOptions())
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// sdkTableSAS returns the query string of a SAS made by the Go SDK's
// Client.GetTableSASURL. The service client it signs with has a trailing
// slash on its URL: without it, GetTableSASURL joins the path-style
// endpoint and the table name without a '/'.
func (e *env) sdkTableSAS(table string, perms aztables.SASPermissions, start, expiry time.Time) string {
	e.t.Helper()
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		e.t.Fatal(err)
	}
	svc, err := aztables.NewServiceClientWithSharedKey(e.svcURL+"/", cred, clientOptions())
	if err != nil {
		e.t.Fatal(err)
	}
	sasURL, err := svc.NewClient(table).GetTableSASURL(perms, start, expiry)
	if err != nil {
		e.t.Fatal(err)
	}
	u, err := url.Parse(sasURL)
	if err != nil {
		e.t.Fatal(err)
	}
	if want := "/" + httpapi.DevAccount + "/" + table; u.Path != want {
		e.t.Fatalf("GetTableSASURL path %q, want %q", u.Path, want)
	}
	return u.RawQuery
}

// fullSnapshot extends snapshot with the stored access policies and the
// service properties: every row a request could change.
func (e *env) fullSnapshot() string {
	e.t.Helper()
	e.wantPool()
	var s string
	err := e.pool.QueryRow(bg, `
SELECT coalesce((SELECT string_agg(format('%s|%s|%s|%s|%s|%s', table_id, policy_id, pos, start_at, expiry_at, permission), E'\n' ORDER BY table_id, pos) FROM table_acls), '')
    || E'\n--\n' ||
       coalesce((SELECT string_agg(format('%s|%s', account, props), E'\n' ORDER BY account) FROM service_properties), '')`).Scan(&s)
	if err != nil {
		e.t.Fatalf("snapshot: %v", err)
	}
	return e.snapshot() + "\n--\n" + s
}

// wantXMLError asserts Azure's XML error body with status and code.
func wantXMLError(t testing.TB, r *rawResponse, status int, code string) {
	t.Helper()
	if r.status != status || r.header.Get("x-ms-error-code") != code {
		t.Errorf("got %d %q, want %d %q; body %s", r.status, r.header.Get("x-ms-error-code"), status, code, trunc(r.body))
		return
	}
	checkStdHeaders(t, r)
	var doc struct {
		XMLName xml.Name `xml:"Error"`
		Code    string   `xml:"Code"`
		Message string   `xml:"Message"`
	}
	if err := xml.Unmarshal(r.body, &doc); err != nil || doc.Code != code {
		t.Errorf("XML error body %q: %v", r.body, err)
	}
	if m := errorValuePattern.FindStringSubmatch(doc.Message); m == nil || m[1] != r.header.Get("x-ms-request-id") {
		t.Errorf("message %q lacks the RequestId and Time lines", doc.Message)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/xml" {
		t.Errorf("error Content-Type %q", ct)
	}
}
