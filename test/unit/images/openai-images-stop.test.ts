// How an OpenAI-compatible image is stopped: the API has no interrupt, so a cancel or the timeout ends Easel's
// request (or never sends it).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import type { FakeOpenAiImages } from '../../fakes/fake-openai-images.ts';
import { REQUEST, expectBackendError, run, startFakeOpenAiImages } from './helpers.ts';

/** Resolves once the fake has received a generation request, so a test can cancel mid-flight. */
async function waitForGenerationRequest(fake: FakeOpenAiImages): Promise<void> {
  while (!fake.requests.some((request) => request.path === '/v1/images/generations')) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('stopping an OpenAI-compatible image', () => {
  it('cancels by aborting the request and rejects with cancelled', async () => {
    const fake = await startFakeOpenAiImages({ hang: true });
    const backend = createOpenAiImagesBackend({ url: fake.url });
    const controller = new AbortController();

    const generation = backend.generate(REQUEST, run(controller.signal));
    await waitForGenerationRequest(fake);
    controller.abort();

    await expectBackendError(generation, 'cancelled');
    // The capabilities probe, then the one generation: this API has nothing to interrupt with.
    expect(fake.requests.map((request) => request.path)).toEqual(['/sdcpp/v1/capabilities', '/v1/images/generations']);
  });

  it('a cancel while a linked image downloads hangs up on that download too', async () => {
    let downloadClosed!: () => void;
    const hungUp = new Promise<void>((resolve) => (downloadClosed = resolve));
    let downloading!: () => void;
    const started = new Promise<void>((resolve) => (downloading = resolve));
    const server = createServer((request, response) => {
      if (request.url === '/v1/images/generations') {
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1, data: [{ url: '/files/slow.png' }] }));
        return;
      }
      if (request.url === '/files/slow.png') {
        // Headers, then nothing: an image still on its way.
        response.writeHead(200, { 'content-type': 'image/png' });
        response.write(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
        request.socket.on('close', downloadClosed);
        downloading();
        return;
      }
      response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const controller = new AbortController();
      const generation = createOpenAiImagesBackend({ url }).generate(REQUEST, run(controller.signal));
      await started;
      controller.abort();
      await expectBackendError(generation, 'cancelled');
      await hungUp;
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('times out and rejects with timeout', async () => {
    const fake = await startFakeOpenAiImages({ hang: true });
    const backend = createOpenAiImagesBackend({ url: fake.url, timeoutMs: 150 });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'timeout');
    expect(error.message).toContain('150 ms');
  });

  it('does not ask at all when the signal is already aborted', async () => {
    const fake = await startFakeOpenAiImages();

    await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run(AbortSignal.abort())), 'cancelled');

    expect(fake.requests.filter((request) => request.path === '/v1/images/generations')).toHaveLength(0);
  });
});
