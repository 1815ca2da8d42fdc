// stable-diffusion.cpp's sd-server through the a1111 backend (its /sdapi/v1 routes), against the fake sd-server.
import { afterEach, describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { readPngSize, readPngText } from '../../../server/png/index.ts';
import { createFakeSdServer } from '../../fakes/fake-sd-server.ts';
import type { FakeSdServer, FakeSdServerOptions } from '../../fakes/fake-sd-server.ts';
import { REQUEST, expectBackendError, recordProgress } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function startFake(options: FakeSdServerOptions = {}): Promise<FakeSdServer> {
  const fake = await createFakeSdServer({ stepDelayMs: 2, ...options });
  cleanups.push(() => fake.close());
  return fake;
}

const noProgress = () => {};

describe('the a1111 backend against sd-server', () => {
  it('records the steps sd-server really ran (clamped to 100) and the seed and model its info names', async () => {
    const fake = await startFake();
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate({ ...REQUEST, steps: 120 }, { signal: new AbortController().signal, onProgress: noProgress });

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
    const fake = await startFake({ stepDelayMs: 20 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress });
    await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress });

    expect(events).toEqual([]);
    // One 404 is enough: the second image does not ask again.
    expect(fake.requests.filter((request) => request.path === '/sdapi/v1/progress')).toHaveLength(1);
  });

  it("keeps sd-server's own words from a {\"error\": \"server_error\", \"message\"} answer", async () => {
    const fake = await startFake();
    const corruptingFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/txt2img') ? fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(String(init?.body)), steps: 'many' }) }) : fetch(input, init);
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, fetch: corruptingFetch });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('server_error: [json.exception.type_error.302] type must be number, but is string');
  });

  it('a cancel says sd-server cannot stop a running image, and sends no interrupt it does not have', async () => {
    const fake = await startFake({ stepDelayMs: 20 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    expect((await backend.checkHealth()).server).toBe('stable-diffusion.cpp sd-server');
    const controller = new AbortController();

    const generation = backend.generate({ ...REQUEST, steps: 50 }, { signal: controller.signal, onProgress: noProgress });
    await expect.poll(() => fake.requests.some((r) => r.path === '/sdapi/v1/txt2img')).toBe(true);
    controller.abort();

    const error = await expectBackendError(generation, 'cancelled');
    expect(error.message).toContain('cannot stop an image once it runs');
    expect(fake.requests.filter((r) => r.path === '/sdapi/v1/interrupt')).toEqual([]);
  });

  it('an answer over the cap names sd-server, not AUTOMATIC1111, once the server is known to be sd-server', async () => {
    const fake = await startFake();
    // sd-server's answer declares 150 MB: refused at its Content-Length, before any of it is read.
    const hugeFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/txt2img')
        ? Promise.resolve(new Response('{"images": ["', { headers: { 'content-type': 'application/json', 'content-length': String(150 * 1024 * 1024) } }))
        : fetch(input, init);
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, fetch: hugeFetch });
    expect((await backend.checkHealth()).server).toBe('stable-diffusion.cpp sd-server');

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'too_large');
    expect(error.message).toBe(
      `stable-diffusion.cpp's sd-server at ${fake.url} sent an answer of 150 MB, more than Easel accepts for one image (64 MB of PNG); Easel stopped reading it and kept nothing. Lower the image size.`,
    );
  });

  it('checkHealth names sd-server (found by /sdcpp/v1/capabilities, although it answers /sdapi/v1/options too)', async () => {
    const fake = await startFake();
    const health = await createA1111Backend({ url: fake.url }).checkHealth();
    expect(health).toEqual({ reachable: true, server: 'stable-diffusion.cpp sd-server', detail: expect.stringContaining('sd-server answers') });
    expect(health.detail).toContain('v1-5-pruned-emaonly.safetensors');
    expect(health.detail).toContain('no progress');
  });
});

describe('fake sd-server fidelity', () => {
  it('has no progress or interrupt endpoint: 404 with an empty body, as cpp-httplib answers', async () => {
    const fake = await startFake();
    for (const [method, path] of [['GET', '/sdapi/v1/progress'], ['POST', '/sdapi/v1/interrupt']] as const) {
      const response = await fetch(`${fake.url}${path}`, { method });
      expect(response.status).toBe(404);
      expect(await response.text()).toBe('');
    }
  });

  it('answers /sdapi/v1/options with its two keys only', async () => {
    const fake = await startFake();
    expect(await (await fetch(`${fake.url}/sdapi/v1/options`)).json()).toEqual({ samples_format: 'png', sd_model_checkpoint: 'v1-5-pruned-emaonly' });
  });

  it('/v1/images/generations ignores seed, steps, negative_prompt and cfg_scale, using seed 42 and 20 steps', async () => {
    const fake = await startFake();
    const response = await fetch(`${fake.url}/v1/images/generations`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'a fox', size: '64x64', seed: 7, steps: 9, negative_prompt: 'blur', cfg_scale: 3, response_format: 'url' }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ data: [{ b64_json: expect.any(String) }], output_format: 'png' });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a fox', seed: 42, steps: 20, cfg: 7, negativePrompt: '' })]);
  });

  it('reads seed, negative prompt, steps and cfg from <sd_cpp_extra_args>, with steps and cfg nested', async () => {
    const fake = await startFake();
    const extra = JSON.stringify({ seed: 5, negative_prompt: 'blur', steps: 3, sample_params: { sample_steps: 130, guidance: { txt_cfg: 4.5 } } });
    await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', body: JSON.stringify({ prompt: `<sd_cpp_extra_args>${extra}</sd_cpp_extra_args>a fox`, size: '64x64' }) });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a fox', seed: 5, steps: 100, cfg: 4.5, negativePrompt: 'blur' })]);
  });

  it('cannot cancel a job of its own queue once it generates: 409', async () => {
    const fake = await startFake({ stepDelayMs: 30 });
    const queued = (await (await fetch(`${fake.url}/sdcpp/v1/img_gen`, { method: 'POST', body: JSON.stringify({ prompt: 'a fox', sample_params: { sample_steps: 20 } }) })).json()) as { id: string };
    await expect.poll(async () => ((await (await fetch(`${fake.url}/sdcpp/v1/jobs/${queued.id}`)).json()) as { status: string }).status).toBe('generating');
    const cancel = await fetch(`${fake.url}/sdcpp/v1/jobs/${queued.id}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(409);
    expect(await cancel.json()).toEqual({ error: 'job is currently generating and cannot be interrupted yet' });
  });
});
