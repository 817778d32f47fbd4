package integration

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// TestTables covers the table operations through the aztables client:
// create, list with paging, delete, immediate name reuse and
// case-insensitive names (TS-002, TS-008..TS-010, TS-013..TS-015, TS-124).
func TestTables(t *testing.T) {
	t.Parallel()
	needInProcess(t)

	t.Run("CreateListDelete", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		resp, err := e.service.CreateTable(bg, "Customers", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.TableName == nil || *resp.TableName != "Customers" {
			t.Fatalf("create returned %v", resp.TableName)
		}
		_, err = e.service.CreateTable(bg, "Customers", nil)
		wantRespErr(t, err, 409, "TableAlreadyExists")
		if got := listTableNames(t, e.service); !reflect.DeepEqual(got, []string{"Customers"}) {
			t.Fatalf("tables %v", got)
		}
		if _, err := e.service.DeleteTable(bg, "Customers", nil); err != nil {
			t.Fatal(err)
		}
		if got := listTableNames(t, e.service); len(got) != 0 {
			t.Fatalf("tables after delete %v", got)
		}
		_, err = e.service.DeleteTable(bg, "Customers", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
		_, err = e.service.DeleteTable(bg, "NeverExisted", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
	})

	t.Run("ListPaging", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		// Listing order is the lower-cased name; the casing of creation
		// is kept.
		names := []string{"delta", "Bravo", "alpha", "Echo7", "charlie", "FOXTROT", "golf"}
		for _, n := range names {
			if _, err := e.service.CreateTable(bg, n, nil); err != nil {
				t.Fatal(err)
			}
		}
		want := slices.Clone(names)
		slices.SortFunc(want, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
		var got []string
		var pages []int
		p := e.service.NewListTablesPager(&aztables.ListTablesOptions{Top: ptr[int32](2)})
		for p.More() {
			page, err := p.NextPage(bg)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, len(page.Tables))
			for _, tp := range page.Tables {
				got = append(got, *tp.Name)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("listed %v, want %v", got, want)
		}
		if !reflect.DeepEqual(pages, []int{2, 2, 2, 1}) {
			t.Fatalf("page sizes %v", pages)
		}
	})

	t.Run("Over1000", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		const n = 1003
		parallel(n, 16, func(i int) {
			if _, err := e.service.CreateTable(bg, fmt.Sprintf("many%04d", i), nil); err != nil {
				t.Errorf("create: %v", err)
			}
		})
		var pages []int
		seen := map[string]bool{}
		p := e.service.NewListTablesPager(nil)
		for p.More() {
			page, err := p.NextPage(bg)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, len(page.Tables))
			for _, tp := range page.Tables {
				if seen[*tp.Name] {
					t.Fatalf("%s listed twice", *tp.Name)
				}
				seen[*tp.Name] = true
			}
		}
		if len(seen) != n || !reflect.DeepEqual(pages, []int{1000, 3}) {
			t.Fatalf("listed %d tables in pages %v", len(seen), pages)
		}
	})

	t.Run("RawTopOnePaging", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		names := []string{"tone", "Ttwo", "tthree"}
		for _, n := range names {
			if _, err := e.service.CreateTable(bg, n, nil); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		next := ""
		for i := 0; ; i++ {
			path := "/" + httpapi.DevAccount + "/Tables?%24top=1"
			if next != "" {
				path += "&NextTableName=" + next
			}
			r := e.send(rawReq{method: "GET", path: path})
			wantStatus(t, r, 200)
			v := rawValue(t, r.body)
			if len(v) != 1 {
				t.Fatalf("page %d has %d tables", i, len(v))
			}
			got = append(got, str(t, v[0], "TableName"))
			next = r.header.Get("x-ms-continuation-NextTableName")
			if next == "" {
				break
			}
			if i > 5 {
				t.Fatal("paging does not end")
			}
		}
		if want := []string{"tone", "tthree", "Ttwo"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})

	t.Run("ForeignContinuationToken", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		for _, n := range []string{"alpha", "Brav", "charlie"} {
			if _, err := e.service.CreateTable(bg, n, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Tokens naming a table in another letter case (Azurite's plain
		// base64 of "Brav", Azure's 1!len!base64 with '-' padding of
		// "BRAV") start the listing at that table: names compare
		// case-insensitively.
		for _, tok := range []string{"QnJhdg==", "1!8!QlJBVg--"} {
			r := e.send(rawReq{method: "GET", path: "/" + httpapi.DevAccount + "/Tables?NextTableName=" + tok})
			wantStatus(t, r, 200)
			var got []string
			for _, m := range rawValue(t, r.body) {
				got = append(got, str(t, m, "TableName"))
			}
			if want := []string{"Brav", "charlie"}; !reflect.DeepEqual(got, want) {
				t.Errorf("NextTableName=%s listed %v, want %v", tok, got, want)
			}
		}
	})

	t.Run("CaseInsensitiveNames", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		if _, err := e.service.CreateTable(bg, "MyTable", nil); err != nil {
			t.Fatal(err)
		}
		orig := e.service.NewClient("MyTable")
		if _, err := orig.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r1", "V": int32(1)}), nil); err != nil {
			t.Fatal(err)
		}
		before := e.snapshot()
		for _, dup := range []string{"mytable", "MYTABLE", "myTABLE", "MyTable"} {
			_, err := e.service.CreateTable(bg, dup, nil)
			wantRespErr(t, err, 409, "TableAlreadyExists")
		}
		if e.snapshot() != before {
			t.Fatal("duplicate creates changed the database")
		}
		if got := listTableNames(t, e.service); !reflect.DeepEqual(got, []string{"MyTable"}) {
			t.Fatalf("tables %v", got)
		}
		// Entity operations through other casings reach MyTable.
		upper := e.service.NewClient("MYTABLE")
		if _, err := upper.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r2", "V": int32(2)}), nil); err != nil {
			t.Fatal(err)
		}
		ent, _ := getEDM(t, e.service.NewClient("mytable"), "p", "r2")
		if ent.Properties["V"] != int32(2) {
			t.Fatalf("got %v", ent.Properties)
		}
		ent, _ = getEDM(t, upper, "p", "r1")
		if ent.Properties["V"] != int32(1) {
			t.Fatalf("got %v", ent.Properties)
		}
		all, _ := listAll(t, orig, nil)
		if len(all) != 2 {
			t.Fatalf("MyTable has %d entities", len(all))
		}
		if _, err := e.service.DeleteTable(bg, "mYtAbLe", nil); err != nil {
			t.Fatal(err)
		}
		if got := listTableNames(t, e.service); len(got) != 0 {
			t.Fatalf("tables %v", got)
		}
	})

	t.Run("DeleteAndReuse", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		const name = "reused"
		if _, err := e.service.CreateTable(bg, name, nil); err != nil {
			t.Fatal(err)
		}
		c := e.service.NewClient(name)
		for i := 0; i < 3; i++ {
			if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": fmt.Sprint(i)}), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.service.DeleteTable(bg, name, nil); err != nil {
			t.Fatal(err)
		}
		_, err := c.GetEntity(bg, "p", "0", nil)
		wantRespErr(t, err, 404, "TableNotFound")
		_, err = c.NewListEntitiesPager(nil).NextPage(bg)
		wantRespErr(t, err, 404, "TableNotFound")
		// The name is free at once, in any casing, and the new table is
		// empty: entities of the deleted one never reappear.
		if _, err := e.service.CreateTable(bg, "REUSED", nil); err != nil {
			t.Fatalf("re-create right after delete: %v", err)
		}
		all, _ := listAll(t, c, nil)
		if len(all) != 0 {
			t.Fatalf("re-created table lists %d entities", len(all))
		}
		_, err = c.GetEntity(bg, "p", "0", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
		if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "0"}), nil); err != nil {
			t.Fatalf("insert a key of the deleted table: %v", err)
		}
		if got := listTableNames(t, e.service); !reflect.DeepEqual(got, []string{"REUSED"}) {
			t.Fatalf("tables %v", got)
		}
		// Delete and re-create again, several times in a row.
		for i := 0; i < 3; i++ {
			if _, err := e.service.DeleteTable(bg, name, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := e.service.CreateTable(bg, name, nil); err != nil {
				t.Fatal(err)
			}
		}
		all, _ = listAll(t, c, nil)
		if len(all) != 0 {
			t.Fatalf("re-created table lists %d entities", len(all))
		}
	})

	t.Run("MissingTable", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		c := e.service.NewClient("nosuchtable")
		ent := mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r", "V": "x"})
		_, err := c.AddEntity(bg, ent, nil)
		wantRespErr(t, err, 404, "TableNotFound")
		_, err = c.GetEntity(bg, "p", "r", nil)
		wantRespErr(t, err, 404, "TableNotFound")
		for _, mode := range []aztables.UpdateMode{aztables.UpdateModeReplace, aztables.UpdateModeMerge} {
			_, err = c.UpdateEntity(bg, ent, &aztables.UpdateEntityOptions{UpdateMode: mode})
			wantRespErr(t, err, 404, "TableNotFound")
			_, err = c.UpsertEntity(bg, ent, &aztables.UpsertEntityOptions{UpdateMode: mode})
			wantRespErr(t, err, 404, "TableNotFound")
		}
		_, err = c.DeleteEntity(bg, "p", "r", nil)
		wantRespErr(t, err, 404, "TableNotFound")
		_, err = c.NewListEntitiesPager(nil).NextPage(bg)
		wantRespErr(t, err, 404, "TableNotFound")
		_, err = c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Top: ptr[int32](5), Select: ptr("V")}).NextPage(bg)
		wantRespErr(t, err, 404, "TableNotFound")
		// Raw POST tunnelling and a query without parentheses, too.
		r := e.send(rawReq{method: http.MethodPost, path: e.entityPath("nosuchtable", "p", "r"), header: map[string]string{"X-HTTP-Method": "MERGE"}, body: ent})
		wantError(t, r, 404, "TableNotFound")
		r = e.send(rawReq{method: http.MethodGet, path: e.tablePath("nosuchtable")})
		wantError(t, r, 404, "TableNotFound")
		if n := e.entityCount(); n != 0 {
			t.Fatalf("%d entities stored", n)
		}
	})
}

// TestTableNameRules checks every table-name rule with its error code
// (rest-protocol §3.2, §4.11; TS-003..TS-007) and that a rejected create
// stores nothing.
func TestTableNameRules(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	long63 := "a" + strings.Repeat("B1", 31)
	tests := []struct {
		name string
		code string // "" = accepted
	}{
		{"abc", ""},
		{long63, ""},
		{"A1b2C3", ""},
		{"Tables1", ""},
		{"ab", "OutOfRangeInput"},
		{"a", "OutOfRangeInput"},
		{long63 + "x", "OutOfRangeInput"},
		{strings.Repeat("a", 300), "OutOfRangeInput"},
		{"1table", "InvalidResourceName"},
		{"my-table", "InvalidResourceName"},
		{"my_table", "InvalidResourceName"},
		{"my table", "InvalidResourceName"},
		{"tablé", "InvalidResourceName"},
		{"table.x", "InvalidResourceName"},
		{"tables", "InvalidInput"},
		{"TABLES", "InvalidInput"},
		{"Tables", "InvalidInput"},
	}
	var accepted []string
	for _, tc := range tests {
		before := e.snapshot()
		_, err := e.service.CreateTable(bg, tc.name, nil)
		if tc.code == "" {
			if err != nil {
				t.Errorf("create %q: %v", tc.name, err)
			}
			accepted = append(accepted, tc.name)
			continue
		}
		status, code := respStatus(t, err)
		if status != 400 || code != tc.code {
			t.Errorf("create %q: got %d %q, want 400 %s", tc.name, status, code, tc.code)
		}
		if e.snapshot() != before {
			t.Errorf("create %q changed the database", tc.name)
		}
	}
	slices.Sort(accepted)
	if got := listTableNames(t, e.service); !reflect.DeepEqual(got, accepted) {
		t.Fatalf("tables %v, want %v", got, accepted)
	}
}

func ptr[T any](v T) *T { return &v }
