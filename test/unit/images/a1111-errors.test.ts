// What the A1111 adapter says when an image does not come, word for word where the words are the point, and
// the answers it must still read. The gaps a look at the adapter's untested messages showed.
import { afterEach, describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import type { FakeA1111, FakeA1111Options } from '../../fakes/fake-a1111.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { REQUEST, expectBackendError, startCuttingServer, cancelAtFirstProgress } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function startFake(options: FakeA1111Options = {}): Promise<FakeA1111> {
  const fake = await createFakeA1111({ stepDelayMs: 5, ...options });
  cleanups.push(() => fake.close());
  return fake;
}

const run = (signal = new AbortController().signal) => ({ signal, onProgress: () => {} });

describe('the A1111 adapter when no image comes', () => {
  it('a cancel says A1111 was asked to stop; a timeout says how long it waited and that it asked A1111 to stop', async () => {
    const fake = await startFake({ stepDelayMs: 50 });
    const cancelled = await cancelAtFirstProgress(createA1111Backend({ url: fake.url, pollIntervalMs: 5 }), { ...REQUEST, steps: 100 });
    expect(cancelled.message).toBe(`The image was cancelled; AUTOMATIC1111 at ${fake.url} was asked to stop.`);

    const hanging = await startFake({ hang: true });
    const timedOut = await expectBackendError(createA1111Backend({ url: hanging.url, pollIntervalMs: 5, timeoutMs: 150 }).generate(REQUEST, run()), 'timeout');
    expect(timedOut.message).toBe(
      `AUTOMATIC1111 at ${hanging.url} did not finish the image within 150 ms, so Easel asked it to stop. Lower the steps or size, or raise the image timeout.`,
    );
  });

  it('an answer without an image quotes the start of what came', async () => {
    const fake = await startFake({ failWith: { status: 200, body: { images: [], parameters: {}, info: '{}' } } });

    const error = await expectBackendError(createA1111Backend({ url: fake.url, pollIntervalMs: 5 }).generate(REQUEST, run()), 'bad_response');

    expect(error.message).toContain(`AUTOMATIC1111 at ${fake.url} answered txt2img without an image ({"images":[],`);
    expect(error.message).toContain('--image-url points to an AUTOMATIC1111-compatible API');
  });

  it('reads an image sent as a data: URL, as some A1111-compatible servers do', async () => {
    const png = makePng(64, 96);
    const fake = await startFake({
      failWith: { status: 200, body: { images: [`data:image/png;base64,${Buffer.from(png).toString('base64')}`], parameters: {}, info: '{}' } },
    });

    const result = await createA1111Backend({ url: fake.url, pollIntervalMs: 5 }).generate(REQUEST, run());

    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
  });

  it('a connection cut in the middle of the answer is a broken connection, not a server that is not running', async () => {
    const server = await startCuttingServer('/sdapi/v1/txt2img', '{"images": ["iVBORw0');
    cleanups.push(() => server.close());
    const { url } = server;

    const error = await expectBackendError(createA1111Backend({ url, pollIntervalMs: 5 }).generate(REQUEST, run()), 'unreachable');

    expect(error.message).toContain(`The connection to the image backend at ${url} broke before the image arrived`);
    expect(error.message).not.toContain('is not answering');
  });
});
