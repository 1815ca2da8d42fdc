// The image generator's own rules (server/core/generation.ts) at the edges the whole-folder mutation run
// found untested, with a scripted backend (the ImageBackend port each adapter implements) and a real SQLite
// store: whose parameters text a PNG keeps, what the record and event say when the backend says little,
// seed ranges at their ends, what each failure says and logs, a cancel while queued, and the health answer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createImageGenerator,
  createLogger,
  DEFAULT_SETTINGS,
  ImageBackendError,
  NO_BACKEND_MESSAGE,
  StorageError,
  type ImageBackend,
  type ImageGeneratorDeps,
  type ImageRequest,
  type ImageResult,
} from '../../../server/core/index.ts';
import { readPngText } from '../../../server/png/index.ts';
import { createSqliteStore } from '../../../server/sqlite/index.ts';
import { insertTextChunk, makePng } from '../../fakes/png-bytes.ts';
import { collectAll } from '../../helpers/streams.ts';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

type Generate = ImageBackend['generate'];

function backendWith(generate: Generate, over: Partial<ImageBackend> = {}): ImageBackend & { calls: number } {
  const backend = {
    name: 'a1111' as const,
    url: 'http://127.0.0.1:7860',
    calls: 0,
    generate: (...args: Parameters<Generate>) => {
      backend.calls++;
      return generate(...args);
    },
    checkHealth: async () => ({ reachable: true, detail: 'ready' }),
    ...over,
  };
  return backend;
}

function setUp(backend: ImageBackend | null, over: Partial<ImageGeneratorDeps> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'easel-generation-edges-'));
  const store = createSqliteStore({ path: join(dir, 'easel.db') });
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => store.close());
  store.createConversation({ id: 'c1', createdAt: new Date().toISOString(), settings: DEFAULT_SETTINGS });
  const saved = new Map<string, Uint8Array>();
  const logs: string[] = [];
  const images = createImageGenerator({
    backend,
    store,
    logger: createLogger({ level: 'debug', write: (line) => logs.push(line.replace(/^\S+ /, '')) }),
    clock: Date,
    saveFile: async (name, bytes) => void saved.set(name, bytes),
    newImageId: () => 'img1',
    ...over,
  });
  return { images, store, saved, logs };
}

const input = (over: { seed?: number; promptVersion?: number | null; signal?: AbortSignal } = {}) => ({
  conversationId: 'c1',
  turnId: null,
  prompt: 'a fox',
  settings: { ...DEFAULT_SETTINGS, seed: over.seed ?? 42 },
  promptVersion: over.promptVersion ?? null,
  signal: over.signal ?? new AbortController().signal,
});

const png = makePng(8, 8);
const result = (over: Partial<ImageResult> = {}): ImageResult => ({ png, ...over });

describe('whose parameters text the saved PNG keeps', () => {
  it('a text that is only a prompt is not the backend\'s parameters: Easel writes its own', async () => {
    const { images, saved } = setUp(backendWith(async () => result({ png: insertTextChunk(png, 'parameters', 'a fox', 'pillow'), seed: 42 })));
    await collectAll(images.generate(input()));
    expect(readPngText(saved.get('img1.png')!)['parameters']).toBe('a fox\nSeed: 42, Size: 8x8');
  });

  it('a text with steps but no seed, or a seed but no steps, is the backend\'s: kept as it is', async () => {
    for (const text of ['a fox\nSteps: 30, Sampler: Euler, CFG scale: 7', 'a fox\nSeed: 7, Size: 8x8, Model: m']) {
      const { images, saved } = setUp(backendWith(async () => result({ png: insertTextChunk(png, 'parameters', text, 'pillow') })));
      await collectAll(images.generate(input()));
      expect(readPngText(saved.get('img1.png')!)['parameters']).toBe(text);
    }
  });
});

describe('what an image says when the backend says little', () => {
  it('keys the backend did not claim are absent from the event and null in the record; an empty sampler or model is none', async () => {
    const { images, store } = setUp(backendWith(async () => result({ sampler: '', scheduler: '', model: '' })));
    const version = store.addUserPromptVersion('c1', 'a fox', new Date().toISOString());
    const events = await collectAll(images.generate(input({ promptVersion: version })));
    // toStrictEqual: a key holding undefined would read as "the backend used undefined".
    expect(events.at(-1)).toStrictEqual({ type: 'image', id: 'img1', url: '/images/img1.png', width: 8, height: 8, prompt: 'a fox', negativePrompt: '', promptVersion: version });
    expect(store.listImages('c1')[0]).toMatchObject({ seed: null, steps: null, cfg: null, sampler: null, scheduler: null, model: null, promptVersion: version });
  });

  it("the request names no checkpoint, sampler, scheduler or starting image the user did not choose: the server's own are used", async () => {
    const requests: ImageRequest[] = [];
    const { images } = setUp(backendWith(async (request) => (requests.push(request), result())));
    await collectAll(images.generate(input()));
    expect(Object.keys(requests[0]!).sort()).toEqual(['cfg', 'height', 'negativePrompt', 'prompt', 'seed', 'steps', 'width']);
  });
});

describe('seeds', () => {
  it('a random seed may be either end of the backend\'s range; a fixed one at its ends is taken, past them refused', async () => {
    const seeds: number[] = [];
    const backend = backendWith(async (request) => (seeds.push(request.seed), result({ seed: request.seed })), { seedRange: { min: 7, max: 9 } });
    const { images, logs } = setUp(backend);
    await collectAll(images.generate(input({ seed: -1 })));
    await collectAll(images.generate(input({ seed: 9 })));
    await collectAll(images.generate(input({ seed: 7 })));
    expect(seeds[0]).toBeGreaterThanOrEqual(7);
    expect(seeds.slice(1)).toEqual([9, 7]);
    for (const seed of [6, 10]) {
      const events = await collectAll(images.generate(input({ seed })));
      expect(events.at(-1)).toMatchObject({ type: 'error', code: 'image_seed_out_of_range' });
    }
    expect(backend.calls).toBe(3);
    expect(logs.filter((line) => line.startsWith('WARN  image generation did not finish')).map((line) => line.includes('"name":"SeedOutOfRangeError"'))).toEqual([true, true]);

    const single = backendWith(async (request) => result({ seed: request.seed }), { seedRange: { min: 5, max: 5 } });
    const events = await collectAll(setUp(single).images.generate(input({ seed: -1 })));
    expect(events.at(-1)).toMatchObject({ type: 'image', seed: 5 });
  });
});

describe('failures, in words and in the log', () => {
  const keep = 'The prompt is kept: press Generate to try again.';

  it('no backend: the event says how to configure one', async () => {
    const { images } = setUp(null);
    expect(await collectAll(images.generate(input()))).toEqual([{ type: 'error', code: 'image_backend_missing', message: NO_BACKEND_MESSAGE }]);
    expect(await images.checkHealth()).toEqual({ backend: 'none', url: null, configured: false, reachable: false, detail: NO_BACKEND_MESSAGE });
  });

  it('a cancel the backend reports (another client interrupted it) says cancelled; an unexpected failure points at the log', async () => {
    const cancelled = setUp(backendWith(async () => Promise.reject(new ImageBackendError('cancelled', 'A1111 interrupted the job.'))));
    expect((await collectAll(cancelled.images.generate(input()))).at(-1)).toEqual({ type: 'error', code: 'image_cancelled', message: `Image generation was cancelled. ${keep}` });
    expect(cancelled.logs.filter((line) => line.startsWith('WARN  image generation did not finish'))).toHaveLength(1);

    const broken = setUp(backendWith(async () => Promise.reject(new TypeError('a bug'))));
    expect((await collectAll(broken.images.generate(input()))).at(-1)).toEqual({ type: 'error', code: 'image_failed', message: `The image could not be made; the details are in the server log. ${keep}` });
    expect(broken.logs).toEqual(['ERROR image generation failed {"error":{"name":"TypeError","message":"a bug"}}']);
  });

  it('a failed save without a folder or an error code says so plainly, and is logged as the disk\'s fault', async () => {
    const { images, logs } = setUp(backendWith(async () => result()), { saveFile: async () => Promise.reject(new Error('no reason given')) });
    expect((await collectAll(images.generate(input()))).at(-1)).toEqual({
      type: 'error',
      code: 'image_save_failed',
      message:
        'The image was made but could not be saved in the images folder of the data dir, and nothing was written. Check that this folder exists and that Easel may write to it (permissions, a read-only disk, --data-dir), then press Generate again; the prompt is kept.',
    });
    expect(logs).toEqual(['ERROR the finished image could not be saved {"error":{"name":"ImageSaveError","message":"could not write img1.png","cause":"no reason given"}}']);
  });

  it('a record the database refuses is said as a storage failure and its file removed; logged here unless the store logged it', async () => {
    for (const [code, logged] of [
      ['full', ['ERROR the image could not be recorded {"error":{"name":"StorageError","message":"SQLITE_FULL"}}']],
      ['gone', []],
    ] as const) {
      const removed: string[] = [];
      const failing = { addImage: () => { throw new StorageError(code, code === 'full' ? 'SQLITE_FULL' : 'gone', { location: '/data/easel.db' }); } } as unknown as ImageGeneratorDeps['store'];
      const { images, logs } = setUp(backendWith(async () => result()), { store: failing, removeFile: async (name) => void removed.push(name) });
      const events = await collectAll(images.generate(input()));
      expect(events.at(-1)).toMatchObject({ type: 'error', code: code === 'full' ? 'storage_full' : 'storage_failed', message: expect.stringContaining('The image was made but not kept') });
      expect(removed).toEqual(['img1.png']);
      expect(logs).toEqual(logged);
    }
  });

  it('a chat model that will not unload is logged, and the image is made anyway', async () => {
    const { images, logs } = setUp(backendWith(async () => result()), { unloadLlm: async () => Promise.reject(new Error('Ollama is down')) });
    expect((await collectAll(images.generate(input()))).at(-1)).toMatchObject({ type: 'image' });
    expect(logs).toEqual(['WARN  could not unload the chat model before the image {"error":{"name":"Error","message":"Ollama is down"}}']);
  });
});

describe('the queue', () => {
  it('a queued image cancelled while it waits ends at once, and its backend is never asked', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const backend = backendWith(async () => (await gate, result()));
    const { images } = setUp(backend);
    const first = collectAll(images.generate(input()));
    const controller = new AbortController();
    const second = images.generate(input({ signal: controller.signal }));
    expect((await second.next()).value).toMatchObject({ type: 'generation', queued: true });
    // Waiting for the running image, then cancelled.
    const waiting = second.next();
    await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort(new Error('cancelled'));
    expect((await waiting).value).toMatchObject({ type: 'error', code: 'image_cancelled' });
    expect(await second.next()).toEqual({ done: true, value: undefined });
    expect(backend.calls).toBe(1);
    release();
    await first;
    // Nothing waits now: the next image is not queued.
    const third = images.generate(input());
    expect((await third.next()).value).toEqual({ type: 'generation', id: 'img1' });
    await collectAll(third);
  });

  it('a cancel before the image starts asks the backend nothing', async () => {
    const backend = backendWith(async () => result());
    const { images } = setUp(backend);
    const controller = new AbortController();
    const events = images.generate(input({ signal: controller.signal }));
    await events.next();
    controller.abort(new Error('cancelled'));
    expect((await events.next()).value).toMatchObject({ type: 'error', code: 'image_cancelled' });
    expect(backend.calls).toBe(0);
  });

  it('progress reported after the image was delivered is dropped', async () => {
    const backend = backendWith(async (_request, { onProgress }) => {
      onProgress({ fraction: 0.5 });
      setImmediate(() => onProgress({ fraction: 0.9 }));
      return result();
    });
    const { images } = setUp(backend);
    const events = await collectAll(images.generate(input()));
    expect(events.map((event) => event.type)).toEqual(['generation', 'progress', 'image']);
  });
});

describe('listModels', () => {
  it('a backend that cannot list offers no choices: the server paints with its own', async () => {
    const { images } = setUp(backendWith(async () => result()));
    expect(await images.listModels(new AbortController().signal)).toEqual({ backend: 'a1111', options: { checkpoints: [], current: null, samplers: [], schedulers: [] } });
    expect(await setUp(null).images.listModels(new AbortController().signal)).toBeNull();
  });
});

describe('checkHealth', () => {
  it('says whether the backend can vary, in its words, once it can tell', async () => {
    const cannot = 'LocalAI cannot start from an image.';
    expect(await setUp(backendWith(async () => result(), { canVary: cannot })).images.checkHealth()).toMatchObject({ canVary: cannot });
    expect(await setUp(backendWith(async () => result(), { canVary: true })).images.checkHealth()).toMatchObject({ canVary: true });
  });

  it('passes on what the backend found, and says when auto chose it', async () => {
    const backend = backendWith(async () => result(), {
      auto: true,
      checkHealth: async () => ({ reachable: true, detail: 'ready', server: 'stable-diffusion.cpp sd-server', found: 'a1111' as never }),
    });
    expect(await setUp(backend).images.checkHealth()).toEqual({
      backend: 'a1111',
      url: 'http://127.0.0.1:7860',
      configured: true,
      reachable: true,
      detail: 'ready',
      server: 'stable-diffusion.cpp sd-server',
      found: 'a1111',
      auto: true,
    });
    expect(await setUp(backendWith(async () => result())).images.checkHealth()).toStrictEqual({
      backend: 'a1111',
      url: 'http://127.0.0.1:7860',
      configured: true,
      reachable: true,
      detail: 'ready',
    });
  });

  it('a check too slow to answer while the backend makes one of our images says it is busy, not down; a refused one is down', async () => {
    const slow = { reachable: false, slow: true as const, detail: 'The image backend at http://127.0.0.1:7860 did not answer within 3 s.' };
    const refused = { reachable: false, detail: 'Nothing is listening at http://127.0.0.1:7860.' };
    let health: { reachable: boolean; slow?: true; detail: string } = slow;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { images } = setUp(backendWith(async () => (await gate, result()), { checkHealth: async () => health }));
    const down = { backend: 'a1111', url: 'http://127.0.0.1:7860', configured: true, reachable: false };
    // No image being made: a check with no answer is what it says.
    expect(await images.checkHealth()).toEqual({ ...down, detail: slow.detail });

    const events = images.generate(input());
    expect((await events.next()).value).toMatchObject({ type: 'generation' });
    const rest = collectAll(events);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await images.checkHealth()).toEqual({ ...down, reachable: true, detail: 'AUTOMATIC1111 at http://127.0.0.1:7860 is busy making an image.' });
    // Nothing listening is not busy, image or not.
    health = refused;
    expect(await images.checkHealth()).toEqual({ ...down, detail: refused.detail });

    health = slow;
    release();
    expect((await rest).at(-1)).toMatchObject({ type: 'image' });
    expect(await images.checkHealth()).toEqual({ ...down, detail: slow.detail });
  });
});
