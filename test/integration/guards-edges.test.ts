// The edges of the guards in docs/SECURITY.md (Host allowlist, cross-site writes, token) and of the
// app's wiring (body limits, images, 404s, 500s): the exact refusal each request gets, the log line it
// leaves, and the odd headers a browser would not send but a script or an attacker can.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../server/core/index.ts';
import { createApp, type AccessOptions } from '../../server/http/index.ts';
import { createPageRoutes } from '../../server/http/page/index.ts';
import { useEasel } from '../helpers/easel.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { buildService } from '../helpers/service.ts';

const TOKEN = 'correct-horse-battery-staple-42';
const HOW = 'Send the header Authorization: Bearer <token>; the token is in the URL Easel printed when it started, or the one given with --token.';
const CROSS_SITE = 'Easel only accepts changes from its own page, and this request came from another site. Open Easel at its own address and try again.';
const NO_HOST =
  "The request has no valid Host header, so Easel cannot tell it from another site's. Open Easel at http://127.0.0.1 with its port, or add the name you use with --allowed-hosts.";
const LOCAL = { host: '127.0.0.1:8377' };
const JSON_TYPE = { 'content-type': 'application/json' };

/** The app as main.ts wires it (real page routes, SQLite in memory), with a log whose lines can be read word for word. */
function buildApp(access: AccessOptions, page?: Hono) {
  const lines: string[] = [];
  // Time fixed at the epoch, so a whole log line can be compared.
  const logger = createLogger({ level: 'debug', write: (line) => lines.push(line), now: () => new Date(0) });
  const imagesDir = mkdtempSync(join(tmpdir(), 'easel-guards-'));
  const { service, store } = buildService({ imagesDir });
  const app = createApp({ service, logger, imagesDir, access, page: page ?? createPageRoutes({ service, logger }) });
  const request = (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) =>
    app.request(path, { ...init, headers: { ...LOCAL, ...init.headers } });
  return {
    app,
    request,
    lines,
    imagesDir,
    /** The log lines of one level, without the fixed time stamp. */
    logged: (level: string) => lines.filter((line) => line.split(' ')[1] === level).map((line) => line.slice('1970-01-01T00:00:00.000Z '.length)),
    close() {
      store.close();
      rmSync(imagesDir, { recursive: true, force: true });
    },
  };
}

type Built = ReturnType<typeof buildApp>;

describe('the Host allowlist at its edges', () => {
  let built: Built;
  beforeAll(() => {
    // As main.ts passes them: the --host, the machine's addresses (IPv6 ones bare), the --allowed-hosts.
    // 'not a/host' is an entry that cannot be read: it must be skipped, not break the others.
    built = buildApp({ allowedHosts: ['not a/host', '2001:db8::5', 'my-laptop.local'] });
  });
  afterAll(() => built.close());

  it('refuses a foreign Host with the exact sentence, and logs the refusal with the Host it saw', async () => {
    const api = await built.request('/api/health', { headers: { host: 'evil.example:8377' } });
    expect(api.status).toBe(403);
    expect(await api.json()).toEqual({
      error:
        'Easel does not answer to the name "evil.example" (this guards against DNS rebinding). If you opened Easel by this name on purpose, restart it with --allowed-hosts evil.example.',
    });
    const page = await built.request('/c/abc', { headers: { host: 'Evil.Example.' } });
    expect(page.status).toBe(403);
    expect(await page.text()).toBe(
      'Easel does not answer to the name "evil.example" (this guards against DNS rebinding). If you opened Easel by this name on purpose, restart it with --allowed-hosts evil.example.',
    );
    expect(built.logged('WARN').slice(-2)).toEqual([
      'WARN  refused a request for another host name {"method":"GET","path":"/api/health","host":"evil.example:8377"}',
      'WARN  refused a request for another host name {"method":"GET","path":"/c/abc","host":"Evil.Example."}',
    ]);
  });

  it('refuses a request with no Host, or one that is not a host name, with the sentence that says so', async () => {
    const none = await built.app.request('/api/health');
    expect(none.status).toBe(403);
    expect(await none.json()).toEqual({ error: NO_HOST });
    expect(built.logged('WARN').at(-1)).toBe('WARN  refused a request for another host name {"method":"GET","path":"/api/health"}');
    // User info or a path in the Host would make a URL parser read `localhost` out of it: each is refused whole.
    for (const host of ['evil.example@localhost', 'localhost/evil', 'localhost?x', 'localhost#x', 'local\\host', 'evil example', 'localhost:99999']) {
      const response = await built.request('/', { headers: { host } });
      expect(response.status, host).toBe(403);
      expect(await response.text(), host).toBe(NO_HOST);
    }
  });

  it('answers an IPv6 address given bare (as main.ts lists the machine\'s addresses) in the bracketed form a browser sends', async () => {
    for (const host of ['[2001:db8::5]:8377', '[2001:DB8:0::5]']) {
      expect((await built.request('/api/health', { headers: { host } })).status, host).toBe(200);
    }
    expect((await built.request('/api/health', { headers: { host: '[2001:db8::6]:8377' } })).status).toBe(403);
  });

  it('skips an entry it cannot read and still answers the others, refusing the rest with 403', async () => {
    expect((await built.request('/api/health', { headers: { host: 'my-laptop.local:1' } })).status).toBe(200);
    const other = await built.request('/api/health', { headers: { host: 'elsewhere.example' } });
    expect(other.status).toBe(403);
    expect(((await other.json()) as { error: string }).error).toContain('--allowed-hosts elsewhere.example.');
  });

  it('reads a Host with a non-breaking space around it as the name inside', async () => {
    // HTTP trims only spaces and tabs; a latin-1 0xA0 byte reaches the guard, whose trim() removes it.
    expect((await built.request('/api/health', { headers: { host: '\u00a0localhost\u00a0' } })).status).toBe(200);
    expect((await built.request('/api/health', { headers: { host: '\u00a0evil.example' } })).status).toBe(403);
  });
});

describe('cross-site writes at their edges', () => {
  let built: Built;
  beforeAll(() => {
    built = buildApp({ allowedHosts: [] });
  });
  afterAll(() => built.close());

  it('takes a write from the own name over https (a TLS proxy in front), and refuses other schemes on the same host', async () => {
    const https = await built.request('/api/conversations', { method: 'POST', headers: { origin: 'https://127.0.0.1:8377' } });
    expect(https.status).toBe(201);
    for (const origin of ['ftp://127.0.0.1:8377', 'ws://127.0.0.1:8377', 'chrome-extension://127.0.0.1:8377']) {
      const response = await built.request('/api/conversations', { method: 'POST', headers: { origin } });
      expect(response.status, origin).toBe(403);
    }
  });

  it('refuses with the exact sentence (JSON on the API, text on the page) and logs origin and Sec-Fetch-Site', async () => {
    const api = await built.request('/api/conversations', { method: 'POST', headers: { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' } });
    expect(api.status).toBe(403);
    expect(await api.json()).toEqual({ error: CROSS_SITE });
    const page = await built.request('/c', { method: 'POST', headers: { 'sec-fetch-site': 'same-site' } });
    expect(page.status).toBe(403);
    expect(await page.text()).toBe(CROSS_SITE);
    expect(built.logged('WARN').slice(-2)).toEqual([
      'WARN  refused a write from another site {"method":"POST","path":"/api/conversations","origin":"http://evil.example","secFetchSite":"cross-site"}',
      'WARN  refused a write from another site {"method":"POST","path":"/c","secFetchSite":"same-site"}',
    ]);
  });

  it('lets reads through whatever site they come from: HEAD as well as GET', async () => {
    const foreign = { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' };
    expect((await built.request('/api/health', { method: 'HEAD', headers: foreign })).status).toBe(200);
    expect((await built.request('/api/health', { headers: foreign })).status).toBe(200);
    // Every other method is a write.
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      expect((await built.request('/api/health', { method, headers: foreign })).status, method).toBe(403);
    }
  });
});

describe('token mode at its edges', () => {
  let built: Built;
  beforeAll(() => {
    built = buildApp({ allowedHosts: [], token: TOKEN });
  });
  afterAll(() => built.close());

  it('asks for the token with the exact sentence, no-store, and a debug line saying no bearer was sent', async () => {
    const response = await built.request('/api/health');
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ error: `Easel needs its access token. ${HOW}` });
    // A refusal must not be cached and replayed once the token is given.
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="Easel"');
    expect(built.logged('DEBUG').at(-1)).toBe('DEBUG asked for the token {"method":"GET","path":"/api/health","bearer":false}');
  });

  it('says a wrong bearer token is not the right one, and logs that a bearer was sent', async () => {
    const response = await built.request('/api/health', { headers: { authorization: 'Bearer wrong-token-value-1234' } });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ error: `That token is not the right one. ${HOW}` });
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(built.logged('DEBUG').at(-1)).toBe('DEBUG asked for the token {"method":"GET","path":"/api/health","bearer":true}');
  });

  it('shows the page form without any alert when no token was offered', async () => {
    const response = await built.request('/c/abc');
    expect(response.status).toBe(401);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const page = await response.text();
    expect(page).toMatch(/^<!doctype html>\n<html lang="en">/);
    expect(page).toContain('<title>Easel: enter the token</title>');
    expect(page).toContain('<h1>Easel needs its token</h1>');
    // The form sends the token back to the page that asked for it.
    expect(page).toContain('<form method="get" action="/c/abc">');
    expect(page).toContain('<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>');
    expect(page).not.toContain('role="alert"');
  });

  it('answers a wrong ?token= with the form and its alert, and logs a warning without the token', async () => {
    const response = await built.request('/c/abc?token=not-it');
    expect(response.status).toBe(401);
    expect(await response.text()).toContain(
      '<p role="alert"><strong>That token is not the right one. Copy it again from the line Easel printed when it started.</strong></p>',
    );
    expect(built.logged('WARN').at(-1)).toBe('WARN  refused a wrong token {"method":"GET","path":"/c/abc"}');
    expect(built.lines.join('\n')).not.toContain('not-it');
  });

  it('takes ?token= on HEAD as on GET: the cookie and the redirect', async () => {
    const response = await built.request(`/c/abc?token=${TOKEN}`, { method: 'HEAD' });
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe('/c/abc');
    expect(response.headers.get('set-cookie')).toMatch(new RegExp(`^easel_token=${TOKEN};`));
  });

  it('reads the bearer header strictly: the scheme first, one token, nothing after it', async () => {
    for (const authorization of [`XBearer ${TOKEN}`, `Basic Bearer ${TOKEN}`, `Bearer ${TOKEN} extra`, `Bearer ${TOKEN} ${TOKEN}`, `Bearer${TOKEN}`]) {
      const response = await built.request('/api/health', { headers: { authorization } });
      expect(response.status, authorization).toBe(401);
    }
  });

  it('takes the bearer token whatever whitespace is around it and whatever the scheme\'s case', async () => {
    // Spaces after the token are trimmed by HTTP itself; a non-breaking space (latin-1 0xA0) reaches the parser.
    for (const authorization of [`Bearer  ${TOKEN}`, `bearer\t${TOKEN}`, `BEARER ${TOKEN}\u00a0`, `Bearer \u00a0${TOKEN}`]) {
      const response = await built.request('/api/health', { headers: { authorization } });
      expect(response.status, JSON.stringify(authorization)).toBe(200);
    }
  });
});

describe('the app\'s own answers', () => {
  let built: Built;
  let id: string;
  beforeAll(async () => {
    built = buildApp({ allowedHosts: [] });
    id = ((await (await built.request('/api/conversations', { method: 'POST' })).json()) as { id: string }).id;
  });
  afterAll(() => built.close());

  it('refuses a text body over 64 KiB with the exact JSON sentence, and leaves the prompt as it was', async () => {
    const response = await built.request(`/api/conversations/${id}/prompt`, {
      method: 'PUT',
      headers: JSON_TYPE,
      body: JSON.stringify({ prompt: 'x'.repeat(70_000) }),
    });
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({ error: 'The request body is larger than 64 KiB; send less text.' });
    const stored = (await (await built.request(`/api/conversations/${id}`)).json()) as { prompt: string };
    expect(stored.prompt).not.toContain('xxxx');
  });

  it('gives the larger import limit only to a POST on an import path', async () => {
    // A PUT to the import address is no import: the text limit holds for it.
    const response = await built.request('/api/conversations/import', { method: 'PUT', headers: JSON_TYPE, body: 'x'.repeat(70_000) });
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({ error: 'The request body is larger than 64 KiB; send less text.' });
  });

  it('answers a bad image name and a missing image with a plain "Not found"', async () => {
    for (const path of ['/images/nope.png', '/images/0123456789abcdef0123456789abcdef.png', '/images/0123456789ABCDEF0123456789ABCDEF.png']) {
      const response = await built.request(path);
      expect(response.status, path).toBe(404);
      expect(await response.text(), path).toBe('Not found');
    }
  });

  it('serves an image that exists, forever cacheable', async () => {
    const name = 'fedcba9876543210fedcba9876543210.png';
    writeFileSync(join(built.imagesDir, name), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
    const response = await built.request(`/images/${name}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('image/png');
    expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(new Uint8Array([0x89, 0x50, 0x4e, 0x47]));
  });

  it('answers an unknown page path with "Not found" and an unknown API route with the route it looked for', async () => {
    const page = await built.request('/nowhere');
    expect(page.status).toBe(404);
    expect(await page.text()).toBe('Not found');
    const api = await built.request('/api/nowhere', { method: 'DELETE' });
    expect(api.status).toBe(404);
    expect(await api.json()).toEqual({ error: 'No API route DELETE /api/nowhere. See docs/API.md.' });
  });
});

describe('an internal error', () => {
  it('is answered with the exact sentence and logged with the request and the error', async () => {
    const page = new Hono().get('/boom', () => {
      throw new Error('boom');
    });
    const built = buildApp({ allowedHosts: [] }, page);
    try {
      const response = await built.request('/boom');
      expect(response.status).toBe(500);
      expect(await response.text()).toBe('Easel hit an internal error; the details are in the server log.');
      expect(built.logged('ERROR')).toEqual(['ERROR request failed {"method":"GET","path":"/boom","error":{"name":"Error","message":"boom"}}']);
    } finally {
      built.close();
    }
  });
});

describe('on a real port', () => {
  const { easel } = useEasel('all tests', { flags: ['--token', TOKEN] });
  let port: string;
  beforeAll(() => {
    port = new URL(easel.url).port;
  });

  it('a HEAD with ?token= sets the cookie as a GET does', async () => {
    const response = await rawRequest(easel.url, { method: 'HEAD', path: `/?token=${TOKEN}` });
    expect(response.status).toBe(303);
    expect(response.headers['set-cookie']?.[0]).toMatch(new RegExp(`^easel_token=${TOKEN};`));
  });

  it('a bearer header with a non-breaking space after the token still works, extra words do not', async () => {
    expect((await rawRequest(easel.url, { path: '/api/health', headers: { authorization: `Bearer ${TOKEN}\u00a0` } })).status).toBe(200);
    expect((await rawRequest(easel.url, { path: '/api/health', headers: { authorization: `Bearer  ${TOKEN}` } })).status).toBe(200);
    expect((await rawRequest(easel.url, { path: '/api/health', headers: { authorization: `Bearer ${TOKEN} x` } })).status).toBe(401);
  });

  it('a write with the own Origin over https passes the cross-site rule (then needs the token)', async () => {
    const bearer = { authorization: `Bearer ${TOKEN}` };
    const created = await rawRequest(easel.url, { method: 'POST', path: '/api/conversations', headers: { ...bearer, origin: `https://127.0.0.1:${port}` } });
    expect(created.status).toBe(201);
    const foreign = await rawRequest(easel.url, { method: 'POST', path: '/api/conversations', headers: { ...bearer, origin: `ftp://127.0.0.1:${port}` } });
    expect(foreign.status).toBe(403);
  });
});
