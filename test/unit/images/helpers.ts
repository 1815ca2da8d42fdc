// What the image adapter tests share: the request they send, servers standing for an image server (the fakes,
// scripted routes, a status, a cut connection) closed when the test ends, and checks of how an image ended.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { onTestFinished } from 'vitest';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import type { FakeA1111, FakeA1111Options } from '../../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../../fakes/fake-comfyui.ts';
import type { FakeComfyUi, FakeComfyUiOptions } from '../../fakes/fake-comfyui.ts';
import { createFakeLocalAi } from '../../fakes/fake-localai.ts';
import type { FakeLocalAi, FakeLocalAiOptions } from '../../fakes/fake-localai.ts';
import { createFakeOpenAiImages } from '../../fakes/fake-openai-images.ts';
import type { FakeOpenAiImages, FakeOpenAiImagesOptions } from '../../fakes/fake-openai-images.ts';
import { createFakeSdServer } from '../../fakes/fake-sd-server.ts';
import type { FakeSdServer, FakeSdServerOptions } from '../../fakes/fake-sd-server.ts';
import { readBody } from '../../fakes/http-body.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { ImageBackendError } from '../../../server/core/errors.ts';
import type { ImageBackendErrorCode } from '../../../server/core/errors.ts';
import type { ImageBackend, ImageProgress, ImageRequest } from '../../../server/core/ports.ts';

export const REQUEST: ImageRequest = {
  prompt: 'a red fox in fresh snow, golden hour',
  negativePrompt: 'blurry, watermark',
  steps: 6,
  cfg: 7.5,
  seed: 123456789,
  width: 64,
  height: 96,
};

const SMALL_PNG_BASE64 = Buffer.from(makePng(8, 8)).toString('base64');

/** A txt2img answer as A1111 sends it: the image, the parameters it was sent, `info` as a JSON string. */
export const a1111Answer = (info: Record<string, unknown>) => ({ json: { images: [SMALL_PNG_BASE64], parameters: {}, info: JSON.stringify(info) } });

/** An images/generations answer as OpenAI's API sends it: one image, as b64_json. */
export const OPENAI_IMAGE = { json: { created: 1, data: [{ b64_json: SMALL_PNG_BASE64 }] } };

/** The options of one generate call: a signal of its own unless one is given, progress dropped unless watched. */
export function run(signal: AbortSignal = new AbortController().signal, onProgress: (progress: ImageProgress) => void = () => {}): { signal: AbortSignal; onProgress: (progress: ImageProgress) => void } {
  return { signal, onProgress };
}

/** A server (a fake, or one of the servers below) that is closed when the test ends. */
export async function closeAfterTest<T extends { close(): Promise<void> }>(starting: Promise<T>): Promise<T> {
  const server = await starting;
  onTestFinished(() => server.close());
  return server;
}

/** A fake ComfyUI with quick steps (unless told otherwise), closed when the test ends. */
export function startFakeComfyUi(options: FakeComfyUiOptions = {}): Promise<FakeComfyUi> {
  return closeAfterTest(createFakeComfyUi({ stepDelayMs: 5, ...options }));
}

/** A fake AUTOMATIC1111 with quick steps (unless told otherwise), closed when the test ends. */
export function startFakeA1111(options: FakeA1111Options = {}): Promise<FakeA1111> {
  return closeAfterTest(createFakeA1111({ stepDelayMs: 5, ...options }));
}

/** A fake stable-diffusion.cpp sd-server with quick steps (unless told otherwise), closed when the test ends. */
export function startFakeSdServer(options: FakeSdServerOptions = {}): Promise<FakeSdServer> {
  return closeAfterTest(createFakeSdServer({ stepDelayMs: 2, ...options }));
}

/** A fake server with OpenAI's images API, closed when the test ends. */
export function startFakeOpenAiImages(options: FakeOpenAiImagesOptions = {}): Promise<FakeOpenAiImages> {
  return closeAfterTest(createFakeOpenAiImages(options));
}

/** A fake LocalAI, closed when the test ends. */
export function startFakeLocalAi(options: FakeLocalAiOptions = {}): Promise<FakeLocalAi> {
  return closeAfterTest(createFakeLocalAi(options));
}

/** A URL on 127.0.0.1 where nothing listens: a port that was free a moment ago. */
export async function findClosedUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** A plain HTTP server answering every request with one status, to stand for "something else". */
export async function startStatusServer(status: number): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A server that crashes while answering `path`: headers, the start of a JSON body, then the socket closes.
 * Every other path gets a bare 404.
 */
export async function startCuttingServer(path: string, bodyStart: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    request.resume();
    if (!request.url?.startsWith(path)) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
    response.write(bodyStart);
    setTimeout(() => response.socket?.destroy(), 20);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Awaits a promise that must reject with ImageBackendError `code`, and returns that error. */
export async function expectBackendError(promise: Promise<unknown>, code: ImageBackendErrorCode): Promise<ImageBackendError> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  if (!(caught instanceof ImageBackendError)) {
    throw new Error(`expected ImageBackendError ${code}, got ${caught === undefined ? 'success' : String(caught)}`);
  }
  if (caught.code !== code) throw new Error(`expected code ${code}, got ${caught.code}: ${caught.message}`);
  return caught;
}

export function recordProgress(): { events: ImageProgress[]; onProgress: (progress: ImageProgress) => void } {
  const events: ImageProgress[] = [];
  return { events, onProgress: (progress) => events.push(progress) };
}

/** Resolves at the first progress event; lets a test cancel a job known to be running. */
export function waitForFirstProgress(): { onProgress: (progress: ImageProgress) => void; started: Promise<void> } {
  let resolve: () => void = () => {};
  const started = new Promise<void>((done) => (resolve = done));
  return { onProgress: () => resolve(), started };
}

/** A rejection's error, for checking an error's cause as well as its words. */
export async function failureOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

/** Starts an image, aborts it at its first progress report, and returns the `cancelled` error it must end with. */
export async function cancelAtFirstProgress(backend: ImageBackend, request: ImageRequest = REQUEST): Promise<ImageBackendError> {
  const controller = new AbortController();
  const { onProgress, started } = waitForFirstProgress();
  const generation = backend.generate(request, { signal: controller.signal, onProgress });
  await started;
  controller.abort();
  return expectBackendError(generation, 'cancelled');
}

/** What a route of `startRouteServer` answers: JSON or text with a status, after a delay; 'hang' never answers, 'cut' closes the connection. */
export type RouteAnswer = { status?: number; json?: unknown; text?: string; delayMs?: number; headers?: Record<string, string> } | 'hang' | 'cut';
export interface RouteRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}
export type Route = RouteAnswer | ((request: RouteRequest) => RouteAnswer | Promise<RouteAnswer>);
export interface RouteServer {
  url: string;
  requests: RouteRequest[];
  close(): Promise<void>;
}

/** FastAPI's answer to a path it has no route for (A1111's API). */
const FASTAPI_NOT_FOUND: RouteAnswer = { status: 404, json: { detail: 'Not Found' } };

/**
 * A real server answering exactly the given paths (query left out), for answers no fake gives on its own:
 * odd shapes, partial failures, sequences. Every other path gets `notFound`, FastAPI's 404 unless given.
 */
export async function startRouteServer(routes: Record<string, Route>, { notFound = FASTAPI_NOT_FOUND }: { notFound?: RouteAnswer } = {}): Promise<RouteServer> {
  const requests: RouteRequest[] = [];
  const server: Server = createServer((request, response) => {
    void (async () => {
      const recorded: RouteRequest = {
        method: request.method ?? 'GET',
        path: new URL(request.url ?? '/', 'http://127.0.0.1').pathname,
        headers: request.headers,
        body: await readBody(request),
      };
      requests.push(recorded);
      const route = routes[recorded.path] ?? notFound;
      const answer = typeof route === 'function' ? await route(recorded) : route;
      if (answer === 'hang') return;
      if (answer === 'cut') {
        request.socket.destroy();
        return;
      }
      setTimeout(() => {
        const text = answer.json === undefined ? (answer.text ?? '') : JSON.stringify(answer.json);
        response.writeHead(answer.status ?? 200, { 'content-type': answer.json === undefined ? 'text/plain' : 'application/json', ...answer.headers }).end(text);
      }, answer.delayMs ?? 0);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `startRouteServer` for one test: closed when the test ends. */
export function serveRoutes(routes: Record<string, Route>, options: { notFound?: RouteAnswer } = {}): Promise<RouteServer> {
  return closeAfterTest(startRouteServer(routes, options));
}

/** A signal already aborted with `reason`, as a Cancel before the image started leaves it. */
export function abortedSignal(reason: unknown): AbortSignal {
  const controller = new AbortController();
  controller.abort(reason);
  return controller.signal;
}
