// --image-backend localai: the openai-images adapter's LocalAI dialect against the fake LocalAI.
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { readPngSize, readPngText } from '../../../server/png/index.ts';
import { createFakeLocalAi } from '../../fakes/fake-localai.ts';
import type { FakeLocalAi, FakeLocalAiOptions } from '../../fakes/fake-localai.ts';
import { REQUEST, expectBackendError, findClosedUrl } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function startFake(options: FakeLocalAiOptions = {}): Promise<FakeLocalAi> {
  const fake = await createFakeLocalAi(options);
  cleanups.push(() => fake.close());
  return fake;
}

const noProgress = () => {};
const generate = (backend: ReturnType<typeof createOpenAiImagesBackend>, request = REQUEST) =>
  backend.generate(request, { signal: new AbortController().signal, onProgress: noProgress });

describe('createOpenAiImagesBackend({ dialect: "localai" })', () => {
  it('sends `step` and "positive|negative", which LocalAI reads, and the image is made with them', async () => {
    const fake = await startFake();
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
    const fake = await startFake({ cfgScale: 4 });
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
    const fake = await startFake();
    const result = await generate(createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' }), {
      ...REQUEST,
      prompt: 'a [cat|dog] on a mat',
      negativePrompt: 'blur | noise',
    });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a [cat/dog] on a mat', negativePrompt: 'blur / noise' })]);
    expect(result).toMatchObject({ prompt: 'a [cat/dog] on a mat', negativePrompt: 'blur / noise' });
  });

  it('an empty negative prompt sends the prompt alone', async () => {
    const fake = await startFake();
    await generate(createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' }), { ...REQUEST, negativePrompt: '' });
    expect((fake.requests.find((r) => r.path === '/v1/images/generations')?.body as { prompt: string }).prompt).toBe(REQUEST.prompt);
  });

  it('declares the seeds LocalAI keeps as given: 1 to 2147483647', () => {
    expect(createOpenAiImagesBackend({ url: 'http://127.0.0.1:1', dialect: 'localai' })).toMatchObject({ name: 'localai', seedRange: { min: 1, max: 2_147_483_647 } });
    expect(createOpenAiImagesBackend({ url: 'http://127.0.0.1:1' }).seedRange).toBeUndefined();
  });

  it("keeps LocalAI's own words from its {error: {code, message, type}} answer", async () => {
    const fake = await startFake();
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
    const ready = await startFake({ models: ['sd-1.5'] });
    expect(await createOpenAiImagesBackend({ url: ready.url, dialect: 'localai' }).checkHealth()).toEqual({
      reachable: true,
      server: 'LocalAI',
      detail: expect.stringContaining('LocalAI answers at'),
    });
    const starting = await startFake({ starting: true });
    const health = await createOpenAiImagesBackend({ url: starting.url, dialect: 'localai' }).checkHealth();
    expect(health).toMatchObject({ reachable: true, detail: expect.stringContaining('is starting') });
    expect(starting.requests.map((r) => r.path).sort()).toEqual(['/readyz', '/v1/models']);
  });
});

describe('fake LocalAI fidelity', () => {
  async function post(fake: FakeLocalAi, body: unknown) {
    const response = await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it('ignores steps, negative_prompt and cfg_scale (15 steps, no negative), and answers a url unless b64_json is asked', async () => {
    const fake = await startFake();
    const { body } = await post(fake, { prompt: 'a fox', steps: 30, negative_prompt: 'blur', cfg_scale: 2, size: '64x64' });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a fox', negativePrompt: '', steps: 15, cfg: 7 })]);
    expect(body['data']).toEqual([{ index: 0, url: expect.stringMatching(/\/generated-images\/b64\w+\.png$/) }]);
  });

  it('splits the prompt at "|" and drops what follows a second one', async () => {
    const fake = await startFake();
    await post(fake, { prompt: 'a fox|blur|lost words', size: '64x64' });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a fox', negativePrompt: 'blur' })]);
  });

  it('keeps 32 bits of the seed: above 2147483647 it turns negative, which is random', async () => {
    const fake = await startFake();
    await post(fake, { prompt: 'a fox', seed: 3_000_000_000, size: '64x64' });
    expect(fake.runs[0]).toMatchObject({ seedReceived: 3_000_000_000 - 4_294_967_296, random: true });
    const diffusers = await startFake({ backend: 'diffusers' });
    await post(diffusers, { prompt: 'a fox', seed: 0, size: '64x64' });
    expect(diffusers.runs[0]).toMatchObject({ seedReceived: 0, random: true });
  });

  it('answers errors as {error: {code, message, type}} and writes no text into its PNG', async () => {
    const fake = await startFake();
    expect(await post(fake, { prompt: 'a fox', size: 'axb' })).toEqual({ status: 500, body: { error: { code: 500, message: "invalid value for 'size'", type: '' } } });
    const { body } = await post(fake, { prompt: 'a fox', size: '64x64', response_format: 'b64_json' });
    const png = new Uint8Array(Buffer.from((body['data'] as { b64_json: string }[])[0]!.b64_json, 'base64'));
    expect(readPngText(png)).toEqual({});
  });

  it('reads a body only when it is sent as application/json, as Echo binds it', async () => {
    const fake = await startFake();
    const response = await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', headers: { 'content-type': 'text/plain;charset=UTF-8' }, body: '{"prompt": "a fox"}' });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: { code: 400, message: 'failed parsing request body: code=415, message=Unsupported Media Type', type: '' } });
    expect(fake.runs).toEqual([]);
  });
});
