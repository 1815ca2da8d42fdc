import { afterEach, describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import type { FakeA1111, FakeA1111Options } from '../../fakes/fake-a1111.ts';
import { decodeSolidPng } from '../../fakes/png-bytes.ts';
import { REQUEST, expectBackendError, findClosedUrl, recordProgress, startStatusServer, cancelAtFirstProgress } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function startFake(options: FakeA1111Options = {}): Promise<FakeA1111> {
  const fake = await createFakeA1111({ stepDelayMs: 5, ...options });
  cleanups.push(() => fake.close());
  return fake;
}

const noProgress = () => {};

describe('createA1111Backend', () => {
  it('generates a real PNG of the requested size and reports what A1111 says it used', async () => {
    const fake = await startFake();
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });

    const size = readPngSize(result.png);
    expect(size).toEqual({ ok: true, value: { width: 64, height: 96 } });
    expect(decodeSolidPng(result.png).width).toBe(64);
    expect(result).toMatchObject({ seed: REQUEST.seed, steps: 6, cfg: 7.5, sampler: 'Euler', model: 'v1-5-pruned-emaonly' });
    const call = fake.requests.find((request) => request.path === '/sdapi/v1/txt2img');
    expect(call?.body).toEqual({
      prompt: REQUEST.prompt,
      negative_prompt: REQUEST.negativePrompt,
      steps: 6,
      cfg_scale: 7.5,
      seed: REQUEST.seed,
      width: 64,
      height: 96,
      batch_size: 1,
      n_iter: 1,
    });
  });

  it("reports progress step by step by polling /sdapi/v1/progress, with A1111's own fraction", async () => {
    const fake = await startFake({ stepDelayMs: 40 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate({ ...REQUEST, steps: 8 }, { signal: new AbortController().signal, onProgress });

    expect(events.length).toBeGreaterThanOrEqual(2);
    const steps = events.map((event) => event.step ?? -1);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    for (const event of events) {
      expect(event.steps).toBe(8);
      // sampling_step is 0-based: "step 2 of 8" is sampling_step 1, progress 0.01 + 1/8 (api.py:609-614).
      expect(event.step).toBeGreaterThanOrEqual(2);
      expect(event.fraction).toBeCloseTo(0.01 + ((event.step ?? 0) - 1) / 8);
    }
    expect(fake.requests.some((request) => request.path === '/sdapi/v1/progress' && request.query['skip_current_image'] === 'true')).toBe(true);
  });

  it('cancels on the backend when the signal aborts and rejects with cancelled', async () => {
    const fake = await startFake({ stepDelayMs: 50 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const error = await cancelAtFirstProgress(backend, { ...REQUEST, steps: 100 });
    expect(error.message).toContain(fake.url);
    expect(fake.interrupts).toBe(1);
  });

  it('still rejects with cancelled when A1111 answers the interrupted job with 200 and an image', async () => {
    const fake = await startFake({ stepDelayMs: 50 });
    // A fetch that ignores our abort, so the half-finished 200 answer really reaches the adapter.
    const stubbornFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/txt2img') ? fetch(input, { ...init, signal: null }) : fetch(input, init);
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, fetch: stubbornFetch });
    await cancelAtFirstProgress(backend, { ...REQUEST, steps: 100 });
    expect(fake.interrupts).toBe(1);
  });

  it('rejects at once, without calling the backend, when the signal is already aborted', async () => {
    const fake = await startFake();
    const backend = createA1111Backend({ url: fake.url });

    await expectBackendError(backend.generate(REQUEST, { signal: AbortSignal.abort(), onProgress: noProgress }), 'cancelled');
    expect(fake.requests.filter((request) => request.path === '/sdapi/v1/txt2img')).toHaveLength(0);
  });

  it('says how to start the backend when nothing listens at the URL', async () => {
    const url = await findClosedUrl();
    const backend = createA1111Backend({ url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'unreachable');
    expect(error.message).toContain(url);
    expect(error.message).toContain('--api');
    expect(error.message).toContain('--image-url');
  });

  it("surfaces A1111's own error words as backend_error", async () => {
    const fake = await startFake({
      failWith: {
        status: 500,
        body: { error: 'OutOfMemoryError', detail: '', body: '', errors: 'CUDA out of memory. Tried to allocate 2.00 GiB' },
      },
    });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB');
  });

  it('turns a 422 validation detail list into readable field messages', async () => {
    const fake = await startFake();
    const corruptingFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/txt2img')
        ? fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(String(init?.body)), steps: 'many', cfg_scale: 'high' }) })
        : fetch(input, init);
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, fetch: corruptingFetch });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('HTTP 422');
    expect(error.message).toContain('steps: value is not a valid integer');
    expect(error.message).toContain('cfg_scale: value is not a valid float');
  });

  it('times out, interrupts the backend and rejects with timeout', async () => {
    const fake = await startFake({ hang: true });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, timeoutMs: 150 });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'timeout');
    expect(error.message).toContain('150 ms');
    expect(fake.interrupts).toBe(1);
  });

  it('rejects with bad_response when the answer holds no image', async () => {
    const fake = await startFake({ failWith: { status: 200, body: { images: [], parameters: {}, info: '{}' } } });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'bad_response');
  });

  it('rejects with bad_response, naming the setting, when A1111 sends JPEG', async () => {
    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16]).toString('base64');
    const fake = await startFake({ failWith: { status: 200, body: { images: [jpeg], parameters: {}, info: '{}' } } });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'bad_response');
    expect(error.message).toContain('JPEG');
    expect(error.message).toContain('png');
  });

  it('checkHealth: reachable with the model name when A1111 answers', async () => {
    const fake = await startFake();
    const health = await createA1111Backend({ url: fake.url }).checkHealth();
    expect(health).toMatchObject({ reachable: true, server: 'AUTOMATIC1111' });
    expect(health.detail).toContain('v1-5-pruned-emaonly');
  });

  it('checkHealth: a server without /sdapi/v1/options answers, but is told to need --api (sd-server has that route now)', async () => {
    const other = await startStatusServer(404);
    cleanups.push(() => other.close());
    const health = await createA1111Backend({ url: other.url }).checkHealth();
    expect(health).toEqual({ reachable: true, detail: expect.stringContaining('--api') });
    expect(health.detail).not.toContain('sd-server');
  });

  it('checkHealth: unreachable when nothing listens, without throwing', async () => {
    const url = await findClosedUrl();
    const health = await createA1111Backend({ url }).checkHealth();
    expect(health.reachable).toBe(false);
    expect(health.detail).toContain(url);
  });
});

describe('fake A1111 fidelity', () => {
  it('answers a body that is not a JSON object with a FastAPI 422 detail list', async () => {
    const fake = await startFake();
    const response = await fetch(`${fake.url}/sdapi/v1/txt2img`, { method: 'POST', body: '[1, 2]' });
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({ detail: [{ loc: ['body'], msg: 'value is not a valid dict', type: 'type_error.dict' }] });
  });

  it('reads the body as JSON only without a content type or with application/json, as FastAPI does', async () => {
    const fake = await startFake();
    const body = JSON.stringify({ prompt: 'x', steps: 1, width: 8, height: 8 });
    const asText = await fetch(`${fake.url}/sdapi/v1/txt2img`, { method: 'POST', headers: { 'content-type': 'text/plain;charset=UTF-8' }, body });
    expect(asText.status).toBe(422);
    expect(await asText.json()).toEqual({ detail: [{ loc: ['body'], msg: 'value is not a valid dict', type: 'type_error.dict' }] });
    const asJson = await fetch(`${fake.url}/sdapi/v1/txt2img`, { method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8' }, body });
    expect(asJson.status).toBe(200);
  });

  it('uses a random seed when -1 is sent and reports it in info', async () => {
    const fake = await startFake();
    const response = await fetch(`${fake.url}/sdapi/v1/txt2img`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'x', seed: -1, steps: 1, width: 8, height: 8 }),
    });
    const body = (await response.json()) as { info: string };
    const info = JSON.parse(body.info) as { seed: number; all_seeds: number[] };
    expect(info.seed).toBeGreaterThanOrEqual(0);
    expect(info.all_seeds).toEqual([info.seed]);
  });
});
