// What the OpenAI-compatible adapter reads from each answer and says, word for word: where the API lives,
// what an image is recorded as made with, links it refuses, answers without a usable image, causes kept
// for the log, and checkHealth's words. The gaps a mutation run of server/openai-images showed.
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { readPngChunks } from '../../../server/png/index.ts';
import { createFakeLocalAi } from '../../fakes/fake-localai.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { REQUEST, abortedSignal, expectBackendError, findClosedUrl, startCuttingServer, serveRoutes } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

const PNG = makePng(8, 8);
const IMAGE = { json: { created: 1, data: [{ b64_json: Buffer.from(PNG).toString('base64') }] } };
const run = (signal = new AbortController().signal) => ({ signal, onProgress: () => {} });
const reasonOf = (bytes: Uint8Array) => {
  const read = readPngChunks(bytes);
  return read.ok ? 'none' : read.error.message;
};

describe('what the OpenAI-compatible adapter sends and records', () => {
  it('keeps a /v1 inside the address: only a trailing /v1 is the API root', async () => {
    const server = await serveRoutes({ '/api/v1/sd/v1/images/generations': IMAGE });

    await createOpenAiImagesBackend({ url: `${server.url}/api/v1/sd` }).generate(REQUEST, run());

    expect(server.requests.map((request) => request.path)).toContain('/api/v1/sd/v1/images/generations');
  });

  it('records no model it was not given, for OpenAI and for LocalAI', async () => {
    const server = await serveRoutes({ '/v1/images/generations': IMAGE });
    const { png: _png, ...openai } = await createOpenAiImagesBackend({ url: server.url }).generate(REQUEST, run());
    // toStrictEqual: a model key holding undefined is not "no model".
    expect(openai).toStrictEqual({ negativePrompt: '' });

    const localai = await createFakeLocalAi();
    cleanups.push(() => localai.close());
    const { png: _localPng, ...made } = await createOpenAiImagesBackend({ url: localai.url, dialect: 'localai' }).generate(REQUEST, run());
    expect(made).toStrictEqual({ seed: REQUEST.seed, steps: REQUEST.steps, prompt: REQUEST.prompt, negativePrompt: REQUEST.negativePrompt });
  });
});

describe('answers the OpenAI-compatible adapter cannot use', () => {
  it('a link it cannot read is quoted to 120 characters; a link to a file: URL names its scheme', async () => {
    const unreadable = `http://[${'x'.repeat(300)}`;
    const links = [unreadable, 'file:///etc/passwd'];
    let next = 0;
    const server = await serveRoutes({ '/v1/images/generations': () => ({ json: { created: 1, data: [{ url: links[next++] }] } }) });
    const backend = createOpenAiImagesBackend({ url: server.url });

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} answered with an image link Easel cannot read (${unreadable.slice(0, 120)}).`,
    );
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} linked its image on another server (file:); Easel only downloads images from ${server.url} itself, so it fetched nothing. Configure the server to answer with b64_json, or to link its images on its own address.`,
    );
  });

  it('a link answered with 300 is a redirect; one answered with 400 is an image the server could not serve', async () => {
    const statuses = [300, 400];
    const server = await serveRoutes({
      '/v1/images/generations': { json: { created: 1, data: [{ url: '/files/a.png' }] } },
      '/files/a.png': () => ({ status: statuses.shift() ?? 500, text: '' }),
    });
    const backend = createOpenAiImagesBackend({ url: server.url });

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} answered GET /files/a.png with a redirect (HTTP 300, no Location). Easel follows no redirect of an image server, so it sent nothing there. Set --image-url to the address the server really answers at.`,
    );
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'backend_error')).message).toBe(
      `The image server at ${server.url} could not serve the image it made (HTTP 400).`,
    );
  });

  it('a WebP image is refused with what to configure; an image of a kind no setting gives, without', async () => {
    const webp = new Uint8Array(Buffer.concat([Buffer.from('RIFF'), Buffer.from([26, 0, 0, 0]), Buffer.from('WEBPVP8 '), Buffer.alloc(14)]));
    const gif = new Uint8Array(Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1'));
    const images = [webp, gif];
    let next = 0;
    const server = await serveRoutes({ '/v1/images/generations': () => ({ json: { created: 1, data: [{ b64_json: Buffer.from(images[next++] ?? gif).toString('base64') }] } }) });
    const backend = createOpenAiImagesBackend({ url: server.url });

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} sent an image Easel cannot use: ${reasonOf(webp)} Configure the server to return PNG.`,
    );
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} sent an image Easel cannot use: ${reasonOf(gif)}`,
    );
  });

  it('an empty answer and a long one are "without an image", quoting at most 120 characters', async () => {
    const long = { created: 1, data: [], note: 'x'.repeat(500) };
    const answers = [{ text: '' }, { json: long }];
    let next = 0;
    const server = await serveRoutes({ '/v1/images/generations': () => answers[next++] ?? 'cut' });
    const backend = createOpenAiImagesBackend({ url: server.url });
    const words = (quote: string) => `The image server at ${server.url} answered without an image (${quote}). Check that it serves an image model.`;

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words('empty answer'));
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words(JSON.stringify(long).slice(0, 120)));
  });

  it('a failure with no error code says "not answering" without one', async () => {
    const uncoded = (): Promise<Response> => Promise.reject(new TypeError('fetch failed'));

    const error = await expectBackendError(createOpenAiImagesBackend({ url: 'http://images.invalid:8080', fetch: uncoded }).generate(REQUEST, run()), 'unreachable');

    expect(error.message).toBe('The OpenAI-compatible image server at http://images.invalid:8080 is not answering. Start the image server, or set --image-url to where it runs.');
  });

  it('keeps the cause of each failure for the log, and says a cancel cannot stop the server', async () => {
    const closed = await findClosedUrl();
    const refused = await expectBackendError(createOpenAiImagesBackend({ url: closed }).generate(REQUEST, run()), 'unreachable');
    expect(refused.cause).toBeInstanceOf(Error);

    const cutting = await startCuttingServer('/v1/images/generations', '{"data": [{"b64_json": "iVBORw0');
    cleanups.push(() => cutting.close());
    const broken = await expectBackendError(createOpenAiImagesBackend({ url: cutting.url }).generate(REQUEST, run()), 'unreachable');
    expect(broken.message).toContain('broke before the image arrived');
    expect(broken.cause).toBeInstanceOf(Error);

    const server = await serveRoutes({ '/v1/images/generations': 'hang' });
    const reason = new Error('the user pressed Cancel');
    const cancelled = await expectBackendError(createOpenAiImagesBackend({ url: server.url }).generate(REQUEST, run(abortedSignal(reason))), 'cancelled');
    expect(cancelled.message).toBe(
      `The image was cancelled; Easel stopped waiting for ${server.url} (this API has no interrupt, so the server may finish it anyway).`,
    );
    expect(cancelled.cause).toBe(reason);

    const timedOut = await expectBackendError(createOpenAiImagesBackend({ url: server.url, timeoutMs: 100 }).generate(REQUEST, run()), 'timeout');
    expect(timedOut.cause).toBeInstanceOf(Error);
  });

  it('an sd-server probe that never answers ends with the health timeout, and the image is asked for plainly', { timeout: 5_000 }, async () => {
    const server = await serveRoutes({ '/sdcpp/v1/capabilities': 'hang', '/v1/images/generations': IMAGE });

    await createOpenAiImagesBackend({ url: server.url, healthTimeoutMs: 150 }).generate(REQUEST, run());

    const sent = server.requests.find((request) => request.path === '/v1/images/generations');
    expect(JSON.parse(sent?.body ?? '{}')).toEqual({ n: 1, size: '64x96', response_format: 'b64_json', prompt: REQUEST.prompt });
  });
});

describe('OpenAI-compatible checkHealth, word for word', () => {
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
      detail: `LocalAI at ${hanging.url} did not answer within 150 ms.`,
    });
  });

  it('a check that gets no answer in time says so; a cancelled one says it was cancelled', { timeout: 5_000 }, async () => {
    const silent = await serveRoutes({ '/v1/models': 'hang', '/sdcpp/v1/capabilities': 'hang' });
    expect(await createOpenAiImagesBackend({ url: silent.url, healthTimeoutMs: 150 }).checkHealth()).toEqual({
      reachable: false,
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
