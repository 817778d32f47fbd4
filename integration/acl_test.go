package integration

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// TestTableACL sets and gets stored access policies with the SDK and on
// the wire, and checks the XML errors.
func TestTableACL(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	c, table := e.newTable()
	got, err := c.GetAccessPolicy(bg, nil)
	if err != nil || len(got.SignedIdentifiers) != 0 {
		t.Fatalf("new table: %+v %v", got, err)
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	expiry := time.Date(2030, 1, 1, 0, 0, 0, 123456700, time.FixedZone("x", 3600))
	acl := []*aztables.SignedIdentifier{
		{ID: to.Ptr("full"), AccessPolicy: &aztables.AccessPolicy{Start: &start, Expiry: &expiry, Permission: to.Ptr("dura")}},
		{ID: to.Ptr("readonly"), AccessPolicy: &aztables.AccessPolicy{Permission: to.Ptr("r")}},
	}
	if _, err := c.SetAccessPolicy(bg, &aztables.SetAccessPolicyOptions{TableACL: acl}); err != nil {
		t.Fatal(err)
	}
	got, err = c.GetAccessPolicy(bg, nil)
	if err != nil || len(got.SignedIdentifiers) != 2 {
		t.Fatalf("get: %+v %v", got, err)
	}
	full, ro := got.SignedIdentifiers[0], got.SignedIdentifiers[1]
	if *full.ID != "full" || !full.AccessPolicy.Start.Equal(start) || !full.AccessPolicy.Expiry.Equal(expiry) || *full.AccessPolicy.Permission != "raud" {
		t.Errorf("full: %s %v %v %s", *full.ID, full.AccessPolicy.Start, full.AccessPolicy.Expiry, *full.AccessPolicy.Permission)
	}
	if *ro.ID != "readonly" || ro.AccessPolicy.Start != nil || ro.AccessPolicy.Expiry != nil || *ro.AccessPolicy.Permission != "r" {
		t.Errorf("readonly: %+v", ro.AccessPolicy)
	}

	path := "/" + httpapi.DevAccount + "/" + table + "?comp=acl"
	xmlHeaders := map[string]string{"Accept": "application/xml", "Content-Type": "application/xml", "DataServiceVersion": ""}
	r := e.send(rawReq{method: "GET", path: path, header: xmlHeaders})
	wantStatus(t, r, 200)
	want := `<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers><SignedIdentifier><Id>full</Id><AccessPolicy><Start>2024-01-01T00:00:00.0000000Z</Start><Expiry>2029-12-31T23:00:00.1234567Z</Expiry><Permission>raud</Permission></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>readonly</Id><AccessPolicy><Permission>r</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`
	if string(r.body) != want || r.header.Get("Content-Type") != "application/xml" {
		t.Errorf("GET ACL: %s %s", r.header.Get("Content-Type"), r.body)
	}

	// The .NET/JS/Python element order, with a byte order mark.
	body := "\ufeff" + `<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers><SignedIdentifier><Id>net</Id><AccessPolicy><Start>2024-01-01T00:00:00Z</Start><Expiry>2024-01-02T00:00:00Z</Expiry><Permission>ar</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`
	r = e.send(rawReq{method: "PUT", path: path, header: xmlHeaders, body: []byte(body)})
	wantStatus(t, r, 204)
	if len(r.body) != 0 {
		t.Errorf("set ACL answer has a body: %q", r.body)
	}
	r = e.send(rawReq{method: "GET", path: path, header: xmlHeaders})
	if !strings.Contains(string(r.body), "<Id>net</Id><AccessPolicy><Start>2024-01-01T00:00:00.0000000Z</Start><Expiry>2024-01-02T00:00:00.0000000Z</Expiry><Permission>ra</Permission>") {
		t.Errorf("after PUT: %s", r.body)
	}

	// A policy without fields, as the JavaScript SDK sends it, comes back
	// as Azure gives it: without an AccessPolicy element.
	body = `<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers><SignedIdentifier><Id>x</Id><AccessPolicy/></SignedIdentifier><SignedIdentifier><Id>y</Id><AccessPolicy><Start></Start></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>z</Id></SignedIdentifier></SignedIdentifiers>`
	wantStatus(t, e.send(rawReq{method: "PUT", path: path, header: xmlHeaders, body: []byte(body)}), 204)
	r = e.send(rawReq{method: "GET", path: path, header: xmlHeaders})
	if want := `<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers><SignedIdentifier><Id>x</Id></SignedIdentifier><SignedIdentifier><Id>y</Id></SignedIdentifier><SignedIdentifier><Id>z</Id></SignedIdentifier></SignedIdentifiers>`; string(r.body) != want {
		t.Errorf("policies without fields:\n got %s\nwant %s", r.body, want)
	}

	ident := func(id, policy string) string {
		return "<SignedIdentifier><Id>" + id + "</Id><AccessPolicy>" + policy + "</AccessPolicy></SignedIdentifier>"
	}
	doc := func(items ...string) []byte {
		return []byte("<SignedIdentifiers>" + strings.Join(items, "") + "</SignedIdentifiers>")
	}
	before := e.fullSnapshot()
	bad := []struct {
		name string
		body []byte
		code string
	}{
		{"six identifiers", doc(ident("1", ""), ident("2", ""), ident("3", ""), ident("4", ""), ident("5", ""), ident("6", "")), "InvalidXmlDocument"},
		{"malformed", []byte("<SignedIdentifiers><SignedIdentifier>"), "InvalidXmlDocument"},
		{"json", []byte(`{"SignedIdentifiers":[]}`), "InvalidXmlDocument"},
		{"bad start", doc(ident("a", "<Start>01/02/2024</Start>")), "InvalidXmlNodeValue"},
		{"bad expiry", doc(ident("a", "<Expiry>2024-02-30T00:00:00Z</Expiry>")), "InvalidXmlNodeValue"},
		{"bad permission", doc(ident("a", "<Permission>rwl</Permission>")), "InvalidXmlNodeValue"},
		{"id too long", doc(ident(strings.Repeat("i", 65), "")), "InvalidXmlNodeValue"},
	}
	for _, b := range bad {
		r := e.send(rawReq{method: "PUT", path: path, header: xmlHeaders, body: b.body})
		wantXMLError(t, r, 400, b.code)
	}
	if e.fullSnapshot() != before {
		t.Fatal("a rejected Set Table ACL changed the database")
	}
	// Five and an Id of 64 characters are fine.
	r = e.send(rawReq{method: "PUT", path: path, header: xmlHeaders,
		body: doc(ident("1", ""), ident("2", ""), ident("3", ""), ident("4", ""), ident(strings.Repeat("i", 64), ""))})
	wantStatus(t, r, 204)
	if got, err := c.GetAccessPolicy(bg, nil); err != nil || len(got.SignedIdentifiers) != 5 {
		t.Fatalf("five: %+v %v", got, err)
	}
	// An empty body clears the ACL.
	r = e.send(rawReq{method: "PUT", path: path, header: xmlHeaders, body: []byte{}})
	wantStatus(t, r, 204)
	r = e.send(rawReq{method: "GET", path: path, header: xmlHeaders})
	if want := `<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers />`; string(r.body) != want {
		t.Errorf("cleared: %s", r.body)
	}

	// A missing table.
	missing := "/" + httpapi.DevAccount + "/nosuchtable?comp=acl"
	wantXMLError(t, e.send(rawReq{method: "GET", path: missing, header: xmlHeaders}), 404, "TableNotFound")
	wantXMLError(t, e.send(rawReq{method: "PUT", path: missing, header: xmlHeaders, body: doc()}), 404, "TableNotFound")
	_, err = e.service.NewClient("nosuchtable").GetAccessPolicy(bg, nil)
	wantRespErr(t, err, 404, "TableNotFound")
}

// TestStoredAccessPolicy uses a SAS that names a stored access policy and
// revokes it by changing and removing the policy, and by deleting the
// table.
func TestStoredAccessPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, table := e.newTable()
	sasAdd(t, c, "p", "r")
	setPolicy := func(policies ...*aztables.SignedIdentifier) {
		t.Helper()
		if _, err := c.SetAccessPolicy(bg, &aztables.SetAccessPolicyOptions{TableACL: policies}); err != nil {
			t.Fatal(err)
		}
	}
	policy := func(perm string, start, expiry time.Time) *aztables.SignedIdentifier {
		ap := &aztables.AccessPolicy{}
		if perm != "" {
			ap.Permission = to.Ptr(perm)
		}
		if !start.IsZero() {
			ap.Start = &start
		}
		if !expiry.IsZero() {
			ap.Expiry = &expiry
		}
		return &aztables.SignedIdentifier{ID: to.Ptr("pol"), AccessPolicy: ap}
	}
	now := time.Now().UTC()
	setPolicy(policy("r", now.Add(-time.Minute), now.Add(time.Hour)))

	// The SDK signs a SAS that names the policy and nothing else.
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	q, err := aztables.SASSignatureValues{TableName: table, Identifier: "pol"}.Sign(cred)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := url.ParseQuery(q); v.Get("si") != "pol" || v.Has("sp") || v.Has("se") {
		t.Fatalf("SDK SAS %s", q)
	}
	sc := e.sasTableClient(table, q)
	get := func() error { _, err := sc.GetEntity(bg, "p", "r", nil); return err }
	if err := get(); err != nil {
		t.Fatalf("with the policy: %v", err)
	}

	// A field in both the SAS and the policy is a 400.
	for _, s := range []svcSAS{
		{tn: table, si: "pol", sp: "r"},
		{tn: table, si: "pol", se: inAnHour()},
		{tn: table, si: "pol", st: sasTime(now.Add(-time.Hour))},
	} {
		_, err := e.sasTableClient(table, s.encode()).GetEntity(bg, "p", "r", nil)
		wantRespErr(t, err, 400, "InvalidQueryParameterValue")
	}

	// Changing the policy's permission takes effect at once.
	setPolicy(policy("a", time.Time{}, now.Add(time.Hour)))
	wantRespErr(t, get(), 403, "AuthorizationPermissionMismatch")
	if _, err := sc.AddEntity(bg, sasEntity("p", "added", 1), nil); err != nil {
		t.Fatalf("add with the changed policy: %v", err)
	}
	// So does moving its expiry into the past.
	setPolicy(policy("r", time.Time{}, now.Add(-time.Minute)))
	wantRespErr(t, get(), 403, "AuthenticationFailed")
	// A policy without expiry needs the SAS to bring one.
	setPolicy(policy("r", time.Time{}, time.Time{}))
	wantRespErr(t, get(), 403, "AuthenticationFailed")
	if _, err := e.sasTableClient(table, svcSAS{tn: table, si: "pol", se: inAnHour()}.encode()).GetEntity(bg, "p", "r", nil); err != nil {
		t.Fatalf("expiry from the SAS, permission from the policy: %v", err)
	}
	// A policy without permission needs the SAS to bring it.
	setPolicy(policy("", time.Time{}, now.Add(time.Hour)))
	wantRespErr(t, get(), 403, "AuthenticationFailed")
	if _, err := e.sasTableClient(table, svcSAS{tn: table, si: "pol", sp: "r"}.encode()).GetEntity(bg, "p", "r", nil); err != nil {
		t.Fatalf("permission from the SAS, expiry from the policy: %v", err)
	}
	// Removing the policy revokes the SAS.
	setPolicy(policy("r", time.Time{}, now.Add(time.Hour)))
	if err := get(); err != nil {
		t.Fatalf("policy restored: %v", err)
	}
	setPolicy()
	wantRespErr(t, get(), 403, "AuthenticationFailed")

	// Policies go with their table: a new table of the same name has none.
	setPolicy(policy("r", time.Time{}, now.Add(time.Hour)))
	if _, err := e.service.DeleteTable(bg, table, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.service.CreateTable(bg, table, nil); err != nil {
		t.Fatal(err)
	}
	sasAdd(t, c, "p", "r")
	wantRespErr(t, get(), 403, "AuthenticationFailed")
	if got, err := c.GetAccessPolicy(bg, nil); err != nil || len(got.SignedIdentifiers) != 0 {
		t.Fatalf("ACL of the new table: %+v %v", got, err)
	}
}
