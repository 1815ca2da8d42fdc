// What the OpenAI-compatible adapter sends (only what OpenAI's images API defines, the API key, at the API's
// address) and so what it records an image was made with.
import { describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { decodeSolidPng } from '../../fakes/png-bytes.ts';
import { OPENAI_IMAGE, REQUEST, expectBackendError, recordProgress, run, serveRoutes, startFakeLocalAi, startFakeOpenAiImages } from './helpers.ts';

describe('what the OpenAI-compatible adapter sends and records', () => {
  it("generates a real PNG with the requested size, sending only what OpenAI's API defines and claiming nothing it ignores", async () => {
    const fake = await startFakeOpenAiImages();
    const backend = createOpenAiImagesBackend({ url: fake.url, model: 'stablediffusion' });
    const { events, onProgress } = recordProgress();

    const result = await backend.generate(REQUEST, run(undefined, onProgress));

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
    const fake = await startFakeOpenAiImages();
    const backend = createOpenAiImagesBackend({ url: `${fake.url}/v1/` });

    const result = await backend.generate({ ...REQUEST, negativePrompt: '' }, run());

    expect(result.model).toBeUndefined();
    const body = fake.requests.find((request) => request.path === '/v1/images/generations')?.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['n', 'prompt', 'response_format', 'size']);
  });

  it('sends the API key as a Bearer token only when one is given', async () => {
    const fake = await startFakeOpenAiImages({ requireApiKey: 'sk-local-123' });

    const result = await createOpenAiImagesBackend({ url: fake.url, apiKey: 'sk-local-123' }).generate(REQUEST, run());
    expect(readPngSize(result.png).ok).toBe(true);
    expect(fake.requests[0]?.authorization).toBe('Bearer sk-local-123');

    const error = await expectBackendError(
      createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run()),
      'backend_error',
    );
    expect(error.message).toContain("You didn't provide an API key");
    expect(error.message).toContain('API key');
  });

  it('a URL with several trailing slashes is the same server', async () => {
    const fake = await startFakeOpenAiImages();

    await createOpenAiImagesBackend({ url: `${fake.url}///` }).generate(REQUEST, run());

    expect(fake.requests.map((request) => request.path)).toContain('/v1/images/generations');
  });

  it('sends no Authorization header for an empty API key', async () => {
    const fake = await startFakeOpenAiImages();

    await createOpenAiImagesBackend({ url: fake.url, apiKey: '' }).generate(REQUEST, run());

    expect(fake.requests.find((request) => request.path === '/v1/images/generations')?.authorization).toBeUndefined();
  });

  it('keeps a /v1 inside the address: only a trailing /v1 is the API root', async () => {
    const server = await serveRoutes({ '/api/v1/sd/v1/images/generations': OPENAI_IMAGE });

    await createOpenAiImagesBackend({ url: `${server.url}/api/v1/sd` }).generate(REQUEST, run());

    expect(server.requests.map((request) => request.path)).toContain('/api/v1/sd/v1/images/generations');
  });

  it('records no model it was not given, for OpenAI and for LocalAI', async () => {
    const server = await serveRoutes({ '/v1/images/generations': OPENAI_IMAGE });
    const { png: _png, ...openai } = await createOpenAiImagesBackend({ url: server.url }).generate(REQUEST, run());
    // toStrictEqual: a model key holding undefined is not "no model".
    expect(openai).toStrictEqual({ negativePrompt: '' });

    const localai = await startFakeLocalAi();
    const { png: _localPng, ...made } = await createOpenAiImagesBackend({ url: localai.url, dialect: 'localai' }).generate(REQUEST, run());
    expect(made).toStrictEqual({ seed: REQUEST.seed, steps: REQUEST.steps, prompt: REQUEST.prompt, negativePrompt: REQUEST.negativePrompt });
  });
});
