import { parse as parseContentType } from 'content-type';
import type { Context } from 'hono';
import type { ServiceError } from '../core/index.ts';

// The few error codes the HTTP edge knows, mapped to statuses; the message is already for a person.
export const STATUS: Record<ServiceError['code'], ServiceErrorStatus> = {
  not_found: 404,
  unavailable: 503,
  busy: 409,
  // Nothing to undo or redo, no suggestion to answer: the pane changed meanwhile.
  conflict: 409,
  invalid: 422,
  // The store could not write (a full or read-only disk): the message says what to do.
  storage: 503,
  bad_archive: 400,
  too_large: 413,
};

export type ServiceErrorStatus = 400 | 404 | 409 | 413 | 422 | 503;

export function respondError(c: Context, error: ServiceError) {
  return c.json({ error: error.message, ...(error.fields ? { fields: error.fields } : {}) }, STATUS[error.code]);
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

/** Reads a JSON body; a person gets told what was wrong with it rather than a stack trace. */
export async function readJsonBody(c: Context): Promise<JsonBody> {
  if (readMediaType(c) !== 'application/json') {
    const sent = c.req.header('content-type');
    const what = sent ? `was sent as "${sent}"` : 'has no Content-Type';
    return { ok: false, response: c.json({ error: `The body ${what}: send it as JSON with the header Content-Type: application/json.` }, 415) };
  }
  try {
    return { ok: true, value: await c.req.json() };
  } catch {
    return { ok: false, response: c.json({ error: 'The body is not valid JSON. Check quotes and commas.' }, 400) };
  }
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
