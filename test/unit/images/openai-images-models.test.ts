// The OpenAI-compatible adapter's models: what listModels reads from GET /v1/models (LocalAI's image models only,
// through /v1/models/capabilities), the checkpoint a request sends as `model` and so claims, and an unknown or
// unfit model refused in the server's own words.
import { describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { REQUEST, abortedSignal, expectBackendError, findClosedUrl, run, serveRoutes, startFakeLocalAi, startFakeOpenAiImages, startFakeSdServer } from './helpers.ts';

const NO_CHOICE = { samplers: [], schedulers: [] };

describe('listModels', () => {
  it("LocalAI: the image models of /v1/models/capabilities, not its chat models; current is --image-model or unknown", async () => {
    const fake = await startFakeLocalAi({ models: ['sd-1.5', 'flux-dev'], chatModels: ['mistral-7b'] });

    expect(await createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' }).listModels?.()).toEqual({ checkpoints: ['sd-1.5', 'flux-dev'], current: null, ...NO_CHOICE });
    expect(fake.requests.map((request) => `${request.method} ${request.path}`)).toEqual(['GET /v1/models/capabilities']);
    expect(await createOpenAiImagesBackend({ url: `${fake.url}/v1`, dialect: 'localai', model: 'flux-dev' }).listModels?.()).toEqual({
      checkpoints: ['sd-1.5', 'flux-dev'],
      current: 'flux-dev',
      ...NO_CHOICE,
    });
  });

  it('LocalAI: read anew each time, so a model installed since is listed', async () => {
    const fake = await startFakeLocalAi({ models: ['sd-1.5'] });
    const backend = createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' });
    expect((await backend.listModels?.())?.checkpoints).toEqual(['sd-1.5']);

    fake.models.push('sdxl-turbo');

    expect((await backend.listModels?.())?.checkpoints).toEqual(['sd-1.5', 'sdxl-turbo']);
  });

  it('LocalAI from before /v1/models/capabilities: every model of /v1/models, as nothing tells them apart', async () => {
    const fake = await startFakeLocalAi({ models: ['sd-1.5'], chatModels: ['mistral-7b'], noCapabilitiesRoute: true });

    expect(await createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' }).listModels?.()).toEqual({ checkpoints: ['sd-1.5', 'mistral-7b'], current: null, ...NO_CHOICE });
    expect(fake.requests.map((request) => request.path)).toEqual(['/v1/models/capabilities', '/v1/models']);
  });

  it('LocalAI: a model without capabilities (a loose file, no config) is left out, a name listed twice is one', async () => {
    const server = await serveRoutes({
      '/v1/models/capabilities': {
        json: {
          object: 'list',
          data: [
            { id: 'sd-1.5', object: 'model', capabilities: ['image'], input_modalities: ['text'], output_modalities: ['image'] },
            { id: 'notes.txt', object: 'model', capabilities: null, input_modalities: null, output_modalities: null },
            { id: 'sd-1.5', object: 'model', capabilities: ['image'] },
            { id: 'whisper', object: 'model', capabilities: ['transcript'] },
            { object: 'model', capabilities: ['image'] },
          ],
        },
      },
    });

    expect((await createOpenAiImagesBackend({ url: server.url, dialect: 'localai' }).listModels?.())?.checkpoints).toEqual(['sd-1.5']);
  });

  it('an OpenAI-style server: every id of /v1/models, with the API key; current is --image-model or unknown', async () => {
    const fake = await startFakeOpenAiImages({ models: ['dall-e-3', 'gpt-4o'], requireApiKey: 'k' });

    expect(await createOpenAiImagesBackend({ url: fake.url, apiKey: 'k' }).listModels?.()).toEqual({ checkpoints: ['dall-e-3', 'gpt-4o'], current: null, ...NO_CHOICE });
    expect(await createOpenAiImagesBackend({ url: fake.url, apiKey: 'k', model: 'dall-e-3' }).listModels?.()).toMatchObject({ current: 'dall-e-3' });
    expect(fake.requests.filter((request) => request.path === '/v1/models').map((request) => request.authorization)).toEqual(['Bearer k', 'Bearer k']);
  });

  it("sd-server: its one fixed model, which it paints with whatever --image-model says", async () => {
    const fake = await startFakeSdServer();

    expect(await createOpenAiImagesBackend({ url: fake.url, model: 'flux' }).listModels?.()).toEqual({ checkpoints: ['sd-cpp-local'], current: 'sd-cpp-local', ...NO_CHOICE });
  });

  it('fails with the server words when it refuses, and says what was wrong otherwise', async () => {
    const keyed = await startFakeOpenAiImages({ requireApiKey: 'k' });
    const refused = await expectBackendError(createOpenAiImagesBackend({ url: keyed.url }).listModels!(), 'backend_error');
    expect(refused.message).toBe(
      `The image server at ${keyed.url} refused the API key (HTTP 401): You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). Check the image API key Easel was given.`,
    );

    const failing = await serveRoutes({ '/v1/models/capabilities': { status: 500, json: { error: { code: 500, message: 'no model path' } } } });
    const failed = await expectBackendError(createOpenAiImagesBackend({ url: failing.url, dialect: 'localai' }).listModels!(), 'backend_error');
    expect(failed.message).toBe(`LocalAI at ${failing.url} could not list its models (GET ${failing.url}/v1/models/capabilities, HTTP 500): no model path.`);

    const missing = await serveRoutes({});
    const absent = await expectBackendError(createOpenAiImagesBackend({ url: missing.url }).listModels!(), 'backend_error');
    expect(absent.message).toBe(`The server at ${missing.url} has no ${missing.url}/v1/models (HTTP 404). Check that --image-url points to an OpenAI-compatible image server.`);

    const odd = await serveRoutes({ '/v1/models': { json: { models: ['sd'] } } });
    const unreadable = await expectBackendError(createOpenAiImagesBackend({ url: odd.url }).listModels!(), 'bad_response');
    expect(unreadable.message).toBe(`The image server at ${odd.url} answered GET ${odd.url}/v1/models without a model list ({"models":["sd"]}).`);
  });

  it('nothing listening, no answer in time, a cancel: unreachable, timeout, cancelled', async () => {
    const url = await findClosedUrl();
    const down = await expectBackendError(createOpenAiImagesBackend({ url, dialect: 'localai' }).listModels!(), 'unreachable');
    expect(down.message).toContain(`LocalAI at ${url} is not answering`);

    const hanging = await serveRoutes({ '/v1/models': 'hang' });
    const slow = await expectBackendError(createOpenAiImagesBackend({ url: hanging.url, healthTimeoutMs: 50 }).listModels!(), 'timeout');
    expect(slow.message).toBe(`The image server at ${hanging.url} did not list its models within 50 ms. Try again.`);

    const cancelled = await expectBackendError(createOpenAiImagesBackend({ url: hanging.url }).listModels!(abortedSignal(new Error('stop'))), 'cancelled');
    expect(cancelled.message).toBe(`Listing the models of ${hanging.url} was cancelled.`);
  });
});

describe('the checkpoint a request asks for', () => {
  it('LocalAI: goes out as `model` over --image-model, paints the image, and is claimed', async () => {
    const fake = await startFakeLocalAi({ models: ['sd-1.5', 'flux-dev'] });
    const backend = createOpenAiImagesBackend({ url: fake.url, dialect: 'localai', model: 'sd-1.5' });

    const chosen = await backend.generate({ ...REQUEST, checkpoint: 'flux-dev' }, run());
    const configured = await backend.generate({ ...REQUEST, checkpoint: '' }, run());

    expect(fake.runs.map((made) => made.model)).toEqual(['flux-dev', 'sd-1.5']);
    expect(fake.requests.filter((request) => request.path === '/v1/images/generations').map((request) => (request.body as Record<string, unknown>)['model'])).toEqual(['flux-dev', 'sd-1.5']);
    expect([chosen.model, configured.model]).toEqual(['flux-dev', 'sd-1.5']);
  });

  it('LocalAI without --image-model: sent and claimed when asked for; otherwise neither, the server picks', async () => {
    const fake = await startFakeLocalAi({ models: ['sd-1.5', 'flux-dev'] });
    const backend = createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' });

    expect((await backend.generate({ ...REQUEST, checkpoint: 'flux-dev' }, run())).model).toBe('flux-dev');
    expect((await backend.generate(REQUEST, run())).model).toBeUndefined();
    expect(fake.requests.filter((request) => request.path === '/v1/images/generations').map((request) => 'model' in (request.body as Record<string, unknown>))).toEqual([true, false]);
  });

  it('an OpenAI-style server: sent as `model` and claimed; no sampler or scheduler is ever sent', async () => {
    const fake = await startFakeOpenAiImages({ models: ['dall-e-2', 'dall-e-3'], knownModelsOnly: true });

    const result = await createOpenAiImagesBackend({ url: fake.url, model: 'dall-e-2' }).generate({ ...REQUEST, checkpoint: 'dall-e-3', sampler: 'euler', scheduler: 'karras' }, run());

    expect(result).toEqual({ png: result.png, model: 'dall-e-3', negativePrompt: '' });
    expect(fake.requests.find((request) => request.path === '/v1/images/generations')?.body).toEqual({
      prompt: REQUEST.prompt,
      n: 1,
      size: '64x96',
      response_format: 'b64_json',
      model: 'dall-e-3',
    });
  });

  it('sd-server: sent, but not claimed, as sd-server never reads it', async () => {
    const fake = await startFakeSdServer();

    const result = await createOpenAiImagesBackend({ url: fake.url }).generate({ ...REQUEST, checkpoint: 'sd-cpp-local' }, run());

    expect(result.model).toBeUndefined();
    expect(fake.requests.find((request) => request.path === '/v1/images/generations')?.body).toMatchObject({ model: 'sd-cpp-local' });
  });

  it("a model LocalAI does not have is refused in LocalAI's words, and so is a chat model that makes no image", async () => {
    const fake = await startFakeLocalAi({ models: ['sd-1.5'], chatModels: ['mistral-7b'] });
    const backend = createOpenAiImagesBackend({ url: fake.url, dialect: 'localai', model: 'sd-1.5' });

    const unknown = await expectBackendError(backend.generate({ ...REQUEST, checkpoint: 'sdxl' }, run()), 'backend_error');
    expect(unknown.message).toBe(
      `LocalAI at ${fake.url} refused the image (HTTP 404): model "sdxl" not found. To see available models, call GET /v1/models. Check its console and the model it serves.`,
    );
    const chat = await expectBackendError(backend.generate({ ...REQUEST, checkpoint: 'mistral-7b' }, run()), 'backend_error');
    expect(chat.message).toBe(`LocalAI at ${fake.url} refused the image (HTTP 500): rpc error: code = Unimplemented desc =. Check its console and the model it serves.`);
    expect(fake.runs).toEqual([]);
  });

  it("a model an OpenAI-style server does not have is refused in its words", async () => {
    const fake = await startFakeOpenAiImages({ models: ['dall-e-3'], knownModelsOnly: true });

    const error = await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate({ ...REQUEST, checkpoint: 'dall-e-9' }, run()), 'backend_error');

    expect(error.message).toBe(
      `The image server at ${fake.url} refused the image (HTTP 404): The model \`dall-e-9\` does not exist or you do not have access to it. Check its console and the model it serves.`,
    );
  });
});
