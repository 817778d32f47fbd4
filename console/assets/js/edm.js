// The eight EDM types of the Table service: how a value of each is read
// from the wire, checked when typed by hand, written back, and written as
// a $filter literal.

/** TYPES lists the EDM types in the order the editor offers them. */
export const TYPES = ['String', 'Int32', 'Int64', 'Double', 'Boolean', 'DateTime', 'Guid', 'Binary'];

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
// The service keeps 7 fractional digits (100 ns); more cannot be stored.
const DATETIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,7}))?)?Z$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const SYSTEM = new Set(['PartitionKey', 'RowKey', 'Timestamp']);

/** isSystem reports the three properties every entity has. */
export function isSystem(name) {
  return SYSTEM.has(name);
}

/**
 * validate returns an error message for text that is not a value of
 * type, or '' when it is one. text is the value as the editor shows it.
 */
export function validate(type, text) {
  switch (type) {
    case 'String':
      return text.length > 32 * 1024 ? 'a String holds at most 32,768 characters' : '';
    case 'Int32': {
      if (!/^-?\d+$/.test(text)) return 'an Int32 is a whole number';
      const n = Number(text);
      return n < -2147483648 || n > 2147483647 ? 'an Int32 lies between -2147483648 and 2147483647' : '';
    }
    case 'Int64': {
      if (!/^-?\d+$/.test(text)) return 'an Int64 is a whole number';
      const n = BigInt(text);
      return n < INT64_MIN || n > INT64_MAX ? 'an Int64 lies between -9223372036854775808 and 9223372036854775807' : '';
    }
    case 'Double':
      if (['NaN', 'Infinity', '-Infinity'].includes(text)) return '';
      return /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text) && Number.isFinite(Number(text))
        ? '' : 'a Double is a number such as 1.5, -2e10, NaN, Infinity or -Infinity';
    case 'Boolean':
      return text === 'true' || text === 'false' ? '' : 'a Boolean is true or false';
    case 'DateTime': {
      const m = DATETIME.exec(text);
      if (!m) return 'a DateTime is UTC, as 2024-05-01T12:30:00.1234567Z (up to 7 fractional digits)';
      const d = new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0)));
      if (d.getUTCFullYear() !== +m[1] || d.getUTCMonth() !== +m[2] - 1 || d.getUTCDate() !== +m[3] ||
          +m[4] > 23 || +m[5] > 59 || +(m[6] || 0) > 59) {
        return 'not a date and time of the calendar';
      }
      return +m[1] < 1601 ? 'a DateTime of the Table service is not before 1601-01-01' : '';
    }
    case 'Guid':
      return GUID.test(text) ? '' : 'a Guid is written as 8-4-4-4-12 hexadecimal digits';
    case 'Binary':
      if (!BASE64.test(text)) return 'a Binary is written in base64';
      return text.length > 88 * 1024 ? 'a Binary holds at most 64 KiB' : '';
    default:
      return 'unknown type ' + type;
  }
}

/**
 * fromWire reads an entity as the service sends it in JSON (minimal or
 * full metadata) into { etag, props: [{name, type, text}] }, with the
 * system properties first.
 */
export function fromWire(obj) {
  const props = [];
  for (const [name, value] of Object.entries(obj)) {
    if (name.startsWith('odata.') || name.includes('@')) continue;
    const annotated = obj[name + '@odata.type'];
    let type = annotated ? annotated.replace(/^Edm\./, '') : inferType(value);
    if (name === 'Timestamp') type = 'DateTime';
    props.push({ name, type, text: textOf(type, value) });
  }
  const order = (p) => (p.name === 'PartitionKey' ? 0 : p.name === 'RowKey' ? 1 : p.name === 'Timestamp' ? 2 : 3);
  props.sort((a, b) => order(a) - order(b));
  return { etag: obj['odata.etag'] || '', props };
}

function inferType(value) {
  switch (typeof value) {
    case 'boolean':
      return 'Boolean';
    case 'number':
      // pgtables annotates whole Doubles (5.0), so a whole number
      // without an annotation is an Int32.
      return Number.isInteger(value) ? 'Int32' : 'Double';
    default:
      return 'String';
  }
}

function textOf(type, value) {
  if (type === 'Double' && typeof value === 'number') return doubleText(value);
  return String(value);
}

/** doubleText writes a Double so that it reads back as one: 5 as 5.0. */
export function doubleText(n) {
  if (!Number.isFinite(n)) return String(n);
  const s = String(n);
  return /[.eE]/.test(s) ? s : s + '.0';
}

/**
 * toWire writes props ([{name, type, text}], valid) as the JSON object of
 * an insert or update, with a type annotation wherever the JSON value
 * alone would be read as another type.
 */
export function toWire(props) {
  const out = {};
  for (const p of props) {
    if (p.name === 'Timestamp') continue;
    switch (p.type) {
      case 'String':
        out[p.name] = p.text;
        break;
      case 'Int32':
        out[p.name] = Number(p.text);
        break;
      case 'Boolean':
        out[p.name] = p.text === 'true';
        break;
      case 'Double':
        out[p.name] = Number.isFinite(Number(p.text)) ? Number(p.text) : p.text;
        out[p.name + '@odata.type'] = 'Edm.Double';
        break;
      default: // Int64, DateTime, Guid, Binary travel as strings
        out[p.name] = p.text;
        out[p.name + '@odata.type'] = 'Edm.' + p.type;
    }
  }
  return out;
}

/** literal writes a $filter literal of type for text (valid). */
export function literal(type, text) {
  switch (type) {
    case 'String':
      return "'" + text.replace(/'/g, "''") + "'";
    case 'Int32':
      return text;
    case 'Int64':
      return text + 'L';
    case 'Double':
      return doubleText(Number(text));
    case 'Boolean':
      return text;
    case 'DateTime':
      return "datetime'" + text + "'";
    case 'Guid':
      return "guid'" + text + "'";
    case 'Binary': {
      const bin = atob(text);
      let hex = '';
      for (let i = 0; i < bin.length; i++) hex += bin.charCodeAt(i).toString(16).padStart(2, '0');
      return "X'" + hex + "'";
    }
  }
  throw new Error('unknown type ' + type);
}
