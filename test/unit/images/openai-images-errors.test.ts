// What the OpenAI-compatible adapter says when the server answers something other than an image: each
// message names what happened and what to do. These are the gaps a mutation run of the adapter showed.
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend, describeOpenAiError } from '../../../server/openai-images/index.ts';
import { createFakeOpenAiImages } from '../../fakes/fake-openai-images.ts';
import type { FakeOpenAiImages, FakeOpenAiImagesOptions } from '../../fakes/fake-openai-images.ts';
import { REQUEST, expectBackendError, findClosedUrl, startCuttingServer, startStatusServer } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function startFake(options: FakeOpenAiImagesOptions = {}): Promise<FakeOpenAiImages> {
  const fake = await createFakeOpenAiImages(options);
  cleanups.push(() => fake.close());
  return fake;
}

const run = (signal = new AbortController().signal) => ({ signal, onProgress: () => {} });

// The first bytes of a JPEG (SOI, APP0 "JFIF"): what a server set to JPEG answers.
const JPEG_BASE64 = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00]).toString('base64');

describe("the server's own words", () => {
  it('reads every error shape the servers use, and says when there were none', () => {
    expect(describeOpenAiError('{"error": {"message": "model not found", "type": "invalid_request_error"}}')).toBe('model not found');
    // sd-server (routes_openai.cpp): an error name, then its message.
    expect(describeOpenAiError('{"error": "server_error", "message": "out of memory"}')).toBe('server_error: out of memory');
    expect(describeOpenAiError('{"error": "invalid size"}')).toBe('invalid size');
    expect(describeOpenAiError('{"error": "invalid size", "message": ""}')).toBe('invalid size');
    expect(describeOpenAiError('{"error": {"message": ""}, "message": "the outer words"}')).toBe('the outer words');
    expect(describeOpenAiError('{"error": "", "detail": "Not Found"}')).toBe('Not Found');
    expect(describeOpenAiError('Bad Gateway')).toBe('Bad Gateway');
    expect(describeOpenAiError('')).toBe('(empty answer)');
  });
});

describe('answers that are not an image', () => {
  it('a 401 or 403 is a refused API key, with the server\'s words', async () => {
    for (const status of [401, 403]) {
      const fake = await startFake({ failWith: { status, body: { error: { message: 'Incorrect API key provided' } } } });

      const error = await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run()), 'backend_error');

      expect(error.message).toContain(`refused the API key (HTTP ${status}): Incorrect API key provided`);
      expect(error.message).toContain('Check the image API key');
    }
  });

  it('a 404 without an error body is a missing route; with OpenAI\'s error body it is the server refusing the image', async () => {
    const missing = await startFake({ failWith: { status: 404, body: '404 page not found' } });
    const route = await expectBackendError(createOpenAiImagesBackend({ url: missing.url }).generate(REQUEST, run()), 'backend_error');
    expect(route.message).toContain(`has no ${missing.url}/v1/images/generations (HTTP 404: 404 page not found)`);
    expect(route.message).toContain('--image-url');

    const model = await startFake({ failWith: { status: 404, body: { error: { message: 'The model `dall-e-9` does not exist' } } } });
    const refused = await expectBackendError(createOpenAiImagesBackend({ url: model.url }).generate(REQUEST, run()), 'backend_error');
    expect(refused.message).toContain('refused the image (HTTP 404): The model `dall-e-9` does not exist');
  });

  it('a JPEG says to configure PNG', async () => {
    const fake = await startFake({ failWith: { status: 200, body: { created: 1, data: [{ b64_json: JPEG_BASE64 }] } } });

    const error = await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run()), 'bad_response');

    expect(error.message).toContain('Configure the server to return PNG.');
  });

  it('a link it cannot serve, and a link that is no URL, are said as such', async () => {
    const fake = await startFake({ failWith: { status: 200, body: { created: 1, data: [{ url: '/generated-images/missing.png' }] } } });
    const notServed = await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run()), 'backend_error');
    expect(notServed.message).toContain('could not serve the image it made (HTTP 404)');

    const unreadable = await startFake({ failWith: { status: 200, body: { created: 1, data: [{ url: 'http://[not a host' }] } } });
    const bad = await expectBackendError(createOpenAiImagesBackend({ url: unreadable.url }).generate(REQUEST, run()), 'bad_response');
    expect(bad.message).toContain('answered with an image link Easel cannot read (http://[not a host)');
  });

  it('a URL with several trailing slashes is the same server', async () => {
    const fake = await startFake();

    await createOpenAiImagesBackend({ url: `${fake.url}///` }).generate(REQUEST, run());

    expect(fake.requests.map((request) => request.path)).toContain('/v1/images/generations');
  });

  it('a connection cut in the middle of the answer is said as a broken connection, not as a server that is not running', async () => {
    const server = await startCuttingServer('/v1/images/generations', '{"created": 1, "data": [{"b64_json": "');
    cleanups.push(() => server.close());
    const { url } = server;

    const error = await expectBackendError(createOpenAiImagesBackend({ url }).generate(REQUEST, run()), 'unreachable');

    expect(error.message).toContain('broke before the image arrived');
    expect(error.message).not.toContain('is not answering');
  });
});

describe('the words, by dialect, and the answers it reads', () => {
  it('names LocalAI as LocalAI, and an OpenAI-style server as what it is, when nothing answers or an image is refused', async () => {
    const closed = await findClosedUrl();
    const localNothing = await expectBackendError(createOpenAiImagesBackend({ url: closed, dialect: 'localai' }).generate(REQUEST, run()), 'unreachable');
    expect(localNothing.message).toBe(`LocalAI at ${closed} is not answering (ECONNREFUSED). Start LocalAI, or set --image-url to where it runs.`);
    const openaiNothing = await expectBackendError(createOpenAiImagesBackend({ url: closed }).generate(REQUEST, run()), 'unreachable');
    expect(openaiNothing.message).toBe(
      `The OpenAI-compatible image server at ${closed} is not answering (ECONNREFUSED). Start the image server, or set --image-url to where it runs.`,
    );

    const refusing = await startFake({ failWith: { status: 500, body: { error: { message: 'no backend' } } } });
    const local = await expectBackendError(createOpenAiImagesBackend({ url: refusing.url, dialect: 'localai' }).generate(REQUEST, run()), 'backend_error');
    expect(local.message.startsWith(`LocalAI at ${refusing.url} refused the image (HTTP 500): no backend.`)).toBe(true);
    const other = await expectBackendError(createOpenAiImagesBackend({ url: refusing.url }).generate(REQUEST, run()), 'backend_error');
    expect(other.message.startsWith(`The image server at ${refusing.url} refused the image (HTTP 500): no backend.`)).toBe(true);
  });

  it('asks only an OpenAI-dialect server whether it is sd-server', async () => {
    const fake = await startFake();

    await createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' }).generate(REQUEST, run());

    expect(fake.requests.map((request) => request.path)).not.toContain('/sdcpp/v1/capabilities');
  });

  it('sends no Authorization header for an empty API key', async () => {
    const fake = await startFake();

    await createOpenAiImagesBackend({ url: fake.url, apiKey: '' }).generate(REQUEST, run());

    expect(fake.requests.find((request) => request.path === '/v1/images/generations')?.authorization).toBeUndefined();
  });

  it('reads b64_json sent as a data: URL, takes an empty b64_json as no image, and quotes an answer without one', async () => {
    const good = await startFake();
    const png = (await createOpenAiImagesBackend({ url: good.url }).generate(REQUEST, run())).png;
    const dataUrl = await startFake({
      failWith: { status: 200, body: { created: 1, data: [{ b64_json: `data:image/png;base64,${Buffer.from(png).toString('base64')}` }] } },
    });
    expect((await createOpenAiImagesBackend({ url: dataUrl.url }).generate(REQUEST, run())).png).toEqual(png);

    const empty = await startFake({ failWith: { status: 200, body: { created: 1, data: [{ b64_json: '', url: '' }] } } });
    const error = await expectBackendError(createOpenAiImagesBackend({ url: empty.url }).generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(
      `The image server at ${empty.url} answered without an image ({"created":1,"data":[{"b64_json":"","url":""}]}). Check that it serves an image model.`,
    );
  });

  it('does not ask at all when the signal is already aborted', async () => {
    const fake = await startFake();

    await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run(AbortSignal.abort())), 'cancelled');

    expect(fake.requests.filter((request) => request.path === '/v1/images/generations')).toHaveLength(0);
  });
});

describe('checkHealth', () => {
  it('says when the key is refused, when /v1/models fails, and lists at most five models', async () => {
    const locked = await startFake({ requireApiKey: 'sk-1' });
    const refused = await createOpenAiImagesBackend({ url: locked.url }).checkHealth();
    expect(refused.reachable).toBe(true);
    expect(refused.detail).toContain(`The image server at ${locked.url} answers but refuses the API key (HTTP 401)`);

    const broken = await startStatusServer(500);
    cleanups.push(() => broken.close());
    const failing = await createOpenAiImagesBackend({ url: broken.url }).checkHealth();
    expect(failing).toMatchObject({ reachable: true, detail: `The server at ${broken.url} answers ${broken.url}/v1/models with HTTP 500.` });

    const many = await startFake({ models: ['a', 'b', 'c', 'd', 'e', 'f'] });
    expect((await createOpenAiImagesBackend({ url: many.url }).checkHealth()).detail).toContain('(models: a, b, c, d, e, …)');
    const five = await startFake({ models: ['a', 'b', 'c', 'd', 'e'] });
    expect((await createOpenAiImagesBackend({ url: five.url }).checkHealth()).detail).toContain('(models: a, b, c, d, e).');
  });
});
