// The JSON API's edges, as docs/API.md promises them to a client: the exact refusals (status and
// `{ error, fields? }` body) for bodies of the wrong type or shape, unknown conversations, the import's
// content types, the export's headers, and a /api/health whose client hangs up.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { startTestEasel, useEasel } from '../helpers/easel.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { readSse } from '../helpers/sse.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const NO_SUCH = 'There is no such conversation.';

const { fake, easel } = useEasel('each test');

/** A request with a JSON body sent as it is (a string is not re-encoded). */
function send(method: string, path: string, body: string, contentType = 'application/json'): Promise<Response> {
  return fetch(easel.url + path, { method, headers: { 'content-type': contentType }, body });
}

async function answer(response: Response): Promise<{ status: number; body: unknown }> {
  return { status: response.status, body: await response.json() };
}

describe('a JSON body of the wrong type or shape', () => {
  it('names the Content-Type it was sent with, word for word (415)', async () => {
    const id = await easel.newConversation();
    expect(await answer(await send('PUT', `/api/conversations/${id}/prompt`, '{"prompt":"a cat"}', 'text/plain'))).toEqual({
      status: 415,
      body: { error: 'The body was sent as "text/plain": send it as JSON with the header Content-Type: application/json.' },
    });
  });

  it('says when there is no Content-Type at all (415)', async () => {
    const id = await easel.newConversation();
    // fetch would add text/plain to a string body; a raw request sends no Content-Type.
    const response = await rawRequest(easel.url, { method: 'PUT', path: `/api/conversations/${id}/prompt`, body: '{"prompt":"a cat"}' });
    expect(response.status).toBe(415);
    expect(JSON.parse(response.body)).toEqual({
      error: 'The body has no Content-Type: send it as JSON with the header Content-Type: application/json.',
    });
  });

  // JSON that is not an object (null, a number, a string, an array) is a missing field, not a crash.
  const notAnObject: Array<[string, string, string[], { error: string; fields?: Record<string, string> }]> = [
    ['PATCH', '', ['null', '5', '"a cat"', '[]'], { error: 'Send {"title": "…"} ("" gives it back its title from the first message).', fields: { title: 'title is required.' } }],
    ['PUT', '/prompt', ['null', '5', '{}'], { error: 'Send {"prompt": "…"}.', fields: { prompt: 'prompt is required.' } }],
    ['POST', '/messages', ['null', '5', '[]'], { error: 'Send {"text": "…"}.', fields: { text: 'text is required.' } }],
    ['POST', '/generations', ['null', '"a cat"', '[]'], { error: 'Send a JSON object, e.g. {} or {"prompt": "…", "settings": {"steps": 30}}.' }],
  ];
  it.each(notAnObject.flatMap(([method, path, bodies, refusal]) => bodies.map((body) => [method, path, body, refusal] as const)))(
    '%s …%s with %s is 422 and says what to send',
    async (method, path, body, refusal) => {
      const id = await easel.newConversation();
      expect(await answer(await send(method, `/api/conversations/${id}${path}`, body))).toEqual({ status: 422, body: refusal });
    },
  );

  it('POST …/messages with a replaceLast that is not a boolean is 422, naming the field', async () => {
    const id = await easel.newConversation();
    expect(await answer(await send('POST', `/api/conversations/${id}/messages`, '{"text":"a cat","replaceLast":"yes"}'))).toEqual({
      status: 422,
      body: { error: 'replaceLast must be true or false.', fields: { replaceLast: 'replaceLast must be true or false.' } },
    });
  });
});

describe('the answers of the pane routes', () => {
  it('PUT …/prompt answers exactly the prompt, its version and the pane revision', async () => {
    const id = await easel.newConversation();
    const response = await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a tabby cat' });
    expect(await answer(response)).toEqual({ status: 200, body: { prompt: 'a tabby cat', promptVersion: expect.any(Number), paneRevision: 1 } });
  });
});

describe('an unknown conversation', () => {
  it('GET is 404 and says how to create one', async () => {
    expect(await answer(await easel.get('/api/conversations/nope'))).toEqual({
      status: 404,
      body: { error: 'There is no such conversation. Create one with POST /api/conversations.' },
    });
  });

  it('Stop and Cancel images are 404 with the same words', async () => {
    expect(await answer(await easel.post('/api/conversations/nope/stop'))).toEqual({ status: 404, body: { error: NO_SUCH } });
    expect(await answer(await easel.post('/api/conversations/nope/images/cancel'))).toEqual({ status: 404, body: { error: NO_SUCH } });
  });

  it('its prompt, or a comparison\'s pick, is 404 before the body is read', async () => {
    const unknown = '0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c';
    // Bodies the rules would refuse (422): the missing conversation is said first.
    expect((await easel.put(`/api/conversations/${unknown}/prompt`, { prompt: 5 })).status).toBe(404);
    expect((await easel.post(`/api/conversations/${unknown}/compare/pick`, { promptVersion: 1, over: 2 })).status).toBe(404);
  });

  it('Stop and Cancel images of a known, idle conversation answer false', async () => {
    const id = await easel.newConversation();
    expect(await answer(await easel.post(`/api/conversations/${id}/stop`))).toEqual({ status: 200, body: { stopped: false } });
    expect(await answer(await easel.post(`/api/conversations/${id}/images/cancel`))).toEqual({ status: 200, body: { cancelled: false } });
  });
});

describe('GET /api/conversations/:id turns', () => {
  it('a turn carries notices only when it has some, and images only when it made some', async () => {
    const id = await easel.newConversation();
    // steps 500 is clamped into range: the reply's metadata gets a notice saying so.
    fake.enqueue(scriptReply('A cat it is.', { ...ASKING, steps: 500 }));
    const events = await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a cat' }));
    const notices = events.find((event) => event.type === 'metadata')?.data.notices as string[];
    expect(notices.length).toBeGreaterThan(0);
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { turns: Array<Record<string, unknown>> };
    const [user, reply] = conversation.turns;
    expect(reply?.notices).toEqual(notices);
    expect(user).not.toHaveProperty('notices');
    // No image was made: the key is absent, not an empty list.
    expect(user).not.toHaveProperty('images');
    expect(reply).not.toHaveProperty('images');
  });
});

describe('export and import', () => {
  it('the export is an attachment that is never cached', async () => {
    const id = await easel.newConversation();
    const response = await easel.get(`/api/conversations/${id}/export`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/zip');
    expect(response.headers.get('content-disposition')).toMatch(/^attachment; filename="easel-.*\.zip"$/);
    expect(response.headers.get('cache-control')).toBe('no-store');
  });

  it('an import sent as another type is 415 and names the type it was sent as', async () => {
    const response = await fetch(`${easel.url}/api/conversations/import`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'PK' });
    expect(await answer(response)).toEqual({
      status: 415,
      body: { error: 'Send the .zip made by Export as the body, with Content-Type: application/zip (this body was sent as "text/plain").' },
    });
  });

  it('an import without a Content-Type is 415 and says so', async () => {
    const response = await rawRequest(easel.url, { method: 'POST', path: '/api/conversations/import', body: 'PK' });
    expect(response.status).toBe(415);
    expect(JSON.parse(response.body)).toEqual({
      error: 'Send the .zip made by Export as the body, with Content-Type: application/zip (this body has no Content-Type).',
    });
  });

  it('application/x-zip-compressed is taken as a zip too: junk bytes get 400 (not a zip), not 415', async () => {
    const response = await fetch(`${easel.url}/api/conversations/import`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-zip-compressed' },
      body: new Uint8Array([1, 2, 3, 4]),
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toBeTypeOf('string');
  });
});

describe('routes outside the API', () => {
  it('GET /api itself is an API path: its 404 is JSON', async () => {
    const response = await easel.get('/api');
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ error: 'No API route GET /api. See docs/API.md.' });
  });

  it('a path that only starts with "api" is not an API path: its 404 is plain text', async () => {
    const response = await easel.get('/apix');
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await response.text()).toBe('Not found');
  });

  it('a page form write with an empty Content-Type header counts as no body type (not 415)', async () => {
    const id = await easel.newConversation();
    const response = await rawRequest(easel.url, { method: 'POST', path: `/c/${id}/stop`, headers: { 'content-type': '' }, body: '' });
    expect(response.status).not.toBe(415);
    expect(response.status).toBeLessThan(400);
  });
});

describe('GET /api/health when the client hangs up', () => {
  let hung: Server | undefined;
  afterEach(async () => {
    hung?.closeAllConnections();
    await new Promise((resolve) => hung?.close(resolve));
    hung = undefined;
  });

  it('aborts the request to Ollama at once, not after the 3 s health timeout', async () => {
    // An "Ollama" that takes requests and never answers; it notes when Easel closes one.
    const seen: IncomingMessage[] = [];
    const closed: number[] = [];
    hung = createServer((req) => {
      seen.push(req);
      req.socket.on('close', () => closed.push(Date.now()));
    });
    await new Promise<void>((resolve) => hung!.listen(0, '127.0.0.1', resolve));
    const ollamaUrl = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
    const easelHung = await startTestEasel({ ollamaUrl });
    try {
      const client = new AbortController();
      const request = fetch(`${easelHung.url}/api/health`, { signal: client.signal }).catch(() => undefined);
      await waitFor(() => seen.length > 0);
      const hungUpAt = Date.now();
      client.abort();
      await request;
      await waitFor(() => closed.length > 0, 2000);
      expect(closed[0]! - hungUpAt).toBeLessThan(1500);
    } finally {
      await easelHung.close();
    }
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
