// The OpenAI-compatible adapter's LocalAI dialect (--image-backend localai) against the fake LocalAI: what it
// sends and claims, its words, and its health.
import { describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { REQUEST, expectBackendError, findClosedUrl, run, startFakeLocalAi } from './helpers.ts';

const generate = (backend: ReturnType<typeof createOpenAiImagesBackend>, request = REQUEST) => backend.generate(request, run());

describe('createOpenAiImagesBackend({ dialect: "localai" })', () => {
  it('sends `step` and "positive|negative", which LocalAI reads, and the image is made with them', async () => {
    const fake = await startFakeLocalAi();
    const backend = createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' });

    const result = await generate(backend);

    expect(fake.requests.find((r) => r.path === '/v1/images/generations')?.body).toEqual({
      prompt: `${REQUEST.prompt}|${REQUEST.negativePrompt}`,
      step: 6,
      seed: REQUEST.seed,
      n: 1,
      size: '64x96',
      response_format: 'b64_json',
    });
    expect(fake.runs).toEqual([
      expect.objectContaining({ prompt: REQUEST.prompt, negativePrompt: REQUEST.negativePrompt, steps: 6, seedReceived: REQUEST.seed, random: false }),
    ]);
    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
  });

  it('claims the seed and steps it sent, and no CFG: LocalAI takes CFG from the model, not the request', async () => {
    const fake = await startFakeLocalAi({ cfgScale: 4 });
    const result = await generate(createOpenAiImagesBackend({ url: fake.url, dialect: 'localai', model: 'stablediffusion' }));
    expect(result).toEqual({
      png: result.png,
      seed: REQUEST.seed,
      steps: 6,
      prompt: REQUEST.prompt,
      negativePrompt: REQUEST.negativePrompt,
      model: 'stablediffusion',
    });
    expect(fake.runs[0]?.cfg).toBe(4);
  });

  it('a "|" inside the prompt or the negative prompt is sent as "/", so it cannot move words between them', async () => {
    const fake = await startFakeLocalAi();
    const result = await generate(createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' }), {
      ...REQUEST,
      prompt: 'a [cat|dog] on a mat',
      negativePrompt: 'blur | noise',
    });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a [cat/dog] on a mat', negativePrompt: 'blur / noise' })]);
    expect(result).toMatchObject({ prompt: 'a [cat/dog] on a mat', negativePrompt: 'blur / noise' });
  });

  it('an empty negative prompt sends the prompt alone', async () => {
    const fake = await startFakeLocalAi();
    await generate(createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' }), { ...REQUEST, negativePrompt: '' });
    expect((fake.requests.find((r) => r.path === '/v1/images/generations')?.body as { prompt: string }).prompt).toBe(REQUEST.prompt);
  });

  it('declares the seeds LocalAI keeps as given: 1 to 2147483647', () => {
    expect(createOpenAiImagesBackend({ url: 'http://127.0.0.1:1', dialect: 'localai' })).toMatchObject({ name: 'localai', seedRange: { min: 1, max: 2_147_483_647 } });
    expect(createOpenAiImagesBackend({ url: 'http://127.0.0.1:1' }).seedRange).toBeUndefined();
  });

  it("keeps LocalAI's own words from its {error: {code, message, type}} answer", async () => {
    const fake = await startFakeLocalAi();
    const error = await expectBackendError(generate(createOpenAiImagesBackend({ url: fake.url, dialect: 'localai', model: 'flux' })), 'backend_error');
    expect(error.message).toContain('LocalAI at');
    expect(error.message).toContain('HTTP 404');
    expect(error.message).toContain('model "flux" not found. To see available models, call GET /v1/models');
  });

  it('says how to start LocalAI when nothing listens', async () => {
    const url = await findClosedUrl();
    const error = await expectBackendError(generate(createOpenAiImagesBackend({ url, dialect: 'localai' })), 'unreachable');
    expect(error.message).toContain(`LocalAI at ${url} is not answering`);
  });

  it('checkHealth reads /readyz: ready, or starting during a preload', async () => {
    const ready = await startFakeLocalAi({ models: ['sd-1.5'] });
    expect(await createOpenAiImagesBackend({ url: ready.url, dialect: 'localai' }).checkHealth()).toEqual({
      reachable: true,
      server: 'LocalAI',
      detail: expect.stringContaining('LocalAI answers at'),
    });
    const starting = await startFakeLocalAi({ starting: true });
    const health = await createOpenAiImagesBackend({ url: starting.url, dialect: 'localai' }).checkHealth();
    expect(health).toMatchObject({ reachable: true, detail: expect.stringContaining('is starting') });
    expect(starting.requests.map((r) => r.path).sort()).toEqual(['/readyz', '/v1/models']);
  });
});
