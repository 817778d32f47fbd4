package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pgtables/pgtables/httpapi"
)

// The console's flows in a real browser: the page talks to pgtables only
// through the Table REST API, signing in the browser; every check of what
// was written goes through the Go SDK or raw requests, not the page.

func TestConsoleServedFromBinary(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	for _, tc := range []struct {
		path, wantType string
		status         int
	}{
		{"/-/console/", "text/html; charset=utf-8", 200},
		{"/-/console/js/app.js", "text/javascript; charset=utf-8", 200},
		{"/-/console/console.css", "text/css; charset=utf-8", 200},
		{"/-/console/js/missing.js", "", 404},
		{"/-/console/../../devstoreaccount1/Tables", "", 404},
	} {
		resp, err := http.Get(e.baseURL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.wantType != "" && resp.Header.Get("Content-Type") != tc.wantType) {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, tc.wantType)
		}
		if tc.status == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: no content security policy", tc.path)
		}
	}
	// Switched off, the path is nobody's.
	off := newEnv(t)
	resp, err := http.Get(off.baseURL + "/-/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("console off: GET /-/console/ answered %s, want 404", resp.Status)
	}
}

func TestConsoleSignIn(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	tc, table := e.newTable()
	if _, err := tc.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r", "Name": "seen through a SAS"}), nil); err != nil {
		t.Fatal(err)
	}
	p := newPage(t, e, 1280, 800)
	if p == nil {
		return
	}

	t.Run("wrong key shows the 403", func(t *testing.T) {
		p.t = t
		p.open("#/signin")
		p.set("#key-name", httpapi.DevAccount)
		p.set("#key-key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==")
		p.click("#signin-key button[type=submit]")
		msg := p.waitText("#message", "403")
		if !strings.Contains(msg, "AuthenticationFailed") || !strings.Contains(msg, "Server failed to authenticate the request") {
			t.Errorf("message %q, want the service's 403 AuthenticationFailed and its message", msg)
		}
		if p.count("#account option") != 0 {
			t.Errorf("a refused key was kept")
		}
	})
	t.Run("name and key, then sign out", func(t *testing.T) {
		p.t = t
		// By keyboard: Enter in the key field signs in.
		p.open("#/signin")
		p.set("#key-name", httpapi.DevAccount)
		p.set("#key-key", "")
		p.do(chromedp.SendKeys(chromedp.CSS("#key-key"), httpapi.DevKey+kb.Enter))
		p.waitText("#message", "Signed in to "+httpapi.DevAccount)
		p.shot("signin-tables")
		p.waitText("#tables", table)
		p.click("#sign-out")
		p.waitText("#message", "its key is forgotten")
		p.do(chromedp.WaitVisible(chromedp.CSS("#signin-key")))
		if n := p.count("#account option"); n != 0 {
			t.Errorf("%d accounts after sign-out", n)
		}
		var stored string
		if err := json.Unmarshal(p.eval(`JSON.stringify([sessionStorage, localStorage].map((s) => s.getItem('pgtables.console.accounts')))`), &stored); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stored, httpapi.DevKey) {
			t.Errorf("the key is still stored after sign-out: %s", stored)
		}
	})
	t.Run("connection string", func(t *testing.T) {
		p.t = t
		p.open("#/signin")
		p.set("#cs", "DefaultEndpointsProtocol=http;AccountName="+httpapi.DevAccount+";AccountKey="+httpapi.DevKey+";TableEndpoint="+e.svcURL+";")
		p.click("#signin-cs button[type=submit]")
		p.waitText("#message", "Signed in")
		p.waitText("#tables", table)
	})
	t.Run("SAS URL, beside the account", func(t *testing.T) {
		p.t = t
		sas := e.sdkTableSAS(table, aztables.SASPermissions{Read: true}, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		p.open("#/signin")
		p.set("#sas-url", e.svcURL+"/"+table+"?"+sas)
		p.click("#signin-sas button[type=submit]")
		p.waitText("#message", "(SAS: "+table+")")
		if n := p.count("#account option"); n != 2 {
			t.Errorf("%d accounts, want the key's and the SAS's", n)
		}
		p.waitText("#tables", table)
		p.click("#tables a")
		p.waitText("#grid", "seen through a SAS")
	})
}

// consoleEntity is an entity with a property of every EDM type, as typed
// into the editor: name, type, text.
var consoleEntity = [][3]string{
	{"Text", "String", `héllo, "quoted" 'and' ✓`},
	{"Small", "Int32", "-2147483648"},
	{"Big", "Int64", "9223372036854775807"},
	{"Ratio", "Double", "2.5"},
	{"Whole", "Double", "5.0"},
	{"Flag", "Boolean", "false"},
	{"When", "DateTime", "2024-05-01T12:30:00.1234567Z"},
	{"Id", "Guid", "0f8fad5b-d9cb-469f-a165-70867728950e"},
	{"Bytes", "Binary", "AAEC/w=="},
}

// fillEditor types props into the editor's property rows, adding rows.
func (p *page) fillEditor(props [][3]string) {
	p.t.Helper()
	for i, pr := range props {
		if p.count("#ed-props [name=name]") <= i {
			p.click("#ed-add-prop")
		}
		p.eval(fmt.Sprintf(`(() => {
			const at = (n) => document.querySelectorAll('#ed-props [name=' + n + ']')[%d];
			const fire = (el) => { el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); };
			at('name').value = %s; fire(at('name'));
			at('type').value = %s; fire(at('type'));
			at('value').value = %s; fire(at('value'));
			return true; })()`, i, jsString(pr[0]), jsString(pr[1]), jsString(pr[2])))
	}
}

func TestConsoleEntities(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	p := signedInPage(t, e)
	if p == nil {
		return
	}
	table := fmt.Sprintf("console%d", time.Now().UnixNano()%1e9)

	// Create the table in the page.
	p.set("#new-table", table)
	p.click("#create-table")
	p.waitText("#message", "Table "+table+" created")
	p.waitText("#tables", table)
	if !slices.Contains(listTableNames(t, e.service), table) {
		t.Fatalf("table %s not created", table)
	}
	// Entities for the query, added by another client.
	client := e.service.NewClient(table)
	for i := range 20 {
		ent := map[string]any{"PartitionKey": fmt.Sprintf("p%d", i%2), "RowKey": fmt.Sprintf("r%02d", i), "Age": i, "Name": fmt.Sprintf("n%d", i)}
		if _, err := client.AddEntity(bg, mustJSON(t, ent), nil); err != nil {
			t.Fatal(err)
		}
	}
	p.open("#/t/" + table)
	p.waitText("#loaded-count", "20 entities loaded")

	// An invalid value is marked and nothing is written.
	p.click("#add-entity")
	p.set("#ed-pk", "typed")
	p.set("#ed-rk", "all")
	p.fillEditor([][3]string{{"Big", "Int64", "9223372036854775808"}})
	p.click("#ed-save")
	p.waitText("#ed-error", "not valid")
	p.waitText("#ed-props", "an Int64 lies between")
	if r := e.send(rawReq{method: "GET", path: e.entityPath(table, "typed", "all")}); r.status != 404 {
		t.Fatalf("an invalid entity was written: %d", r.status)
	}

	// Every EDM type, read back exactly by another client.
	p.fillEditor(consoleEntity)
	p.shot("editor")
	p.click("#ed-save")
	p.waitText("#message", "inserted")
	_, got := e.getRaw(table, "typed", "all")
	want := map[string]string{
		"Text": `"héllo, \"quoted\" 'and' ✓"`, "Small": "-2147483648",
		"Big": `"9223372036854775807"`, "Big@odata.type": `"Edm.Int64"`,
		"Ratio": "2.5", "Whole": "5.0", "Whole@odata.type": `"Edm.Double"`, "Flag": "false",
		"When": `"2024-05-01T12:30:00.1234567Z"`, "When@odata.type": `"Edm.DateTime"`,
		"Id": `"0f8fad5b-d9cb-469f-a165-70867728950e"`, "Id@odata.type": `"Edm.Guid"`,
		"Bytes": `"AAEC/w=="`, "Bytes@odata.type": `"Edm.Binary"`,
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("stored %s = %s, want %s", k, got[k], v)
		}
	}
	for _, k := range []string{"Ratio@odata.type", "Small@odata.type", "Flag@odata.type", "Text@odata.type"} {
		if _, ok := got[k]; ok {
			t.Errorf("stored entity has %s: the type is not the one typed", k)
		}
	}
	edmEnt, _ := getEDM(t, client, "typed", "all")
	if edmEnt.Properties["Big"] != aztables.EDMInt64(9223372036854775807) || edmEnt.Properties["Small"] != int32(-2147483648) {
		t.Errorf("the Go SDK reads Big=%#v Small=%#v", edmEnt.Properties["Big"], edmEnt.Properties["Small"])
	}
	// The grid shows what it holds with its type.
	p.waitText("#loaded-count", "21 entities loaded")
	for _, pr := range consoleEntity {
		raw := p.eval(fmt.Sprintf(`(() => { const col = [...document.querySelectorAll('#grid th')].findIndex((th) => th.dataset.col === %s);
			const row = document.querySelector('#grid tr[data-pk="typed"]'); const td = row.children[col];
			return [td.textContent, td.dataset.type, document.querySelectorAll('#grid th')[col].querySelector('.type').textContent]; })()`, jsString(pr[0])))
		var cell [3]string
		if err := json.Unmarshal(raw, &cell); err != nil {
			t.Fatal(err)
		}
		if cell[0] != pr[2] || cell[1] != pr[1] {
			t.Errorf("grid shows %s as %q (%s), want %q (%s)", pr[0], cell[0], cell[1], pr[2], pr[1])
		}
	}
	p.shot("grid")

	// The query builder writes the filter; the raw box runs it.
	p.set("#qb-rows .qb-row:nth-child(1) [name=prop]", "Age")
	p.set("#qb-rows .qb-row:nth-child(1) [name=type]", "Int32")
	p.set("#qb-rows .qb-row:nth-child(1) [name=op]", "ge")
	p.set("#qb-rows .qb-row:nth-child(1) [name=value]", "15")
	p.click("#qb-add")
	p.set("#qb-rows .qb-row:nth-child(2) [name=join]", "and")
	p.set("#qb-rows .qb-row:nth-child(2) [name=prop]", "Name")
	p.set("#qb-rows .qb-row:nth-child(2) [name=type]", "String")
	p.set("#qb-rows .qb-row:nth-child(2) [name=op]", "ne")
	p.set("#qb-rows .qb-row:nth-child(2) [name=value]", "n17")
	p.click("#qb-apply")
	var filter string
	if err := json.Unmarshal(p.eval(`document.querySelector('#filter').value`), &filter); err != nil {
		t.Fatal(err)
	}
	if want := "Age ge 15 and Name ne 'n17'"; filter != want {
		t.Errorf("builder wrote %q, want %q", filter, want)
	}
	p.click("#run-query")
	p.waitText("#loaded-count", "4 entities loaded")
	p.shot("query-builder")
	if got := p.rowKeys(); strings.Join(got, " ") != "p0/r16 p0/r18 p1/r15 p1/r19" {
		t.Errorf("builder query found %v", got)
	}

	// A raw $filter, with $select.
	p.set("#filter", "Big eq 9223372036854775807L or Age eq 3")
	p.set("#select", "Big,Age")
	p.click("#run-query")
	p.waitText("#loaded-count", "2 entities loaded")
	if got := p.rowKeys(); strings.Join(got, " ") != "p1/r03 typed/all" {
		t.Errorf("raw filter found %v", got)
	}
	if p.count("#grid th[data-col=Name]") != 0 || p.count("#grid th[data-col=Big]") != 1 {
		t.Errorf("$select did not choose the columns")
	}
	// A filter the service refuses shows its code.
	p.set("#filter", "Age eq")
	p.click("#run-query")
	p.waitText("#message", "400 ")
}

// setProp types value into the editor's property called name.
func (p *page) setProp(name, value string) {
	p.t.Helper()
	p.eval(fmt.Sprintf(`(() => { const n = [...document.querySelectorAll('#ed-props [name=name]')].find((n) => n.value === %s);
		const v = n.nextElementSibling.nextElementSibling; v.value = %s;
		v.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, jsString(name), jsString(value)))
}

// rowKeys returns the grid's rows as "pk/rk", as they show when its box
// is scrolled from the top to the bottom a screen at a time (the grid
// holds only the rows in view); a row never shown is "".
func (p *page) rowKeys() []string {
	p.t.Helper()
	var keys []*string
	if err := json.Unmarshal(p.eval(`(async () => {
		const box = document.querySelector('#grid').closest('.grid-box');
		const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
		const keys = [];
		for (let top = 0; ; top += box.clientHeight) {
			box.scrollTop = top;
			await frame(); await frame();
			for (const r of document.querySelectorAll('#grid tbody tr')) keys[+r.dataset.index] = r.dataset.pk + '/' + r.dataset.rk;
			if (box.scrollTop + box.clientHeight >= box.scrollHeight - 1) break;
		}
		box.scrollTop = 0;
		return Array.from(keys, (k) => k ?? null); })()`), &keys); err != nil {
		p.t.Fatal(err)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		if k != nil {
			out[i] = *k
		}
	}
	return out
}

// batchInsert adds entities of one partition with the SDK, a hundred at a time.
func batchInsert(t *testing.T, c *aztables.Client, ents []map[string]any) {
	t.Helper()
	for i := 0; i < len(ents); i += 100 {
		var actions []aztables.TransactionAction
		for _, ent := range ents[i:min(i+100, len(ents))] {
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: mustJSON(t, ent)})
		}
		if _, err := c.SubmitTransaction(bg, actions, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// insertPages adds 2,500 entities in 25 partitions, their Name markup
// to be shown as text; it returns their keys as "pk/rk", in order.
func insertPages(t *testing.T, c *aztables.Client) []string {
	t.Helper()
	var keys []string
	for pk := range 25 {
		var ents []map[string]any
		for rk := range 100 {
			ents = append(ents, map[string]any{"PartitionKey": fmt.Sprintf("p%02d", pk), "RowKey": fmt.Sprintf("r%03d", rk), "N": pk*100 + rk,
				"Name": fmt.Sprintf("<b>entity %d</b>", pk*100+rk), "Even": rk%2 == 0})
			keys = append(keys, fmt.Sprintf("p%02d/r%03d", pk, rk))
		}
		batchInsert(t, c, ents)
	}
	return keys
}

// TestConsolePaging pages through 2,500 entities a thousand at a time at
// both sizes, and logs how long each page takes from the answer to the
// screen (no timed assertion: the machine's speed varies; see renderTime).
func TestConsolePaging(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	want := insertPages(t, c)
	atSizes(t, e, true, func(t *testing.T, p *page) {
		p.open("#/t/" + table)
		p.waitText("#loaded-count", "100 entities loaded (more available)")
		p.set("#top", "1000")
		first := p.renderTime("#run-query", "1000 entities loaded (more available)")
		next := p.renderTime("#next-page", "2000 entities loaded (more available)")
		last := p.renderTime("#next-page", "2500 entities loaded")
		t.Logf("render times: first page of 1000 %.0f ms, next page of 1000 %.0f ms, last page of 500 %.0f ms", first, next, last)
		if got := p.text("#loaded-count"); strings.Contains(got, "more") {
			t.Errorf("after the last page: %q", got)
		}
		var disabled bool
		if err := json.Unmarshal(p.eval(`document.querySelector('#next-page').disabled`), &disabled); err != nil || !disabled {
			t.Errorf("next page still enabled after the last page")
		}
		if keys := p.rowKeys(); strings.Join(keys, ",") != strings.Join(want, ",") {
			t.Errorf("the grid holds %d rows, not the table in order", len(keys))
		}
		// Values are text, never markup.
		if n := p.count("#grid tbody b"); n != 0 {
			t.Errorf("the grid made %d elements of entity values", n)
		}
		p.eval(`(() => { const box = document.querySelector('.grid-box'); box.scrollTop = box.scrollHeight; return true; })()`)
		if got := p.waitText(`#grid tr[data-pk="p24"][data-rk="r099"]`, "entity 2499"); !strings.Contains(got, "<b>entity 2499</b>") {
			t.Errorf("the last row shows %q", got)
		}
	})
}

func TestConsoleEditConflict(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r", "Status": "new", "Count": 1}), nil); err != nil {
		t.Fatal(err)
	}
	p := signedInPage(t, e)
	if p == nil {
		return
	}
	p.open("#/t/" + table)
	p.waitText("#loaded-count", "1 entity loaded")
	p.click("#grid tr[data-pk=p] button.edit")
	p.do(chromedp.WaitVisible(chromedp.CSS("#editor")))
	p.setProp("Status", "from the console")

	// Another client changes the entity first.
	if _, err := c.UpdateEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r", "Status": "from the SDK", "Count": 2}), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
		t.Fatal(err)
	}
	p.click("#ed-save")
	msg := p.waitText("#ed-conflict", "412")
	if !strings.Contains(msg, "UpdateConditionNotSatisfied") || !strings.Contains(msg, "Nothing was written") {
		t.Errorf("conflict shows %q", msg)
	}
	p.shot("editor-conflict")
	if ent, _ := getEDM(t, c, "p", "r"); ent.Properties["Status"] != "from the SDK" {
		t.Fatalf("the console overwrote the other client's change: %v", ent.Properties)
	}
	// Reload shows the entity as it is now; saving again then works.
	p.click("#ed-reload")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var v string
		if err := json.Unmarshal(p.eval(`[...document.querySelectorAll('#ed-props [name=name]')].find((n) => n.value === 'Status').nextElementSibling.nextElementSibling.value`), &v); err != nil {
			t.Fatal(err)
		}
		if v == "from the SDK" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after reload the editor shows %q", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.setProp("Status", "from the console")
	p.click("#ed-save")
	p.waitText("#message", "replaced")
	ent, _ := getEDM(t, c, "p", "r")
	if ent.Properties["Status"] != "from the console" || ent.Properties["Count"] != int32(2) {
		t.Errorf("after reload and save: %v", ent.Properties)
	}

	// A merge without Count keeps it; a replace without it drops it.
	for _, mode := range []string{"merge", "replace"} {
		p.waitText("#loaded-count", "1 entity loaded")
		p.do(chromedp.WaitNotPresent(chromedp.CSS("#editor")))
		p.click("#grid tr[data-pk=p] button.edit")
		p.do(chromedp.WaitVisible(chromedp.CSS("#editor")))
		p.eval(`(() => { const n = [...document.querySelectorAll('#ed-props [name=name]')].find((n) => n.value === 'Count');
			n.nextElementSibling.nextElementSibling.nextElementSibling.click(); return true; })()`)
		p.setProp("Status", "by "+mode)
		p.set("#ed-mode", mode)
		p.click("#ed-save")
		p.waitText("#message", map[string]string{"merge": "merged", "replace": "replaced"}[mode])
		ent, _ := getEDM(t, c, "p", "r")
		_, kept := ent.Properties["Count"]
		if ent.Properties["Status"] != "by "+mode || kept != (mode == "merge") {
			t.Errorf("after a %s without Count: %v", mode, ent.Properties)
		}
	}
}

func TestConsoleDeleteMany(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	for _, pk := range []string{"a", "b"} {
		var ents []map[string]any
		for rk := range map[string]int{"a": 120, "b": 30}[pk] {
			ents = append(ents, map[string]any{"PartitionKey": pk, "RowKey": fmt.Sprintf("%03d", rk)})
		}
		batchInsert(t, c, ents)
	}
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "keep", "RowKey": "1"}), nil); err != nil {
		t.Fatal(err)
	}
	p := signedInPage(t, e)
	if p == nil {
		return
	}
	p.open("#/t/" + table)
	p.set("#filter", "PartitionKey ne 'keep'")
	p.set("#top", "1000")
	p.click("#run-query")
	p.waitText("#loaded-count", "150 entities loaded")
	p.click("#select-all")
	p.click("#delete-selected")
	p.waitText("#confirm", "Delete 150 entities?")
	p.click("#confirm-ok")
	p.waitText("#message", "Deleted 150 entities.")
	left, _ := listAll(t, c, nil)
	if len(left) != 1 || left[0]["PartitionKey"] != "keep" {
		t.Errorf("after deleting: %v", left)
	}
}

func TestConsoleExportImport(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	_, table := e.newTable()
	// Every type, strings CSV must quote, and entities that lack
	// properties others have.
	for i, body := range []string{
		`{"PartitionKey":"p1","RowKey":"a","S":"plain","I":7,"L":"-9223372036854775808","L@odata.type":"Edm.Int64","D":0.1,"W":3.0,"W@odata.type":"Edm.Double","B":true,` +
			`"T":"1601-01-01T00:00:00.0000001Z","T@odata.type":"Edm.DateTime","G":"c9da6455-213d-42c9-9a79-3e9149a57833","G@odata.type":"Edm.Guid","X":"3q2+7w==","X@odata.type":"Edm.Binary"}`,
		`{"PartitionKey":"p1","RowKey":"b","S":"comma, \"quote\"\nnew line","N":"NaN","N@odata.type":"Edm.Double","E":""}`,
		`{"PartitionKey":"p, 2","RowKey":"'q'","I":-1,"Inf":"-Infinity","Inf@odata.type":"Edm.Double"}`,
	} {
		r := e.send(rawReq{method: "POST", path: e.tablePath(table), body: []byte(body)})
		if r.status != 201 {
			t.Fatalf("insert %d: %d %s", i, r.status, trunc(r.body))
		}
	}
	p := signedInPage(t, e)
	if p == nil {
		return
	}
	p.open("#/t/" + table)
	p.waitText("#loaded-count", "3 entities loaded")
	p.click("#export-json")
	jsonFile := p.download(table + ".json")
	p.click("#export-csv")
	csvFile := p.download(table + ".csv")

	for _, tc := range []struct {
		name string
		data []byte
	}{{"export.json", jsonFile}, {"export.csv", csvFile}} {
		_, into := e.newTable()
		path := filepath.Join(t.TempDir(), tc.name)
		if err := os.WriteFile(path, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		p.open("#/t/" + into)
		p.waitText("#loaded-count", "0 entities loaded")
		p.do(chromedp.SetUploadFiles(chromedp.CSS("#import-file"), []string{path}))
		p.waitText("#message", "Imported 3 entities into "+into)
		if a, b := e.comparable(table), e.comparable(into); a != b {
			t.Errorf("%s imported differs:\n%s\nwant\n%s", tc.name, b, a)
		}
	}
}

// comparable lists a table's entities as JSON, without what a write
// changes (Timestamp, ETag), sorted by key.
func (e *env) comparable(table string) string {
	e.t.Helper()
	r := e.send(rawReq{method: "GET", path: e.tablePath(table) + "()"})
	if r.status != 200 {
		e.t.Fatalf("list %s: %d", table, r.status)
	}
	var lines []string
	for _, m := range rawValue(e.t, r.body) {
		for _, k := range []string{"odata.etag", "Timestamp", "Timestamp@odata.type"} {
			delete(m, k)
		}
		var b bytes.Buffer
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s ", k, m[k])
		}
		lines = append(lines, b.String())
	}
	return strings.Join(lines, "\n")
}

func TestConsoleSAS(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	_, table := e.newTable()
	p := signedInPage(t, e)
	if p == nil {
		return
	}
	p.open("#/sas")
	p.set("#sas-table", table)
	p.click("#sas-perms input[value=a]") // r is on already
	p.set("#sas-spk", "a")
	p.set("#sas-epk", "m")
	p.set("#sas-ip", "127.0.0.1")
	p.click("#sas-generate")
	url := p.waitText("#sas-url-out", "sig=")
	c, err := aztables.NewClientWithNoCredential(url, clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "b", "RowKey": "1"}), nil); err != nil {
		t.Fatalf("add with the generated SAS: %v", err)
	}
	if all, _ := listAll(t, c, nil); len(all) != 1 {
		t.Errorf("query with the generated SAS: %d entities", len(all))
	}
	_, err = c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "z", "RowKey": "1"}), nil)
	wantRespErr(t, err, 403, "AuthorizationFailure")
	_, err = c.DeleteEntity(bg, "b", "1", nil)
	wantRespErr(t, err, 403, "AuthorizationPermissionMismatch")

	// An account SAS: list and create tables.
	p.set("#sas-kind", "account")
	p.click("#sas-perms input[value=l]")
	p.click("#sas-perms input[value=c]")
	p.click("#sas-srt input[value=s]")
	p.click("#sas-generate")
	url = p.waitText("#sas-url-out", "sig=")
	svc, err := aztables.NewServiceClientWithNoCredential(strings.Replace(url, "?", "/?", 1), clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(listTableNames(t, svc), table) {
		t.Errorf("the account SAS does not list %s", table)
	}
	if _, err := svc.CreateTable(bg, table+"x", nil); err != nil {
		t.Errorf("create a table with the account SAS: %v", err)
	}
}

func TestConsoleServiceAndPolicies(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	p := signedInPage(t, e)
	if p == nil {
		return
	}

	// Stored access policies of a table.
	p.waitText("#tables", table)
	p.click(fmt.Sprintf("#tables tr[data-table=%q] button.acl", table))
	p.do(chromedp.WaitVisible(chromedp.CSS("#acl-dialog")))
	p.click("#acl-add")
	p.set("#acl-rows .acl-row:last-child [name=id]", "readers")
	p.set("#acl-rows .acl-row:last-child [name=start]", "2026-01-01T00:00:00Z")
	p.set("#acl-rows .acl-row:last-child [name=expiry]", "2036-01-01T00:00:00Z")
	p.click("#acl-rows .acl-row:last-child [name=perm][value=r]")
	p.click("#acl-save")
	p.waitText("#message", "Saved 1 access policy of "+table)
	acl, err := c.GetAccessPolicy(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(acl.SignedIdentifiers) != 1 || *acl.SignedIdentifiers[0].ID != "readers" || *acl.SignedIdentifiers[0].AccessPolicy.Permission != "r" {
		t.Fatalf("policies after saving: %+v", acl.SignedIdentifiers)
	}

	// And removed again.
	p.click(fmt.Sprintf("#tables tr[data-table=%q] button.acl", table))
	p.do(chromedp.WaitVisible(chromedp.CSS("#acl-rows .acl-row button")))
	p.click("#acl-rows .acl-row button")
	p.click("#acl-save")
	p.waitText("#message", "Saved 0 access policies of "+table)
	if acl, err := c.GetAccessPolicy(bg, nil); err != nil || len(acl.SignedIdentifiers) != 0 {
		t.Fatalf("policies after removing: %v %+v", err, acl.SignedIdentifiers)
	}

	// Tables by prefix, a page at a time; one deleted after confirmation.
	prefix := fmt.Sprintf("pg%d", time.Now().UnixNano()%1e6)
	for i := range 25 {
		if _, err := e.service.CreateTable(bg, fmt.Sprintf("%sx%02d", prefix, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	p.set("#table-prefix", prefix)
	p.set("#tables-top", "20")
	p.click("#tables-search button[type=submit]")
	p.waitText("#tables-count", "20 tables shown")
	p.click("#tables-next")
	p.waitText("#tables-count", "25 tables shown")
	if n := p.count("#tables tbody tr"); n != 25 {
		t.Errorf("%d tables listed for the prefix, want 25", n)
	}
	p.click(fmt.Sprintf("#tables tr[data-table=%q] button.delete-table", prefix+"x07"))
	p.waitText("#confirm", "Delete the table \""+prefix+"x07\"")
	p.click("#confirm-ok")
	p.waitText("#message", "Table "+prefix+"x07 deleted")
	if slices.Contains(listTableNames(t, e.service), prefix+"x07") {
		t.Errorf("the table was not deleted")
	}

	// Service: version, readiness and CORS rules.
	p.open("#/service")
	p.waitText("#readiness", "200 ready")
	p.waitText("#server-version", "pgtables/test")
	p.click("#cors-add")
	p.set("#cors-rules tr:last-child [name=AllowedOrigins]", "https://app.example.com")
	p.set("#cors-rules tr:last-child [name=AllowedMethods]", "GET,PUT")
	p.set("#cors-rules tr:last-child [name=AllowedHeaders]", "x-ms-*")
	p.click("#cors-save")
	p.waitText("#message", "CORS rules saved.")
	props, err := e.service.GetProperties(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(props.Cors) != 1 || *props.Cors[0].AllowedOrigins != "https://app.example.com" || *props.Cors[0].AllowedMethods != "GET,PUT" {
		t.Errorf("CORS rules after saving: %+v", props.Cors)
	}
	// A document the service refuses shows its code.
	p.set("#props-xml", "<StorageServiceProperties><Cors><CorsRule></CorsRule></Cors></StorageServiceProperties>")
	p.click("#props-save")
	p.waitText("#message", "400 ")
}

// TestConsolePhone runs the daily path at a phone's size: nothing wider
// than the screen but the grid, which scrolls in its own box.
func TestConsolePhone(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "r", "A": strings.Repeat("wide ", 40), "B": 1, "C": true}), nil); err != nil {
		t.Fatal(err)
	}
	p := newPage(t, e, 1280, 800)
	if p == nil {
		return
	}
	p.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3)))
	p.signInWithKey()
	p.open("#/t/" + table)
	p.waitText("#loaded-count", "1 entity loaded")
	p.click("#grid button.edit")
	p.do(chromedp.WaitVisible(chromedp.CSS("#editor")))
	p.shot("phone-editor")
	var widths [2]int
	if err := json.Unmarshal(p.eval(`[document.documentElement.scrollWidth, window.innerWidth]`), &widths); err != nil {
		t.Fatal(err)
	}
	if widths[0] > widths[1] {
		t.Errorf("the page is %dpx wide on a %dpx screen", widths[0], widths[1])
	}
}

// TestConsoleInsecureOrigin signs in from an origin that is not a secure
// context (plain http, not loopback by name), where browsers offer no
// WebCrypto: signing must not need it.
func TestConsoleInsecureOrigin(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	_, table := e.newTable()
	p := newPage(t, e, 1280, 800, chromedp.Flag("host-resolver-rules", "MAP console.test 127.0.0.1"))
	if p == nil {
		return
	}
	origin := strings.Replace(e.baseURL, "127.0.0.1", "console.test", 1)
	p.do(chromedp.Navigate(origin+"/-/console/#/signin"), chromedp.WaitVisible(chromedp.CSS("#signin-key")))
	var secure bool
	if err := json.Unmarshal(p.eval(`window.isSecureContext && !!(window.crypto && crypto.subtle)`), &secure); err != nil || secure {
		t.Fatalf("the page is a secure context (%v); this test needs one that is not", err)
	}
	p.set("#key-key", httpapi.DevKey)
	p.click("#signin-key button[type=submit]")
	p.waitText("#tables", table)
}
