// What the A1111 adapter reads from each answer and what it says, word for word: the error shapes of A1111
// (modules/api/api.py handle_exception: error, detail, body, errors), FastAPI's 422 detail lists and sd-server's
// {"error", "message"}, what the server says it used, progress polls that describe our job and those that do
// not, and what the adapter learns about the server as it goes. The gaps a mutation run of server/a1111 showed.
import { afterEach, describe, expect, it } from 'vitest';
import { createA1111Backend, describeA1111Error } from '../../../server/a1111/index.ts';
import { readPngChunks } from '../../../server/png/index.ts';
import type { ImageProgress } from '../../../server/core/ports.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import { createFakeSdServer } from '../../fakes/fake-sd-server.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { REQUEST, abortedSignal, expectBackendError, findClosedUrl, recordProgress, startCuttingServer, serveRoutes } from './helpers.ts';
import type { RouteAnswer } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

const PNG = Buffer.from(makePng(8, 8)).toString('base64');
/** A txt2img answer as A1111 sends it: the image, the parameters it was sent, `info` as a JSON string. */
const answerWith = (info: Record<string, unknown>) => ({ json: { images: [PNG], parameters: {}, info: JSON.stringify(info) } });
const run = (signal = new AbortController().signal, onProgress: (progress: ImageProgress) => void = () => {}) => ({ signal, onProgress });

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

describe('what the A1111 adapter reads from an answer', () => {
  it('the seed, steps, cfg, sampler and model the server says it used, else what it was asked', async () => {
    const infos: Record<string, unknown>[] = [
      { seed: 777, steps: 9, cfg_scale: 6.5, sampler_name: 'DPM++ 2M', sd_model_name: 'dreamshaper_8' },
      { all_seeds: [4242] },
      {},
      { sampler_name: 'NONE', sd_model_name: '' },
      { sampler_name: '' },
    ];
    let next = 0;
    const server = await serveRoutes({ '/sdapi/v1/txt2img': () => answerWith(infos[next++] ?? {}), '/sdapi/v1/progress': { status: 404, text: '' } });
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    const asked = { seed: REQUEST.seed, steps: REQUEST.steps, cfg: REQUEST.cfg };

    const results = [];
    for (let index = 0; index < infos.length; index++) {
      const { png: _png, ...used } = await backend.generate(REQUEST, run());
      results.push(used);
    }

    // toStrictEqual: a key holding undefined would override what was asked in the stored image.
    expect(results).toStrictEqual([
      { seed: 777, steps: 9, cfg: 6.5, sampler: 'DPM++ 2M', model: 'dreamshaper_8' },
      { ...asked, seed: 4242 },
      asked,
      asked,
      asked,
    ]);
  });

  it('takes an address with trailing slashes as the server itself', async () => {
    const server = await serveRoutes({ '/sdapi/v1/txt2img': answerWith({}) });
    const backend = createA1111Backend({ url: `${server.url}//`, pollIntervalMs: 3_600_000 });

    await backend.generate(REQUEST, run());

    expect(backend.url).toBe(server.url);
    expect(server.requests.map((request) => request.path)).toEqual(['/sdapi/v1/txt2img']);
  });

  it('an empty image, an empty answer and a long answer are "without an image", quoting at most 120 characters', async () => {
    const long = { images: [], note: 'x'.repeat(500) };
    const answers = [{ json: { images: [''], parameters: {}, info: '{}' } }, { text: '' }, { json: long }];
    let next = 0;
    const server = await serveRoutes({ '/sdapi/v1/txt2img': () => answers[next++] ?? 'cut' });
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    const words = (quote: string) =>
      `AUTOMATIC1111 at ${server.url} answered txt2img without an image (${quote}). Check that --image-url points to an AUTOMATIC1111-compatible API.`;

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words('{"images":[""],"parameters":{},"info":"{}"}'));
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words('empty answer'));
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words(JSON.stringify(long).slice(0, 120)));
  });

  it('a WebP image is refused with the setting to change; an image of a kind no setting gives, without', async () => {
    const webp = Buffer.concat([Buffer.from('RIFF'), Buffer.from([26, 0, 0, 0]), Buffer.from('WEBPVP8 '), Buffer.alloc(14)]);
    const gif = Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1');
    const images = [webp, gif];
    let next = 0;
    const server = await serveRoutes({ '/sdapi/v1/txt2img': () => ({ json: { images: [(images[next++] ?? gif).toString('base64')], info: '{}' } }) });
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    const reason = (bytes: Buffer) => {
      const read = readPngChunks(new Uint8Array(bytes));
      return read.ok ? 'none' : read.error.message;
    };

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `AUTOMATIC1111 at ${server.url} sent an image Easel cannot use: ${reason(webp)} Set Settings → Saving images → File format to png.`,
    );
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `AUTOMATIC1111 at ${server.url} sent an image Easel cannot use: ${reason(gif)}`,
    );
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

    const cutting = await startCuttingServer('/sdapi/v1/txt2img', '{"images": ["iVBORw0');
    cleanups.push(() => cutting.close());
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

describe('A1111 progress', () => {
  it('shows a poll only when it describes our sampling, once per change, and skips failed polls', async () => {
    const state = (fields: Record<string, unknown>) => ({ skipped: false, interrupted: false, job: '', job_no: 0, ...fields });
    const polls: RouteAnswer[] = [
      // The previous job's steps while ours waits (job_count 0), or no job count at all.
      { json: { progress: 0.3, eta_relative: 2, state: state({ job_count: 0, sampling_step: 5, sampling_steps: 30 }) } },
      { json: { progress: 0.3, eta_relative: 2, state: state({ sampling_step: 5, sampling_steps: 30 }) } },
      // A step counter at its end says nothing more than the image will.
      { json: { progress: 0.5, state: state({ job_count: 1, sampling_step: 20, sampling_steps: 20 }) } },
      // No fraction of A1111's own: the step's; a negative eta is no eta.
      { json: { eta_relative: -1, state: state({ job_count: 1, sampling_step: 4, sampling_steps: 10 }) } },
      { json: { eta_relative: -1, state: state({ job_count: 1, sampling_step: 4, sampling_steps: 10 }) } },
      { json: { progress: 0.6, eta_relative: 0, state: state({ job_count: 1, sampling_step: 5, sampling_steps: 10 }) } },
      // A failed poll, whatever its body says.
      { status: 500, json: { progress: 0.7, state: state({ job_count: 1, sampling_step: 6, sampling_steps: 10 }) } },
    ];
    let polled = 0;
    let allPolled: () => void = () => {};
    const done = new Promise<void>((resolve) => (allPolled = resolve));
    const server = await serveRoutes({
      '/sdapi/v1/progress': () => {
        const poll = polls[polled++];
        if (polled >= polls.length) allPolled();
        return poll ?? { json: { progress: 0, state: state({ job_count: 0, sampling_step: 0, sampling_steps: 0 }) } };
      },
      '/sdapi/v1/txt2img': async () => {
        await done;
        return answerWith({});
      },
    });
    const { events, onProgress } = recordProgress();

    await createA1111Backend({ url: server.url, pollIntervalMs: 2 }).generate(REQUEST, run(undefined, onProgress));

    expect(events).toStrictEqual([
      { fraction: 0.5, step: 5, steps: 10 },
      { fraction: 0.6, step: 6, steps: 10, etaSeconds: 0 },
    ]);
  });

  it('the image is handed on as soon as it comes: a poll that never answers or a long poll interval does not hold it', { timeout: 5_000 }, async () => {
    const server = await serveRoutes({ '/sdapi/v1/progress': 'hang', '/sdapi/v1/txt2img': { ...answerWith({}), delayMs: 50 } });
    await createA1111Backend({ url: server.url, pollIntervalMs: 2, healthTimeoutMs: 3_600_000 }).generate(REQUEST, run());

    const quiet = await serveRoutes({ '/sdapi/v1/txt2img': answerWith({}) });
    await createA1111Backend({ url: quiet.url, pollIntervalMs: 3_600_000 }).generate(REQUEST, run());
    expect(quiet.requests.map((request) => request.path)).toEqual(['/sdapi/v1/txt2img']);
  });
});

describe('stopping an A1111 image', () => {
  it('a cancel stays a cancel when the timeout passes during the interrupt, and A1111 is asked to stop once', async () => {
    let arrived: () => void = () => {};
    const started = new Promise<void>((resolve) => (arrived = resolve));
    let release: () => void = () => {};
    const interrupted = new Promise<void>((resolve) => (release = resolve));
    const server = await serveRoutes({
      '/sdapi/v1/txt2img': async () => {
        arrived();
        await interrupted;
        return answerWith({});
      },
      // A1111 answers the interrupt once the sampler has stopped: slower than the timeout here.
      '/sdapi/v1/interrupt': () => {
        setTimeout(release, 400);
        return { json: {}, delayMs: 400 };
      },
    });
    const controller = new AbortController();
    const generation = createA1111Backend({ url: server.url, timeoutMs: 150, pollIntervalMs: 3_600_000 }).generate(REQUEST, run(controller.signal));
    await started;
    controller.abort();

    await expectBackendError(generation, 'cancelled');
    expect(server.requests.filter((request) => request.path === '/sdapi/v1/interrupt')).toHaveLength(1);
  });

  it('once the image is there, a later abort or the timeout asks nothing more of A1111', async () => {
    const fake = await createFakeA1111({ stepDelayMs: 1 });
    cleanups.push(() => fake.close());
    const controller = new AbortController();

    await createA1111Backend({ url: fake.url, timeoutMs: 200, pollIntervalMs: 5 }).generate(REQUEST, run(controller.signal));
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 300));

    expect(fake.requests.filter((request) => request.path === '/sdapi/v1/interrupt')).toEqual([]);
  });
});

describe('what the A1111 adapter learns about the server', () => {
  const sdServerCancel = (url: string) =>
    `The image was cancelled. stable-diffusion.cpp's sd-server at ${url} cannot stop an image once it runs, so it finishes this one and Easel discards it; the next image starts after it.`;

  it('a server without /progress is sd-server from then on', async () => {
    const server = await serveRoutes({ '/sdapi/v1/progress': { status: 404, text: '' }, '/sdapi/v1/txt2img': { ...answerWith({}), delayMs: 100 } });
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 2 });

    await backend.generate(REQUEST, run());
    const error = await expectBackendError(backend.generate(REQUEST, run(abortedSignal(new Error('stop')))), 'cancelled');

    expect(error.message).toBe(sdServerCancel(server.url));
  });

  it("an answer whose info says version stable-diffusion.cpp is sd-server's; A1111's answers never make it one", async () => {
    const server = await serveRoutes({ '/sdapi/v1/txt2img': answerWith({ version: 'stable-diffusion.cpp' }) });
    const sdServer = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    await sdServer.generate(REQUEST, run());
    expect((await expectBackendError(sdServer.generate(REQUEST, run(abortedSignal(new Error('stop')))), 'cancelled')).message).toBe(sdServerCancel(server.url));

    const fake = await createFakeA1111({ stepDelayMs: 1 });
    cleanups.push(() => fake.close());
    const a1111 = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    await a1111.generate(REQUEST, run());
    expect((await expectBackendError(a1111.generate(REQUEST, run(abortedSignal(new Error('stop')))), 'cancelled')).message).toBe(
      `The image was cancelled; AUTOMATIC1111 at ${fake.url} was asked to stop.`,
    );
  });

  it('a timeout on sd-server says Easel stopped waiting, since sd-server cannot stop the image', async () => {
    const server = await serveRoutes({ '/sdcpp/v1/capabilities': { json: { model: { name: 'sd.gguf' } } }, '/sdapi/v1/options': { json: {} }, '/sdapi/v1/txt2img': 'hang' });
    const backend = createA1111Backend({ url: server.url, timeoutMs: 100, pollIntervalMs: 3_600_000 });
    await backend.checkHealth();

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'timeout');

    expect(error.message).toBe(
      `stable-diffusion.cpp's sd-server at ${server.url} did not finish the image within 100 ms, Easel stopped waiting (sd-server cannot stop an image once it runs: it finishes it, and Easel discards it). Lower the steps or size, or raise the image timeout.`,
    );
    expect(server.requests.some((request) => request.path === '/sdapi/v1/interrupt')).toBe(false);
  });

  it('after a health check finds sd-server, a cancel says it cannot stop a running image, and keeps its cause', async () => {
    const fake = await createFakeSdServer();
    cleanups.push(() => fake.close());
    const backend = createA1111Backend({ url: fake.url });
    const reason = new Error('the user pressed Cancel');

    await backend.checkHealth();
    const error = await expectBackendError(backend.generate(REQUEST, run(abortedSignal(reason))), 'cancelled');

    expect(error.message).toBe(sdServerCancel(fake.url));
    expect(error.cause).toBe(reason);
  });
});

describe('A1111 checkHealth, word for word', () => {
  it('names the model of sd-server and of A1111, and no model when none is named', async () => {
    const sdServer = await createFakeSdServer();
    cleanups.push(() => sdServer.close());
    const sdHealth = await createA1111Backend({ url: sdServer.url }).checkHealth();
    const capabilities = (await (await fetch(`${sdServer.url}/sdcpp/v1/capabilities`)).json()) as { model: { name: string } };
    expect(sdHealth).toEqual({
      reachable: true,
      server: 'stable-diffusion.cpp sd-server',
      detail: `stable-diffusion.cpp's sd-server answers at ${sdServer.url} with model ${capabilities.model.name}. It reports no progress and cannot stop an image once it runs.`,
    });

    const unnamedSd = await serveRoutes({ '/sdcpp/v1/capabilities': { json: { model: { name: '' } } }, '/sdapi/v1/options': { json: {} } });
    expect((await createA1111Backend({ url: unnamedSd.url }).checkHealth()).detail).toBe(
      `stable-diffusion.cpp's sd-server answers at ${unnamedSd.url}. It reports no progress and cannot stop an image once it runs.`,
    );

    const a1111 = await createFakeA1111({ modelName: 'dreamshaper_8' });
    cleanups.push(() => a1111.close());
    const options = (await (await fetch(`${a1111.url}/sdapi/v1/options`)).json()) as { sd_model_checkpoint: string };
    expect(options.sd_model_checkpoint).toMatch(/^dreamshaper_8/);
    expect(await createA1111Backend({ url: a1111.url }).checkHealth()).toEqual({
      reachable: true,
      server: 'AUTOMATIC1111',
      detail: `AUTOMATIC1111 answers at ${a1111.url} with model ${options.sd_model_checkpoint}.`,
    });

    const unnamed = await serveRoutes({ '/sdapi/v1/options': { json: { sd_model_checkpoint: '' } } });
    expect((await createA1111Backend({ url: unnamed.url }).checkHealth()).detail).toBe(`AUTOMATIC1111 answers at ${unnamed.url}.`);

    // No name at all, on either server.
    const noModelSd = await serveRoutes({ '/sdcpp/v1/capabilities': { json: { model: {} } }, '/sdapi/v1/options': { json: {} } });
    expect((await createA1111Backend({ url: noModelSd.url }).checkHealth()).detail).toBe(
      `stable-diffusion.cpp's sd-server answers at ${noModelSd.url}. It reports no progress and cannot stop an image once it runs.`,
    );
    const noModel = await serveRoutes({ '/sdapi/v1/options': { json: {} } });
    expect((await createA1111Backend({ url: noModel.url }).checkHealth()).detail).toBe(`AUTOMATIC1111 answers at ${noModel.url}.`);
  });

  it('nothing listening is "not answering" with its code, not a timeout', async () => {
    const closed = await findClosedUrl();

    expect(await createA1111Backend({ url: closed }).checkHealth()).toEqual({
      reachable: false,
      detail: `The image backend at ${closed} is not answering (ECONNREFUSED). Start AUTOMATIC1111 / Forge / SD.Next with --api (or stable-diffusion.cpp's sd-server), or set --image-url to where it runs.`,
    });
  });

  it('quotes an answer that is neither 200 nor 404', async () => {
    const server = await serveRoutes({ '/sdapi/v1/options': { status: 500, json: { error: 'RuntimeError', detail: '', body: '', errors: 'boom' } } });

    expect(await createA1111Backend({ url: server.url }).checkHealth()).toEqual({
      reachable: true,
      detail: `The server at ${server.url} answers /sdapi/v1/options with HTTP 500: RuntimeError: boom.`,
    });
  });

  it('a check that gets no answer in time says so; a cancelled one says it was cancelled', { timeout: 5_000 }, async () => {
    const silent = await serveRoutes({ '/sdapi/v1/options': 'hang', '/sdcpp/v1/capabilities': 'hang' });
    expect(await createA1111Backend({ url: silent.url, healthTimeoutMs: 150 }).checkHealth()).toEqual({
      reachable: false,
      detail: `The image backend at ${silent.url} did not answer within 150 ms; it may be busy loading a model.`,
    });

    const controller = new AbortController();
    const check = createA1111Backend({ url: silent.url, healthTimeoutMs: 3_600_000 }).checkHealth(controller.signal);
    setTimeout(() => controller.abort(), 20);
    expect(await check).toEqual({ reachable: false, detail: 'The health check was cancelled.' });
  });

  it('a capabilities route that breaks leaves A1111 found; one that hangs ends with the timeout', { timeout: 5_000 }, async () => {
    const breaking = await serveRoutes({ '/sdcpp/v1/capabilities': 'cut', '/sdapi/v1/options': { json: { sd_model_checkpoint: 'm' } } });
    expect(await createA1111Backend({ url: breaking.url }).checkHealth()).toEqual({ reachable: true, server: 'AUTOMATIC1111', detail: `AUTOMATIC1111 answers at ${breaking.url} with model m.` });

    const hanging = await serveRoutes({ '/sdcpp/v1/capabilities': 'hang', '/sdapi/v1/options': { json: { sd_model_checkpoint: 'm' } } });
    expect(await createA1111Backend({ url: hanging.url, healthTimeoutMs: 150 }).checkHealth()).toMatchObject({ reachable: false });
  });
});
