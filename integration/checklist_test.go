package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// Behaviours of the specification's checklist (table-service.md §5) that
// the operation suites do not show on their own.

// TS-110: with inverted-tick RowKeys (19 digits, zero-padded, MaxInt64
// minus the ticks), $top=10 on the partition returns the 10 most recently
// written entities, newest first: the log-tail pattern.
func TestInvertedTickRowKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	base := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	const n = 25
	for i := range n { // written oldest first
		ticks := base.Add(time.Duration(i)*time.Second).UnixNano() / 100
		rk := fmt.Sprintf("%019d", math.MaxInt64-ticks)
		if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "log", "RowKey": rk, "Seq": i}), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Another partition, sorting after "log", must not leak into the page.
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "loh", "RowKey": "0", "Seq": -1}), nil); err != nil {
		t.Fatal(err)
	}
	filter := "PartitionKey eq 'log'"
	p := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: ptr[int32](10)})
	page, err := p.NextPage(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entities) != 10 {
		t.Fatalf("got %d entities, want 10", len(page.Entities))
	}
	for i, b := range page.Entities {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if want := float64(n - 1 - i); m["Seq"] != want {
			t.Fatalf("entity %d has Seq %v, want %v (newest first)", i, m["Seq"], want)
		}
	}
}

// TS-122: a continuation token still works after the service restarts:
// tokens hold keys, not server state.
func TestContinuationAcrossRestart(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	c, table := e.newTable()
	const n = 1500
	var batch []aztables.TransactionAction
	flush := func(pk string) {
		if len(batch) == 0 {
			return
		}
		if _, err := c.SubmitTransaction(bg, batch, nil); err != nil {
			t.Fatalf("load %s: %v", pk, err)
		}
		batch = batch[:0]
	}
	for i := range n {
		pk := fmt.Sprintf("p%02d", i/100)
		batch = append(batch, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
			Entity: mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": fmt.Sprintf("r%04d", i), "I": i})})
		if len(batch) == 100 {
			flush(pk)
		}
	}
	first, err := c.NewListEntitiesPager(nil).NextPage(bg)
	if err != nil {
		t.Fatal(err)
	}
	if first.NextPartitionKey == nil || first.NextRowKey == nil {
		t.Fatal("no continuation after the first page")
	}

	e2 := e.restart()
	rest, _ := listAll(t, e2.service.NewClient(table), &aztables.ListEntitiesOptions{NextPartitionKey: first.NextPartitionKey, NextRowKey: first.NextRowKey})
	if got := len(first.Entities) + len(rest); got != n {
		t.Fatalf("first page %d + after restart %d = %d entities, want %d", len(first.Entities), len(rest), got, n)
	}
	for i, m := range rest {
		if want := float64(len(first.Entities) + i); m["I"] != want {
			t.Fatalf("entity %d after the restart has I=%v, want %v", i, m["I"], want)
		}
	}
}

// TS-059: a DateTime sent with an offset is stored as its instant and
// returned in UTC, with up to 7 fractional digits and trailing zeros
// dropped, as Azure writes them.
func TestDateTimeReturnedInUTC(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, table := e.newTable()
	body := `{"PartitionKey":"p","RowKey":"r",` +
		`"East@odata.type":"Edm.DateTime","East":"2026-11-22T01:02:03.1234567+02:00",` +
		`"West@odata.type":"Edm.DateTime","West":"2026-12-31T23:30:00-01:00",` +
		`"Plain@odata.type":"Edm.DateTime","Plain":"2026-11-22T01:02:03Z"}`
	wantStatus(t, e.send(rawReq{method: http.MethodPost, path: e.tablePath(table), body: []byte(body)}), http.StatusCreated)
	_, m := e.getRaw(table, "p", "r")
	for name, want := range map[string]string{
		"East":  "2026-11-21T23:02:03.1234567Z",
		"West":  "2027-01-01T00:30:00Z",
		"Plain": "2026-11-22T01:02:03Z",
	} {
		if got := str(t, m, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
		if got := str(t, m, name+"@odata.type"); got != "Edm.DateTime" {
			t.Errorf("%s@odata.type = %q", name, got)
		}
	}
}

// TS-065: a property written as null is absent from point reads and from
// query responses alike, in every metadata level.
func TestNullsNeverReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, table := e.newTable()
	tp := e.tablePath(table)
	wantStatus(t, e.send(rawReq{method: http.MethodPost, path: tp, body: []byte(`{"PartitionKey":"p","RowKey":"a","X":null,"Y":1}`)}), http.StatusCreated)
	wantStatus(t, e.send(rawReq{method: http.MethodPut, path: e.entityPath(table, "p", "b"), body: []byte(`{"X":null,"Y":2}`)}), http.StatusNoContent)
	wantStatus(t, e.send(rawReq{method: "MERGE", path: e.entityPath(table, "p", "c"), body: []byte(`{"X":null,"Y":3,"Z":null}`)}), http.StatusNoContent)
	for _, accept := range []string{"application/json;odata=nometadata", "application/json;odata=minimalmetadata", "application/json;odata=fullmetadata"} {
		r := e.send(rawReq{method: http.MethodGet, path: tp + "()", header: map[string]string{"Accept": accept}})
		wantStatus(t, r, http.StatusOK)
		rows := rawValue(t, r.body)
		if len(rows) != 3 {
			t.Fatalf("%s: %d entities, want 3", accept, len(rows))
		}
		for _, row := range rows {
			for name, v := range row {
				if string(v) == "null" {
					t.Errorf("%s: query returned %s: null", accept, name)
				}
			}
			if _, ok := row["X"]; ok {
				t.Errorf("%s: query returned X", accept)
			}
			if _, ok := row["Z"]; ok {
				t.Errorf("%s: query returned Z", accept)
			}
		}
		for _, rk := range []string{"a", "b", "c"} {
			r := e.send(rawReq{method: http.MethodGet, path: e.entityPath(table, "p", rk), header: map[string]string{"Accept": accept}})
			wantStatus(t, r, http.StatusOK)
			for name, v := range rawObject(t, r.body) {
				if string(v) == "null" || name == "X" || name == "Z" {
					t.Errorf("%s: point read of %s returned %s: %s", accept, rk, name, v)
				}
			}
		}
	}
}
