package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// props returns the custom properties of an entity read through the SDK.
func props(t testing.TB, c *aztables.Client, pk, rk string) map[string]any {
	t.Helper()
	ent, _ := getEDM(t, c, pk, rk)
	return ent.Properties
}

func wantProps(t testing.TB, c *aztables.Client, pk, rk string, want map[string]any) {
	t.Helper()
	if got := props(t, c, pk, rk); !reflect.DeepEqual(got, want) {
		t.Fatalf("entity %s/%s = %#v, want %#v", pk, rk, got, want)
	}
}

// entity builds an SDK entity body from keys and properties.
func entity(t testing.TB, pk, rk string, p map[string]any) []byte {
	t.Helper()
	m := map[string]any{"PartitionKey": pk, "RowKey": rk}
	maps.Copy(m, p)
	return mustJSON(t, m)
}

// TestEntityOperations drives every entity operation through the aztables
// client (TS-016, TS-030..TS-033, TS-037, TS-043..TS-045, TS-062..TS-064,
// TS-074..TS-093, TS-097, TS-113).
func TestEntityOperations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("AddGet", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		ent := aztables.EDMEntity{
			Entity: aztables.Entity{PartitionKey: "p1", RowKey: "r1"},
			Properties: map[string]any{
				"Name": "Ada", "Age": int32(36), "Big": aztables.EDMInt64(1 << 40),
				"EntityType": "Person", "Email": "A@x", "email": "a@x",
			},
		}
		add, err := c.AddEntity(bg, mustJSON(t, ent), nil)
		if err != nil {
			t.Fatal(err)
		}
		if add.ETag == "" {
			t.Fatal("AddEntity returned no ETag")
		}
		var added aztables.EDMEntity
		if err := json.Unmarshal(add.Value, &added); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(added.Properties, ent.Properties) || added.ETag != string(add.ETag) {
			t.Fatalf("insert response %#v (etag %q), want %#v (etag %q)", added.Properties, added.ETag, ent.Properties, add.ETag)
		}
		got, etag := getEDM(t, c, "p1", "r1")
		if !reflect.DeepEqual(got.Properties, ent.Properties) || got.PartitionKey != "p1" || got.RowKey != "r1" {
			t.Fatalf("got %#v", got)
		}
		if etag != add.ETag || got.ETag != string(add.ETag) {
			t.Fatalf("read ETag %q / %q, insert ETag %q", etag, got.ETag, add.ETag)
		}
		// A second insert of the key conflicts and changes nothing.
		_, err = c.AddEntity(bg, entity(t, "p1", "r1", map[string]any{"Name": "Other"}), nil)
		wantRespErr(t, err, 409, "EntityAlreadyExists")
		got2, etag2 := getEDM(t, c, "p1", "r1")
		if etag2 != etag || !reflect.DeepEqual(got2.Properties, ent.Properties) {
			t.Fatal("conflicting insert changed the entity")
		}
		// Keys compare exactly; the same RowKey in another partition and
		// the same keys in another table are other entities.
		for _, pk := range []string{"P1", "p1 ", "p2"} {
			if _, err := c.AddEntity(bg, entity(t, pk, "r1", map[string]any{"Name": pk}), nil); err != nil {
				t.Fatalf("insert %q: %v", pk, err)
			}
		}
		c2, _ := e.newTable()
		if _, err := c2.AddEntity(bg, entity(t, "p1", "r1", map[string]any{"Name": "other table"}), nil); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "P1", "r1", map[string]any{"Name": "P1"})
		wantProps(t, c2, "p1", "r1", map[string]any{"Name": "other table"})
		_, err = c.GetEntity(bg, "p1", "nope", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
		_, err = c.GetEntity(bg, "P1", "R1", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
	})

	t.Run("GetSelect", func(t *testing.T) {
		t.Parallel()
		c, table := e.newTable()
		if _, err := c.AddEntity(bg, entity(t, "p", "r", map[string]any{"Name": "n", "Age": int32(3), "Big@odata.type": "Edm.Int64", "Big": "5"}), nil); err != nil {
			t.Fatal(err)
		}
		// GetEntityOptions has no $select in aztables v1.3.0: raw HTTP.
		r := e.send(rawReq{method: "GET", path: e.entityPath(table, "p", "r") + "?%24select=Name,Missing,RowKey,Big"})
		wantStatus(t, r, 200)
		m := rawObject(t, r.body)
		keys := slices.Sorted(maps.Keys(m))
		if want := []string{"Big", "Big@odata.type", "Missing", "Name", "RowKey", "odata.etag", "odata.metadata"}; !reflect.DeepEqual(keys, want) {
			t.Fatalf("members %v, want %v: %s", keys, want, r.body)
		}
		if string(m["Missing"]) != "null" || str(t, m, "Name") != "n" || str(t, m, "RowKey") != "r" || str(t, m, "Big") != "5" {
			t.Fatalf("body %s", r.body)
		}
		if str(t, m, "odata.etag") != r.header.Get("ETag") {
			t.Fatalf("odata.etag %s, ETag header %q", m["odata.etag"], r.header.Get("ETag"))
		}
	})

	t.Run("UpdateReplace", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		add, err := c.AddEntity(bg, entity(t, "p", "r", map[string]any{"A": "a", "B": int32(1)}), nil)
		if err != nil {
			t.Fatal(err)
		}
		up, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"C": "c"}), &aztables.UpdateEntityOptions{IfMatch: &add.ETag, UpdateMode: aztables.UpdateModeReplace})
		if err != nil {
			t.Fatal(err)
		}
		if up.ETag == "" || up.ETag == add.ETag {
			t.Fatalf("replace ETag %q, before %q", up.ETag, add.ETag)
		}
		wantProps(t, c, "p", "r", map[string]any{"C": "c"})
		// The ETag of the insert is stale now.
		_, err = c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"D": "d"}), &aztables.UpdateEntityOptions{IfMatch: &add.ETag, UpdateMode: aztables.UpdateModeReplace})
		wantRespErr(t, err, 412, "UpdateConditionNotSatisfied")
		wantProps(t, c, "p", "r", map[string]any{"C": "c"})
		// Unconditional (*).
		if _, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"E": true}), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"E": true})
		// Replace with nulls: the property is absent afterwards.
		if _, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"E": nil, "F": int32(6)}), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"F": int32(6)})
	})

	t.Run("UpdateMerge", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		add, err := c.AddEntity(bg, entity(t, "p", "r", map[string]any{"A": "a", "Age": int32(1), "Keep": "k"}), nil)
		if err != nil {
			t.Fatal(err)
		}
		up, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"B": "b", "Age": "one"}), &aztables.UpdateEntityOptions{IfMatch: &add.ETag, UpdateMode: aztables.UpdateModeMerge})
		if err != nil {
			t.Fatal(err)
		}
		if up.ETag == "" || up.ETag == add.ETag {
			t.Fatalf("merge ETag %q", up.ETag)
		}
		// Merge adds B, changes Age's type and value, keeps the rest.
		wantProps(t, c, "p", "r", map[string]any{"A": "a", "Age": "one", "Keep": "k", "B": "b"})
		_, err = c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"A": "stale"}), &aztables.UpdateEntityOptions{IfMatch: &add.ETag, UpdateMode: aztables.UpdateModeMerge})
		wantRespErr(t, err, 412, "UpdateConditionNotSatisfied")
		// Unconditional, with a null that must leave A alone.
		if _, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"A": nil, "C": 2.5}), nil); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"A": "a", "Age": "one", "Keep": "k", "B": "b", "C": 2.5})
	})

	t.Run("UpdateMissingEntity", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		foreign := azcore.ETag(`W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`)
		for _, mode := range []aztables.UpdateMode{aztables.UpdateModeReplace, aztables.UpdateModeMerge} {
			for _, etag := range []*azcore.ETag{nil, &foreign} {
				_, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"A": "a"}), &aztables.UpdateEntityOptions{UpdateMode: mode, IfMatch: etag})
				wantRespErr(t, err, 404, "ResourceNotFound")
			}
		}
		_, err := c.DeleteEntity(bg, "p", "r", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
		_, err = c.DeleteEntity(bg, "p", "r", &aztables.DeleteEntityOptions{IfMatch: &foreign})
		wantRespErr(t, err, 404, "ResourceNotFound")
		_, err = c.GetEntity(bg, "p", "r", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
	})

	t.Run("UpsertReplace", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		opts := &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace}
		r1, err := c.UpsertEntity(bg, entity(t, "p", "r", map[string]any{"A": "a", "N": nil}), opts)
		if err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"A": "a"})
		r2, err := c.UpsertEntity(bg, entity(t, "p", "r", map[string]any{"B": int32(2)}), opts)
		if err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"B": int32(2)})
		// Idempotent: the same request again succeeds with the same result.
		r3, err := c.UpsertEntity(bg, entity(t, "p", "r", map[string]any{"B": int32(2)}), opts)
		if err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"B": int32(2)})
		if r1.ETag == "" || r1.ETag == r2.ETag || r2.ETag == r3.ETag {
			t.Fatalf("ETags %q %q %q", r1.ETag, r2.ETag, r3.ETag)
		}
	})

	t.Run("UpsertMerge", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		opts := &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeMerge}
		if _, err := c.UpsertEntity(bg, entity(t, "p", "r", map[string]any{"A": "a"}), opts); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"A": "a"})
		if _, err := c.UpsertEntity(bg, entity(t, "p", "r", map[string]any{"B": "b", "A": nil}), nil); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"A": "a", "B": "b"})
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		add, err := c.AddEntity(bg, entity(t, "p", "r", nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		up, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"V": int32(1)}), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.DeleteEntity(bg, "p", "r", &aztables.DeleteEntityOptions{IfMatch: &add.ETag})
		wantRespErr(t, err, 412, "UpdateConditionNotSatisfied")
		wantProps(t, c, "p", "r", map[string]any{"V": int32(1)})
		if _, err := c.DeleteEntity(bg, "p", "r", &aztables.DeleteEntityOptions{IfMatch: &up.ETag}); err != nil {
			t.Fatal(err)
		}
		_, err = c.GetEntity(bg, "p", "r", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
		_, err = c.DeleteEntity(bg, "p", "r", nil)
		wantRespErr(t, err, 404, "ResourceNotFound")
		// Delete with * and gone from queries.
		if _, err := c.AddEntity(bg, entity(t, "p", "r2", nil), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.DeleteEntity(bg, "p", "r2", nil); err != nil {
			t.Fatal(err)
		}
		if all, _ := listAll(t, c, nil); len(all) != 0 {
			t.Fatalf("list after delete: %v", all)
		}
	})

	t.Run("Nulls", func(t *testing.T) {
		t.Parallel()
		c, table := e.newTable()
		if _, err := c.AddEntity(bg, []byte(`{"PartitionKey":"p","RowKey":"r","X":null,"Y":"y","Z@odata.type":"Edm.Int64","Z":null}`), nil); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", map[string]any{"Y": "y"})
		_, m := e.getRaw(table, "p", "r")
		for name, v := range m {
			if string(v) == "null" {
				t.Fatalf("response has %s: null", name)
			}
		}
	})

	t.Run("ListSelectTop", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		for i := 0; i < 10; i++ {
			if _, err := c.AddEntity(bg, entity(t, "p", fmt.Sprintf("r%02d", i), map[string]any{"Age": int32(i), "Other": "o"}), nil); err != nil {
				t.Fatal(err)
			}
		}
		all, pages := listAll(t, c, &aztables.ListEntitiesOptions{Select: ptr("RowKey,Age"), Top: ptr[int32](3)})
		if !reflect.DeepEqual(pages, []int{3, 3, 3, 1}) {
			t.Fatalf("page sizes %v", pages)
		}
		for i, m := range all {
			keys := slices.Sorted(maps.Keys(m))
			if want := []string{"Age", "RowKey", "odata.etag"}; !reflect.DeepEqual(keys, want) {
				t.Fatalf("entity %d members %v, want %v", i, keys, want)
			}
			if m["RowKey"] != fmt.Sprintf("r%02d", i) || m["Age"] != float64(i) {
				t.Fatalf("entity %d = %v", i, m)
			}
		}
		// $top alone limits pages, not the result.
		all, pages = listAll(t, c, &aztables.ListEntitiesOptions{Top: ptr[int32](4)})
		if len(all) != 10 || !reflect.DeepEqual(pages, []int{4, 4, 2}) {
			t.Fatalf("%d entities in pages %v", len(all), pages)
		}
		// Every listed entity carries its keys, Timestamp and ETag.
		for _, m := range all {
			for _, k := range []string{"PartitionKey", "RowKey", "Timestamp", "odata.etag", "Age", "Other"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("listed entity lacks %s: %v", k, m)
				}
			}
		}
	})

	t.Run("PagingSpecialKeys", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		// Page boundaries on keys that need escaping in tokens and URLs,
		// the empty key included. (No key pairs U+E000..U+FFFF with a
		// supplementary character: UTF-16 and code-point order differ there,
		// a documented deviation.)
		keys := []string{"", " ", "%2B", "+", "O'Neil", "a b", "a+b", "ü", "日", "😀"}
		want := 0
		for _, pk := range keys {
			for _, rk := range []string{"", "'", "r+", "é"} {
				if _, err := c.AddEntity(bg, entity(t, pk, rk, nil), nil); err != nil {
					t.Fatalf("insert %q/%q: %v", pk, rk, err)
				}
				want++
			}
		}
		for _, top := range []int32{1, 3} {
			all, pages := listAll(t, c, &aztables.ListEntitiesOptions{Top: ptr(top)})
			if len(all) != want {
				t.Fatalf("$top=%d: listed %d of %d in %d pages", top, len(all), want, len(pages))
			}
			for i := 1; i < len(all); i++ {
				a, b := all[i-1], all[i]
				ka := a["PartitionKey"].(string) + "\x00" + a["RowKey"].(string)
				kb := b["PartitionKey"].(string) + "\x00" + b["RowKey"].(string)
				if a["PartitionKey"].(string) > b["PartitionKey"].(string) || a["PartitionKey"] == b["PartitionKey"] && a["RowKey"].(string) >= b["RowKey"].(string) {
					t.Fatalf("$top=%d: %q listed before %q", top, ka, kb)
				}
			}
		}
	})

	t.Run("PropertyTypesPerEntity", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		if _, err := c.AddEntity(bg, entity(t, "p", "a", map[string]any{"Age": int32(30), "OnlyA": "x"}), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AddEntity(bg, entity(t, "p", "b", map[string]any{"Age": "thirty", "OnlyB": true}), nil); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "a", map[string]any{"Age": int32(30), "OnlyA": "x"})
		wantProps(t, c, "p", "b", map[string]any{"Age": "thirty", "OnlyB": true})
	})
}

// TestListEntitiesPaging inserts 2,500 entities over several partitions
// with 16 concurrent clients and pages through them with the SDK: pages of
// at most 1000 (or $top), every entity exactly once, in PartitionKey,
// RowKey ordinal order (TS-107..TS-109, TS-111, TS-115..TS-119).
func TestListEntitiesPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	// Partition keys whose ordinal order differs from a linguistic one:
	// upper case sorts before lower case, '_' between them.
	pks := []string{"b", "B", "a", "A", "_x", "Z9"}
	type key struct{ pk, rk string }
	var keys []key
	for i := 0; len(keys) < 2500; i++ {
		pk := pks[i%len(pks)]
		// RowKeys "1", "10", "2" sort as strings, zero-padded ones numerically.
		rk := fmt.Sprintf("%d", i)
		if i%3 == 0 {
			rk = fmt.Sprintf("%08d", i)
		}
		keys = append(keys, key{pk, rk})
	}
	var failed atomic.Int32
	parallel(len(keys), 16, func(i int) {
		k := keys[i]
		body := entity(t, k.pk, k.rk, map[string]any{"I": int32(i)})
		if _, err := c.AddEntity(bg, body, nil); err != nil {
			if failed.Add(1) == 1 {
				t.Errorf("insert %v: %v", k, err)
			}
		}
	})
	if failed.Load() > 0 {
		t.FailNow()
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].pk != keys[j].pk {
			return keys[i].pk < keys[j].pk // Go compares strings bytewise: ordinal
		}
		return keys[i].rk < keys[j].rk
	})

	check := func(t *testing.T, all []map[string]any) {
		t.Helper()
		if len(all) != len(keys) {
			t.Fatalf("listed %d entities, want %d", len(all), len(keys))
		}
		for i, m := range all {
			if m["PartitionKey"] != keys[i].pk || m["RowKey"] != keys[i].rk {
				t.Fatalf("entity %d is %v/%v, want %v", i, m["PartitionKey"], m["RowKey"], keys[i])
			}
		}
	}

	t.Run("DefaultPages", func(t *testing.T) {
		t.Parallel()
		all, pages := listAll(t, c, nil)
		check(t, all)
		if len(pages) < 3 {
			t.Fatalf("pages %v: want at least 3 for 2500 entities", pages)
		}
		for _, n := range pages {
			if n > 1000 {
				t.Fatalf("page of %d entities", n)
			}
		}
	})
	t.Run("Top300", func(t *testing.T) {
		t.Parallel()
		all, pages := listAll(t, c, &aztables.ListEntitiesOptions{Top: ptr[int32](300), Select: ptr("PartitionKey,RowKey,I")})
		check(t, all)
		for _, n := range pages {
			if n > 300 {
				t.Fatalf("page of %d entities with $top=300", n)
			}
		}
		for i, m := range all {
			if len(m) != 4 { // odata.etag + the three selected
				t.Fatalf("entity %d has members %v", i, slices.Sorted(maps.Keys(m)))
			}
		}
	})
	t.Run("Top1000", func(t *testing.T) {
		t.Parallel()
		all, pages := listAll(t, c, &aztables.ListEntitiesOptions{Top: ptr[int32](1000)})
		check(t, all)
		for _, n := range pages {
			if n > 1000 {
				t.Fatalf("page of %d entities", n)
			}
		}
	})
	t.Run("ResumeFromToken", func(t *testing.T) {
		t.Parallel()
		// A token from one pager resumes in a new pager (tokens are
		// stateless).
		p := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Top: ptr[int32](700)})
		first, err := p.NextPage(bg)
		if err != nil {
			t.Fatal(err)
		}
		if first.NextPartitionKey == nil || *first.NextPartitionKey == "" {
			t.Fatal("no continuation after the first page")
		}
		rest, _ := listAll(t, c, &aztables.ListEntitiesOptions{NextPartitionKey: first.NextPartitionKey, NextRowKey: first.NextRowKey})
		var all []map[string]any
		for _, b := range first.Entities {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			all = append(all, m)
		}
		check(t, append(all, rest...))
	})
}
