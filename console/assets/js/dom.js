// Small DOM helpers the views share.

const PROPS = new Set(['value', 'checked', 'disabled', 'selected', 'readOnly', 'hidden', 'multiple']);

/** h creates an element; attributes starting with "on" are listeners. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (PROPS.has(k)) el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** esc escapes text for HTML, in content and in quoted attributes. */
export function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESC[c]);
}
