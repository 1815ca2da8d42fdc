// The a1111 adapter against stable-diffusion.cpp's sd-server (its /sdapi/v1 routes): what it records, the
// progress and interrupt sd-server lacks, its words, and how the adapter tells sd-server from A1111.
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { readPngSize, readPngText } from '../../../server/png/index.ts';
import { createFakeSdServer } from '../../fakes/fake-sd-server.ts';
import { REQUEST, a1111Answer, abortedSignal, closeAfterTest, expectBackendError, recordProgress, run, serveRoutes, startFakeA1111, startFakeSdServer } from './helpers.ts';

describe('the a1111 backend against sd-server', () => {
  it('records the steps sd-server really ran (clamped to 100) and the seed and model its info names', async () => {
    const fake = await startFakeSdServer();
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate({ ...REQUEST, steps: 120 }, run());

    expect(fake.requests.find((r) => r.path === '/sdapi/v1/txt2img')?.body).toMatchObject({ steps: 120 });
    expect(fake.runs).toEqual([expect.objectContaining({ steps: 100, seed: REQUEST.seed })]);
    expect(result).toMatchObject({ steps: 100, seed: REQUEST.seed, cfg: 7.5, model: 'v1-5-pruned-emaonly.safetensors' });
    // "NONE" is sd.cpp's word for "the model's default sampler", not a sampler's name.
    expect(result.sampler).toBeUndefined();
    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
    // sd.cpp's own parameters, with its SDCPP block, arrive in the PNG.
    expect(readPngText(result.png)['parameters']).toContain('Version: stable-diffusion.cpp, SDCPP: {');
  });

  it('polls for progress once, finds none, and reports no percentage', async () => {
    const fake = await startFakeSdServer({ stepDelayMs: 20 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate(REQUEST, run(undefined, onProgress));
    await backend.generate(REQUEST, run(undefined, onProgress));

    expect(events).toEqual([]);
    // One 404 is enough: the second image does not ask again.
    expect(fake.requests.filter((request) => request.path === '/sdapi/v1/progress')).toHaveLength(1);
  });

  it("keeps sd-server's own words from a {\"error\": \"server_error\", \"message\"} answer", async () => {
    const fake = await startFakeSdServer();
    const corruptingFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/txt2img') ? fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(String(init?.body)), steps: 'many' }) }) : fetch(input, init);
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, fetch: corruptingFetch });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('server_error: [json.exception.type_error.302] type must be number, but is string');
  });

  it('a cancel says sd-server cannot stop a running image, and sends no interrupt it does not have', async () => {
    const fake = await startFakeSdServer({ stepDelayMs: 20 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    expect((await backend.checkHealth()).server).toBe('stable-diffusion.cpp sd-server');
    const controller = new AbortController();

    const generation = backend.generate({ ...REQUEST, steps: 50 }, run(controller.signal));
    await expect.poll(() => fake.requests.some((r) => r.path === '/sdapi/v1/txt2img')).toBe(true);
    controller.abort();

    const error = await expectBackendError(generation, 'cancelled');
    expect(error.message).toContain('cannot stop an image once it runs');
    expect(fake.requests.filter((r) => r.path === '/sdapi/v1/interrupt')).toEqual([]);
  });

  it('an answer over the cap names sd-server, not AUTOMATIC1111, once the server is known to be sd-server', async () => {
    const fake = await startFakeSdServer();
    // sd-server's answer declares 150 MB: refused at its Content-Length, before any of it is read.
    const hugeFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/txt2img')
        ? Promise.resolve(new Response('{"images": ["', { headers: { 'content-type': 'application/json', 'content-length': String(150 * 1024 * 1024) } }))
        : fetch(input, init);
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, fetch: hugeFetch });
    expect((await backend.checkHealth()).server).toBe('stable-diffusion.cpp sd-server');

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'too_large');
    expect(error.message).toBe(
      `stable-diffusion.cpp's sd-server at ${fake.url} sent an answer of 150 MB, more than Easel accepts for one image (64 MB of PNG); Easel stopped reading it and kept nothing. Lower the image size.`,
    );
  });

  it('checkHealth names sd-server (found by /sdcpp/v1/capabilities, although it answers /sdapi/v1/options too)', async () => {
    const fake = await startFakeSdServer();
    const health = await createA1111Backend({ url: fake.url }).checkHealth();
    expect(health).toEqual({ reachable: true, server: 'stable-diffusion.cpp sd-server', detail: expect.stringContaining('sd-server answers') });
    expect(health.detail).toContain('v1-5-pruned-emaonly.safetensors');
    expect(health.detail).toContain('no progress');
  });
});

describe('what the A1111 adapter learns about the server', () => {
  const sdServerCancel = (url: string) =>
    `The image was cancelled. stable-diffusion.cpp's sd-server at ${url} cannot stop an image once it runs, so it finishes this one and Easel discards it; the next image starts after it.`;

  it('a server without /progress is sd-server from then on', async () => {
    const server = await serveRoutes({ '/sdapi/v1/progress': { status: 404, text: '' }, '/sdapi/v1/txt2img': { ...a1111Answer({}), delayMs: 100 } });
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 2 });

    await backend.generate(REQUEST, run());
    const error = await expectBackendError(backend.generate(REQUEST, run(abortedSignal(new Error('stop')))), 'cancelled');

    expect(error.message).toBe(sdServerCancel(server.url));
  });

  it("an answer whose info says version stable-diffusion.cpp is sd-server's; A1111's answers never make it one", async () => {
    const server = await serveRoutes({ '/sdapi/v1/txt2img': a1111Answer({ version: 'stable-diffusion.cpp' }) });
    const sdServer = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    await sdServer.generate(REQUEST, run());
    expect((await expectBackendError(sdServer.generate(REQUEST, run(abortedSignal(new Error('stop')))), 'cancelled')).message).toBe(sdServerCancel(server.url));

    const fake = await startFakeA1111({ stepDelayMs: 1 });
    const a1111 = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    await a1111.generate(REQUEST, run());
    expect((await expectBackendError(a1111.generate(REQUEST, run(abortedSignal(new Error('stop')))), 'cancelled')).message).toBe(
      `The image was cancelled; AUTOMATIC1111 at ${fake.url} was asked to stop.`,
    );
  });

  it('a timeout on sd-server says Easel stopped waiting, since sd-server cannot stop the image', async () => {
    const server = await serveRoutes({ '/sdcpp/v1/capabilities': { json: { model: { name: 'sd.gguf' } } }, '/sdapi/v1/options': { json: {} }, '/sdapi/v1/txt2img': 'hang' });
    const backend = createA1111Backend({ url: server.url, timeoutMs: 100, pollIntervalMs: 3_600_000 });
    await backend.checkHealth();

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'timeout');

    expect(error.message).toBe(
      `stable-diffusion.cpp's sd-server at ${server.url} did not finish the image within 100 ms, Easel stopped waiting (sd-server cannot stop an image once it runs: it finishes it, and Easel discards it). Lower the steps or size, or raise the image timeout.`,
    );
    expect(server.requests.some((request) => request.path === '/sdapi/v1/interrupt')).toBe(false);
  });

  it('after a health check finds sd-server, a cancel says it cannot stop a running image, and keeps its cause', async () => {
    const fake = await closeAfterTest(createFakeSdServer());
    const backend = createA1111Backend({ url: fake.url });
    const reason = new Error('the user pressed Cancel');

    await backend.checkHealth();
    const error = await expectBackendError(backend.generate(REQUEST, run(abortedSignal(reason))), 'cancelled');

    expect(error.message).toBe(sdServerCancel(fake.url));
    expect(error.cause).toBe(reason);
  });
});
