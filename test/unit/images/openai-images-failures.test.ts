// What the OpenAI-compatible adapter says when the server refuses, fails or cannot be reached: its error shapes,
// a refused key, a missing route, nothing listening, a connection cut midway, each dialect's words, and the
// cause of each failure kept for the log.
import { describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend, describeOpenAiError } from '../../../server/openai-images/index.ts';
import { REQUEST, abortedSignal, closeAfterTest, expectBackendError, findClosedUrl, run, serveRoutes, startCuttingServer, startFakeOpenAiImages } from './helpers.ts';

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

describe('when the server refuses or cannot be reached', () => {
  it("surfaces the server's error message as backend_error", async () => {
    const fake = await startFakeOpenAiImages({
      failWith: { status: 500, body: { error: { code: 500, message: 'could not load model: rpc error: code = Unavailable', type: '' } } },
    });
    const backend = createOpenAiImagesBackend({ url: fake.url });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('could not load model: rpc error: code = Unavailable');
  });

  it('passes on the validation error of a request the server refuses', async () => {
    const fake = await startFakeOpenAiImages();
    const backend = createOpenAiImagesBackend({ url: fake.url });

    const error = await expectBackendError(backend.generate({ ...REQUEST, prompt: '' }, run()), 'backend_error');
    expect(error.message).toContain("Missing required parameter: 'prompt'.");
  });

  it('says how to start a server when nothing listens at the URL', async () => {
    const url = await findClosedUrl();
    const error = await expectBackendError(
      createOpenAiImagesBackend({ url }).generate(REQUEST, run()),
      'unreachable',
    );
    expect(error.message).toContain(url);
    expect(error.message).toContain('--image-url');
  });

  it('a 401 or 403 is a refused API key, with the server\'s words', async () => {
    for (const status of [401, 403]) {
      const fake = await startFakeOpenAiImages({ failWith: { status, body: { error: { message: 'Incorrect API key provided' } } } });

      const error = await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run()), 'backend_error');

      expect(error.message).toContain(`refused the API key (HTTP ${status}): Incorrect API key provided`);
      expect(error.message).toContain('Check the image API key');
    }
  });

  it('a 404 without an error body is a missing route; with OpenAI\'s error body it is the server refusing the image', async () => {
    const missing = await startFakeOpenAiImages({ failWith: { status: 404, body: '404 page not found' } });
    const route = await expectBackendError(createOpenAiImagesBackend({ url: missing.url }).generate(REQUEST, run()), 'backend_error');
    expect(route.message).toContain(`has no ${missing.url}/v1/images/generations (HTTP 404: 404 page not found)`);
    expect(route.message).toContain('--image-url');

    const model = await startFakeOpenAiImages({ failWith: { status: 404, body: { error: { message: 'The model `dall-e-9` does not exist' } } } });
    const refused = await expectBackendError(createOpenAiImagesBackend({ url: model.url }).generate(REQUEST, run()), 'backend_error');
    expect(refused.message).toContain('refused the image (HTTP 404): The model `dall-e-9` does not exist');
  });

  it('a connection cut in the middle of the answer is said as a broken connection, not as a server that is not running', async () => {
    const server = await closeAfterTest(startCuttingServer('/v1/images/generations', '{"created": 1, "data": [{"b64_json": "'));
    const { url } = server;

    const error = await expectBackendError(createOpenAiImagesBackend({ url }).generate(REQUEST, run()), 'unreachable');

    expect(error.message).toContain('broke before the image arrived');
    expect(error.message).not.toContain('is not answering');
  });

  it('names LocalAI as LocalAI, and an OpenAI-style server as what it is, when nothing answers or an image is refused', async () => {
    const closed = await findClosedUrl();
    const localNothing = await expectBackendError(createOpenAiImagesBackend({ url: closed, dialect: 'localai' }).generate(REQUEST, run()), 'unreachable');
    expect(localNothing.message).toBe(`LocalAI at ${closed} is not answering (ECONNREFUSED). Start LocalAI, or set --image-url to where it runs.`);
    const openaiNothing = await expectBackendError(createOpenAiImagesBackend({ url: closed }).generate(REQUEST, run()), 'unreachable');
    expect(openaiNothing.message).toBe(
      `The OpenAI-compatible image server at ${closed} is not answering (ECONNREFUSED). Start the image server, or set --image-url to where it runs.`,
    );

    const refusing = await startFakeOpenAiImages({ failWith: { status: 500, body: { error: { message: 'no backend' } } } });
    const local = await expectBackendError(createOpenAiImagesBackend({ url: refusing.url, dialect: 'localai' }).generate(REQUEST, run()), 'backend_error');
    expect(local.message.startsWith(`LocalAI at ${refusing.url} refused the image (HTTP 500): no backend.`)).toBe(true);
    const other = await expectBackendError(createOpenAiImagesBackend({ url: refusing.url }).generate(REQUEST, run()), 'backend_error');
    expect(other.message.startsWith(`The image server at ${refusing.url} refused the image (HTTP 500): no backend.`)).toBe(true);
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

    const cutting = await closeAfterTest(startCuttingServer('/v1/images/generations', '{"data": [{"b64_json": "iVBORw0'));
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
});
