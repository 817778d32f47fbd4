package httpapi

import (
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

func TestParseACL(t *testing.T) {
	t.Parallel()
	ticks := func(s string) *int64 {
		v, ok := odata.ParseDateTime(s)
		if !ok {
			t.Fatalf("bad time %s", s)
		}
		return &v
	}
	perm := func(s string) *string { return &s }
	tests := []struct {
		name string
		body string
		want []store.AccessPolicy
		err  error
	}{
		{"empty body", "", nil, nil},
		{"empty element", `<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers />`, []store.AccessPolicy{}, nil},
		{"go order", `<?xml version="1.0" encoding="UTF-8"?>
<SignedIdentifiers><SignedIdentifier><AccessPolicy><Permission>raud</Permission><Expiry>2024-01-01T01:00:00Z</Expiry><Start>2024-01-01T00:00:00Z</Start></AccessPolicy><Id>id1</Id></SignedIdentifier></SignedIdentifiers>`,
			[]store.AccessPolicy{{ID: "id1", Start: ticks("2024-01-01T00:00:00Z"), Expiry: ticks("2024-01-01T01:00:00Z"), Permission: perm("raud")}}, nil},
		{"net order, bom, offset, letters out of order", "\xef\xbb\xbf" + `<SignedIdentifiers><SignedIdentifier><Id>a</Id><AccessPolicy><Start>2024-01-01T02:00:00+02:00</Start><Expiry>2024-01-02T00:00:00.1234567Z</Expiry><Permission>dra</Permission></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>b</Id></SignedIdentifier></SignedIdentifiers>`,
			[]store.AccessPolicy{{ID: "a", Start: ticks("2024-01-01T00:00:00Z"), Expiry: ticks("2024-01-02T00:00:00.1234567Z"), Permission: perm("rad")}, {ID: "b"}}, nil},
		{"partial policy", `<SignedIdentifiers><SignedIdentifier><Id>p</Id><AccessPolicy><Permission>r</Permission><Start></Start></AccessPolicy></SignedIdentifier></SignedIdentifiers>`,
			[]store.AccessPolicy{{ID: "p", Permission: perm("r")}}, nil},
		{"six", `<SignedIdentifiers>` + repeat(`<SignedIdentifier><Id>x</Id></SignedIdentifier>`, 6) + `</SignedIdentifiers>`, nil, errInvalidXMLDocument},
		{"malformed", `<SignedIdentifiers><SignedIdentifier>`, nil, errInvalidXMLDocument},
		{"wrong root", `<Identifiers/>`, nil, errInvalidXMLDocument},
		{"trailing element", `<SignedIdentifiers/><SignedIdentifiers/>`, nil, errInvalidXMLDocument},
		{"not xml", `{"a":1}`, nil, errInvalidXMLDocument},
		{"bad permission", `<SignedIdentifiers><SignedIdentifier><Id>p</Id><AccessPolicy><Permission>rw</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`, nil, errInvalidXMLNodeValue},
		{"bad start", `<SignedIdentifiers><SignedIdentifier><Id>p</Id><AccessPolicy><Start>yesterday</Start></AccessPolicy></SignedIdentifier></SignedIdentifiers>`, nil, errInvalidXMLNodeValue},
		{"bad expiry", `<SignedIdentifiers><SignedIdentifier><Id>p</Id><AccessPolicy><Expiry>2024-13-01T00:00:00Z</Expiry></AccessPolicy></SignedIdentifier></SignedIdentifiers>`, nil, errInvalidXMLNodeValue},
		{"no id", `<SignedIdentifiers><SignedIdentifier><AccessPolicy/></SignedIdentifier></SignedIdentifiers>`, nil, errInvalidXMLNodeValue},
		{"long id", `<SignedIdentifiers><SignedIdentifier><Id>` + repeat("x", 65) + `</Id></SignedIdentifier></SignedIdentifiers>`, nil, errInvalidXMLNodeValue},
		{"64 char id", `<SignedIdentifiers><SignedIdentifier><Id>` + repeat("é", 64) + `</Id></SignedIdentifier></SignedIdentifiers>`, []store.AccessPolicy{{ID: repeat("é", 64)}}, nil},
		{"duplicate id", `<SignedIdentifiers><SignedIdentifier><Id>x</Id></SignedIdentifier><SignedIdentifier><Id>x</Id></SignedIdentifier></SignedIdentifiers>`, nil, errInvalidXMLNodeValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseACL([]byte(tt.body))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v %v, want %+v", got, err, tt.want)
			}
		})
	}
}

func repeat(s string, n int) string {
	out := ""
	for i := 0; i < n; i++ {
		out += s
	}
	return out
}

func TestAppendACL(t *testing.T) {
	t.Parallel()
	start, perm := int64(638396640000000000), "ra" // 2024-01-01
	got := string(appendACL(nil, []store.AccessPolicy{{ID: "a<b", Start: &start, Permission: &perm}, {ID: "c"}}))
	want := `<SignedIdentifiers><SignedIdentifier><Id>a&lt;b</Id><AccessPolicy><Start>2024-01-01T00:00:00.0000000Z</Start><Permission>ra</Permission></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>c</Id></SignedIdentifier></SignedIdentifiers>`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := string(appendACL(nil, nil)); got != "<SignedIdentifiers />" {
		t.Fatalf("empty: %s", got)
	}
}

func TestServicePropertiesXML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want func(p *store.ServiceProperties)
		err  error
	}{
		{"empty document keeps all", `<?xml version="1.0" encoding="UTF-8"?><StorageServiceProperties></StorageServiceProperties>`, func(*store.ServiceProperties) {}, nil},
		{"any order", `<StorageServiceProperties><Cors><CorsRule><MaxAgeInSeconds>60</MaxAgeInSeconds><ExposedHeaders>x-ms-*</ExposedHeaders><AllowedOrigins>https://a.example, https://b.example</AllowedOrigins><AllowedMethods>GET,PUT</AllowedMethods></CorsRule></Cors><MinuteMetrics><RetentionPolicy><Days>3</Days><Enabled>true</Enabled></RetentionPolicy><IncludeAPIs>true</IncludeAPIs><Enabled>true</Enabled></MinuteMetrics><Logging><Write>true</Write></Logging></StorageServiceProperties>`,
			func(p *store.ServiceProperties) {
				p.Cors = []store.CorsRule{{AllowedOrigins: "https://a.example, https://b.example", AllowedMethods: "GET,PUT", ExposedHeaders: "x-ms-*", MaxAgeInSeconds: 60}}
				p.MinuteMetrics = store.Metrics{Version: "1.0", Enabled: true, IncludeAPIs: true, RetentionPolicy: store.RetentionPolicy{Enabled: true, Days: 3}}
				p.Logging.Write = true
			}, nil},
		{"disabling drops dependents", `<StorageServiceProperties><HourMetrics><Enabled>false</Enabled><IncludeAPIs>true</IncludeAPIs><RetentionPolicy><Enabled>false</Enabled><Days>9</Days></RetentionPolicy></HourMetrics></StorageServiceProperties>`,
			func(p *store.ServiceProperties) { p.HourMetrics = store.Metrics{Version: "1.0"} }, nil},
		{"empty cors clears", `<StorageServiceProperties><Cors/></StorageServiceProperties>`, func(p *store.ServiceProperties) { p.Cors = []store.CorsRule{} }, nil},
		{"six rules", `<StorageServiceProperties><Cors>` + repeat(`<CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods><MaxAgeInSeconds>1</MaxAgeInSeconds></CorsRule>`, 6) + `</Cors></StorageServiceProperties>`, nil, errInvalidXMLNodeValue},
		{"unknown method", `<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET,TRACE</AllowedMethods></CorsRule></Cors></StorageServiceProperties>`, nil, errInvalidXMLNodeValue},
		{"no origins", `<StorageServiceProperties><Cors><CorsRule><AllowedMethods>GET</AllowedMethods></CorsRule></Cors></StorageServiceProperties>`, nil, errInvalidXMLNodeValue},
		{"negative max age", `<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods><MaxAgeInSeconds>-1</MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>`, nil, errInvalidXMLNodeValue},
		{"days out of range", `<StorageServiceProperties><Logging><RetentionPolicy><Enabled>true</Enabled><Days>366</Days></RetentionPolicy></Logging></StorageServiceProperties>`, nil, errInvalidXMLNodeValue},
		{"days missing", `<StorageServiceProperties><Logging><RetentionPolicy><Enabled>true</Enabled></RetentionPolicy></Logging></StorageServiceProperties>`, nil, errInvalidXMLNodeValue},
		{"bad bool", `<StorageServiceProperties><Logging><Read>yes</Read></Logging></StorageServiceProperties>`, nil, errInvalidXMLNodeValue},
		{"empty version", `<StorageServiceProperties><Logging><Version></Version></Logging></StorageServiceProperties>`, nil, errInvalidXMLNodeValue},
		{"malformed", `<StorageServiceProperties><Logging>`, nil, errInvalidXMLDocument},
		{"wrong root", `<ServiceProperties/>`, nil, errInvalidXMLDocument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var doc xmlServiceProperties
			err := decodeXMLDocument([]byte(tt.body), &doc)
			p := store.DefaultServiceProperties()
			if err == nil {
				err = doc.apply(&p)
			}
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				return
			}
			want := store.DefaultServiceProperties()
			tt.want(&want)
			if err != nil || !reflect.DeepEqual(p, want) {
				t.Fatalf("got %+v %v\nwant %+v", p, err, want)
			}
		})
	}
}

func TestAppendServiceProperties(t *testing.T) {
	t.Parallel()
	p := store.DefaultServiceProperties()
	got := string(appendServiceProperties(nil, &p))
	want := `<StorageServiceProperties><Logging><Version>1.0</Version><Read>false</Read><Write>false</Write><Delete>false</Delete><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging><HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>false</IncludeAPIs><RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></HourMetrics><MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></MinuteMetrics><Cors /></StorageServiceProperties>`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestCorsMatching(t *testing.T) {
	t.Parallel()
	rules := []store.CorsRule{
		{AllowedOrigins: "https://app.example", AllowedMethods: "GET,PUT", AllowedHeaders: "x-ms-*,authorization", MaxAgeInSeconds: 10},
		{AllowedOrigins: "*", AllowedMethods: "DELETE", AllowedHeaders: "*", MaxAgeInSeconds: 20},
	}
	tests := []struct {
		origin, method string
		headers        []string
		preflight      bool
		want           int // index of the rule, -1 for none
	}{
		{"https://app.example", "GET", []string{"x-ms-date", "Authorization"}, true, 0},
		{"HTTPS://APP.EXAMPLE", "put", nil, true, 0},
		{"https://app.example", "GET", []string{"content-type"}, true, -1},
		{"https://app.example", "GET", []string{"content-type"}, false, 0},
		{"https://other.example", "GET", nil, true, -1},
		{"https://other.example", "DELETE", []string{"anything"}, true, 1},
		{"https://app.example", "POST", nil, false, -1},
	}
	for _, tt := range tests {
		r := matchCorsRule(rules, tt.origin, tt.method, tt.headers, tt.preflight)
		got := -1
		for i := range rules {
			if r == &rules[i] {
				got = i
			}
		}
		if got != tt.want {
			t.Errorf("%+v: rule %d, want %d", tt, got, tt.want)
		}
	}
	h := http.Header{}
	h.Set("x-ms-request-id", "1")
	h.Set("Content-Type", "application/json")
	h["ETag"] = []string{"x"}
	h.Set("Access-Control-Allow-Origin", "*")
	if got := exposeHeaders(h, []string{"x-ms-*", "etag", "x-custom"}); got != "ETag,X-Ms-Request-Id,x-custom" {
		t.Fatalf("expose: %s", got)
	}
	if got := exposeHeaders(h, []string{"*"}); got != "Content-Type,ETag,X-Ms-Request-Id" {
		t.Fatalf("expose all: %s", got)
	}
}
