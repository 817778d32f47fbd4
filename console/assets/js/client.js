// A Table REST client for the browser: Shared Key signing or a SAS, the
// operations the console needs, entity group transactions, and SAS
// generation. It speaks only the public protocol.

import { sign } from './hmac.js';

/** VERSION is the x-ms-version the console sends. */
export const VERSION = '2019-02-02';

/** ServiceError is an answer of the service other than success. */
export class ServiceError extends Error {
  constructor(status, code, message) {
    super(message || code || 'HTTP ' + status);
    this.status = status;
    this.code = code || '';
  }
}

/**
 * parseConnectionString reads an Azure Storage connection string into an
 * account ({name, key, sas, endpoint}). A connection string without a
 * TableEndpoint points at this server, path-style.
 */
export function parseConnectionString(s, origin) {
  const f = {};
  for (const part of s.split(';')) {
    const i = part.indexOf('=');
    if (i > 0) f[part.slice(0, i).trim().toLowerCase()] = part.slice(i + 1).trim();
  }
  if (f.usedevelopmentstorage === 'true') {
    f.accountname = 'devstoreaccount1';
    f.accountkey = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
  }
  let endpoint = f.tableendpoint;
  if (!endpoint && f.accountname && f.endpointsuffix) {
    endpoint = (f.defaultendpointsprotocol || 'https') + '://' + f.accountname + '.table.' + f.endpointsuffix;
  }
  const sas = f.sharedaccesssignature ? f.sharedaccesssignature.replace(/^\?/, '') : '';
  let name = f.accountname || '';
  if (!name && endpoint) name = accountOfURL(new URL(endpoint));
  if (!name) throw new Error('The connection string names no account (AccountName or TableEndpoint).');
  if (!f.accountkey && !sas) throw new Error('The connection string has neither AccountKey nor SharedAccessSignature.');
  return { name, key: f.accountkey || '', sas, endpoint: trimSlash(endpoint || origin + '/' + name) };
}

/**
 * parseSASURL reads a SAS URL (https://host/account[/table]?sv=...) into
 * an account; a table in the path limits the console to that table.
 */
export function parseSASURL(s) {
  const u = new URL(s);
  if (!u.searchParams.get('sig')) throw new Error('The URL carries no SAS (no sig parameter).');
  const name = accountOfURL(u);
  const segs = u.pathname.split('/').filter(Boolean);
  const pathStyle = segs[0] === name;
  const rest = pathStyle ? segs.slice(1) : segs;
  const endpoint = u.origin + (pathStyle ? '/' + name : '');
  const table = rest.length ? decodeURIComponent(rest[0]).replace(/\(.*$/, '') : '';
  return { name, key: '', sas: u.search.slice(1), endpoint, table };
}

// accountOfURL finds the account of a service URL: the first label of an
// Azure-style host name, else the first path segment (path-style).
function accountOfURL(u) {
  const seg = u.pathname.split('/').filter(Boolean)[0];
  if (/\.table\./.test(u.hostname)) return u.hostname.split('.')[0];
  if (seg) return decodeURIComponent(seg);
  throw new Error('The URL names no account.');
}

function trimSlash(s) {
  return s.replace(/\/+$/, '');
}

/** escapeKey writes a key for an entity's URL: quotes doubled, all else escaped. */
export function escapeKey(k) {
  return encodeURIComponent(k.replace(/'/g, "''")).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

/** escapeName escapes a table name (or any path segment) for a URL. */
export function escapeName(n) {
  return encodeURIComponent(n).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

/** Client signs and sends the requests of one account. */
export class Client {
  constructor(account) {
    this.account = account;
    this.lastServer = '';
  }

  url(path, query) {
    let q = new URLSearchParams(query || {}).toString().replace(/\+/g, '%20');
    if (this.account.sas) q = q ? q + '&' + this.account.sas : this.account.sas;
    return this.account.endpoint + path + (q ? '?' + q : '');
  }

  // headers returns the request's headers, signed with the account key
  // unless the account signs in with a SAS.
  headers(method, url, contentType, extra) {
    const h = {
      'x-ms-date': new Date().toUTCString(),
      'x-ms-version': VERSION,
      'DataServiceVersion': '3.0',
      'MaxDataServiceVersion': '3.0;NetFx',
      'Accept': 'application/json;odata=minimalmetadata',
      ...extra,
    };
    if (contentType) h['Content-Type'] = contentType;
    if (!this.account.sas) {
      const u = new URL(url);
      const comp = u.searchParams.get('comp');
      const resource = '/' + this.account.name + u.pathname + (comp !== null ? '?comp=' + comp : '');
      const toSign = [method, '', contentType || '', h['x-ms-date'], resource].join('\n');
      h.Authorization = 'SharedKey ' + this.account.name + ':' + sign(this.account.key, toSign);
    }
    return h;
  }

  /**
   * send makes one request and returns the response; an answer of 300 or
   * more becomes a ServiceError carrying the service's code and message.
   */
  async send(method, path, { query, body, contentType, headers, root } = {}) {
    // root: path is at the server's root (pgtables' own APIs), not the
    // endpoint's.
    const url = root ? new URL(this.account.endpoint).origin + path : this.url(path, query);
    const resp = await fetch(url, { method, headers: this.headers(method, url, contentType, headers), body, cache: 'no-store' });
    this.lastServer = resp.headers.get('Server') || this.lastServer;
    if (resp.status >= 300) throw await errorOf(resp);
    return resp;
  }

  async json(method, path, opts) {
    const resp = await this.send(method, path, opts);
    const text = await resp.text();
    return { resp, body: text ? JSON.parse(text) : null };
  }

  /** listTables returns a page of tables whose names start with prefix. */
  async listTables({ prefix, top, next }) {
    const query = {};
    if (prefix) {
      const last = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
      query.$filter = `TableName ge '${prefix.replace(/'/g, "''")}' and TableName lt '${last.replace(/'/g, "''")}'`;
    }
    if (top) query.$top = String(top);
    if (next) query.NextTableName = next;
    const { resp, body } = await this.json('GET', '/Tables', { query });
    return { names: body.value.map((t) => t.TableName), next: resp.headers.get('x-ms-continuation-NextTableName') || '' };
  }

  async createTable(name) {
    await this.send('POST', '/Tables', { body: JSON.stringify({ TableName: name }), contentType: 'application/json', headers: { Prefer: 'return-no-content' } });
  }

  async deleteTable(name) {
    await this.send('DELETE', `/Tables('${escapeKey(name)}')`);
  }

  /** queryEntities returns a page: { entities (wire objects), next }. */
  async queryEntities(table, { filter, select, top, next }) {
    const query = {};
    if (filter) query.$filter = filter;
    if (select) query.$select = select;
    if (top) query.$top = String(top);
    if (next) {
      query.NextPartitionKey = next.pk;
      if (next.rk !== null) query.NextRowKey = next.rk;
    }
    const { resp, body } = await this.json('GET', '/' + escapeName(table) + '()', { query });
    const pk = resp.headers.get('x-ms-continuation-NextPartitionKey');
    // pgtables tells how many rows a page whose filter the keys do not
    // serve examined, and when they were many for what it returned, the
    // properties an index would serve.
    const examined = resp.headers.get('x-pgtables-rows-examined');
    const hint = resp.headers.get('x-pgtables-index-hint');
    return {
      entities: body.value,
      next: pk !== null ? { pk, rk: resp.headers.get('x-ms-continuation-NextRowKey') } : null,
      examined: examined !== null ? +examined : null,
      indexHint: hint ? hint.split(',') : [],
    };
  }

  // Property indexes, a pgtables extension (its index API).

  // Property indexes, a pgtables extension: its index API answers at the
  // server's root, signed with the account key (a SAS cannot use it).

  indexPath(table, name) {
    return `/-/accounts/${encodeURIComponent(this.account.name)}/tables/${encodeURIComponent(table)}/indexes` + (name ? '/' + encodeURIComponent(name) : '');
  }

  /**
   * listIndexes returns the table's indexes: { name, property, type
   * (without "Edm."), afterPartitionKey, state, progress, error }.
   */
  async listIndexes(table) {
    const { body } = await this.json('GET', this.indexPath(table), { root: true });
    return (body.value || []).map((ix) => ({ ...ix, type: String(ix.type).replace(/^Edm\./, '') }));
  }

  /** createIndex declares an index: { property, type (Int32, ...), afterPartitionKey }. */
  async createIndex(table, spec) {
    const body = JSON.stringify({ ...spec, type: 'Edm.' + spec.type });
    await this.send('POST', this.indexPath(table), { body, contentType: 'application/json', root: true });
  }

  async dropIndex(table, name) {
    await this.send('DELETE', this.indexPath(table, name), { root: true });
  }

  // The change feed, a pgtables extension: it answers at the server's
  // root, signed with the account key or with a SAS that reads the table.

  /**
   * readChanges returns the table's changes after cursor ('now', 'oldest'
   * or a change's cursor): { changes, cursor }, waiting up to wait (a Go
   * duration such as '20s') for one; signal aborts it.
   */
  async readChanges(table, { cursor, limit, wait, signal }) {
    const q = new URLSearchParams();
    if (cursor) q.set('cursor', cursor);
    if (limit) q.set('limit', String(limit));
    if (wait) q.set('wait', wait);
    let qs = q.toString();
    if (this.account.sas) qs = qs ? qs + '&' + this.account.sas : this.account.sas;
    const url = new URL(this.account.endpoint).origin +
      `/-/accounts/${encodeURIComponent(this.account.name)}/tables/${encodeURIComponent(table)}/changes` + (qs ? '?' + qs : '');
    const resp = await fetch(url, { headers: this.headers('GET', url, '', { Accept: 'application/json' }), cache: 'no-store', signal });
    if (resp.status >= 300) throw await errorOf(resp);
    return resp.json();
  }

  entityPath(table, pk, rk) {
    return `/${escapeName(table)}(PartitionKey='${escapeKey(pk)}',RowKey='${escapeKey(rk)}')`;
  }

  async getEntity(table, pk, rk) {
    const { resp, body } = await this.json('GET', this.entityPath(table, pk, rk));
    body['odata.etag'] = body['odata.etag'] || resp.headers.get('ETag');
    return body;
  }

  async insertEntity(table, obj) {
    const { body } = await this.json('POST', '/' + escapeName(table), { body: JSON.stringify(obj), contentType: 'application/json' });
    return body;
  }

  /**
   * writeEntity replaces (mode 'replace') or merges (mode 'merge') an
   * entity; with an etag only if it is unchanged, and returns the new ETag.
   */
  async writeEntity(table, obj, mode, etag) {
    const method = mode === 'merge' ? 'MERGE' : 'PUT';
    const headers = etag ? { 'If-Match': etag } : {};
    const resp = await this.send(method, this.entityPath(table, obj.PartitionKey, obj.RowKey), { body: JSON.stringify(obj), contentType: 'application/json', headers });
    return resp.headers.get('ETag');
  }

  async deleteEntity(table, pk, rk, etag) {
    await this.send('DELETE', this.entityPath(table, pk, rk), { headers: { 'If-Match': etag || '*' } });
  }

  /**
   * batch runs operations of one partition as an entity group transaction:
   * ops are {method, pk, rk, body?, etag?}. It throws the failing
   * operation's ServiceError, with its index in the message.
   */
  async batch(table, ops) {
    const b = 'batch_' + crypto.getRandomValues(new Uint32Array(2)).join('');
    const cs = 'changeset_' + crypto.getRandomValues(new Uint32Array(2)).join('');
    const lines = [`--${b}`, `Content-Type: multipart/mixed; boundary=${cs}`, ''];
    ops.forEach((op, i) => {
      const path = op.method === 'POST' ? '/' + escapeName(table) : this.entityPath(table, op.pk, op.rk);
      lines.push(`--${cs}`, 'Content-Type: application/http', 'Content-Transfer-Encoding: binary', '',
        `${op.method} ${this.url(path)} HTTP/1.1`, `Content-ID: ${i + 1}`,
        'Accept: application/json;odata=minimalmetadata', 'DataServiceVersion: 3.0');
      if (op.etag) lines.push(`If-Match: ${op.etag}`);
      if (op.body) {
        const body = JSON.stringify(op.body);
        lines.push('Content-Type: application/json', 'Prefer: return-no-content', `Content-Length: ${new TextEncoder().encode(body).length}`, '', body);
      } else {
        lines.push('', '');
      }
    });
    lines.push(`--${cs}--`, `--${b}--`, '');
    const resp = await this.send('POST', '/$batch', { body: lines.join('\r\n'), contentType: `multipart/mixed; boundary=${b}` });
    const text = await resp.text();
    const statuses = [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => +m[1]);
    const failed = statuses.findIndex((s) => s >= 300);
    if (failed >= 0) {
      const m = /\{[\s\S]*\}/.exec(text.slice(text.indexOf('HTTP/1.1 ' + statuses[failed])));
      let code = '', message = '';
      try {
        const e = JSON.parse(m[0])['odata.error'];
        code = e.code;
        message = e.message.value;
      } catch { /* a body that is not Azure's JSON error */ }
      throw new ServiceError(statuses[failed], code, message || 'The entity group transaction failed.');
    }
    return statuses.length;
  }

  async getACL(table) {
    const resp = await this.send('GET', '/' + escapeName(table), { query: { comp: 'acl' } });
    return parseACL(await resp.text());
  }

  async setACL(table, policies) {
    await this.send('PUT', '/' + escapeName(table), { query: { comp: 'acl' }, body: aclXML(policies), contentType: 'application/xml' });
  }

  async getServiceProperties() {
    const resp = await this.send('GET', '/', { query: { restype: 'service', comp: 'properties' } });
    return resp.text();
  }

  async setServiceProperties(xml) {
    await this.send('PUT', '/', { query: { restype: 'service', comp: 'properties' }, body: xml, contentType: 'application/xml' });
  }
}

async function errorOf(resp) {
  let code = resp.headers.get('x-ms-error-code') || '';
  let message = '';
  const text = await resp.text().catch(() => '');
  try {
    const e = JSON.parse(text)['odata.error'];
    code = e.code || code;
    message = e.message.value;
  } catch {
    const m = /<Message>([\s\S]*?)<\/Message>/.exec(text);
    if (m) message = m[1];
  }
  if (!message && resp.status === 412) message = 'The entity was changed since it was read.';
  return new ServiceError(resp.status, code, message || resp.statusText);
}

/** parseACL reads a SignedIdentifiers document. */
export function parseACL(xml) {
  const doc = new DOMParser().parseFromString(xml, 'application/xml');
  const text = (el, tag) => el.getElementsByTagName(tag)[0]?.textContent || '';
  return [...doc.getElementsByTagName('SignedIdentifier')].map((si) => ({
    id: text(si, 'Id'), start: text(si, 'Start'), expiry: text(si, 'Expiry'), permission: text(si, 'Permission'),
  }));
}

function xmlEscape(s) {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** aclXML writes policies as a SignedIdentifiers document. */
export function aclXML(policies) {
  const parts = ['<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>'];
  for (const p of policies) {
    parts.push('<SignedIdentifier><Id>' + xmlEscape(p.id) + '</Id>');
    if (p.start || p.expiry || p.permission) {
      parts.push('<AccessPolicy>');
      if (p.start) parts.push('<Start>' + xmlEscape(p.start) + '</Start>');
      if (p.expiry) parts.push('<Expiry>' + xmlEscape(p.expiry) + '</Expiry>');
      if (p.permission) parts.push('<Permission>' + xmlEscape(p.permission) + '</Permission>');
      parts.push('</AccessPolicy>');
    }
    parts.push('</SignedIdentifier>');
  }
  parts.push('</SignedIdentifiers>');
  return parts.join('');
}

/**
 * makeSAS signs a table SAS ({table, permissions, start, expiry, ip,
 * protocol, spk, srk, epk, erk, policy}) or an account SAS ({account:
 * true, permissions, services, resourceTypes, ...}) with the account key
 * and returns the query string.
 */
export function makeSAS(account, o) {
  const q = [];
  const add = (k, v) => { if (v) q.push(k + '=' + encodeURIComponent(v)); };
  let toSign;
  if (o.account) {
    toSign = [account.name, o.permissions, 't', o.resourceTypes, o.start || '', o.expiry || '', o.ip || '', o.protocol || '', VERSION, ''].join('\n');
    add('sv', VERSION); add('ss', 't'); add('srt', o.resourceTypes); add('sp', o.permissions);
  } else {
    toSign = [o.permissions || '', o.start || '', o.expiry || '', '/table/' + account.name + '/' + o.table.toLowerCase(), o.policy || '',
      o.ip || '', o.protocol || '', VERSION, o.spk || '', o.srk || '', o.epk || '', o.erk || ''].join('\n');
    add('sv', VERSION); add('tn', o.table); add('sp', o.permissions); add('si', o.policy);
    add('spk', o.spk); add('srk', o.srk); add('epk', o.epk); add('erk', o.erk);
  }
  add('st', o.start); add('se', o.expiry); add('sip', o.ip); add('spr', o.protocol);
  q.push('sig=' + encodeURIComponent(sign(account.key, toSign)));
  return q.join('&');
}
