// Reads an HTTP answer with a ceiling: a body larger than the limit is refused at its Content-Length,
// or as soon as the bytes counted while reading pass the limit; the rest is never read or kept.

export interface BodyTooLarge {
  code: 'too_large';
  limit: number;
  /** The Content-Length the server declared, when it declared one over the limit. */
  declared?: number;
}

export type CappedBody<T> = { ok: true; value: T } | { ok: false; error: BodyTooLarge };

function readDeclaredLength(response: Response): number | undefined {
  const header = response.headers.get('content-length');
  if (header === null || !/^\d+$/.test(header.trim())) return undefined;
  return Number(header.trim());
}

/** The body's bytes, or `too_large` without reading past `limit` (the connection is cancelled). */
export async function readCappedBytes(response: Response, limit: number): Promise<CappedBody<Uint8Array>> {
  const declared = readDeclaredLength(response);
  if (declared !== undefined && declared > limit) {
    await response.body?.cancel().catch(() => {});
    return { ok: false, error: { code: 'too_large', limit, declared } };
  }
  if (response.body === null) return { ok: true, value: new Uint8Array(0) };
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    // Counted, not trusted: Content-Length may be absent (chunked) or describe a compressed body.
    if (total > limit) {
      await reader.cancel().catch(() => {});
      return { ok: false, error: { code: 'too_large', limit } };
    }
    parts.push(value);
  }
  return { ok: true, value: parts.length === 1 && parts[0] !== undefined ? parts[0] : Buffer.concat(parts, total) };
}

/** The body as UTF-8 text, or `too_large` without reading past `limit`. */
export async function readCappedText(response: Response, limit: number): Promise<CappedBody<string>> {
  const body = await readCappedBytes(response, limit);
  return body.ok ? { ok: true, value: Buffer.from(body.value.buffer, body.value.byteOffset, body.value.byteLength).toString('utf8') } : body;
}

/** At most the first `limit` bytes as text, the rest discarded: enough for an error message. */
export async function readTextPrefix(response: Response, limit: number): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  while (total < limit) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(parts, total).toString('utf8');
    parts.push(value);
    total += value.byteLength;
  }
  await reader.cancel().catch(() => {});
  return Buffer.concat(parts, total).subarray(0, limit).toString('utf8');
}

/** "150 MB", "64 MB", "1.5 MB", "900 kB": sizes for people (1 MB = 1024 × 1024 bytes here). */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} kB`;
  return `${bytes} bytes`;
}

/** "an answer of 150 MB" when the size was declared, else "an answer of more than 64 MB". */
export function describeTooLarge(error: BodyTooLarge): string {
  return error.declared === undefined ? `an answer of more than ${formatBytes(error.limit)}` : `an answer of ${formatBytes(error.declared)}`;
}
