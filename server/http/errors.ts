import type { Context } from 'hono';
import type { ServiceError } from '../core/index.ts';

// The few error codes the HTTP edge knows, mapped to statuses; the message is already for a person.
const STATUS: Record<ServiceError['code'], 404 | 409 | 422 | 503> = {
  not_found: 404,
  unavailable: 503,
  busy: 409,
  invalid: 422,
};

export function respondError(c: Context, error: ServiceError) {
  return c.json({ error: error.message, ...(error.fields ? { fields: error.fields } : {}) }, STATUS[error.code]);
}

export type JsonBody = { ok: true; value: unknown } | { ok: false; response: Response };

/** Reads a JSON body; a person gets told what was wrong with it rather than a stack trace. */
export async function readJsonBody(c: Context): Promise<JsonBody> {
  const type = c.req.header('content-type') ?? '';
  if (!type.toLowerCase().includes('application/json')) {
    return { ok: false, response: c.json({ error: 'Send the body as JSON with the header Content-Type: application/json.' }, 415) };
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
