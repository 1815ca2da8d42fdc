// The kit every image adapter is built on (server/image-backend/): the words of its failures, the life of one
// job (stop once, interrupt, wait for it, say why it ended) and a health check's or a model listing's answers when
// it got none.
import { describe, expect, it } from 'vitest';
import { ImageBackendError } from '../../../server/core/errors.ts';
import { checkWithin, describeConnectionFailure, describeImageTooLarge, describeStopped, listWithin, runImageJob } from '../../../server/image-backend/index.ts';
import type { ConnectionWords, ImageJobOptions } from '../../../server/image-backend/index.ts';
import { abortedSignal, expectBackendError } from './helpers.ts';

const URL = 'http://127.0.0.1:7860';
const COMFY: ConnectionWords = { product: 'ComfyUI', url: URL, startHint: 'ComfyUI (python main.py, port 8188 by default)' };
/** Node's fetch failure: a TypeError whose cause carries the socket's code. */
const failedWith = (code: string) => new TypeError('fetch failed', { cause: Object.assign(new Error(code), { code }) });
const MB = 1024 * 1024;

describe('describeConnectionFailure', () => {
  it('nothing listening, or no code at all: not answering, with how to start the server, the failure kept as the cause', () => {
    const refused = failedWith('ECONNREFUSED');
    const error = describeConnectionFailure(refused, COMFY);
    expect(error).toMatchObject({ name: 'ImageBackendError', code: 'unreachable', cause: refused });
    expect(error.message).toBe(`ComfyUI at ${URL} is not answering (ECONNREFUSED). Start ComfyUI (python main.py, port 8188 by default), or set --image-url to where it runs.`);
    expect(describeConnectionFailure(new TypeError('fetch failed'), COMFY).message).toBe(
      `ComfyUI at ${URL} is not answering. Start ComfyUI (python main.py, port 8188 by default), or set --image-url to where it runs.`,
    );
  });

  it('any other code is a connection that broke midway; "The …" is lower-cased inside the sentence, a name is not', () => {
    expect(describeConnectionFailure(failedWith('ECONNRESET'), COMFY).message).toBe(
      `The connection to ComfyUI at ${URL} broke before the image arrived (ECONNRESET). Check its console for a crash, then try again.`,
    );
    const generic = describeConnectionFailure(failedWith('UND_ERR_SOCKET'), { product: 'The image backend', url: URL, startHint: 'it' });
    expect(generic.message).toBe(`The connection to the image backend at ${URL} broke before the image arrived (UND_ERR_SOCKET). Check its console for a crash, then try again.`);
  });
});

describe('describeStopped', () => {
  const cause = new Error('the user pressed Cancel');
  const stopped = (reason: 'cancelled' | 'timeout', cannotStop?: 'no-interrupt' | { finishes: string }) =>
    describeStopped(reason, { product: "stable-diffusion.cpp's sd-server", url: URL, timeoutMs: 120_000, cannotStop }, cause);

  it('a server asked to stop: the cancel says so, the timeout names how long Easel waited', () => {
    expect(stopped('cancelled')).toMatchObject({ code: 'cancelled', cause, message: `The image was cancelled; stable-diffusion.cpp's sd-server at ${URL} was asked to stop.` });
    expect(stopped('timeout')).toMatchObject({
      code: 'timeout',
      message: `stable-diffusion.cpp's sd-server at ${URL} did not finish the image within 2 minutes, so Easel asked it to stop. Lower the steps or size, or raise the image timeout.`,
    });
  });

  it('a server that finishes a running image, and an API with no interrupt: Easel only stops waiting, and says so', () => {
    const finishes = { finishes: 'sd-server' };
    expect(stopped('cancelled', finishes).message).toBe(
      `The image was cancelled. stable-diffusion.cpp's sd-server at ${URL} cannot stop an image once it runs, so it finishes this one and Easel discards it; the next image starts after it.`,
    );
    expect(stopped('timeout', finishes).message).toBe(
      `stable-diffusion.cpp's sd-server at ${URL} did not finish the image within 2 minutes, Easel stopped waiting (sd-server cannot stop an image once it runs: it finishes it, and Easel discards it). Lower the steps or size, or raise the image timeout.`,
    );
    expect(stopped('cancelled', 'no-interrupt').message).toBe(`The image was cancelled; Easel stopped waiting for ${URL} (this API has no interrupt, so the server may finish it anyway).`);
    expect(stopped('timeout', 'no-interrupt').message).toBe(
      `stable-diffusion.cpp's sd-server at ${URL} did not finish the image within 2 minutes; Easel stopped waiting (this API cannot interrupt it). Lower the steps or size, or raise the image timeout.`,
    );
  });
});

describe('describeImageTooLarge', () => {
  it('names who sent it: an image inside JSON is measured against the PNG it would hold, a file against the cap itself', () => {
    const declared = { code: 'too_large' as const, limit: 87 * MB, declared: 150 * MB };
    const inJson = describeImageTooLarge(declared, { product: 'LocalAI', url: URL, hint: 'Lower the image size.' });
    expect(inJson).toMatchObject({ code: 'too_large', cause: declared });
    expect(inJson.message).toBe(`LocalAI at ${URL} sent an answer of 150 MB, more than Easel accepts for one image (64 MB of PNG); Easel stopped reading it and kept nothing. Lower the image size.`);
    const counted = describeImageTooLarge({ code: 'too_large', limit: 64 * MB }, { product: 'ComfyUI', url: URL, file: 'easel_00001_.png', hint: 'Upscale less.' });
    expect(counted.message).toBe(`ComfyUI at ${URL} sent easel_00001_.png as an answer of more than 64 MB, more than the 64 MB Easel accepts for one image; Easel stopped reading it and kept nothing. Upscale less.`);
  });
});

/** A job's options with an interrupt that records its calls and settles when `release` is called. */
function createJob(overrides: Partial<ImageJobOptions> = {}) {
  const events: string[] = [];
  let release = () => {};
  const options: ImageJobOptions = {
    signal: new AbortController().signal,
    timeoutMs: 60_000,
    interrupt: () => {
      events.push('interrupt sent');
      return new Promise<void>((resolve) => (release = resolve)).then(() => void events.push('interrupt done'));
    },
    stopWords: () => ({ product: 'ComfyUI', url: URL }),
    connection: COMFY,
    ...overrides,
  };
  return { options, events, release: () => release() };
}

/** Work that runs until its job signal aborts, then fails with the abort's reason, as a fetch does. */
const untilStopped = (jobSignal: AbortSignal) => new Promise<never>((_resolve, reject) => jobSignal.addEventListener('abort', () => reject(jobSignal.reason as Error)));

describe('runImageJob', () => {
  it('a signal already aborted: cancelled at once with its reason as the cause; the work never starts, nothing is interrupted', async () => {
    const reason = new Error('cancelled before it started');
    const { options, events } = createJob({ signal: abortedSignal(reason) });
    let started = false;
    const error = await expectBackendError(
      runImageJob(options, async () => {
        started = true;
      }),
      'cancelled',
    );
    expect(error.cause).toBe(reason);
    expect(started).toBe(false);
    expect(events).toEqual([]);
  });

  it('a cancel interrupts the server once, before the job signal aborts, and is reported only once the interrupt settled', async () => {
    const controller = new AbortController();
    const { options, events, release } = createJob({ signal: controller.signal });
    const job = runImageJob(options, (jobSignal) => {
      jobSignal.addEventListener('abort', () => events.push('job aborted'));
      return untilStopped(jobSignal);
    });
    const ended = job.then(
      () => 'resolved',
      () => void events.push('rejected'),
    );
    controller.abort();
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events).toEqual(['interrupt sent', 'job aborted']);

    release();
    await ended;
    expect(events).toEqual(['interrupt sent', 'job aborted', 'interrupt done', 'rejected']);
    const error = await expectBackendError(job, 'cancelled');
    expect(error.message).toBe(`The image was cancelled; ComfyUI at ${URL} was asked to stop.`);
    expect((error.cause as Error).name).toBe('AbortError');
  });

  it('the timeout stops the job as a timeout, and a cancel after it changes nothing: one interrupt', async () => {
    const controller = new AbortController();
    const { options, events, release } = createJob({ signal: controller.signal, timeoutMs: 30 });
    const job = runImageJob(options, untilStopped);
    await new Promise((resolve) => setTimeout(resolve, 60));
    controller.abort();
    release();
    const error = await expectBackendError(job, 'timeout');
    expect(error.message).toBe(`ComfyUI at ${URL} did not finish the image within 30 ms, so Easel asked it to stop. Lower the steps or size, or raise the image timeout.`);
    expect(events.filter((event) => event === 'interrupt sent')).toHaveLength(1);
  });

  it('a result that arrives after a stop is not kept: the stopped error, in the words read at the stop', async () => {
    const controller = new AbortController();
    let sdServer = false;
    const job = runImageJob(
      { ...createJob().options, signal: controller.signal, interrupt: undefined, stopWords: () => ({ product: 'sd-server', url: URL, cannotStop: sdServer ? { finishes: 'sd-server' } : undefined }) },
      // Like A1111, which answers an interrupted job with 200 and a half-finished image.
      (jobSignal) => new Promise<string>((resolve) => jobSignal.addEventListener('abort', () => setTimeout(() => resolve('half an image'), 10))),
    );
    sdServer = true;
    controller.abort();
    const error = await expectBackendError(job, 'cancelled');
    expect(error.message).toContain('sd-server at http://127.0.0.1:7860 cannot stop an image once it runs');
  });

  it("the work's ImageBackendError goes through as it is; any other failure is the connection's, kept as the cause", async () => {
    const refusal = new ImageBackendError('backend_error', 'ComfyUI refused the workflow.');
    const { options, events } = createJob();
    expect(await runImageJob(options, () => Promise.reject(refusal)).catch((error: unknown) => error)).toBe(refusal);

    const reset = failedWith('ECONNRESET');
    const broken = await expectBackendError(
      runImageJob(options, () => Promise.reject(reset)),
      'unreachable',
    );
    expect(broken.message).toContain(`The connection to ComfyUI at ${URL} broke before the image arrived (ECONNRESET)`);
    expect(broken.cause).toBe(reset);
    expect(events).toEqual([]);
  });

  it('an interrupt that fails changes nothing: the stop is still reported as the stop', async () => {
    const controller = new AbortController();
    const { options } = createJob({ signal: controller.signal, interrupt: () => Promise.reject(new Error('server gone')) });
    const job = runImageJob(options, untilStopped);
    controller.abort();
    await expectBackendError(job, 'cancelled');
  });

  it('once the job has settled, its timer and its listener are gone: a later abort or timeout interrupts nothing', async () => {
    const controller = new AbortController();
    const { options, events } = createJob({ signal: controller.signal, timeoutMs: 20 });
    expect(await runImageJob(options, async () => 'the image')).toBe('the image');
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events).toEqual([]);
  });
});

describe('checkWithin', () => {
  const words = { connection: { product: 'The image backend', url: URL, startHint: 'AUTOMATIC1111 with --api' } };
  /** Work that waits for its signal and fails with its reason, as a fetch does. */
  const hanging = (signal: AbortSignal) => new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));

  it("gives the work's answer as it is", async () => {
    const health = { reachable: true, server: 'AUTOMATIC1111', detail: 'AUTOMATIC1111 answers.' };
    expect(await checkWithin({ healthTimeoutMs: 1_000, ...words }, async () => health)).toBe(health);
  });

  it("a caller's cancel: cancelled, though the check's own limit has not passed", async () => {
    const controller = new AbortController();
    const check = checkWithin({ healthTimeoutMs: 5_000, signal: controller.signal, ...words }, hanging);
    controller.abort();
    expect(await check).toEqual({ reachable: false, detail: 'The health check was cancelled.' });
  });

  it('no answer within the limit: who was slow, and why it may be, when the adapter knows; marked slow, not refused', async () => {
    expect(await checkWithin({ healthTimeoutMs: 30, ...words, slowHint: 'it may be busy loading a model' }, hanging)).toEqual({
      reachable: false,
      slow: true,
      detail: `The image backend at ${URL} did not answer within 30 ms; it may be busy loading a model.`,
    });
    expect(await checkWithin({ healthTimeoutMs: 30, ...words, slowProduct: 'LocalAI' }, hanging)).toEqual({ reachable: false, slow: true, detail: `LocalAI at ${URL} did not answer within 30 ms.` });
  });

  it('a redirect is something answering there; a failed connection is nothing answering, in the connection words', async () => {
    const redirect = new ImageBackendError('bad_response', 'It answered with a redirect.');
    expect(await checkWithin({ healthTimeoutMs: 1_000, ...words }, () => Promise.reject(redirect))).toEqual({ reachable: true, detail: 'It answered with a redirect.' });
    expect(await checkWithin({ healthTimeoutMs: 1_000, ...words }, () => Promise.reject(failedWith('ECONNREFUSED')))).toEqual({
      reachable: false,
      detail: `The image backend at ${URL} is not answering (ECONNREFUSED). Start AUTOMATIC1111 with --api, or set --image-url to where it runs.`,
    });
  });
});

describe('listWithin', () => {
  const words = { connection: { product: 'ComfyUI', url: URL, startHint: 'ComfyUI (python main.py, port 8188 by default)' } };
  /** Work that waits for its signal and fails with its reason, as a fetch does. */
  const hanging = (signal: AbortSignal) => new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));

  it("gives the work's answer as it is; the adapter's own refusal goes through unchanged", async () => {
    expect(await listWithin({ healthTimeoutMs: 1_000, ...words }, async () => ['sd_xl_base_1.0'])).toEqual(['sd_xl_base_1.0']);
    const refused = new ImageBackendError('bad_response', 'ComfyUI answered /object_info with no checkpoint loader.');
    await expect(listWithin({ healthTimeoutMs: 1_000, ...words }, () => Promise.reject(refused))).rejects.toBe(refused);
  });

  it("a caller's cancel and the limit each say what happened, keeping what the work failed with as the cause for the log", async () => {
    const controller = new AbortController();
    const listing = listWithin({ healthTimeoutMs: 5_000, signal: controller.signal, ...words }, hanging);
    const reason = new Error('the page went away');
    controller.abort(reason);
    const cancelled = await expectBackendError(listing, 'cancelled');
    expect(cancelled.message).toBe(`Listing the models of ${URL} was cancelled.`);
    expect(cancelled.cause).toBe(reason);

    const slow = await expectBackendError(listWithin({ healthTimeoutMs: 30, ...words, slowProduct: 'LocalAI', slowHint: 'it may be busy loading a model' }, hanging), 'timeout');
    expect(slow.message).toBe(`LocalAI at ${URL} did not list its models within 30 ms; it may be busy loading a model. Try again.`);
    expect(slow.cause).toBeInstanceOf(DOMException);
    expect((slow.cause as DOMException).name).toBe('TimeoutError');
  });

  it('a failed connection is nothing answering, in the connection words', async () => {
    const error = await expectBackendError(listWithin({ healthTimeoutMs: 1_000, ...words }, () => Promise.reject(failedWith('ECONNREFUSED'))), 'unreachable');
    expect(error.message).toMatch(/^ComfyUI at http:\/\/127\.0\.0\.1:7860 is not answering \(ECONNREFUSED\)/);
  });
});
