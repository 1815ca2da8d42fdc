import { isUtf8 } from 'node:buffer';
import { parse as parseContentType } from 'content-type';
import type { Context } from 'hono';
import type { ServiceError } from '../core/index.ts';
import { toPaneJson } from './pane-json.ts';

// The few error codes the HTTP edge knows, mapped to statuses; the message is already for a person.
export const STATUS: Record<ServiceError['code'], ServiceErrorStatus> = {
  not_found: 404,
  unavailable: 503,
  busy: 409,
  // Nothing to undo or redo, no suggestion to answer: the pane changed meanwhile.
  conflict: 409,
  // The change was made from an older pane (another tab changed it): nothing changed; the answer has the newer pane.
  stale: 409,
  invalid: 422,
  // The store could not write (a full or read-only disk): the message says what to do.
  storage: 503,
  bad_archive: 400,
  too_large: 413,
};

export type ServiceErrorStatus = 400 | 404 | 409 | 413 | 422 | 503;

export function respondError(c: Context, error: ServiceError) {
  return c.json(
    {
      error: error.message,
      ...(error.fields ? { fields: error.fields } : {}),
      ...(error.storageCode ? { code: error.storageCode } : {}),
      ...(error.pane ? { code: error.code, message: error.message, pane: toPaneJson(error.pane) } : {}),
    },
    STATUS[error.code],
  );
}

export type JsonBody = { ok: true; value: unknown } | { ok: false; response: Response };

/**
 * A message instead of what was asked (a refusal, 404, 500): JSON `{ error }` for the API, plain text elsewhere.
 * The message is for a person and says what to do.
 */
export function respondMessage(c: Context, status: 401 | 403 | 404 | 413 | 415 | 500, message: string): Response {
  return isApiPath(c.req.path) ? c.json({ error: message }, status) : c.text(message, status);
}

export function isApiPath(path: string): boolean {
  return path === '/api' || path.startsWith('/api/');
}

/**
 * The media type of the request body, lower-case and without parameters; undefined when there is no
 * Content-Type, null when it cannot be parsed (e.g. `text/plain; application/json`, which browsers send
 * cross-site without asking first and which a substring test would have taken for JSON).
 */
export function readMediaType(c: Context): string | undefined | null {
  const header = c.req.header('content-type');
  // Stryker disable next-line MethodExpression: Node's HTTP parser and the fetch Headers class strip a header value's outer whitespace
  if (header === undefined || header.trim() === '') return undefined;
  try {
    return parseContentType(header).type;
  } catch {
    return null;
  }
}

const FORM_TYPES = ['application/x-www-form-urlencoded', 'multipart/form-data'];

/**
 * The page's writes are forms (htmx sends application/x-www-form-urlencoded, multipart/form-data for a
 * file): those, or no body type at all (a bare POST to Stop), pass; anything else gets 415.
 */
export function refuseNonFormBody(c: Context): Response | undefined {
  const type = readMediaType(c);
  if (type === undefined || (type !== null && FORM_TYPES.includes(type))) return undefined;
  return c.text(
    `Easel's page sends its forms as application/x-www-form-urlencoded or multipart/form-data, and this body was sent as "${c.req.header('content-type')}". For JSON, use the API under /api (docs/API.md).`,
    415,
  );
}

export type FormBody = { ok: true; value: Record<string, string | File> } | { ok: false; response: Response };

/** Reads the page's form body (its type was checked by refuseNonFormBody); a broken one is 400, not 500. */
export async function readFormBody(c: Context): Promise<FormBody> {
  try {
    return { ok: true, value: (await c.req.parseBody()) as Record<string, string | File> };
  } catch {
    return { ok: false, response: c.text('The form could not be read: reload the page and try again.', 400) };
  }
}

/** The `charset` parameter of the request's Content-Type, lower-case; undefined when it has none. */
function readCharset(c: Context): string | undefined {
  try {
    return parseContentType(c.req.header('content-type') ?? '').parameters['charset']?.toLowerCase();
  } catch {
    return undefined;
  }
}

/**
 * Reads a JSON body; a person gets told what was wrong with it rather than a stack trace. JSON is UTF-8
 * (RFC 8259 §8.1): another charset is 415, and bytes that are not UTF-8 are 400 naming where, never
 * silently turned into U+FFFD.
 */
export async function readJsonBody(c: Context): Promise<JsonBody> {
  const sent = c.req.header('content-type');
  if (readMediaType(c) !== 'application/json') {
    const what = sent ? `was sent as "${sent}"` : 'has no Content-Type';
    return { ok: false, response: c.json({ error: `The body ${what}: send it as JSON with the header Content-Type: application/json.` }, 415) };
  }
  const charset = readCharset(c);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return { ok: false, response: c.json({ error: `The body was sent as "${sent}": Easel reads JSON only as UTF-8. Send it as UTF-8, with Content-Type: application/json.` }, 415) };
  }
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  const invalidAt = findInvalidUtf8(bytes);
  if (invalidAt !== undefined) {
    return { ok: false, response: c.json({ error: `The body is not valid UTF-8: byte ${invalidAt + 1} starts no character. Send the JSON as UTF-8.` }, 400) };
  }
  try {
    return { ok: true, value: JSON.parse(new TextDecoder().decode(bytes)) as unknown };
  } catch {
    return { ok: false, response: c.json({ error: 'The body is not valid JSON. Check quotes and commas.' }, 400) };
  }
}

/** The offset of the first byte of the first sequence that is not UTF-8 (RFC 3629 §4), or undefined when all is. */
export function findInvalidUtf8(bytes: Uint8Array): number | undefined {
  if (isUtf8(bytes)) return undefined;
  for (let index = 0; index < bytes.length; ) {
    const length = readUtf8SequenceLength(bytes, index);
    if (length === 0) return index;
    index += length;
  }
  return undefined;
}

/** The length of the well-formed sequence at `index`, or 0 (RFC 3629 §4: no overlong form, surrogate or code point past U+10FFFF). */
function readUtf8SequenceLength(bytes: Uint8Array, index: number): number {
  const first = bytes[index] ?? 0;
  if (first < 0x80) return 1;
  const [length, low, high] =
    first >= 0xc2 && first <= 0xdf ? [2, 0x80, 0xbf]
    : first === 0xe0 ? [3, 0xa0, 0xbf]
    : first === 0xed ? [3, 0x80, 0x9f]
    : first >= 0xe1 && first <= 0xef ? [3, 0x80, 0xbf]
    : first === 0xf0 ? [4, 0x90, 0xbf]
    : first === 0xf4 ? [4, 0x80, 0x8f]
    : first >= 0xf1 && first <= 0xf3 ? [4, 0x80, 0xbf]
    : [0, 0, 0];
  if (length === 0) return 0;
  const second = bytes[index + 1];
  if (second === undefined || second < low || second > high) return 0;
  for (let offset = 2; offset < length; offset++) {
    const next = bytes[index + offset];
    if (next === undefined || next < 0x80 || next > 0xbf) return 0;
  }
  return length;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
