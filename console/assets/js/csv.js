// CSV as RFC 4180 writes it: fields with a comma, quote or line break are
// quoted, quotes doubled; lines end with CRLF.

/** toCSV writes rows (arrays of strings) as CSV text. */
export function toCSV(rows) {
  return rows.map((r) => r.map(field).join(',')).join('\r\n') + '\r\n';
}

function field(s) {
  return /[",\r\n]/.test(s) || /^\s|\s$/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

/** parseCSV reads CSV text into rows; it throws on an unterminated quote. */
export function parseCSV(text) {
  const rows = [];
  let row = [], f = '', i = 0, quoted = false, any = false;
  if (text.charCodeAt(0) === 0xfeff) i = 1; // a byte order mark
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { f += '"'; i++; }
      else if (c === '"') quoted = false;
      else f += c;
    } else if (c === '"' && f === '') { quoted = true; any = true; }
    else if (c === ',') { row.push(f); f = ''; any = true; }
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      if (any || f !== '') { row.push(f); rows.push(row); }
      row = []; f = ''; any = false;
    } else { f += c; any = true; }
  }
  if (quoted) throw new Error('the CSV ends inside a quoted field');
  if (any || f !== '') { row.push(f); rows.push(row); }
  return rows;
}
