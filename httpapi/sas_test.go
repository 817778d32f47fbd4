package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/store"
)

// devSign signs s with the development account's key.
func devSign(s string) string {
	key, _ := base64.StdEncoding.DecodeString(DevKey)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// sasOf reads the SAS values of a query string as the server does.
func sasOf(t *testing.T, rawQuery string) *sasValues {
	t.Helper()
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		t.Fatal(err)
	}
	v, err := readSASValues(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestServiceSASStringToSignVectors checks the service SAS layout against
// the vectors of rest-protocol.md §8.6 and against signatures made by the
// Go SDK's own builders.
func TestServiceSASStringToSignVectors(t *testing.T) {
	t.Parallel()
	cred, err := aztables.NewSharedKeyCredential(DevAccount, DevKey)
	if err != nil {
		t.Fatal(err)
	}
	st := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	se := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	// The documented vector.
	v := &sasValues{sp: "raud", st: "2024-01-01T00:00:00Z", se: "2030-01-01T00:00:00Z", tn: "mytable", spr: "https,http", sv: "2019-02-02"}
	sts, ok := serviceSASStringToSign(v, DevAccount, "mytable")
	want := "raud\n2024-01-01T00:00:00Z\n2030-01-01T00:00:00Z\n/table/devstoreaccount1/mytable\n\n\nhttps,http\n2019-02-02\n\n\n\n"
	if !ok || sts != want {
		t.Fatalf("string to sign %q, want %q", sts, want)
	}
	if got := devSign(sts); got != "ld0dyBZVi/EikXBt4CXVqZUzdpDF63sBot7QHSCeF4o=" {
		t.Fatalf("signature %s", got)
	}

	// Client.GetTableSASURL, with the service URL's trailing slash that
	// works around its path-style bug.
	svc, err := aztables.NewServiceClientWithSharedKey("http://127.0.0.1:10002/devstoreaccount1/", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	sasURL, err := svc.NewClient("MyTable").GetTableSASURL(aztables.SASPermissions{Read: true, Add: true}, st, se)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(sasURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != "/devstoreaccount1/MyTable" {
		t.Fatalf("SAS URL path %q", u.Path)
	}
	v = sasOf(t, u.RawQuery)
	if v.sp != "ra" {
		t.Fatalf("sp %q", v.sp)
	}
	if sts, _ := serviceSASStringToSign(v, DevAccount, strings.ToLower(v.tn)); devSign(sts) != v.sig {
		t.Fatalf("GetTableSASURL: our string to sign %q does not give its signature", sts)
	}

	// SASSignatureValues.Sign with every field. It signs the key range but
	// leaves it out of the query: add it back as signed.
	tests := []aztables.SASSignatureValues{
		{TableName: "mytable", Permissions: "r", ExpiryTime: se},
		{TableName: "MixedCase", Permissions: "daur", StartTime: st, ExpiryTime: se, Protocol: aztables.SASProtocolHTTPS},
		{TableName: "t1", Permissions: "au", ExpiryTime: se, Identifier: "policy-1"},
		{TableName: "t1", Identifier: "policy-1"},
		{TableName: "t1", Permissions: "rd", ExpiryTime: se, IPRange: aztables.IPRange{Start: []byte{10, 0, 0, 1}, End: []byte{10, 0, 0, 9}}, Protocol: aztables.SASProtocolHTTPSandHTTP},
		{TableName: "t1", Permissions: "r", ExpiryTime: se, StartPartitionKey: "p 1", StartRowKey: "r'1", EndPartitionKey: "p9", EndRowKey: "r/9"},
		{TableName: "t1", Permissions: "r", ExpiryTime: se, StartPartitionKey: "a", EndPartitionKey: "b", Version: "2020-12-06"},
	}
	for _, tt := range tests {
		enc, err := tt.Sign(cred)
		if err != nil {
			t.Fatal(err)
		}
		v := sasOf(t, enc)
		v.spk, v.srk, v.epk, v.erk = tt.StartPartitionKey, tt.StartRowKey, tt.EndPartitionKey, tt.EndRowKey
		sts, ok := serviceSASStringToSign(v, DevAccount, strings.ToLower(v.tn))
		if !ok || devSign(sts) != v.sig {
			t.Errorf("%+v: our string to sign %q does not give the SDK's signature", tt, sts)
		}
	}
}

// TestServiceSASLegacyLayouts pins the layouts of signed versions before
// 2015-04-05, which no current SDK produces (Azure's documentation).
func TestServiceSASLegacyLayouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sv   string
		want string
		ok   bool
	}{
		{"2015-04-05", "r\n\nse\n/table/acct/t\nsi\nsip\nspr\n2015-04-05\nspk\nsrk\nepk\nerk", true},
		{"2015-02-21", "r\n\nse\n/table/acct/t\nsi\n2015-02-21\nspk\nsrk\nepk\nerk", true},
		{"2013-08-15", "r\n\nse\n/acct/t\nsi\n2013-08-15\nspk\nsrk\nepk\nerk", true},
		{"2012-02-12", "r\n\nse\n/acct/t\nsi\n2012-02-12\nspk\nsrk\nepk\nerk", true},
		{"2011-08-18", "", false},
	}
	for _, tt := range tests {
		v := &sasValues{sp: "r", se: "se", si: "si", sip: "sip", spr: "spr", sv: tt.sv, spk: "spk", srk: "srk", epk: "epk", erk: "erk"}
		got, ok := serviceSASStringToSign(v, "acct", "t")
		if got != tt.want || ok != tt.ok {
			t.Errorf("sv %s: %q %v, want %q %v", tt.sv, got, ok, tt.want, tt.ok)
		}
	}
}

// TestAccountSASStringToSignVectors checks the account SAS layouts against
// rest-protocol.md §8.7 and the Go SDK's builders.
func TestAccountSASStringToSignVectors(t *testing.T) {
	t.Parallel()
	cred, err := aztables.NewSharedKeyCredential(DevAccount, DevKey)
	if err != nil {
		t.Fatal(err)
	}
	st := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	se := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	// The documented vector is what GetAccountSASURL makes.
	svc, err := aztables.NewServiceClientWithSharedKey("http://127.0.0.1:10002/devstoreaccount1", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	sasURL, err := svc.GetAccountSASURL(aztables.AccountSASResourceTypes{Service: true, Container: true, Object: true},
		aztables.AccountSASPermissions{Read: true, Write: true, Delete: true, List: true, Add: true, Create: true, Update: true}, st, se)
	if err != nil {
		t.Fatal(err)
	}
	wantURL := "http://127.0.0.1:10002/devstoreaccount1/?se=2030-01-01T00%3A00%3A00Z&sig=3D3sr46kbUDH%2BY7%2FOSHqJxv1aaZ2q5ON43KeFZI69K0%3D&sp=rwdlacu&spr=https&srt=sco&ss=t&st=2024-01-01T00%3A00%3A00Z&sv=2019-02-02"
	if sasURL != wantURL {
		t.Fatalf("GetAccountSASURL = %s", sasURL)
	}
	u, _ := url.Parse(sasURL)
	v := sasOf(t, u.RawQuery)
	sts, ok := accountSASStringToSign(v, DevAccount)
	if want := "devstoreaccount1\nrwdlacu\nt\nsco\n2024-01-01T00:00:00Z\n2030-01-01T00:00:00Z\n\nhttps\n2019-02-02\n"; !ok || sts != want {
		t.Fatalf("string to sign %q, want %q", sts, want)
	}
	if devSign(sts) != v.sig {
		t.Fatal("signature mismatch")
	}

	tests := []aztables.AccountSASSignatureValues{
		{Permissions: "r", Services: "t", ResourceTypes: "o", ExpiryTime: se},
		{Permissions: "lacw", Services: "bqt", ResourceTypes: "c", StartTime: st, ExpiryTime: se, Protocol: aztables.SASProtocolHTTPSandHTTP},
		{Permissions: "rwdlacup", Services: "t", ResourceTypes: "sco", ExpiryTime: se, IPRange: aztables.IPRange{Start: []byte{127, 0, 0, 1}}},
		{Permissions: "r", Services: "b", ResourceTypes: "s", ExpiryTime: se, Version: "2018-03-28"},
	}
	for _, tt := range tests {
		qp, err := tt.Sign(cred)
		if err != nil {
			t.Fatal(err)
		}
		v := sasOf(t, qp.Encode())
		sts, ok := accountSASStringToSign(v, DevAccount)
		if !ok || devSign(sts) != v.sig {
			t.Errorf("%+v: our string to sign %q does not give the SDK's signature", tt, sts)
		}
	}

	// From 2020-12-06 the encryption scope has its own line (the Go SDK
	// v1.3.0 signs only 2019-02-02; this is Azure's documented layout).
	v = &sasValues{sp: "r", ss: "t", srt: "o", se: "2030-01-01", sv: "2020-12-06", ses: "scope"}
	if sts, ok := accountSASStringToSign(v, "acct"); !ok || sts != "acct\nr\nt\no\n\n2030-01-01\n\n\n2020-12-06\nscope\n" {
		t.Fatalf("2020-12-06: %q", sts)
	}
	v.sv = "2015-02-21"
	if _, ok := accountSASStringToSign(v, "acct"); ok {
		t.Fatal("account SAS before 2015-04-05 accepted")
	}
}

func TestParseIPRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		ok     bool
		lo, hi string
	}{
		{"10.0.0.1", true, "10.0.0.1", "10.0.0.1"},
		{"10.0.0.1-10.0.0.9", true, "10.0.0.1", "10.0.0.9"},
		{"::1", true, "::1", "::1"},
		{"::ffff:10.0.0.1", true, "10.0.0.1", "10.0.0.1"},
		{"10.0.0.9-10.0.0.1", false, "", ""},
		{"10.0.0.1-::2", false, "", ""},
		{"10.0.0", false, "", ""},
		{"", false, "", ""},
		{"10.0.0.1-", false, "", ""},
	}
	for _, tt := range tests {
		lo, hi, ok := parseIPRange(tt.in)
		if ok != tt.ok || (ok && (lo.String() != tt.lo || hi.String() != tt.hi)) {
			t.Errorf("%q: %v %v %v", tt.in, lo, hi, ok)
		}
	}
}

func TestSASKeyRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v    sasValues
		ok   bool
		want store.KeyRange
	}{
		{sasValues{}, true, store.KeyRange{}},
		{sasValues{spk: "a", srk: "1", epk: "b", erk: "2"}, true, store.KeyRange{Lower: &store.KeyBound{PK: "a", RK: "1", HasRK: true}, Upper: &store.KeyBound{PK: "b", RK: "2", HasRK: true}}},
		{sasValues{spk: "a", epk: "b"}, true, store.KeyRange{Lower: &store.KeyBound{PK: "a"}, Upper: &store.KeyBound{PK: "b"}}},
		{sasValues{srk: "1"}, false, store.KeyRange{}},
		{sasValues{erk: "1"}, false, store.KeyRange{}},
		{sasValues{spk: "a\x00"}, false, store.KeyRange{}},
		{sasValues{epk: "\xff"}, false, store.KeyRange{}},
	}
	for _, tt := range tests {
		got, err := sasKeyRange(&tt.v)
		if (err == nil) != tt.ok {
			t.Errorf("%+v: err %v", tt.v, err)
			continue
		}
		if tt.ok && (!equalBound(got.Lower, tt.want.Lower) || !equalBound(got.Upper, tt.want.Upper)) {
			t.Errorf("%+v: got %+v", tt.v, got)
		}
	}
}

func equalBound(a, b *store.KeyBound) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestAuthorizeOperations runs every operation against SAS grants and
// checks the error code each gets (rest-protocol.md §8.6, §8.7).
func TestAuthorizeOperations(t *testing.T) {
	t.Parallel()
	svc := func(perms string) *sasGrant { return &sasGrant{kind: serviceSAS, table: "MyTable", perms: perms} }
	acc := func(srt, perms string) *sasGrant {
		return &sasGrant{kind: accountSAS, resourceTypes: srt, perms: perms}
	}
	const ok = ""
	tests := []struct {
		g     *sasGrant
		op    authOp
		table string
		want  error
	}{
		{svc("r"), authQueryEntities, "mytable", nil},
		{svc("r"), authGetEntity, "MYTABLE", nil},
		{svc("r"), authQueryEntities, "other", errAuthorizationFailure},
		{svc("aud"), authQueryEntities, "mytable", errPermissionMismatch},
		{svc("a"), authInsertEntity, "mytable", nil},
		{svc("rud"), authInsertEntity, "mytable", errPermissionMismatch},
		{svc("u"), authUpdateEntity, "mytable", nil},
		{svc("u"), authMergeEntity, "mytable", nil},
		{svc("u"), authUpsertReplace, "mytable", errPermissionMismatch},
		{svc("a"), authUpsertMerge, "mytable", errPermissionMismatch},
		{svc("ua"), authUpsertMerge, "mytable", nil},
		{svc("au"), authUpsertReplace, "mytable", nil},
		{svc("d"), authDeleteEntity, "mytable", nil},
		{svc("rau"), authDeleteEntity, "mytable", errPermissionMismatch},
		{svc("raud"), authBatch, "", nil},
		{svc("raud"), authQueryTables, "", errAuthorizationFailure},
		{svc("raud"), authCreateTable, "", errAuthorizationFailure},
		{svc("raud"), authDeleteTable, "mytable", errAuthorizationFailure},
		{svc("raud"), authGetACL, "mytable", errAuthorizationFailure},
		{svc("raud"), authSetACL, "mytable", errAuthorizationFailure},
		{svc("raud"), authGetServiceProperties, "", errAuthorizationFailure},
		{svc("raud"), authGetServiceStats, "", errAuthorizationFailure},
		{svc("raud"), authUnknown, "mytable", errAuthorizationFailure},
		{acc("s", "r"), authGetServiceProperties, "", nil},
		{acc("s", "r"), authGetServiceStats, "", nil},
		{acc("s", "r"), authSetServiceProperties, "", errPermissionMismatch},
		{acc("s", "w"), authSetServiceProperties, "", nil},
		{acc("co", "rwdlacup"), authGetServiceProperties, "", errResourceTypeMismatch},
		{acc("c", "l"), authQueryTables, "", nil},
		{acc("c", "r"), authQueryTables, "", errPermissionMismatch},
		{acc("so", "l"), authQueryTables, "", errResourceTypeMismatch},
		{acc("c", "c"), authCreateTable, "", nil},
		{acc("c", "a"), authCreateTable, "", nil},
		{acc("c", "w"), authCreateTable, "", nil},
		{acc("c", "rl"), authCreateTable, "", errPermissionMismatch},
		{acc("c", "d"), authDeleteTable, "t", nil},
		{acc("c", "r"), authDeleteTable, "t", errPermissionMismatch},
		{acc("sco", "rwdlacup"), authGetACL, "t", errAuthorizationFailure},
		{acc("sco", "rwdlacup"), authSetACL, "t", errAuthorizationFailure},
		{acc("o", "r"), authQueryEntities, "t", nil},
		{acc("c", "r"), authQueryEntities, "t", errResourceTypeMismatch},
		{acc("o", "a"), authInsertEntity, "t", nil},
		{acc("o", "u"), authUpdateEntity, "t", nil},
		{acc("o", "w"), authUpdateEntity, "t", errPermissionMismatch},
		{acc("o", "u"), authUpsertMerge, "t", errPermissionMismatch},
		{acc("o", "au"), authUpsertMerge, "t", nil},
		{acc("o", "d"), authDeleteEntity, "t", nil},
		{acc("o", ok), authBatch, "", nil},
	}
	for _, tt := range tests {
		err := tt.g.authorize(tt.op, tt.table)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%+v op %d table %q: got %v, want %v", *tt.g, tt.op, tt.table, err, tt.want)
		}
	}
}

func TestClassifyOperation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, uri string
		ifMatch     string
		want        authOp
	}{
		{"GET", "/devstoreaccount1/Tables", "", authQueryTables},
		{"POST", "/devstoreaccount1/Tables()", "", authCreateTable},
		{"DELETE", "/devstoreaccount1/Tables('t')", "", authDeleteTable},
		{"GET", "/devstoreaccount1/Tables('t')", "", authGetTable},
		{"GET", "/devstoreaccount1/t?comp=acl", "", authGetACL},
		{"PUT", "/devstoreaccount1/t?comp=acl", "", authSetACL},
		{"GET", "/devstoreaccount1/t?comp=other", "", authUnknown},
		{"GET", "/devstoreaccount1?comp=properties&restype=service", "", authGetServiceProperties},
		{"PUT", "/devstoreaccount1/?restype=service&comp=properties", "", authSetServiceProperties},
		{"GET", "/devstoreaccount1/?restype=service&comp=stats", "", authGetServiceStats},
		{"GET", "/devstoreaccount1/?comp=stats", "", authUnknown},
		{"GET", "/devstoreaccount1/t()", "", authQueryEntities},
		{"POST", "/devstoreaccount1/t", "", authInsertEntity},
		{"GET", "/devstoreaccount1/t(PartitionKey='a',RowKey='b')", "", authGetEntity},
		{"PUT", "/devstoreaccount1/t(PartitionKey='a',RowKey='b')", "*", authUpdateEntity},
		{"PUT", "/devstoreaccount1/t(PartitionKey='a',RowKey='b')", "", authUpsertReplace},
		{"MERGE", "/devstoreaccount1/t(PartitionKey='a',RowKey='b')", "*", authMergeEntity},
		{"PATCH", "/devstoreaccount1/t(PartitionKey='a',RowKey='b')", "", authUpsertMerge},
		{"DELETE", "/devstoreaccount1/t(PartitionKey='a',RowKey='b')", "*", authDeleteEntity},
		{"POST", "/devstoreaccount1/$batch", "", authBatch},
		{"GET", "/devstoreaccount1/$batch", "", authUnknown},
	}
	for _, tt := range tests {
		tg, err := route("127.0.0.1:10002", tt.uri, devKnown, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := url.ParseQuery(tg.rawQuery)
		h := http.Header{}
		if tt.ifMatch != "" {
			h.Set("If-Match", tt.ifMatch)
		}
		if got := classifyOperation(tg, tt.method, q, h); got != tt.want {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.uri, got, tt.want)
		}
	}
}

func TestReadSASValuesRefusesRepeats(t *testing.T) {
	t.Parallel()
	for _, p := range sasParams {
		q := url.Values{p: {"x", "y"}}
		if _, err := readSASValues(q); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s twice: %v", p, err)
		}
	}
}
