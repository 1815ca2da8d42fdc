// How an A1111 image is stopped: a cancel or the timeout asks A1111 to stop once and says so, a cancel stays a
// cancel whatever A1111 answers, and nothing more is asked of A1111 once the image is there.
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { REQUEST, a1111Answer, cancelAtFirstProgress, expectBackendError, run, serveRoutes, startFakeA1111 } from './helpers.ts';

describe('stopping an A1111 image', () => {
  it('cancels on the backend when the signal aborts and rejects with cancelled', async () => {
    const fake = await startFakeA1111({ stepDelayMs: 50 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const error = await cancelAtFirstProgress(backend, { ...REQUEST, steps: 100 });
    expect(error.message).toContain(fake.url);
    expect(fake.interrupts).toBe(1);
  });

  it('still rejects with cancelled when A1111 answers the interrupted job with 200 and an image', async () => {
    const fake = await startFakeA1111({ stepDelayMs: 50 });
    // A fetch that ignores our abort, so the half-finished 200 answer really reaches the adapter.
    const stubbornFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/txt2img') ? fetch(input, { ...init, signal: null }) : fetch(input, init);
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, fetch: stubbornFetch });
    await cancelAtFirstProgress(backend, { ...REQUEST, steps: 100 });
    expect(fake.interrupts).toBe(1);
  });

  it('rejects at once, without calling the backend, when the signal is already aborted', async () => {
    const fake = await startFakeA1111();
    const backend = createA1111Backend({ url: fake.url });

    await expectBackendError(backend.generate(REQUEST, run(AbortSignal.abort())), 'cancelled');
    expect(fake.requests.filter((request) => request.path === '/sdapi/v1/txt2img')).toHaveLength(0);
  });

  it('times out, interrupts the backend and rejects with timeout', async () => {
    const fake = await startFakeA1111({ hang: true });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5, timeoutMs: 150 });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'timeout');
    expect(error.message).toContain('150 ms');
    expect(fake.interrupts).toBe(1);
  });

  it('a cancel says A1111 was asked to stop; a timeout says how long it waited and that it asked A1111 to stop', async () => {
    const fake = await startFakeA1111({ stepDelayMs: 50 });
    const cancelled = await cancelAtFirstProgress(createA1111Backend({ url: fake.url, pollIntervalMs: 5 }), { ...REQUEST, steps: 100 });
    expect(cancelled.message).toBe(`The image was cancelled; AUTOMATIC1111 at ${fake.url} was asked to stop.`);

    const hanging = await startFakeA1111({ hang: true });
    const timedOut = await expectBackendError(createA1111Backend({ url: hanging.url, pollIntervalMs: 5, timeoutMs: 150 }).generate(REQUEST, run()), 'timeout');
    expect(timedOut.message).toBe(
      `AUTOMATIC1111 at ${hanging.url} did not finish the image within 150 ms, so Easel asked it to stop. Lower the steps or size, or raise the image timeout.`,
    );
  });

  it('a cancel stays a cancel when the timeout passes during the interrupt, and A1111 is asked to stop once', async () => {
    let arrived: () => void = () => {};
    const started = new Promise<void>((resolve) => (arrived = resolve));
    let release: () => void = () => {};
    const interrupted = new Promise<void>((resolve) => (release = resolve));
    const server = await serveRoutes({
      '/sdapi/v1/txt2img': async () => {
        arrived();
        await interrupted;
        return a1111Answer({});
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
    const fake = await startFakeA1111({ stepDelayMs: 1 });
    const controller = new AbortController();

    await createA1111Backend({ url: fake.url, timeoutMs: 200, pollIntervalMs: 5 }).generate(REQUEST, run(controller.signal));
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 300));

    expect(fake.requests.filter((request) => request.path === '/sdapi/v1/interrupt')).toEqual([]);
  });
});
