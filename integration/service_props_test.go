package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// xmlOp are the headers the SDKs send on XML operations.
var xmlOp = map[string]string{"Accept": "application/xml", "Content-Type": "application/xml", "DataServiceVersion": ""}

// TestServiceProperties sets and gets the service properties with the SDK
// and on the wire: absent elements keep their values, element order does
// not matter, Set answers 202, bad documents are refused.
func TestServiceProperties(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	got, err := e.service.GetProperties(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hm := got.HourMetrics
	if hm == nil || !*hm.Enabled || !*hm.RetentionPolicy.Enabled || *hm.RetentionPolicy.Days != 7 || got.Logging == nil || *got.Logging.Read || len(got.Cors) != 0 {
		t.Fatalf("defaults: %+v", got.ServiceProperties)
	}

	rule := &aztables.CorsRule{AllowedOrigins: to.Ptr("https://app.example"), AllowedMethods: to.Ptr("GET,PUT"),
		AllowedHeaders: to.Ptr("x-ms-*"), ExposedHeaders: to.Ptr("x-ms-request-id"), MaxAgeInSeconds: to.Ptr(int32(60))}
	_, err = e.service.SetProperties(bg, aztables.ServiceProperties{
		Cors:          []*aztables.CorsRule{rule},
		MinuteMetrics: &aztables.Metrics{Version: to.Ptr("1.0"), Enabled: to.Ptr(true), IncludeAPIs: to.Ptr(true), RetentionPolicy: &aztables.RetentionPolicy{Enabled: to.Ptr(true), Days: to.Ptr(int32(2))}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// An empty document, as Go sends for ServiceProperties{}, changes
	// nothing.
	if _, err := e.service.SetProperties(bg, aztables.ServiceProperties{}, nil); err != nil {
		t.Fatal(err)
	}
	got, err = e.service.GetProperties(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	mm := got.MinuteMetrics
	if !*mm.Enabled || !*mm.IncludeAPIs || *mm.RetentionPolicy.Days != 2 || !*got.HourMetrics.Enabled || len(got.Cors) != 1 ||
		*got.Cors[0].AllowedOrigins != "https://app.example" || *got.Cors[0].MaxAgeInSeconds != 60 || *got.Cors[0].AllowedHeaders != "x-ms-*" {
		t.Fatalf("after set: %+v %+v", got.ServiceProperties, got.Cors)
	}

	// On the wire, in another element order, with the JS/.NET path.
	path := "/" + httpapi.DevAccount + "/?restype=service&comp=properties"
	body := `<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Cors /><Logging><RetentionPolicy><Days>5</Days><Enabled>true</Enabled></RetentionPolicy><Delete>true</Delete><Write>false</Write><Read>true</Read><Version>1.0</Version></Logging></StorageServiceProperties>`
	r := e.send(rawReq{method: "PUT", path: path, header: xmlOp, body: []byte(body)})
	wantStatus(t, r, 202)
	if len(r.body) != 0 {
		t.Errorf("202 with a body: %s", r.body)
	}
	r = e.send(rawReq{method: "GET", path: "/" + httpapi.DevAccount + "?comp=properties&restype=service", header: xmlOp})
	wantStatus(t, r, 200)
	want := `<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Logging><Version>1.0</Version><Read>true</Read><Write>false</Write><Delete>true</Delete><RetentionPolicy><Enabled>true</Enabled><Days>5</Days></RetentionPolicy></Logging><HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>false</IncludeAPIs><RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></HourMetrics><MinuteMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>true</IncludeAPIs><RetentionPolicy><Enabled>true</Enabled><Days>2</Days></RetentionPolicy></MinuteMetrics><Cors /></StorageServiceProperties>`
	if string(r.body) != want || r.header.Get("Content-Type") != "application/xml" {
		t.Errorf("GET properties:\n%s\nwant\n%s", r.body, want)
	}

	before := e.fullSnapshot()
	corsRule := `<CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods><MaxAgeInSeconds>1</MaxAgeInSeconds><AllowedHeaders></AllowedHeaders><ExposedHeaders></ExposedHeaders></CorsRule>`
	bad := []struct {
		name, body, code string
	}{
		{"six cors rules", "<StorageServiceProperties><Cors>" + strings.Repeat(corsRule, 6) + "</Cors></StorageServiceProperties>", "InvalidXmlNodeValue"},
		{"unknown method", "<StorageServiceProperties><Cors>" + strings.Replace(corsRule, "GET", "GET,CONNECT", 1) + "</Cors></StorageServiceProperties>", "InvalidXmlNodeValue"},
		{"retention days", "<StorageServiceProperties><HourMetrics><RetentionPolicy><Enabled>true</Enabled><Days>0</Days></RetentionPolicy></HourMetrics></StorageServiceProperties>", "InvalidXmlNodeValue"},
		{"not a boolean", "<StorageServiceProperties><Logging><Read>1</Read></Logging></StorageServiceProperties>", "InvalidXmlNodeValue"},
		{"malformed", "<StorageServiceProperties><Logging>", "InvalidXmlDocument"},
		{"empty", "", "InvalidXmlDocument"},
		{"wrong root", "<StorageServiceStats/>", "InvalidXmlDocument"},
	}
	for _, b := range bad {
		r := e.send(rawReq{method: "PUT", path: path, header: xmlOp, body: []byte(b.body)})
		wantXMLError(t, r, 400, b.code)
	}
	// Five rules are fine, but not this time: the check above must not have
	// changed anything.
	if e.fullSnapshot() != before {
		t.Fatal("a rejected Set Service Properties changed the database")
	}
	r = e.send(rawReq{method: "PUT", path: path, header: xmlOp, body: []byte("<StorageServiceProperties><Cors>" + strings.Repeat(corsRule, 5) + "</Cors></StorageServiceProperties>")})
	wantStatus(t, r, 202)

	wantXMLError(t, e.send(rawReq{method: "GET", path: "/" + httpapi.DevAccount + "/?restype=service", header: xmlOp}), 400, "MissingRequiredQueryParameter")
	wantXMLError(t, e.send(rawReq{method: "GET", path: "/" + httpapi.DevAccount + "/?restype=service&comp=list", header: xmlOp}), 400, "InvalidQueryParameterValue")
	wantXMLError(t, e.send(rawReq{method: "DELETE", path: path, header: xmlOp}), 405, "MethodNotAllowed")
}

// TestServiceStats checks Get Table Service Stats on the primary (where Go
// sends it) and on the secondary endpoint (where the other SDKs do).
func TestServiceStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := time.Now().Add(-time.Minute)
	got, err := e.service.GetStatistics(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *got.GeoReplication.Status != aztables.GeoReplicationStatusLive || got.GeoReplication.LastSyncTime.Before(start) {
		t.Fatalf("stats: %v %v", *got.GeoReplication.Status, got.GeoReplication.LastSyncTime)
	}
	for _, p := range []string{"/" + httpapi.DevAccount + "/?restype=service&comp=stats", "/" + httpapi.DevAccount + "-secondary/?restype=service&comp=stats"} {
		r := e.send(rawReq{method: "GET", path: p, header: xmlOp})
		wantStatus(t, r, 200)
		b := string(r.body)
		if !strings.HasPrefix(b, `<?xml version="1.0" encoding="utf-8"?><StorageServiceStats><GeoReplication><Status>live</Status><LastSyncTime>`) || !strings.HasSuffix(b, " GMT</LastSyncTime></GeoReplication></StorageServiceStats>") {
			t.Errorf("%s: %s", p, b)
		}
	}
	// The secondary endpoint as the .NET and JS SDKs reach it.
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := aztables.NewServiceClientWithSharedKey(e.svcURL+"-secondary", cred, clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sec.GetStatistics(bg, nil); err != nil {
		t.Fatalf("secondary: %v", err)
	}
}

// TestCORS plays a browser: preflight requests and actual requests with an
// Origin, before and after CORS rules are set, allowed and denied.
func TestCORS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, table := e.newTable()
	sasAdd(t, owner, "p", "r")
	const app, evil = "https://app.example", "https://evil.example"
	query := "/" + httpapi.DevAccount + "/" + table + "()"
	preflight := func(origin, method, headers string) *rawResponse {
		h := map[string]string{"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers,
			"x-ms-date": "", "x-ms-version": "", "Accept": "", "DataServiceVersion": ""}
		return e.send(rawReq{method: "OPTIONS", path: query, header: h, authz: strp("")})
	}
	const asked = "authorization,x-ms-date,x-ms-version,content-type"

	// No rules yet.
	wantError(t, preflight(app, "GET", asked), 403, "CorsPreflightFailure")
	wantError(t, preflight("", "GET", asked), 400, "InvalidHeaderValue")
	wantError(t, preflight(app, "", asked), 400, "InvalidHeaderValue")
	r := e.send(rawReq{method: "GET", path: query, header: map[string]string{"Origin": app}})
	wantStatus(t, r, 200)
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS headers without rules: %v", r.header)
	}

	_, err := e.service.SetProperties(bg, aztables.ServiceProperties{Cors: []*aztables.CorsRule{
		{AllowedOrigins: to.Ptr(app + ",https://other.example"), AllowedMethods: to.Ptr("GET,PUT,MERGE,POST"),
			AllowedHeaders: to.Ptr("x-ms-*,authorization,content-type,accept,dataserviceversion"),
			ExposedHeaders: to.Ptr("x-ms-*,ETag"), MaxAgeInSeconds: to.Ptr(int32(600))},
		{AllowedOrigins: to.Ptr("*"), AllowedMethods: to.Ptr("DELETE"), AllowedHeaders: to.Ptr("*"), ExposedHeaders: to.Ptr(""), MaxAgeInSeconds: to.Ptr(int32(5))},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Allowed preflights.
	r = preflight(app, "GET", asked)
	wantStatus(t, r, 200)
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin": app, "Access-Control-Allow-Methods": "GET", "Access-Control-Allow-Headers": asked,
		"Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": "true",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("preflight %s = %q, want %q", name, got, want)
		}
	}
	if len(r.body) != 0 {
		t.Errorf("preflight body %q", r.body)
	}
	r = preflight("HTTPS://APP.EXAMPLE", "PUT", "")
	wantStatus(t, r, 200)
	if r.header.Get("Access-Control-Allow-Headers") != "" || r.header.Get("Access-Control-Allow-Origin") != "HTTPS://APP.EXAMPLE" {
		t.Errorf("preflight without headers: %v", r.header)
	}
	r = preflight(evil, "DELETE", "x-anything")
	wantStatus(t, r, 200)
	if r.header.Get("Access-Control-Allow-Origin") != evil || r.header.Get("Access-Control-Max-Age") != "5" {
		t.Errorf("wildcard rule preflight: %v", r.header)
	}
	// Denied preflights.
	wantError(t, preflight(evil, "GET", asked), 403, "CorsPreflightFailure")
	wantError(t, preflight(app, "PATCH", asked), 403, "CorsPreflightFailure")
	wantError(t, preflight(app, "GET", asked+",x-custom"), 403, "CorsPreflightFailure")
	wantError(t, e.send(rawReq{method: "OPTIONS", path: "/nosuchaccount/t()", authz: strp(""),
		header: map[string]string{"Origin": app, "Access-Control-Request-Method": "GET"}}), 403, "CorsPreflightFailure")

	// Actual requests.
	r = e.send(rawReq{method: "GET", path: query, header: map[string]string{"Origin": app}})
	wantStatus(t, r, 200)
	if r.header.Get("Access-Control-Allow-Origin") != app || r.header.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(r.header.Get("Vary"), "Origin") {
		t.Errorf("allowed GET: %v", r.header)
	}
	exposed := strings.Split(r.header.Get("Access-Control-Expose-Headers"), ",")
	for _, h := range []string{"X-Ms-Request-Id", "X-Ms-Version", "ETag"} {
		if !containsFold(exposed, h) {
			t.Errorf("Expose-Headers %v lacks %s", exposed, h)
		}
	}
	if containsFold(exposed, "Content-Type") {
		t.Errorf("Expose-Headers %v has Content-Type", exposed)
	}
	// Denied origin: the request works (the browser enforces), without
	// Allow-Origin.
	r = e.send(rawReq{method: "GET", path: query, header: map[string]string{"Origin": evil}})
	wantStatus(t, r, 200)
	if r.header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(r.header.Get("Vary"), "Origin") {
		t.Errorf("denied origin: %v", r.header)
	}
	// Errors carry the headers too, so that the browser app can read them:
	// a missing table, and a request without credentials.
	r = e.send(rawReq{method: "GET", path: "/" + httpapi.DevAccount + "/nosuchtable()", header: map[string]string{"Origin": app}})
	wantError(t, r, 404, "TableNotFound")
	if r.header.Get("Access-Control-Allow-Origin") != app || !containsFold(strings.Split(r.header.Get("Access-Control-Expose-Headers"), ","), "x-ms-error-code") {
		t.Errorf("error answer: %v", r.header)
	}
	r = e.send(rawReq{method: "GET", path: query, header: map[string]string{"Origin": app}, authz: strp("")})
	wantError(t, r, 403, "AuthenticationFailed")
	if r.header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("anonymous answer: %v", r.header)
	}
	// The wildcard rule answers any origin with *, and no credentials.
	r = e.send(rawReq{method: "DELETE", path: e.entityPath(table, "p", "r"), header: map[string]string{"Origin": evil, "If-Match": "*"}})
	wantStatus(t, r, 204)
	if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("wildcard rule: %v", r.header)
	}
	// A browser app with a SAS: the preflight, then the request.
	q := svcSAS{tn: table, sp: "a", se: inAnHour()}.encode()
	r = e.send(rawReq{method: "OPTIONS", path: "/" + httpapi.DevAccount + "/" + table + "?" + q, authz: strp(""),
		header: map[string]string{"Origin": app, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-ms-version"}})
	wantStatus(t, r, 200)
	r = e.send(rawReq{method: "POST", path: "/" + httpapi.DevAccount + "/" + table + "?" + q, authz: strp(""),
		header: map[string]string{"Origin": app, "Prefer": "return-no-content"}, body: sasEntity("p", "browser", 1)})
	wantStatus(t, r, http.StatusNoContent)
	if r.header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("SAS insert from the browser: %v", r.header)
	}
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(strings.TrimSpace(e), s) {
			return true
		}
	}
	return false
}
