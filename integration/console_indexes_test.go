package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/chromedp/chromedp"

	"github.com/pgtables/pgtables/console"
	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/store"
	"github.com/pgtables/pgtables/tableapi"
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

// TestConsoleIndexes: a table's indexes through the index API: declared
// from the form (After PartitionKey too), listed with their state until
// ready, dropped after a confirmation that opens on Cancel.
func TestConsoleIndexes(t *testing.T) {
	t.Parallel()
	e := newIndexConsoleEnv(t)
	c, table := e.newTable()
	addAges(t, c, 120)
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.open("#/t/" + table)
		p.waitText("#loaded-count", "100 entities loaded")
		p.click("#indexes-panel summary")
		p.waitText("#indexes-note", "No indexes")
		p.set("#index-property", "Age")
		p.set("#index-type", "Int32")
		p.click("#create-index")
		p.waitText("#message", "Index on Age (Int32) declared")
		p.waitText("#indexes-body", "Age")
		p.set("#index-property", "Name")
		p.set("#index-type", "String")
		p.click("#index-after-pk")
		p.click("#create-index")
		p.waitText("#message", "Index on Name (String) declared")
		// The list refreshes itself while a build runs.
		p.do(chromedp.WaitVisible(chromedp.CSS(`#indexes-body tr[data-state=ready] + tr[data-state=ready]`)))
		rows := p.text("#indexes-body")
		for _, want := range []string{"AgeInt32valueready", "NameStringPartitionKey, then valueready"} {
			if !strings.Contains(strings.ReplaceAll(rows, "\n", ""), want) {
				t.Errorf("indexes %q, want a row %q", rows, want)
			}
		}
		p.click(`#indexes-body tr:first-child button.drop-index`)
		p.waitText("#confirm", "Drop the index on Age")
		p.confirmOpensOnCancel()
		p.click("#confirm-ok")
		p.waitText("#message", "Index on Age dropped")
		if n := p.count("#indexes-body tr"); n != 1 {
			t.Errorf("%d indexes listed after the drop, want 1", n)
		}
		ixs, err := e.indexClient(t).Indexes(bg, table)
		if err != nil {
			t.Fatal(err)
		}
		if len(ixs) != 1 || ixs[0].Property != "Name" || !ixs[0].AfterPartitionKey {
			t.Errorf("the server holds %+v, want the index on Name after PartitionKey", ixs)
		}
		// The next screen size starts without indexes.
		for _, ix := range ixs {
			if err := e.indexClient(t).DropIndex(bg, table, ix.Name); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// indexClient is a protocol client of e's development account, for the
// index API.
func (e *env) indexClient(t *testing.T) *tableapi.Client {
	t.Helper()
	c, err := tableapi.NewClient(e.svcURL, httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// confirmOpensOnCancel fails unless the open confirmation has the focus on
// Cancel, so that Enter does not destroy.
func (p *page) confirmOpensOnCancel() {
	p.t.Helper()
	var focused string
	if err := json.Unmarshal(p.eval(`document.activeElement?.id ?? ''`), &focused); err != nil {
		p.t.Fatal(err)
	}
	if focused != "confirm-cancel" {
		p.t.Errorf("the confirmation opens with the focus on %q, want confirm-cancel", focused)
	}
}
