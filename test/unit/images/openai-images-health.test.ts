// What the OpenAI-compatible adapter's checkHealth says: the models it lists, a refused key, a failing
// /v1/models, LocalAI's /readyz, nothing listening, no answer in time, a cancelled check.
import { describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { closeAfterTest, findClosedUrl, serveRoutes, startFakeOpenAiImages, startStatusServer } from './helpers.ts';

describe('OpenAI-compatible checkHealth', () => {
  it('checkHealth: reachable and lists the models', async () => {
    const fake = await startFakeOpenAiImages({ requireApiKey: 'k', models: ['sd-1.5', 'flux'] });
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
    const fake = await startFakeOpenAiImages();
    const health = await createOpenAiImagesBackend({ url: fake.url }).checkHealth(AbortSignal.abort());
    expect(health).toEqual({ reachable: false, detail: 'The health check was cancelled.' });
  });

  it('says when the key is refused, when /v1/models fails, and lists at most five models', async () => {
    const locked = await startFakeOpenAiImages({ requireApiKey: 'sk-1' });
    const refused = await createOpenAiImagesBackend({ url: locked.url }).checkHealth();
    expect(refused.reachable).toBe(true);
    expect(refused.detail).toContain(`The image server at ${locked.url} answers but refuses the API key (HTTP 401)`);

    const broken = await closeAfterTest(startStatusServer(500));
    const failing = await createOpenAiImagesBackend({ url: broken.url }).checkHealth();
    expect(failing).toMatchObject({ reachable: true, detail: `The server at ${broken.url} answers ${broken.url}/v1/models with HTTP 500.` });

    const many = await startFakeOpenAiImages({ models: ['a', 'b', 'c', 'd', 'e', 'f'] });
    expect((await createOpenAiImagesBackend({ url: many.url }).checkHealth()).detail).toContain('(models: a, b, c, d, e, …)');
    const five = await startFakeOpenAiImages({ models: ['a', 'b', 'c', 'd', 'e'] });
    expect((await createOpenAiImagesBackend({ url: five.url }).checkHealth()).detail).toContain('(models: a, b, c, d, e).');
  });

  it('lists the models that have a name, and none when the list is empty', async () => {
    const listing = await serveRoutes({ '/v1/models': { json: { object: 'list', data: [null, 'stray', { id: 'sd-1.5' }, { id: 5 }, { object: 'model' }] } } });
    expect(await createOpenAiImagesBackend({ url: listing.url }).checkHealth()).toEqual({
      reachable: true,
      detail: `The OpenAI-compatible image server answers at ${listing.url} (models: sd-1.5). Its API takes no seed, steps, CFG or negative prompt, so Easel sends and records none.`,
    });

    const empty = await serveRoutes({ '/v1/models': { json: { object: 'list', data: [] } } });
    expect((await createOpenAiImagesBackend({ url: empty.url }).checkHealth()).detail).toBe(
      `The OpenAI-compatible image server answers at ${empty.url}. Its API takes no seed, steps, CFG or negative prompt, so Easel sends and records none.`,
    );
  });

  it('a 403 is a refused key', async () => {
    const server = await serveRoutes({ '/v1/models': { status: 403, json: { error: { message: 'You are not allowed to list models', type: 'invalid_request_error' } } } });

    expect(await createOpenAiImagesBackend({ url: server.url, apiKey: 'sk-test' }).checkHealth()).toEqual({
      reachable: true,
      detail: `The image server at ${server.url} answers but refuses the API key (HTTP 403): You are not allowed to list models.`,
    });
  });

  it("LocalAI's /readyz: a 500 is not \"starting\"; one that never answers ends with the timeout", { timeout: 5_000 }, async () => {
    const failing = await serveRoutes({ '/readyz': { status: 500, text: '' }, '/v1/models': { json: { object: 'list', data: [{ id: 'sd' }] } } });
    expect(await createOpenAiImagesBackend({ url: failing.url, dialect: 'localai' }).checkHealth()).toEqual({
      reachable: true,
      server: 'LocalAI',
      detail: `LocalAI answers at ${failing.url} (models: sd).`,
    });

    const hanging = await serveRoutes({ '/readyz': 'hang', '/v1/models': { json: { object: 'list', data: [{ id: 'sd' }] } } });
    expect(await createOpenAiImagesBackend({ url: hanging.url, dialect: 'localai', healthTimeoutMs: 150 }).checkHealth()).toEqual({
      reachable: false,
      slow: true,
      detail: `LocalAI at ${hanging.url} did not answer within 150 ms.`,
    });
  });

  it('a check that gets no answer in time says so; a cancelled one says it was cancelled', { timeout: 5_000 }, async () => {
    const silent = await serveRoutes({ '/v1/models': 'hang', '/sdcpp/v1/capabilities': 'hang' });
    expect(await createOpenAiImagesBackend({ url: silent.url, healthTimeoutMs: 150 }).checkHealth()).toEqual({
      reachable: false,
      slow: true,
      detail: `The image server at ${silent.url} did not answer within 150 ms.`,
    });

    const controller = new AbortController();
    const check = createOpenAiImagesBackend({ url: silent.url, healthTimeoutMs: 3_600_000 }).checkHealth(controller.signal);
    setTimeout(() => controller.abort(), 20);
    expect(await check).toEqual({ reachable: false, detail: 'The health check was cancelled.' });

    const closed = await findClosedUrl();
    expect(await createOpenAiImagesBackend({ url: closed }).checkHealth()).toEqual({
      reachable: false,
      detail: `The OpenAI-compatible image server at ${closed} is not answering (ECONNREFUSED). Start the image server, or set --image-url to where it runs.`,
    });
  });
});
