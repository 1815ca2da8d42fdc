// The bench's clients: the `ollama` client reading the fake directly, and plain HTTP readers of Easel's
// two streaming paths (the JSON API and the page's form post). The readers only collect bytes while the
// clock runs, so the client's own cost stays far below the server's; checks come after the clock stops.
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { Ollama } from 'ollama';

// Keep-alive, as a browser and any API client would.
const agent = new Agent({ keepAlive: true, maxSockets: 8 });

export interface StreamResult {
  status: number;
  contentType: string;
  /** From sending the request to the end of the response body. */
  ms: number;
  /** From sending the request to the first read holding `firstMarker` (undefined when never seen). */
  firstMarkerMs: number | undefined;
  bytes: number;
  /** The body, when asked for with keepBody. */
  body: string;
}

export interface StreamOptions {
  /** Seen with every network read and its arrival time (process.hrtime in ns). */
  onData?: (text: string, atNs: number) => void;
  firstMarker?: string;
  /** Called once, with the read that first holds `firstMarker`. */
  onFirstMarker?: () => void;
  keepBody?: boolean;
}

/** POSTs `body` and reads the answer as it arrives. */
export function postStream(url: string, body: string, headers: Record<string, string>, options: StreamOptions = {}): Promise<StreamResult> {
  const marker = options.firstMarker === undefined ? undefined : Buffer.from(options.firstMarker);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let firstMarkerMs: number | undefined;
    let bytes = 0;
    const parts: Buffer[] = [];
    const req = request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      res.on('data', (part: Buffer) => {
        bytes += part.length;
        if (options.keepBody) parts.push(part);
        if (marker && firstMarkerMs === undefined && part.includes(marker)) {
          firstMarkerMs = performance.now() - started;
          options.onFirstMarker?.();
        }
        options.onData?.(part.toString('utf8'), Number(process.hrtime.bigint()));
      });
      res.once('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          contentType: String(res.headers['content-type'] ?? ''),
          ms: performance.now() - started,
          firstMarkerMs,
          bytes,
          body: Buffer.concat(parts).toString('utf8'),
        }),
      );
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end(body);
  });
}

async function requestJson(url: string, method: string, body?: unknown): Promise<unknown> {
  const response = await fetch(url, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`);
  return response.json();
}

export async function createConversation(url: string): Promise<string> {
  return ((await requestJson(`${url}/api/conversations`, 'POST', {})) as { id: string }).id;
}

export interface TranscriptTurn {
  role: string;
  text: string;
  status: string;
  error?: { code: string; message: string };
}

export async function readTurns(url: string, id: string): Promise<TranscriptTurn[]> {
  return ((await requestJson(`${url}/api/conversations/${id}`, 'GET')) as { turns: TranscriptTurn[] }).turns;
}

/** A message through the JSON API: `POST /api/conversations/:id/messages`, read as SSE. */
export function sendApiMessage(url: string, id: string, text: string, options: StreamOptions = {}): Promise<StreamResult> {
  return postStream(
    `${url}/api/conversations/${id}/messages`,
    JSON.stringify({ text }),
    { 'content-type': 'application/json', accept: 'text/event-stream' },
    { firstMarker: 'event: delta', ...options },
  );
}

/**
 * A message the way the page sends it (server/http/page/routes.ts, web/easel.js): an htmx form post of
 * `text` and a fresh one-shot `sendKey` to `POST /c/:id/messages`, whose answer is SSE of HTML fragments.
 */
export function sendPageMessage(url: string, id: string, text: string, options: StreamOptions = {}): Promise<StreamResult> {
  const form = new URLSearchParams({ text, sendKey: randomBytes(18).toString('base64url') });
  return postStream(
    `${url}/c/${id}/messages`,
    form.toString(),
    {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'text/event-stream',
      'hx-request': 'true',
      origin: url,
      'sec-fetch-site': 'same-origin',
    },
    options,
  );
}

export interface DirectResult {
  ms: number;
  parts: number;
  text: string;
}

/** The reference: the official `ollama` client reading the same stream straight from the fake. */
export async function readDirect(ollamaUrl: string, onPart?: (atNs: number) => void): Promise<DirectResult> {
  const started = performance.now();
  const client = new Ollama({ host: ollamaUrl });
  const stream = await client.chat({ model: 'mistral:7b', messages: [{ role: 'user', content: 'bench' }], stream: true, options: { num_ctx: 8192 } });
  let parts = 0;
  let text = '';
  for await (const part of stream) {
    parts++;
    text += part.message.content;
    onPart?.(Number(process.hrtime.bigint()));
  }
  return { ms: performance.now() - started, parts, text };
}

/**
 * Finds when each paced token (` w<i>q`, see replies.ts) arrived in a stream, whatever its framing: the
 * tokens are searched in order in the text of each read, a token split across reads included.
 */
export function createArrivalTracker(count: number, tokenText: (i: number) => string) {
  const arrivals: number[] = new Array<number>(count).fill(Number.NaN);
  let pending = '';
  let next = 0;
  return {
    arrivals,
    get found() {
      return next;
    },
    onData(text: string, atNs: number) {
      pending += text;
      let from = 0;
      while (next < count) {
        const needle = tokenText(next).trim();
        const at = pending.indexOf(needle, from);
        if (at === -1) break;
        arrivals[next++] = atNs;
        from = at + needle.length;
      }
      // Keep what may still hold the start of the next token.
      pending = pending.slice(from);
    },
  };
}

/** One event of an event stream: its name ('message' when none), its data lines joined, and its own id. */
export interface SseFrame {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * Reads an event stream as it arrives, in whatever pieces the network brings it (a line or a frame split
 * across reads included): each complete frame goes to `onFrame`, each comment line (`: keep-alive`) to
 * `onComment`. Returns the function to hand each piece of text to.
 */
export function createSseReader(onFrame: (frame: SseFrame) => void, onComment?: (text: string) => void): (text: string) => void {
  let pending = '';
  let event = '';
  let data: string[] = [];
  let id: string | undefined;
  return (text) => {
    pending += text;
    let start = 0;
    for (let end = pending.indexOf('\n'); end !== -1; end = pending.indexOf('\n', start)) {
      const line = pending.slice(start, pending[end - 1] === '\r' ? end - 1 : end);
      start = end + 1;
      if (line === '') {
        if (data.length > 0) onFrame({ event: event || 'message', data: data.join('\n'), id });
        event = '';
        data = [];
        id = undefined;
      } else if (line.startsWith(':')) {
        onComment?.(line.slice(1).trim());
      } else {
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(line[colon + 1] === ' ' ? colon + 2 : colon + 1);
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id') id = value;
      }
    }
    pending = pending.slice(start);
  };
}

/** The text of every `delta` event of a JSON API stream's body, in order. */
export function readDeltaTexts(body: string): string[] {
  const texts: string[] = [];
  createSseReader((frame) => {
    if (frame.event === 'delta') texts.push((JSON.parse(frame.data) as { text: string }).text);
  })(body);
  return texts;
}
