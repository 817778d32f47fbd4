package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/httpapi"
)

// TestEveryRouteRequiresAuthentication tries every route of the protocol
// anonymously, with a wrong key (Shared Key Lite and Shared Key) and with
// a SAS signed by a wrong key: each is 403 AuthenticationFailed, in JSON or
// XML as the operation's answers are, and nothing in the database changes.
// With the right key each route works, which shows the requests are
// otherwise well-formed.
func TestEveryRouteRequiresAuthentication(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	acct := "/" + httpapi.DevAccount
	const wrongKey = "d3Jvbmcga2V5IGZvciB0aGUgZGV2IGFjY291bnQ="
	type route struct {
		name   string
		method string
		path   func(table string) string
		body   func(table string) []byte
		header map[string]string
		xml    bool
	}
	entity := func(table string) string { return acct + "/" + table + "(PartitionKey='p',RowKey='r')" }
	entityBody := func(string) []byte { return []byte(`{"PartitionKey":"p","RowKey":"r","V":1}`) }
	ifMatch := map[string]string{"If-Match": "*"}
	batchBody := func(table string) []byte {
		return []byte(strings.ReplaceAll(fmt.Sprintf("--batch_a\n"+
			"Content-Type: multipart/mixed; boundary=changeset_b\n\n"+
			"--changeset_b\nContent-Type: application/http\nContent-Transfer-Encoding: binary\n\n"+
			"POST %s%s/%s HTTP/1.1\nContent-Type: application/json\nAccept: application/json;odata=minimalmetadata\n\n"+
			`{"PartitionKey":"b","RowKey":"1"}`+"\n"+
			"--changeset_b--\n--batch_a--\n", e.baseURL, acct, table), "\n", "\r\n"))
	}
	acl := func(string) []byte {
		return []byte(`<SignedIdentifiers><SignedIdentifier><Id>x</Id><AccessPolicy><Permission>r</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`)
	}
	props := func(string) []byte {
		return []byte(`<StorageServiceProperties><Logging><Read>true</Read></Logging></StorageServiceProperties>`)
	}
	xmlHeaders := map[string]string{"Accept": "application/xml", "Content-Type": "application/xml", "DataServiceVersion": ""}
	fixed := func(p string) func(string) string { return func(string) string { return p } }
	routes := []route{
		{"query tables", "GET", fixed(acct + "/Tables"), nil, nil, false},
		{"create table", "POST", fixed(acct + "/Tables"), func(string) []byte { return []byte(`{"TableName":"authmade"}`) }, nil, false},
		{"get table", "GET", func(t string) string { return acct + "/Tables('" + t + "')" }, nil, nil, false},
		{"delete table", "DELETE", func(t string) string { return acct + "/Tables('" + t + "')" }, nil, nil, false},
		{"insert entity", "POST", func(t string) string { return acct + "/" + t }, func(string) []byte {
			return []byte(`{"PartitionKey":"p","RowKey":"new"}`)
		}, nil, false},
		{"get entity", "GET", entity, nil, nil, false},
		{"update entity", "PUT", entity, entityBody, ifMatch, false},
		{"merge entity", "MERGE", entity, entityBody, ifMatch, false},
		{"merge entity (PATCH)", "PATCH", entity, entityBody, ifMatch, false},
		{"merge entity (POST tunnel)", "POST", entity, entityBody, map[string]string{"If-Match": "*", "X-HTTP-Method": "MERGE"}, false},
		{"insert or replace", "PUT", entity, entityBody, nil, false},
		{"insert or merge", "MERGE", entity, entityBody, nil, false},
		{"delete entity", "DELETE", entity, nil, ifMatch, false},
		{"query entities", "GET", func(t string) string { return acct + "/" + t + "()" }, nil, nil, false},
		{"batch", "POST", fixed(acct + "/$batch"), batchBody, map[string]string{"Content-Type": "multipart/mixed; boundary=batch_a"}, false},
		{"get acl", "GET", func(t string) string { return acct + "/" + t + "?comp=acl" }, nil, xmlHeaders, true},
		{"set acl", "PUT", func(t string) string { return acct + "/" + t + "?comp=acl" }, acl, xmlHeaders, true},
		{"get service properties", "GET", fixed(acct + "/?restype=service&comp=properties"), nil, xmlHeaders, true},
		{"set service properties", "PUT", fixed(acct + "/?restype=service&comp=properties"), props, xmlHeaders, true},
		{"get service stats", "GET", fixed(acct + "/?restype=service&comp=stats"), nil, xmlHeaders, true},
		{"get service stats (secondary)", "GET", fixed(acct + "-secondary/?restype=service&comp=stats"), nil, xmlHeaders, true},
	}
	// A SAS that would allow everything, but signed with a wrong key.
	badSAS := acctSAS{srt: "sco", sp: "rwdlacup", se: inAnHour(), key: wrongKey}.encode()
	for _, rt := range routes {
		owner, table := e.newTable()
		sasAdd(t, owner, "p", "r")
		path := rt.path(table)
		var body []byte
		if rt.body != nil {
			body = rt.body(table)
		}
		header := map[string]string{}
		for k, v := range rt.header {
			header[k] = v
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		attempts := []struct {
			name string
			req  rawReq
		}{
			{"anonymous", rawReq{method: rt.method, path: path, body: body, header: header, authz: strp("")}},
			{"wrong key", rawReq{method: rt.method, path: path, body: body, header: header, key: wrongKey}},
			{"wrong key, full Shared Key", rawReq{method: rt.method, path: path, body: body, header: header, key: wrongKey, scheme: "SharedKey"}},
			{"another account's name", rawReq{method: rt.method, path: path, body: body, header: header, account: "otheraccount"}},
			{"SAS with a wrong key", rawReq{method: rt.method, path: path + sep + badSAS, body: body, header: header, authz: strp("")}},
		}
		before := e.fullSnapshot()
		for _, a := range attempts {
			r := e.send(a.req)
			if rt.xml {
				wantXMLError(t, r, 403, "AuthenticationFailed")
			} else {
				wantError(t, r, 403, "AuthenticationFailed")
			}
			if t.Failed() {
				t.Fatalf("%s %s (%s): see above", rt.name, a.name, path)
			}
		}
		if e.fullSnapshot() != before {
			t.Fatalf("%s: an unauthenticated request changed the database", rt.name)
		}
		r := e.send(rawReq{method: rt.method, path: path, body: body, header: header})
		if r.status >= 300 {
			t.Errorf("%s with the right key: %d %s %s", rt.name, r.status, r.header.Get("x-ms-error-code"), trunc(r.body))
		}
	}
}
