// JSON from an untrusted file, parsed only once its shape is known to be small: JSON.parse of 30 MB of
// `[` once took 1.4 GB and 5 s of the event loop. One linear pass over the bytes bounds nesting, the
// number of values and containers, the members of an object, the items of an array and the length of a
// string; only then does JSON.parse build anything, so what it builds is bounded by those counts.

export interface JsonBounds {
  /** Containers inside containers, the outermost one being 1. */
  maxDepth: number;
  /** Values of every kind (counted as containers opened plus separators), keys included. */
  maxValues: number;
  /** Objects and arrays in all. */
  maxContainers: number;
  /** Members of one object. */
  maxMembers: number;
  /** Items of one array. */
  maxItems: number;
  /** Bytes of one string literal as written, quotes and escapes included. */
  maxStringBytes: number;
  /** Bytes of one object key as written, quotes included. */
  maxKeyBytes: number;
  /** Different object keys in all: V8 gives every new set of keys its own shape, and thousands cost seconds. */
  maxDistinctKeys: number;
}

export type BoundedJsonErrorCode = 'too_deep' | 'too_many' | 'too_long' | 'malformed';

export type BoundedJsonResult = { ok: true; value: unknown } | { ok: false; error: { code: BoundedJsonErrorCode; message: string } };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;
const COLON = 0x3a;

/**
 * Parses UTF-8 JSON whose shape stays within `bounds`, or says which bound it passes (and where) without
 * building anything. Invalid UTF-8 or JSON is `malformed`.
 */
export function parseBoundedJson(bytes: Uint8Array, bounds: JsonBounds): BoundedJsonResult {
  const shape = checkJsonShape(bytes, bounds);
  if (shape) return { ok: false, error: shape };
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { ok: false, error: { code: 'malformed', message: 'is not UTF-8 text' } };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, error: { code: 'malformed', message: 'is not valid JSON' } };
  }
}

/** Whether the string that ended just before `from` is a key: the next byte that is not white space is a colon. */
function isKey(bytes: Uint8Array, from: number): boolean {
  for (let index = from; index < bytes.length; index++) {
    const byte = bytes[index];
    if (byte === COLON) return true;
    // RFC 8259 §2: space, tab, line feed, carriage return.
    if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) return false;
  }
  return false;
}

/** The first bound the bytes pass, as a phrase ("nests deeper than 16 levels (at byte 40)"), or undefined. */
function checkJsonShape(bytes: Uint8Array, bounds: JsonBounds): { code: BoundedJsonErrorCode; message: string } | undefined {
  // Per open container: whether it is an object, and how many separators it has seen.
  const isObject = new Uint8Array(bounds.maxDepth + 1);
  const separators = new Uint32Array(bounds.maxDepth + 1);
  let depth = 0;
  let values = 0;
  let containers = 0;
  const keys = new Set<string>();
  const at = (index: number) => ` (at byte ${index + 1})`;
  for (let index = 0; index < bytes.length; index++) {
    const byte = bytes[index];
    if (byte === QUOTE) {
      const start = index;
      for (index++; index < bytes.length; index++) {
        const inner = bytes[index];
        if (inner === BACKSLASH) index++;
        else if (inner === QUOTE) break;
      }
      const length = index - start + 1;
      if (length > bounds.maxStringBytes) {
        return { code: 'too_long', message: `holds a text of more than ${bounds.maxStringBytes} bytes${at(start)}` };
      }
      if (isKey(bytes, index + 1)) {
        if (length > bounds.maxKeyBytes) return { code: 'too_long', message: `holds a key of more than ${bounds.maxKeyBytes} bytes${at(start)}` };
        keys.add(Buffer.from(bytes.buffer, bytes.byteOffset + start, length).toString('latin1'));
        if (keys.size > bounds.maxDistinctKeys) return { code: 'too_many', message: `holds more than ${bounds.maxDistinctKeys} different keys${at(start)}` };
      }
    } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      depth++;
      if (depth > bounds.maxDepth) return { code: 'too_deep', message: `nests deeper than ${bounds.maxDepth} levels${at(index)}` };
      isObject[depth] = byte === OPEN_OBJECT ? 1 : 0;
      separators[depth] = 0;
      containers++;
      values++;
      if (containers > bounds.maxContainers) return { code: 'too_many', message: `holds more than ${bounds.maxContainers} objects and lists${at(index)}` };
      if (values > bounds.maxValues) return { code: 'too_many', message: `holds more than ${bounds.maxValues} values${at(index)}` };
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
      // An unbalanced close is JSON.parse's to report; it cannot make the counts grow.
      if (depth > 0) depth--;
    } else if (byte === COMMA) {
      values++;
      if (values > bounds.maxValues) return { code: 'too_many', message: `holds more than ${bounds.maxValues} values${at(index)}` };
      if (depth === 0) continue;
      const seen = (separators[depth] ?? 0) + 1;
      separators[depth] = seen;
      const count = seen + 1;
      if (isObject[depth] === 1 && count > bounds.maxMembers) {
        return { code: 'too_many', message: `holds an object of more than ${bounds.maxMembers} members${at(index)}` };
      }
      if (isObject[depth] === 0 && count > bounds.maxItems) {
        return { code: 'too_many', message: `holds a list of more than ${bounds.maxItems} items${at(index)}` };
      }
    }
  }
  return undefined;
}
