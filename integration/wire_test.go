package integration

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgtables/pgtables/httpapi"
)

// members returns the sorted member names of a raw object.
func members(m map[string]json.RawMessage) []string { return slices.Sorted(maps.Keys(m)) }

func wantHeader(t testing.TB, r *rawResponse, name, want string) {
	t.Helper()
	if got := r.header.Get(name); got != want {
		t.Errorf("%s: %q, want %q", name, got, want)
	}
}

// TestWireFormat checks, over raw HTTP, the wire details the SDK hides
// (rest-protocol §2-§4): Prefer, Location and DataServiceId, the three
// metadata levels, $select nulls, POST tunnelling, the echoed client
// request id, key escaping in the URL, both Shared Key schemes and
// host-style addressing.
func TestWireFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acct := "/" + httpapi.DevAccount

	t.Run("InsertPrefer", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		loc := func(rk string) string {
			return e.svcURL + "/" + table + "(PartitionKey='p',RowKey='" + rk + "')"
		}
		// Default: 201 with the entity.
		r := e.send(rawReq{method: "POST", path: e.tablePath(table), body: []byte(`{"PartitionKey":"p","RowKey":"a","V":1}`)})
		wantStatus(t, r, 201)
		wantHeader(t, r, "Location", loc("a"))
		wantHeader(t, r, "Preference-Applied", "")
		wantHeader(t, r, "DataServiceId", "")
		wantHeader(t, r, "Content-Type", "application/json;odata=minimalmetadata;streaming=true;charset=utf-8")
		m := rawObject(t, r.body)
		if etag := r.header.Get("ETag"); !strings.HasPrefix(etag, `W/"datetime'`) || str(t, m, "odata.etag") != etag {
			t.Errorf("ETag header %q, odata.etag %s", etag, m["odata.etag"])
		}
		if str(t, m, "odata.metadata") != e.svcURL+"/$metadata#"+table+"/@Element" || string(m["V"]) != "1" {
			t.Errorf("body %s", r.body)
		}
		// return-content: the same, acknowledged.
		r = e.send(rawReq{method: "POST", path: e.tablePath(table), body: []byte(`{"PartitionKey":"p","RowKey":"b"}`), header: map[string]string{"Prefer": "return-content"}})
		wantStatus(t, r, 201)
		wantHeader(t, r, "Preference-Applied", "return-content")
		wantHeader(t, r, "Location", loc("b"))
		// return-no-content: 204, no body, Location = DataServiceId, ETag.
		r = e.send(rawReq{method: "POST", path: e.tablePath(table), body: []byte(`{"PartitionKey":"p","RowKey":"c"}`), header: map[string]string{"Prefer": "return-no-content"}})
		wantStatus(t, r, 204)
		wantHeader(t, r, "Preference-Applied", "return-no-content")
		wantHeader(t, r, "Location", loc("c"))
		wantHeader(t, r, "DataServiceId", loc("c"))
		if len(r.body) != 0 || r.header.Get("ETag") == "" {
			t.Errorf("204 with body %q, ETag %q", r.body, r.header.Get("ETag"))
		}
		g, _ := e.getRaw(table, "p", "c")
		wantHeader(t, g, "ETag", r.header.Get("ETag"))
		// An unknown preference is ignored.
		r = e.send(rawReq{method: "POST", path: e.tablePath(table), body: []byte(`{"PartitionKey":"p","RowKey":"d"}`), header: map[string]string{"Prefer": "return=minimal"}})
		wantStatus(t, r, 201)
		wantHeader(t, r, "Preference-Applied", "")
	})

	t.Run("CreateTablePrefer", func(t *testing.T) {
		t.Parallel()
		r := e.send(rawReq{method: "POST", path: acct + "/Tables", body: []byte(`{"TableName":"WireTableA"}`)})
		wantStatus(t, r, 201)
		wantHeader(t, r, "Location", e.svcURL+"/Tables('WireTableA')")
		if string(r.body) != `{"odata.metadata":"`+e.svcURL+`/$metadata#Tables/@Element","TableName":"WireTableA"}` {
			t.Errorf("body %s", r.body)
		}
		r = e.send(rawReq{method: "POST", path: acct + "/Tables", body: []byte(`{"TableName":"WireTableB"}`), header: map[string]string{"Prefer": "return-no-content"}})
		wantStatus(t, r, 204)
		wantHeader(t, r, "Preference-Applied", "return-no-content")
		wantHeader(t, r, "Location", e.svcURL+"/Tables('WireTableB')")
		wantHeader(t, r, "DataServiceId", e.svcURL+"/Tables('WireTableB')")
		r = e.send(rawReq{method: "POST", path: acct + "/Tables", body: []byte(`{"TableName":"WireTableC"}`), header: map[string]string{"Accept": "application/json;odata=fullmetadata"}})
		wantStatus(t, r, 201)
		want := `{"odata.metadata":"` + e.svcURL + `/$metadata#Tables/@Element","odata.type":"devstoreaccount1.Tables","odata.id":"` + e.svcURL + `/Tables('WireTableC')","odata.editLink":"Tables('WireTableC')","TableName":"WireTableC"}`
		if string(r.body) != want {
			t.Errorf("full metadata body\n%s\nwant\n%s", r.body, want)
		}
		r = e.send(rawReq{method: "DELETE", path: acct + "/Tables('wiretablea')"})
		wantStatus(t, r, 204)
		if len(r.body) != 0 {
			t.Errorf("delete body %q", r.body)
		}
	})

	t.Run("MetadataLevels", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		r := e.send(rawReq{method: "POST", path: e.tablePath(table), header: map[string]string{"Prefer": "return-no-content"},
			body: []byte(`{"PartitionKey":"p","RowKey":"r","I":1,"L@odata.type":"Edm.Int64","L":"2","S":"s"}`)})
		wantStatus(t, r, 204)
		etag := r.header.Get("ETag")
		ep := e.entityPath(table, "p", "r")
		id := e.svcURL + "/" + table + "(PartitionKey='p',RowKey='r')"
		levels := []struct {
			name, accept, format, ctype string
			want                        []string
		}{
			{"NoneAccept", "application/json;odata=nometadata", "", "nometadata",
				[]string{"I", "L", "PartitionKey", "RowKey", "S", "Timestamp"}},
			{"MinimalAccept", "application/json;odata=minimalmetadata", "", "minimalmetadata",
				[]string{"I", "L", "L@odata.type", "PartitionKey", "RowKey", "S", "Timestamp", "odata.etag", "odata.metadata"}},
			{"BareJSON", "application/json", "", "minimalmetadata",
				[]string{"I", "L", "L@odata.type", "PartitionKey", "RowKey", "S", "Timestamp", "odata.etag", "odata.metadata"}},
			{"FullAccept", "application/json;odata=fullmetadata", "", "fullmetadata",
				[]string{"I", "L", "L@odata.type", "PartitionKey", "RowKey", "S", "Timestamp", "Timestamp@odata.type", "odata.editLink", "odata.etag", "odata.id", "odata.metadata", "odata.type"}},
			{"FullFormatOverridesAccept", "application/json;odata=nometadata", "application%2Fjson%3Bodata%3Dfullmetadata", "fullmetadata",
				[]string{"I", "L", "L@odata.type", "PartitionKey", "RowKey", "S", "Timestamp", "Timestamp@odata.type", "odata.editLink", "odata.etag", "odata.id", "odata.metadata", "odata.type"}},
			{"NoneFormat", "application/json;odata=fullmetadata", "application/json;odata=nometadata", "nometadata",
				[]string{"I", "L", "PartitionKey", "RowKey", "S", "Timestamp"}},
		}
		for _, lv := range levels {
			t.Run(lv.name, func(t *testing.T) {
				q := ""
				if lv.format != "" {
					q = "?$format=" + lv.format
				}
				h := map[string]string{"Accept": lv.accept}
				for _, kind := range []string{"point", "query"} {
					path := ep + q
					if kind == "query" {
						path = e.tablePath(table) + "()" + q
					}
					r := e.send(rawReq{method: "GET", path: path, header: h})
					wantStatus(t, r, 200)
					wantHeader(t, r, "Content-Type", "application/json;odata="+lv.ctype+";streaming=true;charset=utf-8")
					var m map[string]json.RawMessage
					if kind == "point" {
						m = rawObject(t, r.body)
						wantHeader(t, r, "ETag", etag)
					} else {
						doc := rawObject(t, r.body)
						v := rawValue(t, r.body)
						if len(v) != 1 {
							t.Fatalf("%d entities", len(v))
						}
						m = v[0]
						if lv.ctype != "nometadata" {
							if str(t, doc, "odata.metadata") != e.svcURL+"/$metadata#"+table {
								t.Errorf("collection odata.metadata %s", doc["odata.metadata"])
							}
							m["odata.metadata"] = doc["odata.metadata"] // compare member sets alike
						} else if _, ok := doc["odata.metadata"]; ok {
							t.Errorf("nometadata collection has odata.metadata")
						}
					}
					if got := members(m); !reflect.DeepEqual(got, lv.want) {
						t.Errorf("%s members %v, want %v", kind, got, lv.want)
					}
					if lv.ctype == "fullmetadata" {
						if str(t, m, "odata.type") != httpapi.DevAccount+"."+table || str(t, m, "odata.id") != id ||
							str(t, m, "odata.editLink") != table+"(PartitionKey='p',RowKey='r')" ||
							str(t, m, "Timestamp@odata.type") != "Edm.DateTime" {
							t.Errorf("full metadata %s", r.body)
						}
					}
					if lv.ctype != "nometadata" {
						if str(t, m, "odata.etag") != etag || str(t, m, "L@odata.type") != "Edm.Int64" {
							t.Errorf("%s: %s", kind, r.body)
						}
					}
					if string(m["L"]) != `"2"` || string(m["I"]) != "1" {
						t.Errorf("%s values: %s", kind, r.body)
					}
				}
			})
		}
		t.Run("ErrorFollowsFormat", func(t *testing.T) {
			r := e.send(rawReq{method: "GET", path: e.entityPath(table, "p", "missing"), header: map[string]string{"Accept": "application/json;odata=nometadata"}})
			wantError(t, r, 404, "ResourceNotFound")
			wantHeader(t, r, "Content-Type", "application/json;odata=nometadata;streaming=true;charset=utf-8")
		})
		t.Run("TablesFull", func(t *testing.T) {
			r := e.send(rawReq{method: "GET", path: acct + "/Tables()?$format=application/json;odata=fullmetadata&$select=TableName"})
			wantStatus(t, r, 200)
			found := false
			for _, m := range rawValue(t, r.body) {
				if str(t, m, "TableName") != table {
					continue
				}
				found = true
				if str(t, m, "odata.type") != httpapi.DevAccount+".Tables" || str(t, m, "odata.id") != e.svcURL+"/Tables('"+table+"')" || str(t, m, "odata.editLink") != "Tables('"+table+"')" {
					t.Errorf("table entry %v", m)
				}
			}
			if !found {
				t.Errorf("%s not listed: %s", table, r.body)
			}
		})
	})

	t.Run("InputVariants", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		tp := e.tablePath(table)
		cases := []struct {
			name, ctype, body string
		}{
			{"JSNoMetadata", "application/json;odata=nometadata", `{"PartitionKey":"p","RowKey":"1"}`},
			{"Charset", "application/json; charset=utf-8", `{"PartitionKey":"p","RowKey":"2"}`},
			{"NoContentType", "", `{"PartitionKey":"p","RowKey":"3"}`},
			{"ByteOrderMark", "application/json", "\xef\xbb\xbf{\"PartitionKey\":\"p\",\"RowKey\":\"4\"}"},
			// Control members and Timestamp (as JS/.NET echo them back) and
			// an annotation without a value are ignored.
			{"EchoedMetadata", "application/json", `{"odata.metadata":"m","odata.etag":"W/\"x\"","odata.type":"a.b","PartitionKey":"p","RowKey":"5","Timestamp":"2001-01-01T00:00:00Z","Orphan@odata.type":"Edm.Int64"}`},
			// Python annotates everything and puts annotations after values.
			{"PythonStyle", "application/json;odata=nometadata", `{"PartitionKey":"p","PartitionKey@odata.type":"Edm.String","RowKey":"6","RowKey@odata.type":"Edm.String","S":"s","S@odata.type":"Edm.String","N":null,"N@odata.type":"Edm.Int64","F":3.0,"F@odata.type":"Edm.Double"}`},
			{"Whitespace", "application/json", " \t\r\n{ \"PartitionKey\" : \"p\" ,\n \"RowKey\" : \"7\" } \n"},
		}
		for _, tc := range cases {
			r := e.send(rawReq{method: "POST", path: tp, body: []byte(tc.body), header: map[string]string{"Content-Type": tc.ctype, "Prefer": "return-no-content"}})
			if r.status != 204 {
				t.Errorf("%s: %d %s", tc.name, r.status, trunc(r.body))
			}
		}
		_, m := e.getRaw(table, "p", "5")
		if got := members(m); !reflect.DeepEqual(got, []string{"PartitionKey", "RowKey", "Timestamp", "odata.etag", "odata.metadata"}) {
			t.Errorf("echoed metadata stored: %v", got)
		}
		_, m = e.getRaw(table, "p", "6")
		if got := members(m); !reflect.DeepEqual(got, []string{"F", "F@odata.type", "PartitionKey", "RowKey", "S", "Timestamp", "odata.etag", "odata.metadata"}) || string(m["F"]) != "3.0" {
			t.Errorf("Python-style entity: %v F=%s", got, m["F"])
		}
		// Accept variants: */*, none at all, several ranges.
		for _, accept := range []string{"*/*", "", "text/html, application/json;odata=fullmetadata;q=0.9"} {
			r := e.send(rawReq{method: "GET", path: e.entityPath(table, "p", "1"), header: map[string]string{"Accept": accept}})
			wantStatus(t, r, 200)
			want := "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
			if strings.Contains(accept, "full") {
				want = "application/json;odata=fullmetadata;streaming=true;charset=utf-8"
			}
			wantHeader(t, r, "Content-Type", want)
		}
		// Keys in a PUT or MERGE body are ignored: the URL's keys win.
		r := e.send(rawReq{method: "PUT", path: e.entityPath(table, "p", "1"), body: []byte(`{"PartitionKey":"other","RowKey":"other","V":1}`)})
		wantStatus(t, r, 204)
		r = e.send(rawReq{method: "MERGE", path: e.entityPath(table, "p", "1"), body: []byte(`{"PartitionKey":"x''y","RowKey":"z","W":2}`)})
		wantStatus(t, r, 204)
		_, m = e.getRaw(table, "p", "1")
		if str(t, m, "PartitionKey") != "p" || str(t, m, "RowKey") != "1" || string(m["V"]) != "1" || string(m["W"]) != "2" {
			t.Errorf("after PUT/MERGE with other body keys: %v", m)
		}
		r = e.send(rawReq{method: "GET", path: e.entityPath(table, "other", "other")})
		wantError(t, r, 404, "ResourceNotFound")
		// GET /Tables('name') answers the table entry, in any case.
		r = e.send(rawReq{method: "GET", path: acct + "/Tables('" + strings.ToUpper(table) + "')"})
		wantStatus(t, r, 200)
		if m := rawObject(t, r.body); str(t, m, "TableName") != table {
			t.Errorf("GET Tables('%s'): %s", strings.ToUpper(table), r.body)
		}
		r = e.send(rawReq{method: "GET", path: acct + "/Tables('nosuchtable')"})
		wantError(t, r, 404, "ResourceNotFound")
	})

	t.Run("SelectMissingProperty", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		r := e.send(rawReq{method: "POST", path: e.tablePath(table), body: []byte(`{"PartitionKey":"p","RowKey":"r","Name":"n"}`)})
		wantStatus(t, r, 201)
		for _, path := range []string{e.entityPath(table, "p", "r") + "?$select=Name,Nope", e.tablePath(table) + "()?%24select=Name%2CNope"} {
			r := e.send(rawReq{method: "GET", path: path})
			wantStatus(t, r, 200)
			var m map[string]json.RawMessage
			if strings.Contains(path, "()") {
				m = rawValue(t, r.body)[0]
			} else {
				m = rawObject(t, r.body)
			}
			if string(m["Nope"]) != "null" || str(t, m, "Name") != "n" {
				t.Errorf("%s: %s", path, r.body)
			}
			if _, ok := m["PartitionKey"]; ok {
				t.Errorf("%s: unselected PartitionKey returned", path)
			}
		}
	})

	t.Run("PostTunnelling", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		ep := e.entityPath(table, "p", "r")
		// Without If-Match: Insert Or Merge creates.
		r := e.send(rawReq{method: "POST", path: ep, body: []byte(`{"A":"a"}`), header: map[string]string{"X-HTTP-Method": "MERGE"}})
		wantStatus(t, r, 204)
		// With If-Match: a merge keeps A.
		r = e.send(rawReq{method: "POST", path: ep, body: []byte(`{"B":"b"}`), header: map[string]string{"X-HTTP-Method": "merge", "If-Match": r.header.Get("ETag")}})
		wantStatus(t, r, 204)
		_, m := e.getRaw(table, "p", "r")
		if str(t, m, "A") != "a" || str(t, m, "B") != "b" {
			t.Fatalf("after tunnelled merges: %v", m)
		}
		// PUT through POST replaces.
		r = e.send(rawReq{method: "POST", path: ep, body: []byte(`{"C":"c"}`), header: map[string]string{"X-HTTP-Method": "PUT", "If-Match": "*"}})
		wantStatus(t, r, 204)
		_, m = e.getRaw(table, "p", "r")
		if _, ok := m["A"]; ok || str(t, m, "C") != "c" {
			t.Fatalf("after tunnelled replace: %v", m)
		}
		// PATCH and MERGE verbs merge too.
		for _, verb := range []string{"PATCH", "MERGE"} {
			r = e.send(rawReq{method: verb, path: ep, body: []byte(`{"` + verb + `":true}`)})
			wantStatus(t, r, 204)
		}
		_, m = e.getRaw(table, "p", "r")
		if string(m["PATCH"]) != "true" || string(m["MERGE"]) != "true" || str(t, m, "C") != "c" {
			t.Fatalf("after PATCH and MERGE: %v", m)
		}
	})

	t.Run("ClientRequestID", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		const id = "my-client-request-id 42"
		r := e.send(rawReq{method: "GET", path: e.tablePath(table) + "()", header: map[string]string{"x-ms-client-request-id": id}})
		wantStatus(t, r, 200)
		wantHeader(t, r, "x-ms-client-request-id", id)
		wantHeader(t, r, "x-ms-version", "2019-02-02")
		wantHeader(t, r, "DataServiceVersion", "3.0;")
		r = e.send(rawReq{method: "GET", path: e.entityPath(table, "x", "y"), header: map[string]string{"x-ms-client-request-id": id}})
		wantError(t, r, 404, "ResourceNotFound")
		wantHeader(t, r, "x-ms-client-request-id", id)
		r = e.send(rawReq{method: "GET", path: e.tablePath(table) + "()", authz: strp(""), header: map[string]string{"x-ms-client-request-id": id}})
		wantError(t, r, 403, "AuthenticationFailed")
		wantHeader(t, r, "x-ms-client-request-id", id)
		// The authentication detail: in the JSON message (wantError checks
		// that the body has no other member), in its own XML element.
		if !strings.Contains(string(r.body), `\nAuthenticationErrorDetail:The request has no Authorization header.\n`) {
			t.Errorf("JSON 403 without the detail in its message: %s", r.body)
		}
		rx := e.send(rawReq{method: "GET", path: e.tablePath(table) + "?comp=acl", authz: strp(""), header: map[string]string{"Accept": "application/xml"}})
		if rx.status != 403 || !strings.Contains(string(rx.body), "<AuthenticationErrorDetail>The request has no Authorization header.</AuthenticationErrorDetail>") {
			t.Errorf("XML 403: %d %s", rx.status, rx.body)
		}
		// Each response has its own request id.
		r2 := e.send(rawReq{method: "GET", path: e.tablePath(table) + "()"})
		if r2.header.Get("x-ms-request-id") == r.header.Get("x-ms-request-id") {
			t.Error("request ids repeat")
		}
		// Without x-ms-version the newest version is answered.
		r = e.send(rawReq{method: "GET", path: e.tablePath(table) + "()", header: map[string]string{"x-ms-version": ""}})
		wantStatus(t, r, 200)
	})

	t.Run("KeysInURL", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		for _, k := range []string{"O'Neil", "a+b", "a b", "x%2Fy", "é ü", "it''s"} {
			r := e.send(rawReq{method: "POST", path: e.tablePath(table), body: mustJSON(t, map[string]any{"PartitionKey": k, "RowKey": k, "K": k})})
			wantStatus(t, r, 201)
			// Location points back at the entity.
			loc, err := url.Parse(r.header.Get("Location"))
			if err != nil {
				t.Fatal(err)
			}
			g := e.send(rawReq{method: "GET", path: loc.EscapedPath()})
			wantStatus(t, g, 200)
			if m := rawObject(t, g.body); str(t, m, "K") != k {
				t.Errorf("Location %s reads %s", loc, g.body)
			}
		}
		get := func(pred string) *rawResponse { return e.send(rawReq{method: "GET", path: e.tablePath(table) + pred}) }
		key := func(r *rawResponse) string {
			t.Helper()
			if r.status != 200 {
				return ""
			}
			return str(t, rawObject(t, r.body), "K")
		}
		cases := []struct{ pred, want string }{
			{"(PartitionKey='O''Neil',RowKey='O''Neil')", "O'Neil"},                   // JS: quotes literal, doubled
			{"(PartitionKey='O%27%27Neil',RowKey='O%27%27Neil')", "O'Neil"},           // Go/.NET: doubled, encoded
			{"(PartitionKey='O%27%27Neil',RowKey='O''Neil')", "O'Neil"},               // mixed
			{"(PartitionKey%20=%20'O''Neil'%20,%20RowKey%20=%20'O''Neil')", "O'Neil"}, // spaces around = and ,
			{"(PartitionKey='a+b',RowKey='a+b')", "a+b"},                              // + is a plus in a path
			{"(PartitionKey='a%2Bb',RowKey='a%2Bb')", "a+b"},                          // ... and so is %2B
			{"(PartitionKey='a%20b',RowKey='a%20b')", "a b"},                          // %20 is the space
			{"(PartitionKey='x%252Fy',RowKey='x%252Fy')", "x%2Fy"},                    // decoded once only
			{"(PartitionKey='%C3%A9%20%C3%BC',RowKey='%C3%A9%20%C3%BC')", "é ü"},
			{"(PartitionKey='it''''s',RowKey='it%27%27%27%27s')", "it''s"},
		}
		for _, tc := range cases {
			if got := key(get(tc.pred)); got != tc.want {
				t.Errorf("%s read %q, want %q", tc.pred, got, tc.want)
			}
		}
		// A literal space in the URL is not a plus, and %2F is a slash,
		// which no key may contain.
		r := get("(PartitionKey='a%20b',RowKey='a+b')")
		wantError(t, r, 404, "ResourceNotFound")
		r = get("(PartitionKey='x%2Fy',RowKey='x%2Fy')")
		wantError(t, r, 400, "OutOfRangeInput")
		// Query without parentheses, and /Tables() as Query Tables.
		r = e.send(rawReq{method: "GET", path: e.tablePath(table)})
		wantStatus(t, r, 200)
		if n := len(rawValue(t, r.body)); n != 6 {
			t.Errorf("GET /%s listed %d", table, n)
		}
		r = e.send(rawReq{method: "GET", path: acct + "/Tables()"})
		wantStatus(t, r, 200)
	})

	t.Run("SharedKeySchemes", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		body := []byte(`{"PartitionKey":"p","RowKey":"full"}`)
		r := e.send(rawReq{method: "POST", path: e.tablePath(table), body: body, scheme: "SharedKey"})
		wantStatus(t, r, 201)
		r = e.send(rawReq{method: "GET", path: e.entityPath(table, "p", "full"), scheme: "SharedKey"})
		wantStatus(t, r, 200)
		// The Date header signs when x-ms-date is absent.
		r = e.send(rawReq{method: "GET", path: e.entityPath(table, "p", "full"), header: map[string]string{"x-ms-date": "", "Date": time.Now().UTC().Format(http.TimeFormat)}})
		wantStatus(t, r, 200)
		// A date a few minutes off is within the allowed skew.
		r = e.send(rawReq{method: "GET", path: e.entityPath(table, "p", "full"), date: time.Now().Add(-5 * time.Minute)})
		wantStatus(t, r, 200)
	})

	t.Run("HostStyle", func(t *testing.T) {
		t.Parallel()
		_, port, _ := strings.Cut(strings.TrimPrefix(e.baseURL, "http://"), ":")
		host := httpapi.DevAccount + ".table.example.com:" + port
		r := e.send(rawReq{method: "POST", path: "/Tables", host: host, body: []byte(`{"TableName":"HostStyleTable"}`)})
		wantStatus(t, r, 201)
		wantHeader(t, r, "Location", "http://"+host+"/Tables('HostStyleTable')")
		r = e.send(rawReq{method: "POST", path: "/HostStyleTable", host: host, body: []byte(`{"PartitionKey":"p","RowKey":"r"}`)})
		wantStatus(t, r, 201)
		wantHeader(t, r, "Location", "http://"+host+"/HostStyleTable(PartitionKey='p',RowKey='r')")
		// The same entity through path-style addressing.
		g, _ := e.getRaw("HostStyleTable", "p", "r")
		wantStatus(t, g, 200)
		r = e.send(rawReq{method: "GET", path: "/HostStyleTable(PartitionKey='p',RowKey='r')", host: host})
		wantStatus(t, r, 200)
		if m := rawObject(t, r.body); str(t, m, "odata.metadata") != "http://"+host+"/$metadata#HostStyleTable/@Element" {
			t.Errorf("odata.metadata %s", m["odata.metadata"])
		}
	})
}
