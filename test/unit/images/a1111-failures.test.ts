// What the A1111 adapter says when A1111 fails or cannot be reached: its error shapes in its own words, a
// missing route, nothing listening, a connection cut midway, and the cause of each failure kept for the log.
import { describe, expect, it } from 'vitest';
import { createA1111Backend, describeA1111Error } from '../../../server/a1111/index.ts';
import { REQUEST, abortedSignal, closeAfterTest, expectBackendError, findClosedUrl, run, serveRoutes, startCuttingServer, startFakeA1111 } from './helpers.ts';

describe('describeA1111Error', () => {
  it('quotes a body that is not JSON, and says when the answer was empty', () => {
    expect(describeA1111Error('Internal Server Error')).toBe('Internal Server Error');
    expect(describeA1111Error('')).toBe('(empty answer)');
    expect(describeA1111Error('  \n')).toBe('(empty answer)');
  });

  it('reads a FastAPI detail list: each field without "body", its message, and items of other shapes as they are', () => {
    const detail = [
      { loc: ['body', 'steps'], msg: 'value is not a valid integer', type: 'type_error.integer' },
      { loc: ['query', 'skip_current_image'], msg: 'value could not be parsed to a boolean', type: 'type_error.bool' },
      { loc: 'body', msg: 'a place that is not a list' },
      { msg: 'no place at all' },
      { loc: ['body', 'cfg_scale'], type: 'type_error.float' },
      'a bare string',
    ];

    expect(describeA1111Error(JSON.stringify({ detail }))).toBe(
      'steps: value is not a valid integer; query.skip_current_image: value could not be parsed to a boolean; a place that is not a list; ' +
        'no place at all; cfg_scale: {"loc":["body","cfg_scale"],"type":"type_error.float"}; a bare string',
    );
  });

  it("reads A1111's own error shape, each part once, blank parts left out, and sd-server's", () => {
    // handle_exception (modules/api/api.py): {"error": type name, "detail": "", "body": "", "errors": str(e)}.
    expect(describeA1111Error(JSON.stringify({ error: 'OutOfMemoryError', detail: '', body: '', errors: 'CUDA out of memory.' }))).toBe(
      'OutOfMemoryError: CUDA out of memory.',
    );
    expect(describeA1111Error(JSON.stringify({ error: 'HTTPException', detail: 'Bad request', body: '  ', errors: 'Bad request' }))).toBe(
      'HTTPException: Bad request',
    );
    expect(describeA1111Error(JSON.stringify({ error: 'ValueError', detail: '', body: '{"prompt": 1}', errors: 'bad prompt' }))).toBe(
      'ValueError: bad prompt: {"prompt": 1}',
    );
    // sd-server (routes_sdapi.cpp:398-404).
    expect(describeA1111Error(JSON.stringify({ error: 'server_error', message: 'failed to generate image' }))).toBe('server_error: failed to generate image');
    // Nothing to read: the body itself.
    expect(describeA1111Error('{"status": "busy"}')).toBe('{"status": "busy"}');
  });
});

describe('the A1111 adapter when A1111 fails', () => {
  it('says how to start the backend when nothing listens at the URL', async () => {
    const url = await findClosedUrl();
    const backend = createA1111Backend({ url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'unreachable');
    expect(error.message).toContain(url);
    expect(error.message).toContain('--api');
    expect(error.message).toContain('--image-url');
  });

  it("surfaces A1111's own error words as backend_error", async () => {
    const fake = await startFakeA1111({
      failWith: {
        status: 500,
        body: { error: 'OutOfMemoryError', detail: '', body: '', errors: 'CUDA out of memory. Tried to allocate 2.00 GiB' },
      },
    });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB');
  });

  it('turns a 422 validation detail list into readable field messages', async () => {
    const fake = await startFakeA1111();
    const corruptingFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/txt2img')
        ? fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(String(init?.body)), steps: 'many', cfg_scale: 'high' }) })
        : fetch(input, init);
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, fetch: corruptingFetch });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('HTTP 422');
    expect(error.message).toContain('steps: value is not a valid integer');
    expect(error.message).toContain('cfg_scale: value is not a valid float');
  });

  it('a connection cut in the middle of the answer is a broken connection, not a server that is not running', async () => {
    const server = await closeAfterTest(startCuttingServer('/sdapi/v1/txt2img', '{"images": ["iVBORw0'));
    const { url } = server;

    const error = await expectBackendError(createA1111Backend({ url, pollIntervalMs: 5 }).generate(REQUEST, run()), 'unreachable');

    expect(error.message).toContain(`The connection to the image backend at ${url} broke before the image arrived`);
    expect(error.message).not.toContain('is not answering');
  });

  it('a server without /sdapi/v1/txt2img (HTTP 404) is told apart from a refused image', async () => {
    const server = await serveRoutes({});

    const error = await expectBackendError(createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 }).generate(REQUEST, run()), 'backend_error');

    expect(error.message).toBe(`The server at ${server.url} has no /sdapi/v1/txt2img (HTTP 404: Not Found). Start AUTOMATIC1111 with --api, or point --image-url at it.`);
  });

  it('a failure with no error code says "not answering" without one; nothing listening names its code', async () => {
    const uncoded = (): Promise<Response> => Promise.reject(new TypeError('fetch failed'));
    const advice = "Start AUTOMATIC1111 / Forge / SD.Next with --api (or stable-diffusion.cpp's sd-server), or set --image-url to where it runs.";

    const none = await expectBackendError(createA1111Backend({ url: 'http://images.invalid:7860', fetch: uncoded }).generate(REQUEST, run()), 'unreachable');
    expect(none.message).toBe(`The image backend at http://images.invalid:7860 is not answering. ${advice}`);

    const closed = await findClosedUrl();
    const refused = await expectBackendError(createA1111Backend({ url: closed }).generate(REQUEST, run()), 'unreachable');
    expect(refused.message).toBe(`The image backend at ${closed} is not answering (ECONNREFUSED). ${advice}`);
  });

  it('keeps the cause of each failure for the log', async () => {
    const closed = await findClosedUrl();
    const refused = await expectBackendError(createA1111Backend({ url: closed }).generate(REQUEST, run()), 'unreachable');
    expect(refused.cause).toBeInstanceOf(Error);

    const cutting = await closeAfterTest(startCuttingServer('/sdapi/v1/txt2img', '{"images": ["iVBORw0'));
    const broken = await expectBackendError(createA1111Backend({ url: cutting.url, pollIntervalMs: 3_600_000 }).generate(REQUEST, run()), 'unreachable');
    expect(broken.message).toContain('broke before the image arrived');
    expect(broken.cause).toBeInstanceOf(Error);

    const reason = new Error('the user pressed Cancel');
    const server = await serveRoutes({ '/sdapi/v1/txt2img': 'hang' });
    const cancelled = await expectBackendError(createA1111Backend({ url: server.url }).generate(REQUEST, run(abortedSignal(reason))), 'cancelled');
    expect(cancelled.cause).toBe(reason);

    const timedOut = await expectBackendError(createA1111Backend({ url: server.url, timeoutMs: 100, pollIntervalMs: 3_600_000 }).generate(REQUEST, run()), 'timeout');
    expect(timedOut.cause).toBeInstanceOf(Error);
  });
});
