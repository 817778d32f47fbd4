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
		p.confirmOpensOnCancel()
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

// TestConsoleTablesListedOnce: a search submitted while another load of
// the list is on its way shows the tables once, those of the last search
// (both answers used to be appended: "2 tables shown" for one table).
func TestConsoleTablesListedOnce(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	_, table := e.newTable()
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.set("#table-prefix", table)
		// Two submits at once; then up to 3 s for a second row to show.
		var rows int
		if err := json.Unmarshal(p.eval(`new Promise((resolve) => {
			const form = document.querySelector('#tables-search');
			form.requestSubmit();
			form.requestSubmit();
			const t0 = performance.now();
			const tick = () => {
				const n = document.querySelectorAll('#tables-body tr').length;
				if (n >= 2 || performance.now() - t0 > 3000) resolve(n); else setTimeout(tick, 20);
			};
			tick();
		})`), &rows); err != nil {
			t.Fatal(err)
		}
		if rows != 1 {
			t.Errorf("%d rows listed for the one table %s", rows, table)
		}
		p.waitText("#tables-count", "1 table shown")
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

// checkboxesBesideLabels fails for each checkbox on the page whose label
// text does not sit right beside it, on its line.
func (p *page) checkboxesBesideLabels(where string) {
	p.t.Helper()
	var far []string
	if err := json.Unmarshal(p.eval(`[...document.querySelectorAll('input[type=checkbox]')].filter((cb) => cb.getClientRects().length).flatMap((cb) => {
		const label = cb.closest('label');
		if (!label) return [cb.name + ': no label'];
		const text = [...label.childNodes].find((n) => n.nodeType === 3 && n.textContent.trim());
		if (!text) return [cb.name + ': no label text'];
		const range = document.createRange(); range.selectNodeContents(text);
		const t = range.getClientRects()[0], b = cb.getBoundingClientRect();
		const gap = t.left - b.right, dy = Math.abs((t.top + t.bottom) / 2 - (b.top + b.bottom) / 2);
		return gap >= 0 && gap < 16 && dy < 8 ? [] : [cb.name + ' ' + cb.value + ': ' + JSON.stringify(text.textContent.trim()) + ' ' + Math.round(gap) + 'px beside, ' + Math.round(dy) + 'px off its line'];
	})`), &far); err != nil {
		p.t.Fatal(err)
	}
	for _, f := range far {
		p.t.Errorf("%s: checkbox %s", where, f)
	}
}

// TestConsoleEditorAndPolicyForms: the keys of a stored entity look and
// act read-only, the editor lists properties as the grid does, stored
// policies keep their headings, whole timestamps and permission boxes,
// and every checkbox has its label beside it.
func TestConsoleEditorAndPolicyForms(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r", "Zed": "z", "alpha": 1, "Mid": true, "Bee": "b"}), nil); err != nil {
		t.Fatal(err)
	}
	const start, expiry = "2026-01-01T00:00:00.1234567Z", "2036-01-01T00:00:00Z"
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.open("#/t/" + table)
		p.waitText("#loaded-count", "1 entity loaded")
		p.click("#grid button.edit")
		p.do(chromedp.WaitVisible(chromedp.CSS("#editor")))
		var ed struct {
			Focus, PKBorder, ValueBorder string
			PKTab                        int
			ReadOnly                     bool
			Editor, Grid                 []string
		}
		if err := json.Unmarshal(p.eval(`(() => ({
			Focus: document.activeElement?.id || document.activeElement?.name || '',
			PKBorder: getComputedStyle(document.querySelector('#ed-pk')).borderTopColor,
			ValueBorder: getComputedStyle(document.querySelector('#ed-props [name=value]')).borderTopColor,
			PKTab: document.querySelector('#ed-pk').tabIndex, ReadOnly: document.querySelector('#ed-pk').readOnly,
			Editor: [...document.querySelectorAll('#ed-props [name=name]')].map((n) => n.value),
			Grid: [...document.querySelectorAll('#grid th[data-col]')].map((th) => th.dataset.col).filter((n) => !['PartitionKey', 'RowKey', 'Timestamp'].includes(n)),
		}))()`), &ed); err != nil {
			t.Fatal(err)
		}
		if !ed.ReadOnly || ed.PKTab >= 0 || ed.PKBorder == ed.ValueBorder || ed.Focus == "ed-pk" || ed.Focus == "ed-rk" {
			t.Errorf("PartitionKey of a stored entity: read-only %v, tab index %d, border %s like a value's %s, first focus %q",
				ed.ReadOnly, ed.PKTab, ed.PKBorder, ed.ValueBorder, ed.Focus)
		}
		if strings.Join(ed.Editor, ",") != strings.Join(ed.Grid, ",") {
			t.Errorf("the editor lists %v, the grid %v", ed.Editor, ed.Grid)
		}
		p.click("#ed-cancel")

		p.open("#/tables")
		p.waitText("#tables", table)
		p.click(fmt.Sprintf("#tables tr[data-table=%q] button.acl", table))
		p.do(chromedp.WaitVisible(chromedp.CSS("#acl-dialog")))
		if p.count("#acl-rows .acl-row") == 0 {
			p.click("#acl-add")
			p.set("#acl-rows .acl-row:last-child [name=id]", "readers")
			p.set("#acl-rows .acl-row:last-child [name=start]", start)
			p.set("#acl-rows .acl-row:last-child [name=expiry]", expiry)
			p.click("#acl-rows .acl-row:last-child [name=perm][value=r]")
			p.click("#acl-rows .acl-row:last-child [name=perm][value=u]")
			p.click("#acl-save")
			p.waitText("#message", "Saved 1 access policy")
			p.click(fmt.Sprintf("#tables tr[data-table=%q] button.acl", table))
			p.do(chromedp.WaitVisible(chromedp.CSS("#acl-rows .acl-row")))
		}
		acl, err := c.GetAccessPolicy(bg, nil)
		if err != nil || len(acl.SignedIdentifiers) != 1 || *acl.SignedIdentifiers[0].AccessPolicy.Permission != "ru" {
			t.Fatalf("stored policies: %v %+v", err, acl)
		}
		row := p.text("#acl-rows .acl-row")
		for _, h := range []string{"Policy id", "Start", "Expiry", "Permissions"} {
			if !strings.Contains(row, h) {
				t.Errorf("a stored policy shows %q, without the heading %s", row, h)
			}
		}
		var times [][3]any
		if err := json.Unmarshal(p.eval(`['start', 'expiry'].map((n) => { const el = document.querySelector('#acl-rows [name=' + n + ']'); return [el.value, el.scrollWidth, el.clientWidth]; })`), &times); err != nil {
			t.Fatal(err)
		}
		for _, tm := range times {
			if tm[0] == "" || tm[1].(float64) > tm[2].(float64) {
				t.Errorf("a timestamp %q is cut off (%v px in %v px)", tm[0], tm[1], tm[2])
			}
		}
		var perms string
		if err := json.Unmarshal(p.eval(`[...document.querySelectorAll('#acl-rows [name=perm]:checked')].map((cb) => cb.value).join('')`), &perms); err != nil {
			t.Fatal(err)
		}
		if perms != "ru" {
			t.Errorf("the stored permissions show as %q boxes, want ru", perms)
		}
		p.checkboxesBesideLabels("policies")
		p.click("#acl-dialog .row:last-child button:last-child")

		p.open("#/signin")
		p.do(chromedp.WaitVisible(chromedp.CSS("#signin-key")))
		p.checkboxesBesideLabels("sign-in")
		p.open("#/sas")
		p.do(chromedp.WaitVisible(chromedp.CSS("#sas-generate")))
		p.checkboxesBesideLabels("table SAS")
		p.set("#sas-kind", "account")
		p.checkboxesBesideLabels("account SAS")
	})
}
