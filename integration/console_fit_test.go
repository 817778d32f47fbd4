package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The console at a phone's width and a laptop's: what issue 25 found a
// first-time user tripping on.

// widths returns the document's scroll width and the viewport's width.
func (p *page) widths() [2]int {
	p.t.Helper()
	var w [2]int
	if err := json.Unmarshal(p.eval(`[document.documentElement.scrollWidth, window.innerWidth]`), &w); err != nil {
		p.t.Fatal(err)
	}
	return w
}

// shown reports whether the element sel finds takes up room on the page.
func (p *page) shown(sel string) bool {
	p.t.Helper()
	var b bool
	if err := json.Unmarshal(p.eval(fmt.Sprintf(`(() => { const el = document.querySelector(%s);
		if (!el) throw new Error('no element ' + %[1]s); return el.getClientRects().length > 0; })()`, jsString(sel))), &b); err != nil {
		p.t.Fatal(err)
	}
	return b
}

// TestConsoleViewsFitTheScreen opens every view and requires no sideways
// scrolling of the page: what is wider (the grid, the CORS rules) scrolls
// in a box of its own.
func TestConsoleViewsFitTheScreen(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r", "A": strings.Repeat("wide ", 40), "B": 1, "C": true}), nil); err != nil {
		t.Fatal(err)
	}
	atSizes(t, e, true, func(t *testing.T, p *page) {
		for _, v := range []struct{ view, ready string }{
			{"#/signin", "#signin-key"}, {"#/tables", "#tables"}, {"#/t/" + table, "#grid tbody tr"},
			{"#/service", "#cors-add"}, {"#/sas", "#sas-generate"},
		} {
			p.open(v.view)
			p.do(chromedp.WaitVisible(chromedp.CSS(v.ready)))
			if v.view == "#/service" {
				p.click("#cors-add")
			}
			if w := p.widths(); w[0] > w[1] {
				t.Errorf("%s is %dpx wide on a %dpx screen", v.view, w[0], w[1])
			}
			if v.view == "#/sas" {
				p.set("#sas-kind", "account")
				if w := p.widths(); w[0] > w[1] {
					t.Errorf("%s (account SAS) is %dpx wide on a %dpx screen", v.view, w[0], w[1])
				}
			}
		}
	})
}

// TestConsoleSASShowsOnlyItsKind: a table SAS has no resource types, an
// account SAS no key range or policy (it would ignore them).
func TestConsoleSASShowsOnlyItsKind(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	tableOnly := []string{"#sas-table", "#sas-spk", "#sas-srk", "#sas-epk", "#sas-erk", "#sas-policy"}
	accountOnly := []string{"#sas-srt"}
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.open("#/sas")
		p.do(chromedp.WaitVisible(chromedp.CSS("#sas-generate")))
		for _, kind := range []string{"table", "account"} {
			p.set("#sas-kind", kind)
			for _, sel := range append(slices.Clone(tableOnly), accountOnly...) {
				want := slices.Contains(tableOnly, sel) == (kind == "table")
				if got := p.shown(sel); got != want {
					t.Errorf("%s SAS: %s shown %v, want %v", kind, sel, got, want)
				}
			}
		}
	})
}

// TestConsoleConfirmFocusesTheSafeChoice: Enter in a confirmation keeps
// the table.
func TestConsoleConfirmFocusesTheSafeChoice(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	_, table := e.newTable()
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.waitText("#tables", table)
		p.click(fmt.Sprintf("#tables tr[data-table=%q] button.delete-table", table))
		p.waitText("#confirm", "Delete the table")
		var focused string
		if err := json.Unmarshal(p.eval(`document.activeElement?.id ?? ''`), &focused); err != nil {
			t.Fatal(err)
		}
		if focused != "confirm-cancel" {
			t.Errorf("the confirmation opens with the focus on %q, want confirm-cancel", focused)
		}
		p.do(chromedp.KeyEvent(kb.Enter))
		p.do(chromedp.WaitNotPresent(chromedp.CSS("#confirm")))
		if !slices.Contains(listTableNames(t, e.service), table) {
			t.Fatalf("Enter in the confirmation deleted the table")
		}
	})
}

// TestConsoleMessagesStayWithTheirView: a message about one view is gone
// in the next, and in a dialog about something else.
func TestConsoleMessagesStayWithTheirView(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	_, table := e.newTable()
	atSizes(t, e, true, func(t *testing.T, p *page) {
		gone := fmt.Sprintf("gone%d", time.Now().UnixNano()%1e9)
		p.set("#new-table", gone)
		p.click("#create-table")
		p.waitText("#message", "Table "+gone+" created")
		p.click(fmt.Sprintf("#tables tr[data-table=%q] button.delete-table", gone))
		p.click("#confirm-ok")
		p.waitText("#message", "Table "+gone+" deleted")
		p.click(fmt.Sprintf("#tables tr[data-table=%q] button.acl", table))
		p.do(chromedp.WaitVisible(chromedp.CSS("#acl-dialog")))
		if p.shown("#message") {
			t.Errorf("the policies of %s open under %q", table, p.messageNow())
		}
		p.click("#acl-dialog button:last-child")
		p.do(chromedp.WaitNotPresent(chromedp.CSS("#acl-dialog")))
		p.set("#new-table", gone)
		p.click("#create-table")
		p.waitText("#message", "Table "+gone+" created")
		p.open("#/service")
		p.do(chromedp.WaitVisible(chromedp.CSS("#cors-add")))
		if p.shown("#message") {
			t.Errorf("the service page shows %q", p.messageNow())
		}
	})
}

// TestConsoleCountsInWords: one is singular.
func TestConsoleCountsInWords(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r"}), nil); err != nil {
		t.Fatal(err)
	}
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.set("#table-prefix", table)
		p.click("#tables-search button[type=submit]")
		p.waitText("#tables-count", "1 table shown")
		p.open("#/t/" + table)
		if got := p.waitText("#loaded-count", "loaded"); got != "1 entity loaded" {
			t.Errorf("count %q, want \"1 entity loaded\"", got)
		}
	})
}

// TestConsoleQueryBuilderTypes: a condition on a column of the results
// takes the column's type; one typed otherwise that finds nothing says so.
func TestConsoleQueryBuilderTypes(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	for i := range 20 {
		if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": fmt.Sprintf("r%02d", i), "Age": i}), nil); err != nil {
			t.Fatal(err)
		}
	}
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.open("#/t/" + table)
		p.waitText("#loaded-count", "20 entities loaded")
		row := "#qb-rows .qb-row:nth-child(1) "
		p.set(row+"[name=prop]", "Age")
		var typ string
		if err := json.Unmarshal(p.eval(`document.querySelector('#qb-rows [name=type]').value`), &typ); err != nil {
			t.Fatal(err)
		}
		if typ != "Int32" {
			t.Errorf("a condition on the Int32 column Age starts as %s", typ)
		}
		p.set(row+"[name=op]", "ge")
		p.set(row+"[name=value]", "15")
		p.click("#qb-apply")
		p.click("#run-query")
		p.waitText("#loaded-count", "5 entities loaded")
		// Compared as a String, nothing matches; the page says why.
		p.set(row+"[name=type]", "String")
		p.click("#qb-apply")
		p.click("#run-query")
		p.waitText("#loaded-count", "0 entities loaded")
		if msg := p.waitText("#message", "No entity matched"); !strings.Contains(msg, "Age is Int32") || !strings.Contains(msg, "as String") {
			t.Errorf("hint %q", msg)
		}
	})
}
