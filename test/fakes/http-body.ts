// Request/response plumbing shared by the fake image servers.
import type { IncomingMessage, ServerResponse } from 'node:http';

export async function readBody(request: IncomingMessage): Promise<string> {
  return (await readBodyBytes(request)).toString('utf8');
}

/** The body as bytes: a multipart upload holds binary files that text would corrupt. */
export async function readBodyBytes(request: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of request) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

/**
 * A multipart/form-data body as the servers' own parsers read it (aiohttp's request.post(), cpp-httplib's
 * req.form), here through the platform's own parser; undefined when it is not multipart or does not parse.
 */
export async function readMultipart(bytes: Buffer, contentType: string | undefined): Promise<FormData | undefined> {
  if (contentType === undefined || !/^multipart\/form-data\s*;/i.test(contentType)) return undefined;
  try {
    return await new Response(new Uint8Array(bytes), { headers: { 'content-type': contentType } }).formData();
  } catch {
    return undefined;
  }
}

/** The parsed JSON body, the raw text when it is not JSON, undefined when empty: the fakes record all three. */
export function parseBody(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json' }).end(text);
}

export interface LargeBody {
  /** Total bytes of the body, prefix and suffix included. */
  bytes: number;
  /** true: send Content-Length up front (FastAPI's JSONResponse, aiohttp's FileResponse do); false: chunked. */
  contentLength: boolean;
  contentType?: string;
  prefix?: string;
  suffix?: string;
}

/**
 * Streams a body of `bytes` bytes in 1 MB pieces with backpressure, never holding it whole, and stops when the
 * client goes away. `onSent` sees the running count of bytes handed to the socket: what the client could have read.
 */
export async function streamLargeBody(response: ServerResponse, body: LargeBody, onSent: (bytes: number) => void): Promise<void> {
  const prefix = Buffer.from(body.prefix ?? '');
  const suffix = Buffer.from(body.suffix ?? '');
  const piece = Buffer.alloc(1024 * 1024, 0x41); // 'A': valid base64 and valid JSON string content
  response.writeHead(200, {
    'content-type': body.contentType ?? 'application/octet-stream',
    ...(body.contentLength ? { 'content-length': String(body.bytes) } : {}),
  });
  let sent = 0;
  const write = async (part: Buffer): Promise<boolean> => {
    if (response.destroyed) return false;
    sent += part.length;
    onSent(sent);
    if (response.write(part)) return true;
    await new Promise<void>((resolve) => {
      const done = () => {
        response.off('drain', done);
        response.off('close', done);
        resolve();
      };
      response.on('drain', done);
      response.on('close', done);
    });
    return !response.destroyed;
  };
  if (!(await write(prefix))) return;
  let remaining = body.bytes - prefix.length - suffix.length;
  while (remaining > 0) {
    const size = Math.min(remaining, piece.length);
    if (!(await write(piece.subarray(0, size)))) return;
    remaining -= size;
  }
  if (await write(suffix)) response.end();
}

/**
 * A redirect a fake answers every route with: what a misconfigured reverse proxy in front of the image server
 * sends (to a login page, to https, to another host or port), or a compromised server steering its clients.
 * Without `location` the answer has no Location header, as a broken proxy may send it.
 */
export interface RedirectEverything {
  status: 301 | 302 | 303 | 307 | 308;
  location?: string;
}

export function sendRedirect(response: ServerResponse, redirect: RedirectEverything): void {
  response.writeHead(redirect.status, redirect.location === undefined ? {} : { location: redirect.location }).end();
}

/** The same redirect as the raw answer to a WebSocket upgrade request. */
export function redirectUpgrade(socket: { end(data: string): void }, redirect: RedirectEverything): void {
  const location = redirect.location === undefined ? '' : `Location: ${redirect.location}\r\n`;
  socket.end(`HTTP/1.1 ${redirect.status} Redirect\r\n${location}Content-Length: 0\r\nConnection: close\r\n\r\n`);
}
