// --image-backend auto at its edges: how it reads an address, the answers that look alike, and what it says
// when nothing is found. A small server answers exactly the routes each case gives (every other path 404).
import { describe, expect, it } from 'vitest';
import { createAutoImageBackend, probeImageServer, type FoundImageServer, type ProbeResult } from '../../../server/image-probe/index.ts';
import type { ImageBackend } from '../../../server/core/ports.ts';
import { findClosedUrl, serveRoutes, type Route } from './helpers.ts';

/** Most servers answer a path they do not know with a plain 404. */
const serve = (routes: Record<string, Route>) => serveRoutes(routes, { notFound: { status: 404, text: '404 page not found' } });

const MODELS = { status: 200, json: { object: 'list', data: [{ id: 'stablediffusion', object: 'model' }] } };

describe('probeImageServer at its edges', () => {
  it('reads an address given with /v1 and trailing slashes as the server itself', async () => {
    const server = await serve({ '/v1/models': MODELS });

    const result = await probeImageServer(`${server.url}/v1//`);

    expect(result.found).toEqual({ backend: 'openai', server: 'an OpenAI-compatible image server', url: server.url, evidence: 'GET /v1/models' });
    const paths = server.requests.map((request) => request.path);
    expect(paths).toContain('/v1/models');
    expect(paths.every((path) => !path.startsWith('/v1/v1'))).toBe(true);
  });

  it('names ComfyUI with its version when it gives one, and without when it does not', async () => {
    const withVersion = await serve({ '/system_stats': { status: 200, json: { system: { comfyui_version: '0.3.64' }, devices: [] } } });
    const without = await serve({ '/system_stats': { status: 200, json: { system: {}, devices: [] } } });
    const notComfy = await serve({ '/system_stats': { status: 200, json: { uptime: 3 } } });

    expect((await probeImageServer(withVersion.url)).found?.server).toBe('ComfyUI 0.3.64');
    expect((await probeImageServer(without.url)).found).toMatchObject({ backend: 'comfyui', server: 'ComfyUI' });
    expect((await probeImageServer(notComfy.url)).found).toBeNull();
  });

  it('takes a LocalAI that is still loading its models (503 "starting") as LocalAI, but not a bare /readyz', async () => {
    const starting = await serve({ '/readyz': { status: 503, json: { status: 'starting' } } });
    const otherReady = await serve({ '/readyz': { status: 200, json: { ok: true } }, '/v1/models': { status: 200, json: { models: [] } } });
    const down = await serve({ '/readyz': { status: 503, json: { status: 'down' } } });

    expect((await probeImageServer(starting.url)).found).toMatchObject({ backend: 'localai', evidence: 'GET /readyz' });
    const other = await probeImageServer(otherReady.url);
    expect(other).toMatchObject({ found: null, reachable: true });
    expect(other.found === null && other.detail).toContain(`A server answers at ${otherReady.url}, but not like any image server Easel knows`);
    expect((await probeImageServer(down.url)).found).toBeNull();
  });

  it('an A1111 or sd-server route that answers with something else than an object is not taken for one', async () => {
    const server = await serve({ '/sdcpp/v1/capabilities': { status: 200, json: ['x'] }, '/sdapi/v1/options': { status: 200, json: 'ok' } });

    expect((await probeImageServer(server.url)).found).toBeNull();
  });

  it('says when the server did not answer in time, and when nothing listens', async () => {
    const silent = await serve({ '/sdcpp/v1/capabilities': 'hang', '/sdapi/v1/options': 'hang', '/system_stats': 'hang', '/readyz': 'hang', '/v1/models': 'hang' });
    const slow = await probeImageServer(silent.url, { timeoutMs: 100 });
    expect(slow).toEqual({ found: null, reachable: false, detail: `The server at ${silent.url} did not answer within 100 ms.` });

    const closed = await findClosedUrl();
    const nothing = await probeImageServer(closed);
    expect(nothing).toEqual({ found: null, reachable: false, detail: `Nothing answers at ${closed} (ECONNREFUSED).` });
  });

  it('keeps a /v1 inside the address: only a trailing /v1 is the OpenAI API root', async () => {
    const server = await serve({ '/api/v1/sd/system_stats': { status: 200, json: { system: {} } } });

    const result = await probeImageServer(`${server.url}/api/v1/sd/`);

    expect(result.found).toMatchObject({ backend: 'comfyui', url: `${server.url}/api/v1/sd` });
  });

  it('a server that answers one of the routes and cuts the others is reachable, but not an image server', async () => {
    const server = await serve({ '/sdcpp/v1/capabilities': 'cut', '/sdapi/v1/options': 'cut', '/system_stats': 'cut', '/readyz': 'cut' });

    const result = await probeImageServer(server.url);

    expect(result).toMatchObject({ found: null, reachable: true });
    expect(result.found === null && result.detail).toContain(`A server answers at ${server.url}, but not like any image server`);
  });

  it('one route left unanswered is a timeout, whatever the others did', async () => {
    const server = await serve({ '/sdcpp/v1/capabilities': 'cut', '/sdapi/v1/options': 'cut', '/system_stats': 'cut', '/readyz': 'hang', '/v1/models': 'cut' });

    const result = await probeImageServer(server.url, { timeoutMs: 150 });

    expect(result).toEqual({ found: null, reachable: false, detail: `The server at ${server.url} did not answer within 150 ms.` });
  });

  it('names the first error code there is, and none when no error has one', async () => {
    // Stands for failures that carry no code (undici's "fetch failed" with a cause of its own, a redirect loop).
    const uncoded = (): Promise<Response> => Promise.reject(new TypeError('fetch failed'));
    const none = await probeImageServer('http://images.invalid:7860', { fetch: uncoded });
    expect(none).toEqual({ found: null, reachable: false, detail: 'Nothing answers at http://images.invalid:7860.' });

    let calls = 0;
    const mixed = (): Promise<Response> => {
      calls += 1;
      return Promise.reject(calls === 1 ? new TypeError('fetch failed') : new TypeError('fetch failed', { cause: Object.assign(new Error('getaddrinfo'), { code: 'ENOTFOUND' }) }));
    };
    const named = await probeImageServer('http://images.invalid:7860', { fetch: mixed });
    expect(named).toEqual({ found: null, reachable: false, detail: 'Nothing answers at http://images.invalid:7860 (ENOTFOUND).' });
  });
});

describe('createAutoImageBackend', () => {
  const silent = { debug() {}, info() {}, warn() {}, error() {} };
  /** An adapter standing for the one auto chose: what it answers is what the test sets. */
  const adapterFor = (found: FoundImageServer, server?: string): ImageBackend => ({
    name: found.backend,
    url: found.url,
    generate: () => Promise.reject(new Error('not in this test')),
    checkHealth: () => Promise.resolve({ reachable: true, detail: 'answers', ...(server === undefined ? {} : { server }) }),
  });

  it('before it has looked, it is "auto" at the first address; after finding nothing, it says what each address said', async () => {
    const answers: Record<string, ProbeResult> = {
      'http://a': { found: null, reachable: true, detail: 'A server answers at http://a, but not like any image server Easel knows.' },
      'http://b': { found: null, reachable: false, detail: 'Nothing answers at http://b.' },
    };
    const backend = createAutoImageBackend({ urls: ['http://a', 'http://b'], probe: async (url) => answers[url] as ProbeResult, create: (found) => adapterFor(found), logger: silent });
    expect([backend.name, backend.url]).toEqual(['auto', 'http://a']);

    const health = await backend.checkHealth();

    // One address answered: the backend is reachable, just unknown.
    expect(health.reachable).toBe(true);
    expect(health.detail).toBe(
      'No image server found: A server answers at http://a, but not like any image server Easel knows. Nothing answers at http://b. Start one (AUTOMATIC1111 or Forge with --api, ComfyUI, LocalAI, stable-diffusion.cpp\'s sd-server), or set --image-url to where it runs; Easel looks again before the next image.',
    );
    const none = createAutoImageBackend({ urls: ['http://b'], probe: async (url) => answers[url] as ProbeResult, create: (found) => adapterFor(found), logger: silent });
    expect((await none.checkHealth()).reachable).toBe(false);
  });

  it('a probe that throws is reported, not thrown', async () => {
    const backend = createAutoImageBackend({ urls: ['http://a'], probe: () => Promise.reject(new Error('boom')), create: (found) => adapterFor(found), logger: silent });

    expect(await backend.checkHealth()).toEqual({ reachable: false, detail: 'Looking for the image server failed: Error: boom' });
  });

  it("names the server as the adapter does, or as the probe found it when the adapter says nothing", async () => {
    const found: FoundImageServer = { backend: 'a1111', server: 'AUTOMATIC1111', url: 'http://a', evidence: 'GET /sdapi/v1/options' };
    const named = createAutoImageBackend({ urls: ['http://a'], probe: async () => ({ found }), create: (f) => adapterFor(f, 'Forge'), logger: silent });
    const unnamed = createAutoImageBackend({ urls: ['http://a'], probe: async () => ({ found }), create: (f) => adapterFor(f), logger: silent });

    expect((await named.checkHealth()).server).toBe('Forge');
    expect(await unnamed.checkHealth()).toMatchObject({ server: 'AUTOMATIC1111', found: 'Found AUTOMATIC1111 at http://a (GET /sdapi/v1/options), so Easel uses --image-backend a1111.' });
    expect([unnamed.name, unnamed.url]).toEqual(['a1111', 'http://a']);
  });
});
