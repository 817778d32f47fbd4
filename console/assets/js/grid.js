// The entity grid. A browser takes hundreds of milliseconds to style,
// lay out and paint a table of a thousand rows with a checkbox and a
// button each, and more for every page added, so the grid holds in the
// DOM only the rows in its box's view and a margin around them; padding
// above and below the table stands for the others, so the scroll bar is
// that of all the rows. The columns are fixed in width, measured from the
// text of every loaded row, so they do not change as rows come and go.
// What is selected is kept here, by entity, not in the checkboxes.

const MARGIN = 40; // rows kept beyond each edge of the view
const ESTIMATE = 36; // a row's height in px, until one is measured

import { h, esc } from './dom.js';

/**
 * Grid shows rows (wire objects, in order) under columns; cellsOf(obj)
 * maps a row's property names to {type, text}; onEdit(i) opens row i.
 */
export class Grid {
  constructor(cellsOf, onEdit) {
    this.cellsOf = cellsOf;
    this.rows = [];
    this.cols = [];
    this.widths = []; // px of each column's widest text, cell padding included
    this.picked = new Set();
    this.win = [0, 0]; // rows [start, end) in the DOM
    this.rowH = 0; // a row's height in px, once measured
    this.top = 0; // the box's scrollTop, as its last scroll event saw it
    this.all = h('input', { type: 'checkbox', id: 'select-all', 'aria-label': 'Select all' });
    this.all.addEventListener('change', () => {
      this.picked = this.all.checked ? new Set(this.rows) : new Set();
      for (const cb of this.tbody.querySelectorAll('input[type=checkbox]')) cb.checked = this.all.checked;
    });
    this.colgroup = h('colgroup');
    this.thead = h('thead');
    this.tbody = h('tbody');
    this.table = h('table', { class: 'data', id: 'grid' }, this.colgroup, this.thead, this.tbody);
    this.pad = h('div', { class: 'grid-pad' }, this.table);
    // Focusable, so that keys still scroll when the focused row leaves.
    this.element = h('div', { class: 'scroll grid-box', tabindex: '-1' }, this.pad);
    // Layout is up to date when a scroll event comes: reading scrollTop
    // then costs nothing, where reading it after changing rows would lay
    // them out at once.
    this.element.addEventListener('scroll', () => { this.top = this.element.scrollTop; this.paint(false); }, { passive: true });
    this.tbody.addEventListener('click', (ev) => {
      const b = ev.target.closest('button.edit');
      if (b) onEdit(+b.closest('tr').dataset.index);
    });
    this.tbody.addEventListener('change', (ev) => {
      if (ev.target.type !== 'checkbox') return;
      const obj = this.rows[+ev.target.closest('tr').dataset.index];
      if (ev.target.checked) this.picked.add(obj);
      else this.picked.delete(obj);
      this.syncAll();
    });
  }

  /** setColumns builds the heading for cols of the given types. */
  setColumns(cols, types) {
    this.cols = cols;
    this.colgroup.replaceChildren(h('col', { class: 'pick' }), h('col', { class: 'act' }), ...cols.map(() => h('col')));
    this.thead.replaceChildren(h('tr', { 'aria-rowindex': 1 }, h('th', {}, this.all), h('th', {}),
      cols.map((n) => h('th', { 'data-col': n }, n, h('span', { class: 'type' }, types.get(n))))));
    this.widths = cols.map(() => 0);
    this.setTypes(types);
  }

  /** setTypes shows the columns' types (a type may become mixed). */
  setTypes(types) {
    const r = this.ruler();
    for (const th of this.thead.querySelectorAll('th[data-col]')) {
      const t = types.get(th.dataset.col);
      th.lastChild.textContent = t;
      const j = this.cols.indexOf(th.dataset.col);
      this.widths[j] = Math.max(this.widths[j], r.head(th.dataset.col, t));
    }
  }

  /**
   * show displays rows, which are those shown before with rows from
   * index from on added (0: all new, as after an edit).
   */
  show(rows, from) {
    this.rows = rows;
    if (from === 0) {
      const kept = new Set(rows);
      for (const obj of this.picked) if (!kept.has(obj)) this.picked.delete(obj);
    }
    this.widen(from);
    this.table.setAttribute('aria-rowcount', rows.length + 1);
    // Rows below the view only lengthen the scroll bar.
    if (from === 0 || this.win[1] >= from) this.paint(true);
    else this.pad.style.paddingBottom = (rows.length - this.win[1]) * (this.rowH || ESTIMATE) + 'px';
    this.syncAll();
  }

  /** reset forgets the selection and scrolls to the top, for a new query. */
  reset() {
    this.picked.clear();
    this.top = 0;
    this.element.scrollTop = 0;
  }

  /** replace keeps an edited row selected as it is now stored. */
  replace(old, obj) {
    if (this.picked.delete(old)) this.picked.add(obj);
  }

  /** selected returns the selected rows, in the grid's order. */
  selected() {
    return this.rows.filter((obj) => this.picked.has(obj));
  }

  syncAll() {
    this.all.checked = this.rows.length > 0 && this.picked.size === this.rows.length;
  }

  // ruler measures text as the cells draw it, on a canvas: no layout. A
  // text is as wide as the sum of its characters' advances (each measured
  // once): a thousand rows' texts in a few milliseconds, where measuring
  // each text takes tens; kerning can only make the text narrower.
  ruler() {
    if (!this.measure) {
      const cs = getComputedStyle(this.table);
      const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 14;
      const ctx = document.createElement('canvas').getContext('2d');
      const font = (weight, size) => `${cs.fontStyle} ${weight} ${size} ${cs.fontFamily}`;
      const width = (f) => {
        const advance = new Map();
        return (text) => {
          let w = 0;
          for (const ch of text) {
            let a = advance.get(ch);
            if (a === undefined) {
              ctx.font = f; // costly to set: only for a character not seen
              advance.set(ch, a = ctx.measureText(ch).width);
            }
            w += a;
          }
          return w;
        };
      };
      const body = width(font(cs.fontWeight, cs.fontSize));
      const bold = width(font('bold', cs.fontSize));
      const small = width(font('normal', 0.75 * rem + 'px'));
      // Cells pad .5rem each side; a type label has .3rem of margin and
      // .3rem of padding each side (console.css); 2px for rounding.
      this.measure = {
        cell: (text) => body(text) + rem + 2,
        head: (name, type) => bold(name) + small(type) + 0.9 * rem + rem + 2,
      };
    }
    return this.measure;
  }

  // widen makes each column as wide as the text of rows[from:] needs
  // (up to --cell-max, console.css).
  widen(from) {
    const r = this.ruler();
    const cols = new Map(this.cols.map((n, j) => [n, j]));
    for (let i = from; i < this.rows.length; i++) {
      for (const [n, c] of this.cellsOf(this.rows[i])) {
        const j = cols.get(n);
        if (j !== undefined) this.widths[j] = Math.max(this.widths[j], r.cell(c.text));
      }
    }
    const cs = this.colgroup.children;
    for (let j = 0; j < this.cols.length; j++) cs[j + 2].style.width = `min(var(--cell-max), ${Math.ceil(this.widths[j])}px)`;
  }

  // paint puts in the DOM the rows in view and MARGIN on each side,
  // when those there do not reach MARGIN/2 beyond the view (or always,
  // with force).
  paint(force) {
    const n = this.rows.length;
    const rh = this.rowH || ESTIMATE;
    const first = Math.floor(this.top / rh);
    const seen = Math.ceil(window.innerHeight / rh); // the box is never taller than the screen
    const [s, e] = this.win;
    if (!force && s <= Math.max(0, first - MARGIN / 2) && Math.min(n, first + seen + MARGIN / 2) <= e) return;
    const start = Math.max(0, Math.min(first, n - seen) - MARGIN);
    const end = Math.min(n, first + seen + MARGIN);
    // The focused control goes back to its row, when that row stays.
    const f = document.activeElement;
    const tr = f && f !== this.all && this.tbody.contains(f) ? f.closest('tr') : null;
    let html = '';
    for (let i = start; i < end; i++) html += this.rowHTML(i);
    this.tbody.innerHTML = html;
    this.win = [start, end];
    if (tr) {
      const again = this.tbody.querySelector(`tr[data-index="${tr.dataset.index}"] ${f.matches('button.edit') ? 'button.edit' : 'input'}`);
      (again || this.element).focus({ preventScroll: true });
    }
    this.pad.style.paddingTop = start * rh + 'px';
    this.pad.style.paddingBottom = (n - end) * rh + 'px';
    if (!this.rowH && end > start) requestAnimationFrame(() => this.measureRow());
  }

  // measureRow learns the distance from one row to the next (borders
  // collapse), once per grid, before the frame's layout: the rows are
  // laid out once, with the estimate, and the padding is corrected.
  measureRow() {
    const rs = this.tbody.rows;
    if (this.rowH || !rs.length) return;
    const a = rs[0].getBoundingClientRect();
    this.rowH = (rs.length < 2 ? a.height : (rs[rs.length - 1].getBoundingClientRect().top - a.top) / (rs.length - 1)) || ESTIMATE;
    this.pad.style.paddingTop = this.win[0] * this.rowH + 'px';
    this.pad.style.paddingBottom = (this.rows.length - this.win[1]) * this.rowH + 'px';
  }

  rowHTML(i) {
    const obj = this.rows[i];
    const cells = this.cellsOf(obj);
    let html = `<tr data-index="${i}" aria-rowindex="${i + 2}" data-pk="${esc(obj.PartitionKey)}" data-rk="${esc(obj.RowKey)}">` +
      `<td><input type="checkbox" aria-label="Select row ${i + 1}"${this.picked.has(obj) ? ' checked' : ''}></td>` +
      '<td><button type="button" class="edit">Edit</button></td>';
    for (const n of this.cols) {
      const c = cells.get(n);
      html += c ? `<td title="${esc(c.type + ': ' + c.text)}" data-type="${esc(c.type)}">${esc(c.text)}</td>` : '<td></td>';
    }
    return html + '</tr>';
  }
}
