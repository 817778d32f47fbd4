// The console's views: accounts, tables, entities (grid, query builder,
// editor, import and export), service properties and the SAS generator.
// Views are chosen by the URL's fragment (#/tables, #/t/<table>, ...).

import { Client, ServiceError, parseConnectionString, parseSASURL, makeSAS } from './client.js';
import * as edm from './edm.js';
import { toCSV, parseCSV } from './csv.js';
import { h } from './dom.js';
import { Grid } from './grid.js';

// ---- small DOM helpers ----

const $ = (sel, root = document) => root.querySelector(sel);

function option(value, label, selected) {
  return h('option', { value, selected: !!selected }, label ?? value);
}

// A message belongs to the view it was shown in: route() clears it,
// unless it reports what led to the view being opened (carry).
let carry = false;

function show(text, isError) {
  const m = $('#message');
  m.textContent = text;
  m.className = isError ? 'error' : '';
  m.hidden = !text;
}

/** describe writes an error as the service gave it: status, code, message. */
function describe(err) {
  if (err instanceof ServiceError) return `${err.status} ${err.code}: ${err.message}`.replace(/ : /, ': ');
  return err && err.message ? err.message : String(err);
}

function fail(err) {
  show(describe(err), true);
}

/** busy runs fn with button disabled, reporting its error. */
async function busy(button, fn) {
  if (button) button.disabled = true;
  try {
    await fn();
  } catch (err) {
    fail(err);
  } finally {
    if (button) button.disabled = false;
  }
}

/** confirmDialog asks a question and resolves to true on OK. */
function confirmDialog(text, okLabel) {
  return new Promise((resolve) => {
    const d = h('dialog', { id: 'confirm', 'aria-label': 'Confirm' },
      h('p', {}, text),
      h('div', { class: 'row' },
        h('button', { type: 'button', id: 'confirm-ok', class: 'danger', onclick: () => { d.close(); resolve(true); } }, okLabel || 'OK'),
        h('button', { type: 'button', id: 'confirm-cancel', onclick: () => d.close() }, 'Cancel')));
    d.addEventListener('close', () => { d.remove(); resolve(false); });
    document.body.append(d);
    d.showModal();
    // Enter must not destroy: the safe choice has the focus.
    d.querySelector('#confirm-cancel').focus();
  });
}

function download(name, type, text) {
  const a = h('a', { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

// ---- accounts ----

// Keys stay in the tab (sessionStorage) unless the user asks to remember
// them on the device (localStorage).
const STORE_KEY = 'pgtables.console.accounts';

function loadAccounts() {
  const read = (s) => { try { return JSON.parse(s.getItem(STORE_KEY) || '[]'); } catch { return []; } };
  const byId = new Map();
  for (const a of [...read(localStorage), ...read(sessionStorage)]) byId.set(accountId(a), a);
  return [...byId.values()];
}

function saveAccounts() {
  sessionStorage.setItem(STORE_KEY, JSON.stringify(state.accounts.filter((a) => !a.remember)));
  localStorage.setItem(STORE_KEY, JSON.stringify(state.accounts.filter((a) => a.remember)));
}

function accountId(a) {
  return a.name + ' @ ' + a.endpoint + (a.sas ? ' (SAS' + (a.table ? ': ' + a.table : '') + ')' : '');
}

const state = {
  accounts: loadAccounts(),
  current: sessionStorage.getItem('pgtables.console.current') || '',
  client: null,
};

function currentAccount() {
  return state.accounts.find((a) => accountId(a) === state.current) || state.accounts[0] || null;
}

function useAccount(a) {
  state.current = a ? accountId(a) : '';
  sessionStorage.setItem('pgtables.console.current', state.current);
  state.client = a ? new Client(a) : null;
  renderAccountPicker();
}

function renderAccountPicker() {
  const sel = $('#account');
  const cur = currentAccount();
  sel.replaceChildren(...state.accounts.map((a) => option(accountId(a), accountId(a), a === cur)));
  sel.disabled = state.accounts.length === 0;
  $('#sign-out').disabled = !cur;
}

async function addAccount(a, remember) {
  a.remember = !!remember;
  const c = new Client(a);
  // Prove the credentials before keeping them: a wrong key shows the
  // service's own 403 here.
  if (a.table) await c.queryEntities(a.table, { top: 1 });
  else await c.listTables({ top: 1 });
  state.accounts = state.accounts.filter((x) => accountId(x) !== accountId(a));
  state.accounts.push(a);
  saveAccounts();
  useAccount(a);
}

function signOut() {
  const cur = currentAccount();
  if (!cur) return;
  state.accounts = state.accounts.filter((a) => a !== cur);
  saveAccounts();
  useAccount(state.accounts[0] || null);
  show('Signed out of ' + accountId(cur) + '; its key is forgotten.');
  go(state.accounts.length ? '#/tables' : '#/signin', true);
}

/** count writes n things in words: "1 entity", "2 entities". */
function count(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

// go shows the view of hash, also when it is already the current one;
// with keep, the message shown stays.
function go(hash, keep) {
  carry = !!keep;
  if (location.hash === hash) route();
  else location.hash = hash;
}

// ---- views ----

const views = {
  signin: viewSignIn,
  tables: viewTables,
  t: viewEntities,
  service: viewService,
  sas: viewSAS,
};

function route() {
  if (!carry) show('');
  carry = false;
  const [, name = '', ...rest] = location.hash.replace(/^#/, '').split('/');
  let view = views[name] ? name : 'tables';
  if (!currentAccount() && view !== 'signin') view = 'signin';
  if (!state.client && currentAccount()) useAccount(currentAccount());
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.id === 'nav-' + view || (view === 't' && a.id === 'nav-tables')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  // Each render gets a box of its own: a view still loading when the
  // user moves on writes into a box no longer shown.
  const box = h('div', { class: 'view-' + view });
  $('#view').replaceChildren(box);
  const arg = rest.map(decodeURIComponent).join('/');
  Promise.resolve(views[view](box, arg)).catch((err) => { if (box.isConnected) fail(err); });
}

// Sign in: a connection string, an account name and key, or a SAS URL.
function viewSignIn(main) {
  const remember = () => h('label', {}, h('input', { type: 'checkbox', name: 'remember' }), 'Remember on this device');
  const submit = (form, parse) => async (ev) => {
    ev.preventDefault();
    const btn = form.querySelector('button');
    await busy(btn, async () => {
      await addAccount(parse(), form.querySelector('[name=remember]').checked);
      show('Signed in to ' + state.current + '.');
      go('#/tables', true);
    });
  };
  const cs = h('form', { id: 'signin-cs', class: 'stack' },
    h('fieldset', {}, h('legend', {}, 'Connection string'),
      h('label', {}, 'Connection string', h('textarea', { id: 'cs', name: 'cs', rows: 3, autocomplete: 'off', spellcheck: 'false' })),
      remember(), h('div', {}, h('button', { type: 'submit', class: 'primary' }, 'Sign in'))));
  cs.addEventListener('submit', submit(cs, () => parseConnectionString($('#cs').value.trim(), location.origin)));
  const key = h('form', { id: 'signin-key', class: 'stack' },
    h('fieldset', {}, h('legend', {}, 'Account name and key'),
      h('label', {}, 'Account name', h('input', { id: 'key-name', name: 'name', value: 'devstoreaccount1', autocomplete: 'off' })),
      h('label', {}, 'Account key', h('input', { id: 'key-key', name: 'key', type: 'password', autocomplete: 'off' })),
      h('label', {}, 'Endpoint (empty: this server)', h('input', { id: 'key-endpoint', name: 'endpoint', placeholder: location.origin + '/<account>' })),
      remember(), h('div', {}, h('button', { type: 'submit', class: 'primary' }, 'Sign in'))));
  key.addEventListener('submit', submit(key, () => {
    const name = $('#key-name').value.trim();
    const k = $('#key-key').value.trim();
    if (!name || !k) throw new Error('Give the account name and its key.');
    const endpoint = ($('#key-endpoint').value.trim() || location.origin + '/' + name).replace(/\/+$/, '');
    return { name, key: k, sas: '', endpoint };
  }));
  const sas = h('form', { id: 'signin-sas', class: 'stack' },
    h('fieldset', {}, h('legend', {}, 'SAS URL'),
      h('label', {}, 'A service or table URL with its SAS', h('input', { id: 'sas-url', name: 'url', autocomplete: 'off', placeholder: location.origin + '/devstoreaccount1/mytable?sv=...' })),
      remember(), h('div', {}, h('button', { type: 'submit', class: 'primary' }, 'Sign in'))));
  sas.addEventListener('submit', submit(sas, () => parseSASURL($('#sas-url').value.trim())));
  main.append(h('h1', {}, 'Accounts'),
    state.accounts.length ? h('p', { class: 'muted' }, 'Signed in: ', state.accounts.map(accountId).join(', ')) : h('p', { class: 'muted' }, 'Sign in to an account to browse its tables. Keys stay in this tab unless you ask the console to remember them.'),
    cs, key, sas);
}

// Tables: list with paging and prefix search, create, delete, policies.
async function viewTables(main) {
  const c = state.client;
  const acct = currentAccount();
  const list = h('tbody', { id: 'tables-body' });
  const more = h('button', { type: 'button', id: 'tables-next', disabled: true }, 'Next page');
  const shown = h('span', { id: 'tables-count', class: 'muted' });
  const prefix = h('input', { id: 'table-prefix', type: 'search', placeholder: 'Name starts with', 'aria-label': 'Name starts with' });
  const size = h('select', { id: 'tables-top', 'aria-label': 'Tables per page' }, [20, 100, 1000].map((n) => option(String(n), n + ' per page', n === 100)));
  let next = '';
  const row = (name) => h('tr', { 'data-table': name },
    h('td', {}, h('a', { href: '#/t/' + encodeURIComponent(name) }, name)),
    h('td', {}, h('button', { type: 'button', class: 'acl', onclick: () => policiesDialog(name) }, 'Access policies'), ' ',
      h('button', { type: 'button', class: 'delete-table', onclick: async (ev) => {
        if (!await confirmDialog(`Delete the table "${name}" and all its entities?`, 'Delete table')) return;
        await busy(ev.target, async () => { await c.deleteTable(name); show(`Table ${name} deleted.`); load(false); });
      } }, 'Delete')));
  // A load that starts anew makes the answers of older ones moot: two on
  // their way at once (the first list and a search) must not both show.
  let generation = 0;
  const load = async (append) => {
    const gen = append ? generation : ++generation;
    if (!append) { list.replaceChildren(); next = ''; }
    if (acct.table) { list.append(row(acct.table)); return; }
    const page = await c.listTables({ prefix: prefix.value, top: +size.value, next });
    if (gen !== generation) return;
    list.append(...page.names.map(row));
    next = page.next;
    more.disabled = !next;
    shown.textContent = count(list.children.length, 'table', 'tables') + ' shown';
  };
  more.addEventListener('click', () => { more.disabled = true; busy(null, () => load(true)).finally(() => { more.disabled = !next; }); });
  const search = h('form', { class: 'row', id: 'tables-search' }, prefix, size, h('button', { type: 'submit' }, 'Search'));
  search.addEventListener('submit', (ev) => { ev.preventDefault(); busy(null, () => load(false)); });
  const name = h('input', { id: 'new-table', placeholder: 'New table name', 'aria-label': 'New table name', autocomplete: 'off' });
  const create = h('form', { class: 'row', id: 'create-table-form' }, name, h('button', { type: 'submit', id: 'create-table', class: 'primary' }, 'Create table'));
  create.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy(create.querySelector('button'), async () => {
      await c.createTable(name.value.trim());
      show(`Table ${name.value.trim()} created.`);
      name.value = '';
      await load(false);
    });
  });
  main.append(h('h1', {}, 'Tables'), acct.table ? null : h('div', { class: 'row' }, search, create),
    h('div', { class: 'scroll' }, h('table', { class: 'data', id: 'tables' }, h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, ''))), list)),
    h('div', { class: 'row' }, more, shown));
  await load(false);
}

// policiesDialog views and edits a table's stored access policies.
async function policiesDialog(table) {
  const c = state.client;
  const rows = h('div', { id: 'acl-rows' });
  const addRow = (p) => {
    // Each field keeps its heading once filled; a timestamp shows whole
    // (up to 7 fractional digits); permissions are boxes, as in the SAS
    // generator.
    const time = (name, label) => h('label', { class: 'field' }, label,
      h('input', { name, value: p[name], placeholder: '2024-01-01T00:00:00Z', size: 28, autocomplete: 'off', spellcheck: 'false' }));
    const r = h('div', { class: 'row acl-row' },
      h('label', { class: 'field' }, 'Policy id', h('input', { name: 'id', value: p.id, maxlength: 64, size: 16, autocomplete: 'off' })),
      time('start', 'Start (UTC)'), time('expiry', 'Expiry (UTC)'),
      h('div', { class: 'row', role: 'group', 'aria-label': 'Permissions' }, 'Permissions',
        [['r', 'Query (r)'], ['a', 'Add (a)'], ['u', 'Update (u)'], ['d', 'Delete (d)']].map(([v, l]) =>
          h('label', {}, h('input', { type: 'checkbox', name: 'perm', value: v, checked: (p.permission || '').includes(v) }), l))),
      h('button', { type: 'button', onclick: () => r.remove() }, 'Remove'));
    rows.append(r);
  };
  (await c.getACL(table)).forEach(addRow);
  show('');
  const d = h('dialog', { id: 'acl-dialog', 'aria-label': 'Access policies' },
    h('h2', {}, `Stored access policies of ${table}`),
    h('p', { class: 'muted' }, 'At most five. Permissions: r (query), a (add), u (update), d (delete).'),
    rows,
    h('div', { class: 'row' },
      h('button', { type: 'button', id: 'acl-add', onclick: () => addRow({ id: '', start: '', expiry: '', permission: '' }) }, 'Add policy'),
      h('button', { type: 'button', id: 'acl-save', class: 'primary', onclick: (ev) => busy(ev.target, async () => {
        const policies = [...rows.querySelectorAll('.acl-row')].map((r) => ({
          ...Object.fromEntries(['id', 'start', 'expiry'].map((k) => [k, r.querySelector(`[name=${k}]`).value.trim()])),
          permission: [...r.querySelectorAll('[name=perm]:checked')].map((cb) => cb.value).join(''),
        }));
        await c.setACL(table, policies);
        show(`Saved ${count(policies.length, 'access policy', 'access policies')} of ${table}.`);
        d.close();
      }) }, 'Save'),
      h('button', { type: 'button', onclick: () => d.close() }, 'Close')));
  d.addEventListener('close', () => d.remove());
  document.body.append(d);
  d.showModal();
}

// ---- entities ----

const OPS = [['eq', '='], ['ne', '≠'], ['gt', '>'], ['ge', '≥'], ['lt', '<'], ['le', '≤']];

async function viewEntities(main, table) {
  const c = state.client;
  const loaded = []; // wire objects, in the order the service sent them
  let next = null;
  let lastQuery = null;

  // The query builder writes a $filter into the raw box; the raw box is
  // what runs, so either can be used and the builder's result is visible.
  const qbRows = h('div', { id: 'qb-rows' });
  const columns = h('datalist', { id: 'columns' });
  const addCond = () => {
    const first = qbRows.children.length === 0;
    const r = h('div', { class: 'qb-row' },
      h('select', { name: 'join', 'aria-label': 'And or', disabled: first, hidden: first }, option('and'), option('or')),
      h('input', { name: 'prop', list: 'columns', placeholder: 'Property', 'aria-label': 'Property', onchange: (ev) => {
        // A column of the results has a type: compare as that type.
        const t = types.get(ev.target.value.trim());
        if (t && t !== 'mixed') r.querySelector('[name=type]').value = t;
      } }),
      h('select', { name: 'type', 'aria-label': 'Type' }, edm.TYPES.map((t) => option(t))),
      h('select', { name: 'op', 'aria-label': 'Operator' }, OPS.map(([v, l]) => option(v, l + ' ' + v))),
      h('input', { name: 'value', placeholder: 'Value', 'aria-label': 'Value' }),
      h('button', { type: 'button', 'aria-label': 'Remove condition', onclick: () => { r.remove(); const f = qbRows.firstElementChild; if (f) { f.querySelector('[name=join]').hidden = true; f.querySelector('[name=join]').disabled = true; } } }, '×'));
    qbRows.append(r);
  };
  let built = null; // the builder's last $filter and its conditions
  const buildFilter = () => {
    const parts = [];
    const conds = [];
    for (const r of qbRows.children) {
      const v = (n) => r.querySelector(`[name=${n}]`).value;
      const prop = v('prop').trim();
      if (!prop) continue;
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(prop)) throw new Error(`"${prop}" is not a property name.`);
      const problem = edm.validate(v('type'), v('value'));
      if (problem) throw new Error(`${prop}: ${problem}.`);
      const cond = `${prop} ${v('op')} ${edm.literal(v('type'), v('value'))}`;
      parts.push(parts.length ? `${v('join')} ${cond}` : cond);
      conds.push({ prop, type: v('type') });
    }
    built = { filter: parts.join(' '), conds };
    return built.filter;
  };
  const filter = h('textarea', { id: 'filter', rows: 2, spellcheck: 'false', placeholder: "$filter, e.g. PartitionKey eq 'p1' and Age gt 30", 'aria-label': '$filter' });
  const select = h('input', { id: 'select', placeholder: '$select: Name,Age (empty: all)', 'aria-label': '$select', size: 30 });
  const top = h('select', { id: 'top', 'aria-label': 'Page size' }, [10, 100, 500, 1000].map((n) => option(String(n), n + ' per page', n === 100)));
  const shown = h('span', { id: 'loaded-count', class: 'muted' }, '');
  const nextBtn = h('button', { type: 'button', id: 'next-page', disabled: true }, 'Next page');

  // The grid's columns: the keys and Timestamp, then the others by name;
  // types maps each to its type, or 'mixed'. The grid shows the rows in
  // view (grid.js); its heading is built again only when a page brings a
  // new column.
  let cols = [];
  const types = new Map();
  const parsed = new WeakMap(); // wire object -> its properties by name
  const propsOf = (obj) => {
    let e = parsed.get(obj);
    if (!e) { e = new Map(edm.fromWire(obj).props.map((p) => [p.name, p])); parsed.set(obj, e); }
    return e;
  };
  const grid = new Grid(propsOf, (i) => editorDialog(table, loaded[i], reloadRow(i)));
  // learn adds the types of objs; true when a column is new.
  const learn = (objs) => {
    let added = false;
    for (const obj of objs) {
      for (const p of propsOf(obj).values()) {
        const known = types.get(p.name);
        if (known === undefined) { types.set(p.name, p.type); added = true; } else if (known !== p.type) types.set(p.name, 'mixed');
      }
    }
    return added;
  };
  const renderHead = () => {
    const names = [...types.keys()];
    cols = [...names.filter(edm.isSystem), ...names.filter((n) => !edm.isSystem(n)).sort()];
    columns.replaceChildren(...cols.map((n) => option(n)));
    grid.setColumns(cols, types);
  };
  const renderCount = () => {
    shown.textContent = count(loaded.length, 'entity', 'entities') + ' loaded' + (next ? ' (more available)' : '');
    nextBtn.disabled = !next;
  };
  // renderGrid shows loaded[from:] below the rows shown; from 0 builds
  // the grid anew.
  const renderGrid = (from = 0) => {
    if (from === 0) types.clear();
    if (learn(loaded.slice(from)) || from === 0) {
      from = 0;
      renderHead();
    } else {
      grid.setTypes(types); // a type that became mixed shows in the heading
    }
    grid.show(loaded, from);
    renderCount();
  };
  // reloadRow returns what the editor calls after a write: the row shows
  // the entity as now stored (or goes, once deleted).
  const reloadRow = (i) => async (obj) => {
    if (obj) {
      grid.replace(loaded[i], obj);
      loaded[i] = obj;
    } else loaded.splice(i, 1);
    renderGrid();
  };
  // hintTypes explains an empty answer to the builder's filter when the
  // results before held a compared property with another type: 15 as a
  // String is not the Int32 15.
  let before = new Map();
  const hintTypes = () => {
    if (!built || built.filter !== lastQuery.filter) return;
    const hints = built.conds.filter((cd) => before.has(cd.prop) && before.get(cd.prop) !== 'mixed' && before.get(cd.prop) !== cd.type)
      .map((cd) => `${cd.prop} is ${before.get(cd.prop)} in the results loaded before, and the condition compares it as ${cd.type}.`);
    if (hints.length) show('No entity matched. ' + hints.join(' ') + ' A value matches only a literal of its own type.');
  };
  let generation = 0; // a new query makes the pages of older ones moot
  const runQuery = async (append) => {
    const gen = append ? generation : ++generation;
    if (!append) {
      // The keys are always selected: a row without them could be
      // neither edited nor deleted.
      let sel = select.value.replace(/\s+/g, '');
      if (sel) sel = [...new Set(['PartitionKey', 'RowKey', ...sel.split(',').filter(Boolean)])].join(',');
      lastQuery = { filter: filter.value.trim(), select: sel, top: +top.value };
      before = new Map(types);
      loaded.length = 0;
      next = null;
    }
    const page = await c.queryEntities(table, { ...lastQuery, next: append ? next : null });
    if (gen !== generation) return;
    if (!append) grid.reset();
    const from = loaded.length;
    loaded.push(...page.entities);
    next = page.next;
    renderGrid(from);
    showIndexHint(page);
    if (!append && !loaded.length) hintTypes();
  };
  // The server's hint beside a page that examined many rows to return
  // few: the properties of the filter an index would serve, each a button
  // that fills the index form.
  const indexHint = h('div', { id: 'index-hint', class: 'hint', role: 'note', hidden: true });
  const showIndexHint = (page) => {
    indexHint.hidden = !page.indexHint.length;
    if (indexHint.hidden) return;
    indexHint.replaceChildren(
      `This page examined ${count(page.examined, 'row', 'rows')} to return ${count(page.entities.length, 'entity', 'entities')}: ` +
      `an index on ${page.indexHint.join(' or ')} would serve this query. `,
      ...page.indexHint.map((prop) => h('button', { type: 'button', class: 'index-suggest', 'data-property': prop, onclick: () => indexes.suggest(prop) }, `Index ${prop}…`)));
  };
  const indexes = indexPanel(c, table, types);
  nextBtn.addEventListener('click', () => { nextBtn.disabled = true; busy(null, () => runQuery(true)).finally(() => { nextBtn.disabled = !next; }); });

  const queryForm = h('form', { id: 'query-form' },
    h('fieldset', {}, h('legend', {}, 'Query builder'), qbRows,
      h('div', { class: 'row' },
        h('button', { type: 'button', id: 'qb-add', onclick: addCond }, 'Add condition'),
        h('button', { type: 'button', id: 'qb-apply', onclick: () => { try { filter.value = buildFilter(); show(''); } catch (e) { fail(e); } } }, 'Write $filter'))),
    h('fieldset', {}, h('legend', {}, 'Query'), filter,
      h('div', { class: 'row' }, select, top, h('button', { type: 'submit', id: 'run-query', class: 'primary' }, 'Run query'))));
  queryForm.addEventListener('submit', (ev) => { ev.preventDefault(); busy(queryForm.querySelector('#run-query'), () => runQuery(false)); });
  addCond();

  const importInput = h('input', { type: 'file', id: 'import-file', accept: '.json,.csv,application/json,text/csv', hidden: true, onchange: async (ev) => {
    const file = ev.target.files[0];
    ev.target.value = '';
    if (!file) return;
    await busy(null, async () => {
      const entities = parseImport(file.name, await file.text());
      const n = await writeAll(c, table, entities);
      show(`Imported ${count(n, 'entity', 'entities')} into ${table}.`);
      await runQuery(false);
    });
  } });
  const toolbar = h('div', { class: 'row' }, nextBtn, shown,
    h('button', { type: 'button', id: 'add-entity', class: 'primary', onclick: () => editorDialog(table, null, async (obj) => { if (obj) { loaded.push(obj); renderGrid(loaded.length - 1); } }) }, 'Add entity'),
    h('button', { type: 'button', id: 'delete-selected', class: 'danger', onclick: async (ev) => {
      const picked = grid.selected();
      if (!picked.length) { show('Select the entities to delete first.', true); return; }
      if (!await confirmDialog(`Delete ${count(picked.length, 'entity', 'entities')}?`, 'Delete')) return;
      await busy(ev.target, async () => {
        const n = await deleteAll(c, table, picked);
        show(`Deleted ${count(n, 'entity', 'entities')}.`);
        await runQuery(false);
      });
    } }, 'Delete selected'),
    h('button', { type: 'button', id: 'export-json', onclick: () => download(table + '.json', 'application/json', exportJSON(loaded)) }, 'Export JSON'),
    h('button', { type: 'button', id: 'export-csv', onclick: () => download(table + '.csv', 'text/csv', exportCSV(loaded)) }, 'Export CSV'),
    h('button', { type: 'button', id: 'import', onclick: () => importInput.click() }, 'Import…'), importInput);
  const changes = changesPanel(c, table);
  main.append(h('h1', {}, 'Table ', h('span', { id: 'table-name' }, table)), columns, queryForm, indexes.el, changes, toolbar, indexHint, grid.element);
  await runQuery(false);
}

// ---- property indexes (a pgtables extension) ----

/** progressText describes a build's progress as the index API reports it. */
function progressText(ix) {
  if (ix.state === 'failed') return ix.error || 'failed';
  const p = ix.progress;
  if (ix.state !== 'building' || !p) return '';
  const pct = (done, total) => (total > 0 ? Math.min(100, Math.floor((done * 100) / total)) + '%' : '');
  return [p.phase, pct(p.blocksDone, p.blocksTotal) || pct(p.tuplesDone, p.tuplesTotal)].filter(Boolean).join(': ');
}

/**
 * indexPanel is a table's indexes, folded until opened: the list with
 * each index's state and build progress (refreshed while one builds),
 * a form to declare one and a button to drop each. suggest(prop) opens it
 * with the form filled for prop, typed as the results show it.
 */
function indexPanel(c, table, types) {
  const body = h('tbody', { id: 'indexes-body' });
  const note = h('p', { id: 'indexes-note', class: 'muted' });
  const prop = h('input', { id: 'index-property', list: 'columns', placeholder: 'Property', 'aria-label': 'Indexed property', autocomplete: 'off', required: true });
  const type = h('select', { id: 'index-type', 'aria-label': 'Type of the indexed property' }, edm.TYPES.map((t) => option(t)));
  const afterPK = h('input', { type: 'checkbox', id: 'index-after-pk' });
  let timer = 0;
  const el = h('details', { id: 'indexes-panel' }, h('summary', {}, 'Indexes'));
  const load = async () => {
    clearTimeout(timer);
    const list = await c.listIndexes(table);
    body.replaceChildren(...list.map((ix) => h('tr', { 'data-index': ix.name, 'data-state': ix.state },
      h('td', {}, ix.property), h('td', {}, ix.type), h('td', {}, ix.afterPartitionKey ? 'PartitionKey, then value' : 'value'),
      h('td', { class: 'index-state' }, ix.state), h('td', { class: 'index-progress' }, progressText(ix)),
      h('td', {}, h('button', { type: 'button', class: 'drop-index', onclick: async (ev) => {
        if (!await confirmDialog(`Drop the index on ${ix.property} (${ix.type})? Queries on it will scan the table again.`, 'Drop index')) return;
        await busy(ev.target, async () => { await c.dropIndex(table, ix.name); await load(); show(`Index on ${ix.property} dropped.`); });
      } }, 'Drop')))));
    note.className = 'muted';
    note.textContent = list.length ? '' : 'No indexes: a filter on a property other than the keys reads the whole table (or partition).';
    // While one builds, its state and progress are refreshed.
    if (list.some((ix) => ix.state === 'building')) timer = setTimeout(() => { if (el.isConnected && el.open) busy(null, load); }, 1000);
  };
  // The panel's own failures (a SAS cannot use the index API; a server
  // other than pgtables has none) show in it.
  el.addEventListener('toggle', () => {
    if (!el.open) { clearTimeout(timer); return; }
    load().catch((err) => { note.textContent = describe(err); note.className = 'err'; });
  });
  const form = h('form', { class: 'row', id: 'index-form' }, prop, type,
    h('label', {}, afterPK, 'After PartitionKey'),
    h('button', { type: 'submit', id: 'create-index', class: 'primary' }, 'Create index'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy(form.querySelector('button'), async () => {
      const spec = { property: prop.value.trim(), type: type.value, afterPartitionKey: afterPK.checked };
      await c.createIndex(table, spec);
      prop.value = '';
      // The message comes once the list shows the index.
      await load();
      show(`Index on ${spec.property} (${spec.type}) declared: it builds without blocking writes.`);
    });
  });
  el.append(h('p', { class: 'muted' }, 'Typed indexes on properties serve $filter comparisons of them (a pgtables extension; results stay the same).'),
    h('div', { class: 'scroll' }, h('table', { class: 'data', id: 'indexes' },
      h('thead', {}, h('tr', {}, ['Property', 'Type', 'Order', 'State', 'Progress', ''].map((t) => h('th', {}, t)))), body)),
    note, form);
  const suggest = (name) => {
    prop.value = name;
    const t = types.get(name);
    if (t && t !== 'mixed') type.value = t;
    if (!el.open) el.open = true;
    prop.focus();
  };
  return { el, suggest };
}

// ---- live changes (a pgtables extension) ----

/** MAX_CHANGES is how many changes the panel keeps, the newest. */
const MAX_CHANGES = 200;

/**
 * changesPanel shows the table's changes as they commit, newest first,
 * while the user has it started: a loop of long polls of the change feed
 * (fetch, which can sign, unlike EventSource). It stops on Stop, when
 * the view is left, or on an error other than the server's own (5xx and
 * network failures are tried again). Each change's entity shows on
 * demand.
 */
function changesPanel(c, table) {
  const body = h('tbody', { id: 'changes-body' });
  const status = h('p', { id: 'changes-status', class: 'muted' }, 'Stopped. Start to see each change as it commits, from now on.');
  const toggle = h('button', { type: 'button', id: 'changes-toggle', class: 'primary' }, 'Start');
  const el = h('details', { id: 'changes-panel' }, h('summary', {}, 'Changes'));
  let ctl = null; // the running loop's AbortController
  let seen = 0;
  const stop = (text, isError) => {
    if (ctl) ctl.abort();
    ctl = null;
    toggle.textContent = 'Start';
    status.textContent = text;
    status.className = isError ? 'err' : 'muted';
  };
  const row = (ch) => {
    const entity = h('tr', { class: 'change-entity', hidden: true },
      h('td', { colspan: 5 }, h('pre', {}, ch.entity ? JSON.stringify(ch.entity, null, 2) : '(deleted: no entity)')));
    const show = h('button', { type: 'button', class: 'show-entity', 'aria-expanded': 'false', onclick: () => {
      entity.hidden = !entity.hidden;
      show.setAttribute('aria-expanded', String(!entity.hidden));
      show.textContent = entity.hidden ? 'Entity' : 'Hide';
    } }, 'Entity');
    const time = ch.Timestamp ? new Date(ch.Timestamp) : null;
    const main = h('tr', { class: 'change', 'data-op': ch.op, 'data-txn': ch.txn },
      h('td', { title: ch.Timestamp || '' }, time && !isNaN(time) ? time.toLocaleTimeString() : ''),
      h('td', { class: 'op op-' + ch.op }, ch.op), h('td', {}, ch.PartitionKey), h('td', {}, ch.RowKey), h('td', {}, show));
    return [main, entity];
  };
  const follow = async (mine) => {
    let cursor = 'now';
    let failures = 0;
    while (ctl === mine && el.isConnected) {
      let page;
      try {
        page = await c.readChanges(table, { cursor, wait: '20s', signal: mine.signal });
      } catch (err) {
        if (ctl !== mine) return;
        if (err instanceof ServiceError && err.status < 500) { stop(describe(err), true); return; }
        failures++;
        status.textContent = `${describe(err)}; trying again…`;
        status.className = 'err';
        await new Promise((r) => setTimeout(r, Math.min(10000, 500 * 2 ** failures)));
        continue;
      }
      if (ctl !== mine) return;
      failures = 0;
      cursor = page.cursor;
      for (const ch of page.changes) body.prepend(...row(ch));
      seen += page.changes.length;
      while (body.children.length > 2 * MAX_CHANGES) body.lastElementChild.remove();
      status.className = 'muted';
      status.textContent = `Following: ${count(seen, 'change', 'changes')} since started` +
        (seen > MAX_CHANGES ? `, the newest ${MAX_CHANGES} shown.` : '.');
    }
    if (ctl === mine) stop('Stopped.');
  };
  toggle.addEventListener('click', () => {
    if (ctl) { stop('Stopped.'); return; }
    ctl = new AbortController();
    seen = 0;
    toggle.textContent = 'Stop';
    status.className = 'muted';
    status.textContent = 'Following: no changes since started.';
    follow(ctl);
  });
  el.append(h('p', { class: 'muted' }, 'The committed changes of this table, newest first (a pgtables extension: its change feed).'),
    h('div', { class: 'row' }, toggle, h('button', { type: 'button', id: 'changes-clear', onclick: () => body.replaceChildren() }, 'Clear')),
    status,
    h('div', { class: 'scroll changes-box' }, h('table', { class: 'data', id: 'changes' },
      h('thead', {}, h('tr', {}, ['Time', 'Op', 'PartitionKey', 'RowKey', ''].map((t) => h('th', {}, t)))), body)));
  return el;
}

/**
 * editorDialog adds (obj null) or edits an entity with a typed property
 * editor; done(obj) gets the entity as stored afterwards, or null once it
 * is deleted.
 */
function editorDialog(table, obj, done) {
  const c = state.client;
  const isNew = !obj;
  let etag = obj ? obj['odata.etag'] : '';
  const props = h('div', { class: 'props', id: 'ed-props' });
  // The keys of a stored entity cannot change: shown as text, out of
  // the tab order, so the first focus goes to a value to edit.
  const pk = h('input', { id: 'ed-pk', 'aria-label': 'PartitionKey', readOnly: !isNew, tabindex: isNew ? null : '-1', autocomplete: 'off' });
  const rk = h('input', { id: 'ed-rk', 'aria-label': 'RowKey', readOnly: !isNew, tabindex: isNew ? null : '-1', autocomplete: 'off' });
  const errBox = h('p', { id: 'ed-error', class: 'err', role: 'alert' });
  const conflict = h('div', { id: 'ed-conflict', class: 'conflict', hidden: true });
  const addProp = (p) => {
    const valueInput = () => (p.type === 'Boolean'
      ? h('select', { name: 'value', 'aria-label': 'Value of ' + p.name }, option('true', 'true', p.text === 'true'), option('false', 'false', p.text !== 'true'))
      : h('input', { name: 'value', value: p.text, 'aria-label': 'Value', autocomplete: 'off', spellcheck: 'false' }));
    const name = h('input', { name: 'name', value: p.name, placeholder: 'Property', 'aria-label': 'Property name', autocomplete: 'off' });
    const type = h('select', { name: 'type', 'aria-label': 'Type' }, edm.TYPES.map((t) => option(t, t, t === p.type)));
    let value = valueInput();
    const err = h('div', { class: 'err' });
    const remove = h('button', { type: 'button', 'aria-label': 'Remove property', onclick: () => { for (const el of [name, type, value, remove, err]) el.remove(); } }, '×');
    type.addEventListener('change', () => {
      p.type = type.value;
      p.text = value.value;
      const v = valueInput();
      value.replaceWith(v);
      value = v;
    });
    name._err = type._err = err;
    props.append(name, type, value, remove, err);
  };
  // A mark goes once its value is edited; the next save checks again.
  const unmark = (ev) => {
    const err = ev.target._err || ev.target.previousElementSibling?.previousElementSibling?._err;
    if (err) err.textContent = '';
    errBox.textContent = '';
  };
  props.addEventListener('input', unmark);
  props.addEventListener('change', unmark);
  const fill = (o) => {
    props.replaceChildren();
    if (!o) { addProp({ name: '', type: 'String', text: '' }); return; }
    const e = edm.fromWire(o);
    etag = e.etag;
    // The grid's order: the keys, then the properties by name.
    const rest = e.props.filter((p) => !edm.isSystem(p.name)).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const p of [...e.props.filter((p) => edm.isSystem(p.name)), ...rest]) {
      if (p.name === 'PartitionKey') pk.value = p.text;
      else if (p.name === 'RowKey') rk.value = p.text;
      else if (p.name !== 'Timestamp') addProp(p);
    }
  };
  fill(obj);
  // collect reads the editor, marking each invalid value.
  const collect = () => {
    const out = [{ name: 'PartitionKey', type: 'String', text: pk.value }, { name: 'RowKey', type: 'String', text: rk.value }];
    let bad = 0;
    const seen = new Set();
    const names = props.querySelectorAll('[name=name]');
    for (const n of names) {
      const type = n.nextElementSibling.value;
      const valueEl = n.nextElementSibling.nextElementSibling;
      const err = valueEl.nextElementSibling.nextElementSibling;
      const name = n.value.trim();
      let problem = '';
      if (!name && !valueEl.value) { err.textContent = ''; continue; }
      if (!/^[A-Za-z_][A-Za-z0-9_]{0,254}$/.test(name)) problem = 'a property name is a C# identifier, up to 255 characters';
      else if (edm.isSystem(name) || seen.has(name)) problem = `"${name}" is given twice`;
      else problem = edm.validate(type, valueEl.value);
      err.textContent = problem;
      if (problem) { bad++; valueEl.setAttribute('aria-invalid', 'true'); } else valueEl.removeAttribute('aria-invalid');
      seen.add(name);
      out.push({ name, type, text: valueEl.value });
    }
    if (bad) throw new Error(`${bad} value(s) are not valid; see the marks.`);
    return out;
  };
  const mode = h('select', { id: 'ed-mode', 'aria-label': 'Write mode' }, option('replace', 'Replace (the entity becomes exactly this)'), option('merge', 'Merge (change only these properties)'));
  const save = h('button', { type: 'button', id: 'ed-save', class: 'primary' }, isNew ? 'Insert' : 'Save');
  save.addEventListener('click', async () => {
    errBox.textContent = '';
    conflict.hidden = true;
    save.disabled = true;
    try {
      const body = edm.toWire(collect());
      if (isNew) {
        await c.insertEntity(table, body);
      } else {
        await c.writeEntity(table, body, mode.value, etag);
      }
      const stored = await c.getEntity(table, pk.value, rk.value);
      show(`Entity (${pk.value}, ${rk.value}) ${isNew ? 'inserted' : mode.value === 'merge' ? 'merged' : 'replaced'}.`);
      d.close();
      await done(stored);
    } catch (err) {
      if (err instanceof ServiceError && err.status === 412) {
        conflict.replaceChildren(
          h('strong', {}, 'Conflict: 412 ' + err.code), ' ', err.message,
          h('p', {}, 'Another client changed or deleted this entity after it was loaded. Nothing was written. Reload to see the entity as it is now, then make your change again.'),
          h('button', { type: 'button', id: 'ed-reload', onclick: (ev) => busy(ev.target, async () => {
            const cur = await c.getEntity(table, pk.value, rk.value);
            fill(cur);
            conflict.hidden = true;
            await done(cur);
          }) }, 'Reload entity'));
        conflict.hidden = false;
      } else {
        errBox.textContent = describe(err);
      }
    } finally {
      save.disabled = false;
    }
  });
  const del = isNew ? null : h('button', { type: 'button', id: 'ed-delete', class: 'danger', onclick: async () => {
    if (!await confirmDialog(`Delete the entity (${pk.value}, ${rk.value})?`, 'Delete')) return;
    try {
      await c.deleteEntity(table, pk.value, rk.value, etag);
      show(`Entity (${pk.value}, ${rk.value}) deleted.`);
      d.close();
      await done(null);
    } catch (err) {
      errBox.textContent = describe(err);
    }
  } }, 'Delete');
  const d = h('dialog', { id: 'editor', 'aria-label': 'Entity editor' },
    h('h2', {}, isNew ? `New entity in ${table}` : 'Edit entity'),
    h('div', { class: 'row' }, h('label', {}, 'PartitionKey', pk), h('label', {}, 'RowKey', rk)),
    h('p', { class: 'muted' }, 'Types: Int64 as a whole number; DateTime in UTC with up to 7 fractional digits (2024-05-01T12:30:00.1234567Z); Binary in base64.'),
    props,
    h('div', { class: 'row' }, h('button', { type: 'button', id: 'ed-add-prop', onclick: () => addProp({ name: '', type: 'String', text: '' }) }, 'Add property'),
      isNew ? null : mode),
    conflict, errBox,
    h('div', { class: 'row' }, save, del, h('button', { type: 'button', id: 'ed-cancel', onclick: () => d.close() }, 'Close')));
  d.addEventListener('close', () => d.remove());
  document.body.append(d);
  d.showModal();
  (isNew ? pk : props.querySelector('[name=value]') || save).focus();
}

// groupByPartition splits entities into groups of one partition of at
// most 100, the limit of an entity group transaction.
function groupByPartition(entities) {
  const by = new Map();
  for (const e of entities) {
    if (!by.has(e.PartitionKey)) by.set(e.PartitionKey, []);
    by.get(e.PartitionKey).push(e);
  }
  const groups = [];
  for (const list of by.values()) {
    for (let i = 0; i < list.length; i += 100) groups.push(list.slice(i, i + 100));
  }
  return groups;
}

// deleteAll deletes entities (each still at its loaded ETag) with one
// entity group transaction per partition and hundred.
async function deleteAll(c, table, entities) {
  let n = 0;
  for (const g of groupByPartition(entities)) {
    await c.batch(table, g.map((e) => ({ method: 'DELETE', pk: e.PartitionKey, rk: e.RowKey, etag: e['odata.etag'] || '*' })));
    n += g.length;
    show(`Deleted ${n} of ${entities.length}…`);
  }
  return n;
}

// writeAll inserts or replaces entities (wire objects) by transactions.
async function writeAll(c, table, entities) {
  let n = 0;
  for (const g of groupByPartition(entities)) {
    await c.batch(table, g.map((e) => ({ method: 'PUT', pk: e.PartitionKey, rk: e.RowKey, body: e })));
    n += g.length;
    show(`Imported ${n} of ${entities.length}…`);
  }
  return n;
}

// ---- import and export ----

// An export holds each entity's properties with their types: JSON as the
// protocol writes it (with @odata.type annotations), CSV with a
// "<name>@type" column beside each property, as Storage Explorer does.

function exportJSON(loaded) {
  return JSON.stringify(loaded.map((o) => {
    const props = edm.fromWire(o).props;
    return edm.toWire(props);
  }), null, 2) + '\n';
}

function exportCSV(loaded) {
  const names = [];
  const seen = new Set(['PartitionKey', 'RowKey', 'Timestamp']);
  const entities = loaded.map((o) => edm.fromWire(o).props);
  for (const props of entities) for (const p of props) if (!seen.has(p.name)) { seen.add(p.name); names.push(p.name); }
  const header = ['PartitionKey', 'RowKey', 'Timestamp'];
  for (const n of names) header.push(n, n + '@type');
  const rows = entities.map((props) => {
    const by = new Map(props.map((p) => [p.name, p]));
    const row = [by.get('PartitionKey')?.text ?? '', by.get('RowKey')?.text ?? '', by.get('Timestamp')?.text ?? ''];
    for (const n of names) {
      const p = by.get(n);
      row.push(p ? p.text : '', p ? p.type : '');
    }
    return row;
  });
  return toCSV([header, ...rows]);
}

/** parseImport reads an export (JSON or CSV) into wire objects, checked. */
function parseImport(fileName, text) {
  let entities;
  if (/\.json$/i.test(fileName) || /^\s*[[{]/.test(text)) {
    let data = JSON.parse(text);
    if (!Array.isArray(data)) data = data.value || [data];
    entities = data.map((o) => edm.fromWire(o).props);
  } else {
    const rows = parseCSV(text);
    const header = rows.shift() || [];
    if (header[0] !== 'PartitionKey' || header[1] !== 'RowKey') throw new Error('The CSV must begin with the columns PartitionKey,RowKey.');
    const typeCol = new Map(header.map((n, i) => [n, i]));
    entities = rows.map((r) => {
      const props = [];
      header.forEach((n, i) => {
        if (n.endsWith('@type') || n === 'Timestamp') return;
        if (edm.isSystem(n)) { props.push({ name: n, type: 'String', text: r[i] ?? '' }); return; }
        const ti = typeCol.get(n + '@type');
        const type = ti === undefined ? 'String' : r[ti];
        if (!type) return; // the entity lacks this property
        props.push({ name: n, type, text: r[i] ?? '' });
      });
      return props;
    });
  }
  return entities.map((props, i) => {
    for (const p of props) {
      const problem = edm.validate(p.type, p.text);
      if (problem) throw new Error(`Entity ${i + 1}, ${p.name}: ${problem}.`);
    }
    return edm.toWire(props);
  });
}

// ---- service ----

async function viewService(main) {
  const c = state.client;
  const acct = currentAccount();
  const ready = h('output', { id: 'readiness' }, '…');
  const version = h('output', { id: 'server-version' }, '…');
  main.append(h('h1', {}, 'Service'),
    h('fieldset', {}, h('legend', {}, 'Server'),
      h('div', { class: 'row' }, 'Version', version), h('div', { class: 'row' }, 'Readiness', ready)));
  fetch(new URL('/-/ready', location.origin), { cache: 'no-store' })
    .then(async (r) => { ready.textContent = `${r.status} ${(await r.text()).trim()}`; })
    .catch((e) => { ready.textContent = describe(e); });
  if (acct.table) {
    main.append(h('p', { class: 'muted' }, 'Service properties need an account key or an account SAS.'));
    version.textContent = c.lastServer || 'unknown';
    return;
  }
  const xml = await c.getServiceProperties();
  version.textContent = c.lastServer || 'unknown';
  const doc = new DOMParser().parseFromString(xml, 'application/xml');
  const fields = ['AllowedOrigins', 'AllowedMethods', 'AllowedHeaders', 'ExposedHeaders', 'MaxAgeInSeconds'];
  const rules = h('tbody', { id: 'cors-rules' });
  const addRule = (r) => rules.append(h('tr', { class: 'cors-rule' },
    fields.map((f) => h('td', {}, h('input', { name: f, value: r[f] || '', 'aria-label': f, size: f === 'MaxAgeInSeconds' ? 6 : 18 }))),
    h('td', {}, h('button', { type: 'button', onclick: (ev) => ev.target.closest('tr').remove() }, 'Remove'))));
  for (const el of doc.querySelectorAll('Cors > CorsRule')) {
    addRule(Object.fromEntries(fields.map((f) => [f, el.querySelector(f)?.textContent || ''])));
  }
  const raw = h('textarea', { id: 'props-xml', rows: 14, spellcheck: 'false', 'aria-label': 'Service properties XML', value: xml });
  const saveCors = h('button', { type: 'button', id: 'cors-save', class: 'primary' }, 'Save CORS rules');
  saveCors.addEventListener('click', () => busy(saveCors, async () => {
    const cur = new DOMParser().parseFromString(await c.getServiceProperties(), 'application/xml');
    const root = cur.documentElement;
    for (const el of [...root.children].filter((e) => e.tagName === 'Cors')) el.remove();
    const cors = cur.createElement('Cors');
    for (const tr of rules.querySelectorAll('tr')) {
      const rule = cur.createElement('CorsRule');
      for (const f of fields) {
        const e = cur.createElement(f);
        e.textContent = tr.querySelector(`[name=${f}]`).value.trim();
        rule.append(e);
      }
      cors.append(rule);
    }
    root.append(cors);
    const text = new XMLSerializer().serializeToString(cur);
    await c.setServiceProperties(text);
    raw.value = await c.getServiceProperties();
    show('CORS rules saved.');
  }));
  const saveRaw = h('button', { type: 'button', id: 'props-save', class: 'primary' }, 'Save properties');
  saveRaw.addEventListener('click', () => busy(saveRaw, async () => {
    await c.setServiceProperties(raw.value);
    show('Service properties saved.');
    go(location.hash, true);
  }));
  main.append(
    h('fieldset', {}, h('legend', {}, 'CORS rules'),
      h('div', { class: 'scroll' }, h('table', { class: 'data' }, h('thead', {}, h('tr', {}, fields.map((f) => h('th', {}, f)), h('th', {}))), rules)),
      h('div', { class: 'row' }, h('button', { type: 'button', id: 'cors-add', onclick: () => addRule({ AllowedMethods: 'GET', MaxAgeInSeconds: '60' }) }, 'Add rule'), saveCors)),
    h('fieldset', {}, h('legend', {}, 'All service properties (logging, metrics, CORS) as XML'), raw, h('div', { class: 'row' }, saveRaw)));
}

// ---- SAS generator ----

function viewSAS(main) {
  const acct = currentAccount();
  main.append(h('h1', {}, 'Shared access signature'));
  if (!acct.key) {
    main.append(h('p', {}, 'Making a SAS needs the account key; this account signed in with a SAS.'));
    return;
  }
  const isoIn = (hours) => new Date(Date.now() + hours * 3600e3).toISOString().replace(/\.\d+Z$/, 'Z');
  const perms = (list) => h('div', { class: 'row', id: 'sas-perms' }, list.map(([v, l]) => h('label', {}, h('input', { type: 'checkbox', name: 'perm', value: v, checked: v === 'r' }), l)));
  const kind = h('select', { id: 'sas-kind', 'aria-label': 'Kind' }, option('table', 'Table SAS'), option('account', 'Account SAS'));
  const table = h('input', { id: 'sas-table', placeholder: 'Table', 'aria-label': 'Table' });
  const tablePerms = [['r', 'Query (r)'], ['a', 'Add (a)'], ['u', 'Update (u)'], ['d', 'Delete (d)']];
  const accountPerms = [['r', 'Read (r)'], ['w', 'Write (w)'], ['d', 'Delete (d)'], ['l', 'List (l)'], ['a', 'Add (a)'], ['c', 'Create (c)'], ['u', 'Update (u)']];
  let permBox = perms(tablePerms);
  const rt = h('div', { class: 'row', id: 'sas-srt', hidden: true }, [['s', 'Service (s)'], ['c', 'Container: tables (c)'], ['o', 'Object: entities (o)']]
    .map(([v, l]) => h('label', {}, h('input', { type: 'checkbox', name: 'srt', value: v, checked: v !== 's' }), l)));
  const field = (id, label, value) => h('label', {}, label, h('input', { id, value: value || '', autocomplete: 'off' }));
  const keyRange = h('div', { class: 'row', id: 'sas-range' }, field('sas-spk', 'Start PartitionKey'), field('sas-srk', 'Start RowKey'), field('sas-epk', 'End PartitionKey'), field('sas-erk', 'End RowKey'), field('sas-policy', 'Policy id'));
  kind.addEventListener('change', () => {
    const isTable = kind.value === 'table';
    const np = perms(isTable ? tablePerms : accountPerms);
    permBox.replaceWith(np);
    permBox = np;
    table.hidden = keyRange.hidden = !isTable;
    rt.hidden = isTable;
  });
  const out = h('div', { id: 'sas-out' });
  const gen = h('button', { type: 'button', id: 'sas-generate', class: 'primary' }, 'Generate');
  gen.addEventListener('click', () => {
    try {
      const v = (id) => $('#' + id).value.trim();
      const checked = (root, name) => [...root.querySelectorAll(`[name=${name}]:checked`)].map((c) => c.value).join('');
      const o = {
        account: kind.value === 'account', table: v('sas-table'), permissions: checked(permBox, 'perm'), resourceTypes: checked(rt, 'srt'),
        start: v('sas-start'), expiry: v('sas-expiry'), ip: v('sas-ip'), protocol: $('#sas-protocol').value,
        spk: v('sas-spk'), srk: v('sas-srk'), epk: v('sas-epk'), erk: v('sas-erk'), policy: v('sas-policy'),
      };
      if (!o.account && !o.table) throw new Error('Name the table.');
      if (!o.expiry && !o.policy) throw new Error('Give an expiry (or a policy that has one).');
      for (const t of [o.start, o.expiry]) if (t && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z$/.test(t)) throw new Error(`"${t}" is not a UTC time such as 2030-01-01T00:00:00Z.`);
      const token = makeSAS(acct, o);
      const url = acct.endpoint + (o.account ? '' : '/' + encodeURIComponent(o.table)) + '?' + token;
      out.replaceChildren(
        h('h2', {}, 'SAS token'), h('output', { id: 'sas-token' }, token),
        h('h2', {}, 'URL'), h('output', { id: 'sas-url-out' }, url),
        h('h2', {}, 'Connection string'), h('output', { id: 'sas-cs' }, `TableEndpoint=${acct.endpoint};SharedAccessSignature=${token}`));
      show('');
    } catch (err) {
      fail(err);
    }
  });
  main.append(h('fieldset', { class: 'stack' }, h('legend', {}, 'What it grants'),
    h('div', { class: 'row' }, kind, table), permBox, rt,
    h('div', { class: 'row' }, field('sas-start', 'Start (UTC)', ''), field('sas-expiry', 'Expiry (UTC)', isoIn(24)),
      field('sas-ip', 'IP or range'),
      h('label', {}, 'Protocol', h('select', { id: 'sas-protocol' }, option('https,http', 'https and http'), option('https', 'https only')))),
    keyRange, h('div', {}, gen)), out);
}

// ---- start ----

$('#account').addEventListener('change', (ev) => {
  useAccount(state.accounts.find((a) => accountId(a) === ev.target.value));
  show('');
  go('#/tables');
});
$('#sign-out').addEventListener('click', signOut);
window.addEventListener('hashchange', () => route());
renderAccountPicker();
route();
