package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testissuer"
	"github.com/pgtables/pgtables/tokenauth"
)

// indexWire is an index as the index API sends it.
type indexWire struct {
	Name              string `json:"name"`
	Property          string `json:"property"`
	Type              string `json:"type"`
	AfterPartitionKey bool   `json:"afterPartitionKey"`
	State             string `json:"state"`
	Error             string `json:"error"`
}

func indexesPath(table string) string {
	return "/-/accounts/" + httpapi.DevAccount + "/tables/" + table + "/indexes"
}

// waitIndexesReady lists the table's indexes until none is building.
func waitIndexesReady(t *testing.T, e *env, table string) []indexWire {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		r := e.do(http.MethodGet, indexesPath(table), nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("list indexes: %d %s", r.status, r.body)
		}
		var list struct{ Value []indexWire }
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(list.Value, func(ix indexWire) bool { return ix.State == "building" }) {
			return list.Value
		}
		if time.Now().After(deadline) {
			t.Fatalf("still building: %s", r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The index API with Shared Key: create, list, query through the SDK with
// the index, drop; and its errors in Azure's shape.
func TestIndexAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, table := e.newTable()
	for i := 0; i < 50; i++ {
		ent := map[string]any{"PartitionKey": fmt.Sprint("p", i%5), "RowKey": fmt.Sprintf("%03d", i), "Age": i % 10}
		if i%7 == 0 {
			ent["Age@odata.type"], ent["Age"] = "Edm.Int64", fmt.Sprint(i%10)
		}
		if _, err := client.AddEntity(bg, mustJSON(t, ent), nil); err != nil {
			t.Fatal(err)
		}
	}
	top := int32(3)
	query := func() []string {
		var keys []string
		pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: strp("Age eq 7"), Top: &top})
		for pager.More() {
			page, err := pager.NextPage(bg)
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, fmt.Sprint(len(page.Entities)))
			for _, b := range page.Entities {
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, fmt.Sprint(m["PartitionKey"], "/", m["RowKey"]))
			}
		}
		return keys
	}
	before := query()

	r := e.do(http.MethodPost, indexesPath(table), nil, []byte(`{"property":"Age","type":"Edm.Int32"}`))
	if r.status != http.StatusAccepted {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var created indexWire
	if err := json.Unmarshal(r.body, &created); err != nil || created.State != "building" || created.Type != "Edm.Int32" {
		t.Fatalf("created %s (%v)", r.body, err)
	}
	ixs := waitIndexesReady(t, e, table)
	if len(ixs) != 1 || ixs[0].Name != created.Name || ixs[0].State != "ready" {
		t.Fatalf("indexes %+v", ixs)
	}
	if after := query(); !slices.Equal(after, before) {
		t.Fatalf("pages with the index %v, without %v", after, before)
	}

	errCases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"again", http.MethodPost, indexesPath(table), `{"property":"Age","type":"Edm.Double"}`, 409, "IndexAlreadyExists"},
		{"bad type", http.MethodPost, indexesPath(table), `{"property":"Age","type":"Edm.Decimal"}`, 400, "InvalidIndex"},
		{"bad property", http.MethodPost, indexesPath(table), `{"property":"RowKey","type":"Edm.String"}`, 400, "InvalidIndex"},
		{"bad body", http.MethodPost, indexesPath(table), `{"property":`, 400, "InvalidInput"},
		{"no table", http.MethodPost, indexesPath("nosuchtable"), `{"property":"Age","type":"Edm.Int32"}`, 404, "TableNotFound"},
		{"no index", http.MethodDelete, indexesPath(table) + "/pi_0_000000000000", "", 404, "IndexNotFound"},
		{"method", http.MethodPut, indexesPath(table), "", 405, "MethodNotAllowed"},
		{"path", http.MethodGet, "/-/accounts/" + httpapi.DevAccount + "/tables/" + table, "", 404, "ResourceNotFound"},
	}
	for _, c := range errCases {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		r := e.do(c.method, c.path, nil, body)
		if r.status != c.status || r.header.Get("x-ms-error-code") != c.code {
			t.Errorf("%s: %d %s %s, want %d %s", c.name, r.status, r.header.Get("x-ms-error-code"), r.body, c.status, c.code)
		}
	}
	// Unsigned, or signed with another key: refused as any request.
	if r := e.do(http.MethodGet, indexesPath(table), map[string]string{"Authorization": ""}, nil); r.status != http.StatusForbidden {
		t.Errorf("unsigned: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, indexesPath(table), map[string]string{"Authorization": "SharedKeyLite " + httpapi.DevAccount + ":AAAA"}, nil); r.status != http.StatusForbidden {
		t.Errorf("bad signature: %d %s", r.status, r.body)
	}

	if r := e.do(http.MethodDelete, indexesPath(table)+"/"+created.Name, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("drop: %d %s", r.status, r.body)
	}
	if ixs := waitIndexesReady(t, e, table); len(ixs) != 0 {
		t.Fatalf("after drop: %+v", ixs)
	}
	if after := query(); !slices.Equal(after, before) {
		t.Fatalf("pages after the drop %v, before %v", after, before)
	}
}

// A bearer token needs manage on the table for the index API.
func TestIndexAPIBearer(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	e := newTLSEnv(t, bearerConfig(t, iss,
		tokenauth.Rule{Claim: "roles", Value: "owner", Account: "*", Permissions: []string{"read", "write", "manage"}},
		tokenauth.Rule{Claim: "roles", Value: "writer", Account: "*", Permissions: []string{"read", "write", "delete"}},
	))
	owner := iss.Token(t, iss.StandardClaims("owner-app", "owner"))
	writer := iss.Token(t, iss.StandardClaims("writer-app", "writer"))
	_, table := e.newTable()
	body := []byte(`{"property":"Name","type":"Edm.String","afterPartitionKey":true}`)
	if r := e.do(http.MethodPost, indexesPath(table), map[string]string{"Authorization": *bearer(writer)}, body); r.status != http.StatusForbidden || r.header.Get("x-ms-error-code") != "AuthorizationPermissionMismatch" {
		t.Fatalf("writer creates: %d %s %s", r.status, r.header.Get("x-ms-error-code"), r.body)
	}
	r := e.do(http.MethodPost, indexesPath(table), map[string]string{"Authorization": *bearer(owner)}, body)
	if r.status != http.StatusAccepted {
		t.Fatalf("owner creates: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, indexesPath(table), map[string]string{"Authorization": *bearer(owner)}, nil); r.status != http.StatusOK {
		t.Fatalf("owner lists: %d %s", r.status, r.body)
	}
}
