package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/console"
	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/store"
)

// newIndexConsoleEnv is a console whose server hints at an index for a
// page that examined 50 rows or more to return under 1% of them; its
// scans go in chunks (ScanFirst 1ns), which count on Citus too.
func newIndexConsoleEnv(t *testing.T) *env {
	t.Helper()
	return newEnvConfig(t, store.Options{ScanFirst: time.Nanosecond}, httpapi.Config{Version: "test", Console: console.Handler(), ScanLogRows: 50})
}

// addAges adds n entities over partitions of 100 with Age (Int32) i.
func addAges(t *testing.T, c *aztables.Client, n int) {
	t.Helper()
	for from := 0; from < n; from += 100 {
		var acts []aztables.TransactionAction
		for i := from; i < min(n, from+100); i++ {
			acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
				Entity: mustJSON(t, map[string]any{"PartitionKey": fmt.Sprintf("p%d", from/100), "RowKey": fmt.Sprintf("r%03d", i%100), "Age": i})})
		}
		if _, err := c.SubmitTransaction(bg, acts, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsoleIndexHint: beside a query page that examined many rows to
// return few, the console shows the server's hint, and its button opens
// the indexes with the form filled for the property, typed as the results
// show it.
func TestConsoleIndexHint(t *testing.T) {
	t.Parallel()
	e := newIndexConsoleEnv(t)
	c, table := e.newTable()
	addAges(t, c, 120)
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.open("#/t/" + table)
		p.waitText("#loaded-count", "100 entities loaded")
		if p.shown("#index-hint") {
			t.Errorf("a page of all entities shows the hint %q", p.text("#index-hint"))
		}
		p.set("#filter", "Age eq 42")
		p.click("#run-query")
		p.waitText("#loaded-count", "1 entity loaded")
		hint := p.waitText("#index-hint", "would serve")
		if !strings.Contains(hint, "examined 120 rows to return 1 entity") || !strings.Contains(hint, "an index on Age") {
			t.Errorf("hint %q", hint)
		}
		p.click("#index-hint button.index-suggest[data-property=Age]")
		var form struct {
			Open       bool
			Prop, Type string
		}
		if err := json.Unmarshal(p.eval(`({open: document.querySelector('#indexes-panel').open, prop: document.querySelector('#index-property').value, type: document.querySelector('#index-type').value})`), &form); err != nil {
			t.Fatal(err)
		}
		if !form.Open || form.Prop != "Age" || form.Type != "Int32" {
			t.Errorf("the hint's button left the indexes %+v, want open with Age, Int32", form)
		}
		// A query the keys serve has no hint.
		p.set("#filter", "PartitionKey eq 'p1'")
		p.click("#run-query")
		p.waitText("#loaded-count", "20 entities loaded")
		if p.shown("#index-hint") {
			t.Errorf("a partition's page shows the hint %q", p.text("#index-hint"))
		}
	})
}
