// Who may talk to Easel (docs/SECURITY.md): Host allowlist, cross-site writes, content types, the
// security headers, token mode and control characters, through a real port with the headers a
// browser (or an attacker's page) would send.
import { networkInterfaces } from 'node:os';
import { Hono } from 'hono';
import { beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../server/core/index.ts';
import { createApp } from '../../server/http/index.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { startEaselStage, useEasel } from '../helpers/easel.ts';
import { rawRequest, type RawResponse } from '../helpers/raw-http.ts';
import { readSse } from '../helpers/sse.ts';
import { buildService } from '../helpers/service.ts';

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const FORM = 'application/x-www-form-urlencoded';

function expectSecurityHeaders(headers: Headers | RawResponse['headers']) {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : (headers[name] as string | undefined)) ?? null;
  expect(get('x-content-type-options')).toBe('nosniff');
  expect(get('referrer-policy')).toBe('no-referrer');
  expect(get('content-security-policy')).toBe(CSP);
  expect(get('x-frame-options')).toBe('DENY');
  // Plain HTTP: HSTS would mean nothing here and could break another service on a LAN name.
  expect(get('strict-transport-security')).toBeNull();
}

/** The reply text a raw SSE body shows (its delta events joined). */
function shownText(body: string): string {
  return [...body.matchAll(/^event: delta\ndata: (.*)$/gm)].map((match) => (JSON.parse(match[1] as string) as { text: string }).text).join('');
}

function sendKey() {
  return `k${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`.padEnd(24, 'x');
}

describe('one server on loopback (no token)', () => {
  const { fake: ollama, a1111, easel } = useEasel('all tests', { a1111: { stepDelayMs: 1 }, flags: ['--allowed-hosts', 'my-laptop.local, pinned.example:1'] });
  let port: string;
  let id: string;
  let imagePath: string;

  beforeAll(async () => {
    port = new URL(easel.url).port;
    id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox' }));
    const image = events.find((event) => event.type === 'image');
    if (!image) throw new Error(`no image: ${JSON.stringify(events)}`);
    imagePath = image.data.url as string;
  });

  const send = (options: Parameters<typeof rawRequest>[1]) => rawRequest(easel.url, options);
  const conversation = async () => (await (await easel.get(`/api/conversations/${id}`)).json()) as Record<string, any>;

  describe('Host allowlist (DNS rebinding)', () => {
    const routes = () => [
      { name: 'the page', path: `/c/${id}`, api: false },
      { name: 'the status line', path: '/status', api: false },
      { name: 'the API', path: `/api/conversations/${id}`, api: true },
      { name: 'an image', path: imagePath, api: false },
      { name: 'an asset', path: '/assets/htmx.min.js', api: false },
      { name: 'an unknown path', path: '/nowhere', api: false },
    ];

    it('refuses a foreign Host on every GET route with 403 naming --allowed-hosts', async () => {
      for (const route of routes()) {
        const response = await send({ path: route.path, headers: { host: `evil.example:${port}` } });
        expect(response.status, route.name).toBe(403);
        const message = route.api ? (JSON.parse(response.body) as { error: string }).error : response.body;
        expect(message, route.name).toContain('--allowed-hosts evil.example');
        expect(message, route.name).toContain('DNS rebinding');
        expectSecurityHeaders(response.headers);
      }
    });

    it('refuses a foreign Host on the streams before the model or the backend is asked', async () => {
      const chats = ollama.chatRequests().length;
      const generations = a1111.requests.length;
      const host = { host: `rebind.attacker.example:${port}` };
      const api = await send({
        method: 'POST',
        path: `/api/conversations/${id}/messages`,
        headers: { ...host, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hi' }),
      });
      expect(api.status).toBe(403);
      expect(JSON.parse(api.body).error).toContain('--allowed-hosts rebind.attacker.example');
      const page = await send({
        method: 'POST',
        path: `/c/${id}/messages`,
        headers: { ...host, 'content-type': FORM },
        body: new URLSearchParams({ text: 'hi', sendKey: sendKey() }).toString(),
      });
      expect(page.status).toBe(403);
      const generate = await send({
        method: 'POST',
        path: `/api/conversations/${id}/generations`,
        headers: { ...host, 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'x' }),
      });
      expect(generate.status).toBe(403);
      expect(ollama.chatRequests().length).toBe(chats);
      expect(a1111.requests.length).toBe(generations);
    });

    it('answers loopback names, *.localhost and --allowed-hosts names on every route, on any port', async () => {
      const hosts = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `easel.localhost:${port}`, `my-laptop.local:${port}`, 'My-Laptop.Local:9999', `localhost.:${port}`];
      for (const host of hosts) {
        for (const route of routes().filter((r) => r.path !== '/nowhere')) {
          const response = await send({ path: route.path, headers: { host } });
          expect(response.status, `${host} ${route.name}`).toBe(200);
        }
        expect((await send({ path: '/nowhere', headers: { host } })).status, host).toBe(404);
      }
    });

    it('answers an allowed name on the API stream', async () => {
      ollama.enqueue(scriptReply('Hello from afar.', ASKING));
      const response = await send({
        method: 'POST',
        path: `/api/conversations/${id}/messages`,
        headers: { host: `my-laptop.local:${port}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hello' }),
      });
      expect(response.status).toBe(200);
      expect(response.headers['content-type']).toContain('text/event-stream');
      expect(shownText(response.body)).toBe('Hello from afar.');
      expectSecurityHeaders(response.headers);
    });

    it('an --allowed-hosts entry with a port matches that port only', async () => {
      expect((await send({ path: '/api/health', headers: { host: 'pinned.example:1' } })).status).toBe(200);
      expect((await send({ path: '/api/health', headers: { host: `pinned.example:${port}` } })).status).toBe(403);
      expect((await send({ path: '/api/health', headers: { host: 'pinned.example' } })).status).toBe(403);
    });

    it('does not take a name that merely contains an allowed one', async () => {
      for (const host of ['localhost.evil.example', 'evil-localhost', 'my-laptop.local.evil.example', '127.0.0.1.nip.io', 'xn--localhost', '[::2]']) {
        expect((await send({ path: '/api/health', headers: { host } })).status, host).toBe(403);
      }
      // @hono/node-server itself refuses this one as an invalid Host (400) before any middleware runs.
      expect((await send({ path: '/api/health', headers: { host: 'localhost@evil.example' } })).status).toBe(400);
    });
  });

  describe('cross-site writes', () => {
    const create = (headers: Record<string, string>) => send({ method: 'POST', path: '/api/conversations', headers });

    it('refuses a write whose Origin is not the server\'s own, Origin: null included', async () => {
      for (const origin of ['http://evil.example', 'null', `http://127.0.0.1:${Number(port) + 1}`, `http://localhost:${port}`, `http://127.0.0.1:${port}.evil.example`]) {
        const response = await create({ origin });
        expect(response.status, origin).toBe(403);
        expect(JSON.parse(response.body).error, origin).toContain('only accepts changes from its own page');
        expectSecurityHeaders(response.headers);
      }
    });

    it('refuses Sec-Fetch-Site cross-site and same-site (another port of localhost), even with the own Origin', async () => {
      for (const site of ['cross-site', 'same-site']) {
        expect((await create({ 'sec-fetch-site': site })).status, site).toBe(403);
        expect((await create({ 'sec-fetch-site': site, origin: easel.url })).status, site).toBe(403);
        expect((await create({ 'sec-fetch-site': site, origin: 'null' })).status, site).toBe(403);
      }
      // `Origin: null` is refused whatever Sec-Fetch-Site says: every write of the page goes through htmx's
      // fetch, which sends the page's real origin.
      expect((await create({ 'sec-fetch-site': 'none', origin: 'null' })).status).toBe(403);
      expect((await create({ 'sec-fetch-site': 'same-origin', origin: 'null' })).status).toBe(403);
      expect((await create({ 'sec-fetch-site': 'same-origin', origin: 'http://evil.example' })).status).toBe(403);
    });

    it('lets the own page, a typed address and scripts without either header write', async () => {
      const allowed: Array<Record<string, string>> = [
        {},
        { origin: easel.url },
        { origin: easel.url, 'sec-fetch-site': 'same-origin' },
        { 'sec-fetch-site': 'none' },
        { host: `localhost:${port}`, origin: `http://localhost:${port}` },
        { host: `my-laptop.local:${port}`, origin: `http://MY-LAPTOP.local:${port}` },
      ];
      for (const headers of allowed) expect((await create(headers)).status, JSON.stringify(headers)).toBe(201);
    });

    it('refuses the page\'s form writes from another site and changes nothing', async () => {
      const chats = ollama.chatRequests().length;
      const before = await conversation();
      const message = await send({
        method: 'POST',
        path: `/c/${id}/messages`,
        headers: { origin: 'http://evil.example', 'content-type': FORM },
        body: new URLSearchParams({ text: 'from elsewhere', sendKey: sendKey() }).toString(),
      });
      expect(message.status).toBe(403);
      const prompt = await send({
        method: 'PUT',
        path: `/c/${id}/prompt`,
        headers: { 'sec-fetch-site': 'same-site', 'content-type': FORM },
        body: 'prompt=overwritten',
      });
      expect(prompt.status).toBe(403);
      const settings = await send({
        method: 'PUT',
        path: `/api/conversations/${id}/settings`,
        headers: { origin: 'null', 'content-type': 'application/json' },
        body: JSON.stringify({ steps: 99 }),
      });
      expect(settings.status).toBe(403);
      const stop = await send({ method: 'POST', path: `/c/${id}/stop`, headers: { 'sec-fetch-site': 'cross-site' } });
      expect(stop.status).toBe(403);
      expect(ollama.chatRequests().length).toBe(chats);
      const after = await conversation();
      expect(after.prompt).toBe(before.prompt);
      expect(after.settings).toEqual(before.settings);
      expect(after.turns.length).toBe(before.turns.length);
    });

    it('does not refuse reads, and does not open them to other sites (no CORS header)', async () => {
      const response = await send({ path: '/api/health', headers: { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' } });
      expect(response.status).toBe(200);
      expect(response.headers['access-control-allow-origin']).toBeUndefined();
    });
  });

  describe('content types', () => {
    const putPrompt = (type: string | undefined, body: string) =>
      send({ method: 'PUT', path: `/api/conversations/${id}/prompt`, headers: type === undefined ? {} : { 'content-type': type }, body });

    it('takes only application/json (parameters allowed) as JSON on the API', async () => {
      const body = JSON.stringify({ prompt: 'a fox in the snow' });
      for (const type of ['text/plain; application/json', 'text/plain', 'application/jsonx', 'application/x-www-form-urlencoded', undefined]) {
        const response = await putPrompt(type, body);
        expect(response.status, String(type)).toBe(415);
        expect(JSON.parse(response.body).error, String(type)).toContain('Content-Type: application/json');
        expectSecurityHeaders(response.headers);
      }
      expect((await conversation()).prompt).not.toBe('a fox in the snow');
      const ok = await putPrompt('application/json; charset=utf-8', body);
      expect(ok.status).toBe(200);
      expect((await conversation()).prompt).toBe('a fox in the snow');
      expect((await putPrompt('Application/JSON', JSON.stringify({ prompt: 'upper' }))).status).toBe(200);
    });

    it('refuses the CORS-safelisted text/plain trick on the message stream before the model is asked', async () => {
      const chats = ollama.chatRequests().length;
      const response = await send({
        method: 'POST',
        path: `/api/conversations/${id}/messages`,
        headers: { 'content-type': 'text/plain; application/json' },
        body: JSON.stringify({ text: 'hi' }),
      });
      expect(response.status).toBe(415);
      expect(ollama.chatRequests().length).toBe(chats);
    });

    it('takes forms (urlencoded or multipart) on the page and refuses other types with 415', async () => {
      for (const type of ['application/json', 'text/plain', 'text/plain; application/json']) {
        const response = await send({ method: 'PUT', path: `/c/${id}/prompt`, headers: { 'content-type': type }, body: 'prompt=sneaky' });
        expect(response.status, type).toBe(415);
        expect(response.body, type).toContain('application/x-www-form-urlencoded or multipart/form-data');
      }
      const stop = await send({ method: 'POST', path: `/c/${id}/stop`, headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(stop.status).toBe(415);
      expect((await send({ method: 'POST', path: '/c', headers: { 'content-type': 'text/plain' }, body: 'x' })).status).toBe(415);
      expect((await conversation()).prompt).not.toBe('sneaky');

      const urlencoded = await send({ method: 'PUT', path: `/c/${id}/prompt`, headers: { 'content-type': `${FORM};charset=UTF-8` }, body: 'prompt=by+form' });
      expect(urlencoded.status).toBe(200);
      expect((await conversation()).prompt).toBe('by form');
      const multipart = new FormData();
      multipart.set('prompt', 'by multipart');
      expect((await fetch(`${easel.url}/c/${id}/prompt`, { method: 'PUT', body: multipart })).status).toBe(200);
      expect((await conversation()).prompt).toBe('by multipart');
      // A bare POST (no body, no type) is what a script sends to Stop.
      expect((await send({ method: 'POST', path: `/c/${id}/stop` })).status).toBe(204);
    });

    it('keeps the page\'s form rule to the page: a JSON write to an unknown API route is a JSON 404', async () => {
      for (const path of ['/api/nowhere', '/images/nowhere']) {
        const response = await send({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: '{}' });
        expect(response.status, path).toBe(404);
      }
      const api = await send({ method: 'POST', path: '/api/nowhere', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(JSON.parse(api.body).error).toContain('No API route POST /api/nowhere');
    });

    it('answers a broken form body with 400, not an internal error', async () => {
      const response = await send({ method: 'PUT', path: `/c/${id}/prompt`, headers: { 'content-type': 'multipart/form-data; boundary=xyz' }, body: 'garbage' });
      expect(response.status).toBe(400);
      expect(response.body).toContain('could not be read');
    });
  });

  describe('security headers', () => {
    it('are on the page (with its exact CSP), API JSON, an SSE stream, an image, an asset and 404s', async () => {
      const page = await easel.get(`/c/${id}`);
      expect(page.headers.get('content-type')).toContain('text/html');
      expectSecurityHeaders(page.headers);
      expectSecurityHeaders((await easel.get('/api/health')).headers);
      const image = await easel.get(imagePath);
      expect(image.status).toBe(200);
      expect(image.headers.get('content-type')).toBe('image/png');
      expect(image.headers.get('cross-origin-resource-policy')).toBe('same-origin');
      expectSecurityHeaders(image.headers);
      expectSecurityHeaders((await easel.get('/assets/easel.css')).headers);
      for (const path of ['/nowhere', '/api/nowhere', '/images/0123.png', '/api/conversations/missing']) {
        const response = await easel.get(path);
        expect(response.status, path).toBe(404);
        expectSecurityHeaders(response.headers);
      }
      ollama.enqueue(scriptReply('Streaming.', ASKING));
      const stream = await easel.post(`/api/conversations/${id}/messages`, { text: 'a stream' });
      expect(stream.headers.get('content-type')).toContain('text/event-stream');
      expectSecurityHeaders(stream.headers);
      expect((await readSse(stream)).some((event) => event.type === 'done')).toBe(true);
    });

    it('are on 400, 413 and 422 answers', async () => {
      const bad = await easel.put(`/api/conversations/${id}/prompt`, '{not json');
      expect(bad.status).toBe(400);
      expectSecurityHeaders(bad.headers);
      const large = await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'x'.repeat(70_000) });
      expect(large.status).toBe(413);
      expectSecurityHeaders(large.headers);
      const invalid = await easel.put(`/api/conversations/${id}/settings`, { steps: 0 });
      expect(invalid.status).toBe(422);
      expectSecurityHeaders(invalid.headers);
    });
  });

  describe('control characters', () => {
    it('are refused with 422 naming the field on the API: message, prompt, negativePrompt, a Generate override', async () => {
      const chats = ollama.chatRequests().length;
      const generations = a1111.requests.length;
      const before = await conversation();

      const message = await easel.post(`/api/conversations/${id}/messages`, { text: 'a cat\u0000 in a hat' });
      expect(message.status).toBe(422);
      const messageBody = (await message.json()) as { error: string; fields: Record<string, string> };
      expect(Object.keys(messageBody.fields)).toEqual(['text']);
      expect(messageBody.fields.text).toBe('The message contains an invisible control character (U+0000) at character 6; remove it and try again.');

      const prompt = await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'bell\u0007' });
      expect(prompt.status).toBe(422);
      expect(((await prompt.json()) as { fields: Record<string, string> }).fields.prompt).toContain('The prompt contains an invisible control character (U+0007)');

      const settings = await easel.put(`/api/conversations/${id}/settings`, { negativePrompt: 'blurry \u001b[31m' });
      expect(settings.status).toBe(422);
      expect(((await settings.json()) as { fields: Record<string, string> }).fields.negativePrompt).toContain('The negative prompt contains an invisible control character (U+001B)');

      const generate = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'x\u0001', settings: { negativePrompt: 'ok' } });
      expect(generate.status).toBe(422);
      expect(((await generate.json()) as { fields: Record<string, string> }).fields.prompt).toContain('U+0001');

      expect(ollama.chatRequests().length).toBe(chats);
      expect(a1111.requests.length).toBe(generations);
      const after = await conversation();
      expect(after.turns.length).toBe(before.turns.length);
      expect(after.prompt).toBe(before.prompt);
      expect(after.settings).toEqual(before.settings);
    });

    it('keep tab and newline, and turn CRLF and a lone CR into LF', async () => {
      const prompt = await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a\tb\r\nc\rd\ne' });
      expect(prompt.status).toBe(200);
      expect((await conversation()).prompt).toBe('a\tb\nc\nd\ne');
      const settings = await easel.put(`/api/conversations/${id}/settings`, { negativePrompt: 'x\r\ny' });
      expect(((await settings.json()) as { negativePrompt: string }).negativePrompt).toBe('x\ny');
    });

    it('are refused with 422 naming the field on the page: message, prompt, negative prompt', async () => {
      const chats = ollama.chatRequests().length;
      const before = await conversation();
      const form = (path: string, method: string, fields: Record<string, string>) =>
        send({ method, path, headers: { 'content-type': FORM }, body: new URLSearchParams(fields).toString() });

      const message = await form(`/c/${id}/messages`, 'POST', { text: 'hello\u0000', sendKey: sendKey() });
      expect(message.status).toBe(422);
      expect(message.body).toContain('The message contains an invisible control character (U+0000) at character 6');
      const prompt = await form(`/c/${id}/prompt`, 'PUT', { prompt: 'a\u0008b' });
      expect(prompt.status).toBe(422);
      expect(prompt.body).toContain('The prompt contains an invisible control character (U+0008)');
      const settings = await form(`/c/${id}/settings`, 'PUT', { negativePrompt: 'blurry\u0000', steps: '20' });
      expect(settings.status).toBe(422);
      expect(settings.body).toMatch(/hx-target="#error-negativePrompt"[^>]*>The negative prompt contains an invisible control character \(U\+0000\)/);
      // A prompt travelling with a message is checked too, and the message is then not sent.
      const withPrompt = await form(`/c/${id}/messages`, 'POST', { text: 'fine', prompt: 'bad\u0000', sendKey: sendKey() });
      expect(withPrompt.status).toBe(422);
      expect(withPrompt.body).toContain('U+0000');

      expect(ollama.chatRequests().length).toBe(chats);
      const after = await conversation();
      expect(after.turns.length).toBe(before.turns.length);
      expect(after.prompt).toBe(before.prompt);
      expect(after.settings).toEqual(before.settings);
    });
  });
});

describe('the configured --host', () => {
  it('is answered besides the loopback names; other addresses are not', async () => {
    const { easel, close } = await startEaselStage({ flags: ['--host', '127.0.0.2'] });
    try {
      const port = new URL(easel.url).port;
      expect(easel.token).toBeUndefined();
      expect((await rawRequest(easel.url, { path: '/api/health' })).status).toBe(200);
      expect((await rawRequest(easel.url, { path: '/api/health', headers: { host: `127.0.0.2:${port}` } })).status).toBe(200);
      expect((await rawRequest(easel.url, { path: '/api/health', headers: { host: `127.0.0.3:${port}` } })).status).toBe(403);
    } finally {
      await close();
    }
  });
});

describe('token mode', () => {
  const TOKEN = 'correct-horse-battery-staple-42';
  // On loopback a token is needed only when one is given; given, it is enforced.
  const { fake: ollama, easel } = useEasel('all tests', { flags: ['--token', TOKEN] });

  const send = (options: Parameters<typeof rawRequest>[1]) => rawRequest(easel.url, options);
  const bearer = { authorization: `Bearer ${TOKEN}` };

  it('answers the API without a token with 401 JSON and WWW-Authenticate', async () => {
    const response = await send({ path: '/api/health' });
    expect(response.status).toBe(401);
    expect(response.headers['content-type']).toContain('application/json');
    expect(response.headers['www-authenticate']).toBe('Bearer realm="Easel"');
    expect(JSON.parse(response.body).error).toContain('Authorization: Bearer <token>');
    expectSecurityHeaders(response.headers);
  });

  it('answers the page without a token with a small form to enter it, under the strict CSP', async () => {
    const response = await send({ path: '/' });
    expect(response.status).toBe(401);
    expect(response.headers['content-type']).toContain('text/html');
    expectSecurityHeaders(response.headers);
    expect(response.body).toMatch(/<form method="get" action="\/">/);
    expect(response.body).toContain('<input id="token" name="token" type="password"');
    expect(response.body).not.toMatch(/<script|\sstyle=|\son[a-z]+=/i);
  });

  it('escapes the address it puts into the form', async () => {
    const response = await send({ path: "/c/\"><img/src/onerror='alert(1)'>" });
    expect(response.status).toBe(401);
    expect(response.body).not.toContain('"><img');
    expect(response.body).toContain('action="/c/&quot;&gt;&lt;img/src/onerror=&#39;alert(1)&#39;&gt;"');
  });

  it('takes the right bearer token, refuses a wrong one or another scheme', async () => {
    expect((await send({ path: '/api/health', headers: bearer })).status).toBe(200);
    expect((await send({ path: '/', headers: bearer })).status).toBe(200);
    const wrong = await send({ path: '/api/health', headers: { authorization: `Bearer ${TOKEN}x` } });
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.body).error).toContain('not the right one');
    expect((await send({ path: '/api/health', headers: { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` } })).status).toBe(401);
    expect((await send({ path: '/api/health', headers: { authorization: `Bearer ${TOKEN.slice(0, -1)}` } })).status).toBe(401);
  });

  it('?token= sets an HttpOnly SameSite=Strict cookie and redirects to the same address without it; the cookie then works', async () => {
    const response = await send({ path: `/c/abc?x=1&token=${TOKEN}` });
    expect(response.status).toBe(303);
    expect(response.headers.location).toBe('/c/abc?x=1');
    expect(response.headers['cache-control']).toBe('no-store');
    const cookie = response.headers['set-cookie']?.[0] ?? '';
    expect(cookie).toMatch(new RegExp(`^easel_token=${TOKEN};`));
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).toMatch(/; Path=\//);
    const jar = { cookie: cookie.split(';')[0] as string };
    expect((await send({ path: '/api/health', headers: jar })).status).toBe(200);
    expect((await send({ path: '/assets/htmx.min.js', headers: jar })).status).toBe(200);
    expect((await send({ path: '/', headers: jar })).status).toBe(200);
    expect((await send({ path: '/api/health', headers: { cookie: 'easel_token=wrong-token-value-123' } })).status).toBe(401);
  });

  it('a wrong ?token= shows the form again with a message and sets no cookie', async () => {
    const response = await send({ path: '/?token=not-it' });
    expect(response.status).toBe(401);
    expect(response.headers['set-cookie']).toBeUndefined();
    expect(response.body).toContain('That token is not the right one.');
    expect(response.body).toContain('<form method="get"');
  });

  it('guards the streams, the assets and writes; a token in the query of a write does not count', async () => {
    const chats = ollama.chatRequests().length;
    const id = await easel.newConversation();
    const stream = await send({
      method: 'POST',
      path: `/api/conversations/${id}/messages`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hi' }),
    });
    expect(stream.status).toBe(401);
    const queryWrite = await send({
      method: 'POST',
      path: `/api/conversations/${id}/messages?token=${TOKEN}`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hi' }),
    });
    expect(queryWrite.status).toBe(401);
    expect((await send({ method: 'POST', path: '/api/conversations' })).status).toBe(401);
    expect((await send({ path: '/assets/htmx.min.js' })).status).toBe(401);
    expect((await send({ path: '/status' })).status).toBe(401);
    expect(ollama.chatRequests().length).toBe(chats);

    ollama.enqueue(scriptReply('With the token.', ASKING));
    const allowed = await send({
      method: 'POST',
      path: `/api/conversations/${id}/messages`,
      headers: { ...bearer, 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hi' }),
    });
    expect(allowed.status).toBe(200);
    expect(shownText(allowed.body)).toBe('With the token.');
  });

  it('checks the Host before the token: a rebinding page gets 403, not the form', async () => {
    const response = await send({ path: '/', headers: { host: 'evil.example', ...bearer } });
    expect(response.status).toBe(403);
  });
});

describe('a non-loopback --host', () => {
  it('generates a 128-bit token, prints where to open Easel with it, warns, and answers the machine\'s addresses', async () => {
    const { easel, close } = await startEaselStage({ flags: ['--host', '0.0.0.0'] });
    try {
      const port = new URL(easel.url).port;
      expect(easel.token).toMatch(/^[0-9a-f]{32}$/);
      expect(easel.openUrls[0]).toBe(`http://127.0.0.1:${port}/?token=${easel.token}`);
      expect(easel.logs.some((line) => line.includes('WARN') && line.includes('Easel listens on 0.0.0.0, so other machines on your network can reach it'))).toBe(true);
      expect((await rawRequest(easel.url, { path: '/api/health' })).status).toBe(401);
      const bearer = { authorization: `Bearer ${easel.token}` };
      expect((await rawRequest(easel.url, { path: '/api/health', headers: bearer })).status).toBe(200);
      // The machine's own addresses are what a phone on the same network opens.
      const lan = Object.values(networkInterfaces())
        .flatMap((entries) => entries ?? [])
        .find((entry) => !entry.internal && entry.family === 'IPv4');
      if (lan) {
        expect(easel.openUrls).toContain(`http://${lan.address}:${port}/?token=${easel.token}`);
        expect((await rawRequest(easel.url, { path: '/api/health', headers: { ...bearer, host: `${lan.address}:${port}` } })).status).toBe(200);
      }
      expect((await rawRequest(easel.url, { path: '/api/health', headers: { ...bearer, host: `203.0.113.9:${port}` } })).status).toBe(403);
      expect((await rawRequest(easel.url, { path: '/api/health', headers: { ...bearer, host: `0.0.0.0:${port}` } })).status).toBe(200);
    } finally {
      await close();
    }
  });
});

describe('an internal error', () => {
  it('carries the security headers too', async () => {
    const { service, store } = buildService();
    const page = new Hono().get('/boom', () => {
      throw new Error('boom');
    });
    const app = createApp({ service, logger: silentLogger, page, access: { allowedHosts: [] } });
    const response = await app.request('/boom', { headers: { host: '127.0.0.1' } });
    expect(response.status).toBe(500);
    expect(await response.text()).toContain('internal error');
    expectSecurityHeaders(response.headers);
    store.close();
  });
});
