// The generator's part of Vary with scripted backends: the starting image read from the images folder and handed
// over as `init`, the record's `source` and the PNG's "Denoising strength", and each refusal before anything is
// sent: a backend that says it cannot (known only after `prepare`, as with --image-backend auto), a file gone.
import { describe, expect, it } from 'vitest';
import { createImageGenerator, createLogger, DEFAULT_SETTINGS, type ImageBackend, type ImageGeneratorDeps, type ImageRequest, type ImageRecord } from '../../../server/core/index.ts';
import { parseA1111Parameters, readPngText, writePngText } from '../../../server/png/index.ts';
import { insertTextChunk, makePng } from '../../fakes/png-bytes.ts';
import { collectAll } from '../../helpers/streams.ts';

const START = makePng(8, 8, [10, 20, 30]);
const MADE = makePng(8, 8, [40, 50, 60]);

function setUp(backend: ImageBackend, files: Record<string, Uint8Array> = { 'start.png': START }, over: Partial<ImageGeneratorDeps> = {}) {
  const added: ImageRecord[] = [];
  const logs: string[] = [];
  const saved = new Map<string, Uint8Array>();
  const store = { addImage: (image: ImageRecord) => void added.push(image) } as unknown as Parameters<typeof createImageGenerator>[0]['store'];
  const images = createImageGenerator({
    backend,
    store,
    logger: createLogger({ level: 'debug', write: (line) => logs.push(line.replace(/^\S+ /, '')) }),
    clock: Date,
    saveFile: async (name, bytes) => void saved.set(name, bytes),
    readFile: async (name) => {
      const file = files[name];
      if (file === undefined) throw Object.assign(new Error(`ENOENT: ${name}`), { code: 'ENOENT' });
      return file;
    },
    imagesDir: '/data/images',
    ...over,
  });
  return { images, added, saved, logs };
}

function backendWith(over: Partial<ImageBackend> & { made?: Uint8Array } = {}): ImageBackend & { requests: ImageRequest[] } {
  const requests: ImageRequest[] = [];
  return {
    name: 'a1111',
    url: 'http://sd',
    canVary: true,
    async generate(request) {
      requests.push(request);
      return { png: over.made ?? MADE, seed: request.seed, steps: request.steps, cfg: request.cfg };
    },
    checkHealth: async () => ({ reachable: true, detail: '' }),
    ...over,
    requests,
  };
}

const input = { conversationId: 'c1', turnId: null, prompt: 'a fox', settings: { ...DEFAULT_SETTINGS, seed: 3 }, promptVersion: null, signal: new AbortController().signal };
const from = { imageId: 'a'.repeat(32), strength: 0.35, file: 'start.png' };

describe('a Vary in the generator', () => {
  it('hands the stored PNG over as init, and records and writes where the image came from', async () => {
    const backend = backendWith();
    const { images, added, saved } = setUp(backend);
    const events = await collectAll(images.generate({ ...input, from }));
    expect(backend.requests[0]?.init).toEqual({ png: START, strength: 0.35 });
    const image = events.find((event) => event.type === 'image');
    expect(image).toMatchObject({ source: { imageId: 'a'.repeat(32), strength: 0.35 } });
    expect(added[0]?.source).toEqual({ imageId: 'a'.repeat(32), strength: 0.35 });
    const text = readPngText([...saved.values()][0]!)['parameters']!;
    // Easel's own text (the backend wrote none), the strength where create_infotext puts it.
    expect(text).toBe('a fox\nSteps: 20, CFG scale: 7.0, Seed: 3, Size: 8x8, Denoising strength: 0.35');
    expect(parseA1111Parameters(text).denoisingStrength).toBe(0.35);
  });

  it('an image from the prompt alone has no source, no init and no strength', async () => {
    const backend = backendWith();
    const { images, added, saved } = setUp(backend);
    const events = await collectAll(images.generate(input));
    expect(backend.requests[0]?.init).toBeUndefined();
    expect(events.find((event) => event.type === 'image')).not.toHaveProperty('source');
    expect(added[0]?.source).toBeNull();
    expect(readPngText([...saved.values()][0]!)['parameters']).not.toMatch(/Denoising/);
  });

  it("keeps a server's own text that already names the strength, and adds it to one that does not", async () => {
    // Written as Pillow writes it, right after IHDR and before another text: not a byte of it is rewritten or moved.
    const text = 'a fox\nSteps: 20, Sampler: Euler, CFG scale: 7.0, Seed: 3, Size: 8x8, Denoising strength: 0.35, Version: v1.10.1';
    const own = insertTextChunk(insertTextChunk(MADE, 'Software', 'Forge', 'pillow'), 'parameters', text, 'pillow');
    const kept = setUp(backendWith({ made: own }));
    await collectAll(kept.images.generate({ ...input, from }));
    expect([...kept.saved.values()][0]).toEqual(own);
    const bare = writePngText(MADE, 'parameters', 'a fox\nSteps: 20, CFG scale: 7.000000, Seed: 3, Size: 8x8, Version: stable-diffusion.cpp, SDCPP: {"seed":3}');
    const added = setUp(backendWith({ made: bare }));
    await collectAll(added.images.generate({ ...input, from }));
    expect(readPngText([...added.saved.values()][0]!)['parameters']).toBe('a fox\nSteps: 20, CFG scale: 7.000000, Seed: 3, Size: 8x8, Denoising strength: 0.35, Version: stable-diffusion.cpp, SDCPP: {"seed":3}');
  });

  it('a backend that says it cannot, known only after prepare, is refused in its words before anything is sent', async () => {
    let canVary: true | string | undefined;
    const backend = backendWith({
      prepare: async () => {
        canVary = 'This server cannot start from an image.';
      },
    });
    // As --image-backend auto's: unknown until the server is found.
    Object.defineProperty(backend, 'canVary', { get: () => canVary });
    const { images, added, logs } = setUp(backend);
    expect(images.canVary()).toBeUndefined();
    const events = await collectAll(images.generate({ ...input, from }));
    expect(events.at(-1)).toEqual({ type: 'error', code: 'image_cannot_vary', message: 'This server cannot start from an image. Nothing was sent; Generate makes an image from the prompt alone.' });
    expect(backend.requests).toEqual([]);
    expect(added).toEqual([]);
    expect(images.canVary()).toBe('This server cannot start from an image.');
    expect(logs).toEqual(['WARN  image generation did not finish {"error":{"name":"CannotVaryError","message":"This server cannot start from an image."}}']);
  });

  it('a starting image whose file is gone: image_source_unreadable, nothing sent', async () => {
    const backend = backendWith();
    const { images, logs } = setUp(backend, {});
    const events = await collectAll(images.generate({ ...input, from }));
    expect(events.at(-1)).toEqual({
      type: 'error',
      code: 'image_source_unreadable',
      message: 'The image to vary could not be read from /data/images (ENOENT): its file may have been removed. Nothing was sent; pick another image, or press Generate.',
    });
    expect(backend.requests).toEqual([]);
    expect(logs).toEqual(['ERROR the image to vary could not be read {"error":{"name":"SourceUnreadableError","message":"could not read start.png","cause":"ENOENT: start.png"}}']);
  });

  it('no images folder to read from, or a failure without a code: said without either, and logged', async () => {
    const backend = backendWith();
    const bare = { message: 'The image to vary could not be read from the images folder of the data dir: its file may have been removed. Nothing was sent; pick another image, or press Generate.' };
    const noFolder = setUp(backend, {}, { readFile: undefined, imagesDir: undefined });
    expect((await collectAll(noFolder.images.generate({ ...input, from }))).at(-1)).toEqual({ type: 'error', code: 'image_source_unreadable', ...bare });
    expect(noFolder.logs).toEqual(['ERROR the image to vary could not be read {"error":{"name":"SourceUnreadableError","message":"no images folder to read start.png from"}}']);
    const noCode = setUp(backend, {}, { readFile: async () => Promise.reject(new Error('EIO?')), imagesDir: undefined });
    expect((await collectAll(noCode.images.generate({ ...input, from }))).at(-1)).toEqual({ type: 'error', code: 'image_source_unreadable', ...bare });
    expect(backend.requests).toEqual([]);
  });
});
