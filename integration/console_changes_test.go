package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// TestConsoleChanges: a table's Changes panel, once started, shows each
// committed change newest first (op, keys, time; a batch's changes in one
// transaction), the entity on demand and none for a delete, fits a phone's
// width, and shows nothing more once stopped.
func TestConsoleChanges(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c, table := e.newTable()
	atSizes(t, e, true, func(t *testing.T, p *page) {
		pk := strings.ReplaceAll(t.Name(), "/", "-")
		p.open("#/t/" + table)
		p.waitText("#loaded-count", "loaded")
		p.click("#changes-panel summary")
		p.waitText("#changes-status", "Stopped")
		p.click("#changes-toggle")
		p.waitText("#changes-status", "Following")
		// The panel's first request resolves "now": let it be held before
		// writing, or the first change could come before it.
		time.Sleep(500 * time.Millisecond)

		ent := func(rk string, age int) []byte {
			return mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": rk, "Age": age})
		}
		if _, err := c.AddEntity(bg, ent("r1", 1), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UpdateEntity(bg, ent("r1", 2), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SubmitTransaction(bg, []aztables.TransactionAction{
			{ActionType: aztables.TransactionTypeAdd, Entity: ent("r2", 3)},
			{ActionType: aztables.TransactionTypeAdd, Entity: ent("r3", 4)},
		}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.DeleteEntity(bg, pk, "r1", nil); err != nil {
			t.Fatal(err)
		}
		p.waitText("#changes-status", "5 changes since started")
		var rows []struct{ Op, Txn, PK, RK, Time string }
		if err := json.Unmarshal(p.eval(`[...document.querySelectorAll('#changes-body tr.change')].map((r) =>
			({op: r.dataset.op, txn: r.dataset.txn, pk: r.children[2].textContent, rk: r.children[3].textContent, time: r.children[0].textContent}))`), &rows); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.Op+":"+r.RK)
			if r.PK != pk || r.Time == "" {
				t.Errorf("row %+v, want partition %s and a time", r, pk)
			}
		}
		if want := "delete:r1 insert:r3 insert:r2 merge:r1 insert:r1"; strings.Join(got, " ") != want {
			t.Fatalf("changes shown %q, want %q", strings.Join(got, " "), want)
		}
		if rows[1].Txn != rows[2].Txn || rows[1].Txn == rows[0].Txn || rows[1].Txn == rows[3].Txn {
			t.Errorf("transactions %+v: the batch's two changes should share one, alone", rows)
		}

		// The entity on demand: the merged one's, and none for the delete.
		p.click(`#changes-body tr.change[data-op=merge] button.show-entity`)
		entity := p.waitText(`#changes-body tr.change[data-op=merge] + tr.change-entity`, `"Age": 2`)
		if !strings.Contains(entity, `"RowKey": "r1"`) {
			t.Errorf("merged entity %q", entity)
		}
		p.click(`#changes-body tr.change[data-op=delete] button.show-entity`)
		p.waitText(`#changes-body tr.change[data-op=delete] + tr.change-entity`, "no entity")
		if strings.HasSuffix(t.Name(), "1280x800") {
			p.eval(`document.querySelector('#changes-panel').scrollIntoView(), true`)
			p.shot("changes")
		}
		if w := p.widths(); w[0] > w[1] {
			t.Errorf("the page is %d px wide in a viewport of %d", w[0], w[1])
		}

		p.click("#changes-toggle")
		p.waitText("#changes-status", "Stopped")
		if _, err := c.AddEntity(bg, ent("r4", 5), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if n := p.count("#changes-body tr.change"); n != 5 {
			t.Errorf("%d changes shown after Stop and another insert, want 5", n)
		}
	})
}
