import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { createFakeOpenAiImages } from '../../fakes/fake-openai-images.ts';
import type { FakeOpenAiImages, FakeOpenAiImagesOptions } from '../../fakes/fake-openai-images.ts';
import { decodeSolidPng } from '../../fakes/png-bytes.ts';
import { REQUEST, expectBackendError, findClosedUrl, recordProgress } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function startFake(options: FakeOpenAiImagesOptions = {}): Promise<FakeOpenAiImages> {
  const fake = await createFakeOpenAiImages(options);
  cleanups.push(() => fake.close());
  return fake;
}

const noProgress = () => {};

/** Resolves once the fake has received a generation request, so a test can cancel mid-flight. */
async function waitForGenerationRequest(fake: FakeOpenAiImages): Promise<void> {
  while (!fake.requests.some((request) => request.path === '/v1/images/generations')) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('createOpenAiImagesBackend', () => {
  it('generates a real PNG with the requested size, sending the extras local servers accept', async () => {
    const fake = await startFake();
    const backend = createOpenAiImagesBackend({ url: fake.url, model: 'stablediffusion' });
    const { events, onProgress } = recordProgress();

    const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress });

    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
    expect(decodeSolidPng(result.png).width).toBe(64);
    expect(result).toMatchObject({ seed: REQUEST.seed, model: 'stablediffusion' });
    expect(events).toEqual([]);
    const call = fake.requests.find((request) => request.path === '/v1/images/generations');
    expect(call?.body).toEqual({
      prompt: REQUEST.prompt,
      n: 1,
      size: '64x96',
      response_format: 'b64_json',
      model: 'stablediffusion',
      seed: REQUEST.seed,
      steps: 6,
      negative_prompt: REQUEST.negativePrompt,
    });
    expect(call?.authorization).toBeUndefined();
  });

  it('accepts a URL that already ends in /v1 and leaves out an empty negative prompt and model', async () => {
    const fake = await startFake();
    const backend = createOpenAiImagesBackend({ url: `${fake.url}/v1/` });

    const result = await backend.generate({ ...REQUEST, negativePrompt: '' }, { signal: new AbortController().signal, onProgress: noProgress });

    expect(result.model).toBeUndefined();
    const body = fake.requests.find((request) => request.path === '/v1/images/generations')?.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['n', 'prompt', 'response_format', 'seed', 'size', 'steps']);
  });

  it('sends the API key as a Bearer token only when one is given', async () => {
    const fake = await startFake({ requireApiKey: 'sk-local-123' });

    const result = await createOpenAiImagesBackend({ url: fake.url, apiKey: 'sk-local-123' }).generate(REQUEST, {
      signal: new AbortController().signal,
      onProgress: noProgress,
    });
    expect(readPngSize(result.png).ok).toBe(true);
    expect(fake.requests[0]?.authorization).toBe('Bearer sk-local-123');

    const error = await expectBackendError(
      createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }),
      'backend_error',
    );
    expect(error.message).toContain("You didn't provide an API key");
    expect(error.message).toContain('API key');
  });

  it("surfaces the server's error message as backend_error", async () => {
    const fake = await startFake({
      failWith: { status: 500, body: { error: { code: 500, message: 'could not load model: rpc error: code = Unavailable', type: '' } } },
    });
    const backend = createOpenAiImagesBackend({ url: fake.url });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('could not load model: rpc error: code = Unavailable');
  });

  it('passes on the validation error of a request the server refuses', async () => {
    const fake = await startFake();
    const backend = createOpenAiImagesBackend({ url: fake.url });

    const error = await expectBackendError(backend.generate({ ...REQUEST, prompt: '' }, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain("Missing required parameter: 'prompt'.");
  });

  it('falls back to downloading the image when the server answers with a url', async () => {
    const fake = await startFake();
    const urlFormatFetch: typeof fetch = (input, init) =>
      typeof init?.body === 'string'
        ? fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(init.body), response_format: 'url' }) })
        : fetch(input, init);
    const backend = createOpenAiImagesBackend({ url: fake.url, fetch: urlFormatFetch });

    const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });

    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
    expect(fake.requests.some((request) => request.path.startsWith('/generated-images/'))).toBe(true);
  });

  it('rejects with bad_response when the answer holds no image', async () => {
    const fake = await startFake({ failWith: { status: 200, body: { created: 1, data: [] } } });
    const backend = createOpenAiImagesBackend({ url: fake.url });

    await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'bad_response');
  });

  it('cancels by aborting the request and rejects with cancelled', async () => {
    const fake = await startFake({ hang: true });
    const backend = createOpenAiImagesBackend({ url: fake.url });
    const controller = new AbortController();

    const generation = backend.generate(REQUEST, { signal: controller.signal, onProgress: noProgress });
    await waitForGenerationRequest(fake);
    controller.abort();

    await expectBackendError(generation, 'cancelled');
    expect(fake.requests.map((request) => request.path)).toEqual(['/v1/images/generations']);
  });

  it('times out and rejects with timeout', async () => {
    const fake = await startFake({ hang: true });
    const backend = createOpenAiImagesBackend({ url: fake.url, timeoutMs: 150 });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'timeout');
    expect(error.message).toContain('150 ms');
  });

  it('says how to start a server when nothing listens at the URL', async () => {
    const url = await findClosedUrl();
    const error = await expectBackendError(
      createOpenAiImagesBackend({ url }).generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }),
      'unreachable',
    );
    expect(error.message).toContain(url);
    expect(error.message).toContain('--image-url');
  });

  it('checkHealth: reachable and lists the models', async () => {
    const fake = await startFake({ requireApiKey: 'k', models: ['sd-1.5', 'flux'] });
    const health = await createOpenAiImagesBackend({ url: fake.url, apiKey: 'k' }).checkHealth();
    expect(health).toEqual({ reachable: true, detail: expect.stringContaining('sd-1.5, flux') });
    expect(fake.requests[0]?.path).toBe('/v1/models');
  });

  it('checkHealth: unreachable when nothing listens, without throwing', async () => {
    const url = await findClosedUrl();
    const health = await createOpenAiImagesBackend({ url }).checkHealth();
    expect(health.reachable).toBe(false);
    expect(health.detail).toContain(url);
  });

  it('checkHealth: a cancelled check reports itself instead of throwing', async () => {
    const fake = await startFake();
    const health = await createOpenAiImagesBackend({ url: fake.url }).checkHealth(AbortSignal.abort());
    expect(health).toEqual({ reachable: false, detail: 'The health check was cancelled.' });
  });
});

describe('fake OpenAI images fidelity', () => {
  it('refuses a size that is not WIDTHxHEIGHT in the OpenAI error shape', async () => {
    const fake = await startFake();
    const response = await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', body: JSON.stringify({ prompt: 'x', size: 'big' }) });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { param: 'size', code: 'invalid_value', type: 'invalid_request_error' } });
  });

  it('refuses an unknown response_format', async () => {
    const fake = await startFake();
    const response = await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', body: JSON.stringify({ prompt: 'x', response_format: 'png' }) });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { param: 'response_format' } });
  });
});
