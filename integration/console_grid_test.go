package integration

import (
	"encoding/json"
	"fmt"
	"path"
	"testing"
)

// TestConsoleGridHoldsTheRowsInView loads 2,500 entities into the grid at
// both sizes. The page holds only the rows in view and a margin around
// them, yet the box scrolls to the last row, a selection and the focus
// outlive scrolling, and select-all deletes every loaded entity, not only
// those in the page.
func TestConsoleGridHoldsTheRowsInView(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	tables := map[string]string{}
	for _, s := range consoleSizes {
		c, table := e.newTable()
		insertPages(t, c)
		tables[s.name] = table
	}
	atSizes(t, e, true, func(t *testing.T, p *page) {
		table := tables[path.Base(t.Name())]
		p.open("#/t/" + table)
		p.waitText("#loaded-count", "100 entities loaded (more available)")
		p.set("#top", "1000")
		for _, step := range [][2]string{{"#run-query", "1000 entities loaded (more"}, {"#next-page", "2000 entities loaded (more"}, {"#next-page", "2500 entities loaded"}} {
			p.click(step[0])
			p.waitText("#loaded-count", step[1])
		}
		if n := p.count("#grid tbody tr"); n == 0 || n > 200 {
			t.Errorf("the page holds %d rows of 2500", n)
		}

		// The focus stays on its row when scrolling redraws the rows, and
		// a row's selection stays when it scrolls out of the page and back.
		p.click(`#grid tr[data-index="1"] input[type=checkbox]`)
		var focus struct {
			Index   string
			Checked []bool
		}
		if err := json.Unmarshal(p.eval(`(async () => {
			const box = document.querySelector('.grid-box');
			const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
			const rows = document.querySelectorAll('#grid tbody tr');
			const step = rows[1].getBoundingClientRect().top - rows[0].getBoundingClientRect().top;
			document.querySelector('#grid tr[data-index="5"] button.edit').focus();
			box.scrollTop = 40 * step;
			await frame(); await frame();
			const index = document.activeElement.closest('tr')?.dataset.index ?? '';
			box.scrollTop = box.scrollHeight;
			await frame(); await frame();
			box.scrollTop = 0;
			await frame(); await frame();
			const checked = [0, 1, 2].map((i) => document.querySelector('#grid tr[data-index="' + i + '"] input').checked);
			return { Index: index, Checked: checked }; })()`), &focus); err != nil {
			t.Fatal(err)
		}
		if focus.Index != "5" {
			t.Errorf("after scrolling, the focus is on row %q, not on row 5", focus.Index)
		}
		if fmt.Sprint(focus.Checked) != "[false true false]" {
			t.Errorf("after scrolling away and back rows 0-2 are checked: %v", focus.Checked)
		}

		// Scrolled to the bottom, the last row shows inside the box.
		p.eval(`(() => { const box = document.querySelector('.grid-box'); box.scrollTop = box.scrollHeight; return true; })()`)
		p.waitText(`#grid tr[data-pk="p24"][data-rk="r099"]`, "2499")
		var inside bool
		if err := json.Unmarshal(p.eval(`(() => {
			const b = document.querySelector('.grid-box').getBoundingClientRect();
			const r = document.querySelector('#grid tr[data-pk="p24"][data-rk="r099"]').getBoundingClientRect();
			return r.height > 0 && r.top >= b.top && r.bottom <= b.bottom + 1; })()`), &inside); err != nil || !inside {
			t.Errorf("scrolled to the bottom, the last row is not in the box (%v)", err)
		}

		// Select-all picks every loaded entity.
		p.click("#select-all")
		p.click("#delete-selected")
		p.waitText("#confirm", "Delete 2500 entities?")
		p.click("#confirm-ok")
		p.waitText("#message", "Deleted 2500 entities.")
		if left, _ := listAll(t, e.service.NewClient(table), nil); len(left) != 0 {
			t.Errorf("%d entities left after deleting all", len(left))
		}
	})
}
