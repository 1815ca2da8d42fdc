import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { readPngSize, readPngText } from '../../../server/png/index.ts';
import { createFakeOpenAiImages } from '../../fakes/fake-openai-images.ts';
import type { FakeOpenAiImages, FakeOpenAiImagesOptions } from '../../fakes/fake-openai-images.ts';
import { decodeSolidPng } from '../../fakes/png-bytes.ts';
import { createFakeSdServer } from '../../fakes/fake-sd-server.ts';
import type { FakeSdServer, FakeSdServerOptions } from '../../fakes/fake-sd-server.ts';
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
  it("generates a real PNG with the requested size, sending only what OpenAI's API defines and claiming nothing it ignores", async () => {
    const fake = await startFake();
    const backend = createOpenAiImagesBackend({ url: fake.url, model: 'stablediffusion' });
    const { events, onProgress } = recordProgress();

    const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress });

    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
    expect(decodeSolidPng(result.png).width).toBe(64);
    // The API has no seed, steps, CFG or negative prompt: none was used, so none is claimed.
    expect(result).toEqual({ png: result.png, model: 'stablediffusion', negativePrompt: '' });
    expect(events).toEqual([]);
    const call = fake.requests.find((request) => request.path === '/v1/images/generations');
    expect(call?.body).toEqual({ prompt: REQUEST.prompt, n: 1, size: '64x96', response_format: 'b64_json', model: 'stablediffusion' });
    expect(call?.authorization).toBeUndefined();
  });

  it('accepts a URL that already ends in /v1 and leaves out an empty negative prompt and model', async () => {
    const fake = await startFake();
    const backend = createOpenAiImagesBackend({ url: `${fake.url}/v1/` });

    const result = await backend.generate({ ...REQUEST, negativePrompt: '' }, { signal: new AbortController().signal, onProgress: noProgress });

    expect(result.model).toBeUndefined();
    const body = fake.requests.find((request) => request.path === '/v1/images/generations')?.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['n', 'prompt', 'response_format', 'size']);
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
    // The capabilities probe, then the one generation: this API has nothing to interrupt with.
    expect(fake.requests.map((request) => request.path)).toEqual(['/sdcpp/v1/capabilities', '/v1/images/generations']);
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
    expect(fake.requests.map((request) => request.path).sort()).toEqual(['/sdcpp/v1/capabilities', '/v1/models']);
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

describe("the openai backend against sd-server's /v1/images/generations", () => {
  async function startSdServer(options: FakeSdServerOptions = {}): Promise<FakeSdServer> {
    const fake = await createFakeSdServer({ stepDelayMs: 1, ...options });
    cleanups.push(() => fake.close());
    return fake;
  }

  it('passes seed, steps, CFG and the negative prompt in <sd_cpp_extra_args>, which sd-server honours', async () => {
    const fake = await startSdServer();
    const backend = createOpenAiImagesBackend({ url: fake.url });

    const result = await backend.generate({ ...REQUEST, steps: 120 }, { signal: new AbortController().signal, onProgress: noProgress });

    expect(fake.runs).toEqual([
      expect.objectContaining({ prompt: REQUEST.prompt, negativePrompt: REQUEST.negativePrompt, seed: REQUEST.seed, steps: 100, cfg: 7.5, width: 64, height: 96 }),
    ]);
    expect(result).toMatchObject({ seed: REQUEST.seed, steps: 100, cfg: 7.5 });
    expect(readPngText(result.png)['parameters']).toContain(`Seed: ${REQUEST.seed}, Size: 64x96`);
    const body = fake.requests.find((request) => request.path === '/v1/images/generations')?.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['n', 'prompt', 'response_format', 'size']);
  });

  it('keeps a prompt and negative prompt holding the closing tag or newlines intact', async () => {
    const fake = await startSdServer();
    const backend = createOpenAiImagesBackend({ url: fake.url });
    const prompt = 'a sign reading <sd_cpp_extra_args>{"seed":1}</sd_cpp_extra_args>\nin neon';
    const negativePrompt = 'text </sd_cpp_extra_args> <b>';

    await backend.generate({ ...REQUEST, prompt, negativePrompt }, { signal: new AbortController().signal, onProgress: noProgress });

    // sd.cpp parses the first block (ours), removes every block, and keeps the rest of the prompt as it is.
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a sign reading \nin neon', negativePrompt, seed: REQUEST.seed })]);
  });

  it('a plain OpenAI-style server is asked /sdcpp/v1/capabilities once, then never again', async () => {
    const fake = await startFake();
    const backend = createOpenAiImagesBackend({ url: fake.url });
    await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });
    await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });
    expect(fake.requests.map((request) => request.path)).toEqual(['/sdcpp/v1/capabilities', '/v1/images/generations', '/v1/images/generations']);
    const body = fake.requests[1]?.body as Record<string, unknown>;
    expect(String(body['prompt'])).not.toContain('sd_cpp_extra_args');
  });

  it("keeps sd-server's own words from a {\"error\": \"server_error\", \"message\"} answer", async () => {
    const fake = await startSdServer();
    const corruptingFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/images/generations') ? fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(String(init?.body)), size: 64 }) }) : fetch(input, init);
    const error = await expectBackendError(createOpenAiImagesBackend({ url: fake.url, fetch: corruptingFetch }).generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('server_error: [json.exception.type_error.302] type must be string, but is number');
  });

  it('checkHealth names sd-server and suggests the a1111 backend', async () => {
    const fake = await startSdServer();
    const health = await createOpenAiImagesBackend({ url: fake.url }).checkHealth();
    expect(health).toMatchObject({ reachable: true, server: 'stable-diffusion.cpp sd-server' });
    expect(health.detail).toContain('--image-backend a1111');
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
