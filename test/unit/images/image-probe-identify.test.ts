// probeImageServer (--image-backend auto): which image server answers at an address, against each fake and
// against answers that only look alike, and what it says when no image server answers.
import { describe, expect, it } from 'vitest';
import { probeImageServer, type FoundImageServer } from '../../../server/image-probe/index.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../../fakes/fake-comfyui.ts';
import { createFakeLocalAi } from '../../fakes/fake-localai.ts';
import { createFakeOpenAiImages } from '../../fakes/fake-openai-images.ts';
import { createFakeSdServer } from '../../fakes/fake-sd-server.ts';
import { closeAfterTest, findClosedUrl, serveRoutes, startStatusServer, type Route } from './helpers.ts';

/** Most servers answer a path they do not know with a plain 404. */
const serve = (routes: Record<string, Route>) => serveRoutes(routes, { notFound: { status: 404, text: '404 page not found' } });

const MODELS = { status: 200, json: { object: 'list', data: [{ id: 'stablediffusion', object: 'model' }] } };

describe('probeImageServer: which server answers', () => {
  const cases: Array<[string, () => Promise<{ url: string; close(): Promise<void> }>, Partial<FoundImageServer>]> = [
    ["stable-diffusion.cpp's sd-server (which answers /sdapi/v1/options and /v1/models too)", () => createFakeSdServer(), { backend: 'a1111', server: 'stable-diffusion.cpp sd-server', evidence: 'GET /sdcpp/v1/capabilities' }],
    ['AUTOMATIC1111', () => createFakeA1111(), { backend: 'a1111', server: 'AUTOMATIC1111', evidence: 'GET /sdapi/v1/options' }],
    ['ComfyUI', () => createFakeComfyUi(), { backend: 'comfyui', server: 'ComfyUI 0.3.64', evidence: 'GET /system_stats' }],
    ['LocalAI (which answers /v1/models too)', () => createFakeLocalAi(), { backend: 'localai', server: 'LocalAI', evidence: 'GET /readyz' }],
    ['LocalAI while it preloads (503 starting)', () => createFakeLocalAi({ starting: true }), { backend: 'localai' }],
    ['a server with OpenAI’s API', () => createFakeOpenAiImages(), { backend: 'openai', evidence: 'GET /v1/models' }],
  ];

  for (const [name, start, expected] of cases) {
    it(`finds ${name}`, async () => {
      const fake = await closeAfterTest(start());
      expect(await probeImageServer(`${fake.url}/`)).toEqual({ found: { url: fake.url, backend: expect.any(String), server: expect.any(String), evidence: expect.any(String), ...expected } });
    });
  }

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

  it('keeps a /v1 inside the address: only a trailing /v1 is the OpenAI API root', async () => {
    const server = await serve({ '/api/v1/sd/system_stats': { status: 200, json: { system: {} } } });

    const result = await probeImageServer(`${server.url}/api/v1/sd/`);

    expect(result.found).toMatchObject({ backend: 'comfyui', url: `${server.url}/api/v1/sd` });
  });
});

describe('probeImageServer: when no image server answers', () => {
  it('says when something answers that is no image server Easel knows, and when nothing answers', async () => {
    const other = await closeAfterTest(startStatusServer(404));
    expect(await probeImageServer(other.url)).toEqual({ found: null, reachable: true, detail: expect.stringContaining('not like any image server Easel knows') });
    const closed = await findClosedUrl();
    expect(await probeImageServer(closed)).toEqual({ found: null, reachable: false, detail: `Nothing answers at ${closed} (ECONNREFUSED).` });
  });

  it('says when the server did not answer in time, and when nothing listens', async () => {
    const silent = await serve({ '/sdcpp/v1/capabilities': 'hang', '/sdapi/v1/options': 'hang', '/system_stats': 'hang', '/readyz': 'hang', '/v1/models': 'hang' });
    const slow = await probeImageServer(silent.url, { timeoutMs: 100 });
    expect(slow).toEqual({ found: null, reachable: false, detail: `The server at ${silent.url} did not answer within 100 ms.` });

    const closed = await findClosedUrl();
    const nothing = await probeImageServer(closed);
    expect(nothing).toEqual({ found: null, reachable: false, detail: `Nothing answers at ${closed} (ECONNREFUSED).` });
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
