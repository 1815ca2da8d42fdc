// The generator's batches with scripted backends: one backend job per image (seed after seed, progress across the
// batch, each image saved as it comes, a cancel keeping those made), or the backend's own batch; the seeds a batch
// needs checked against the backend's range; the activity a late reader follows holding every image.
import { describe, expect, it } from 'vitest';
import { createImageActivities, createImageGenerator, DEFAULT_SETTINGS, silentLogger, type ImageBackend, type ImageRecord, type ImageRequest, type TurnEvent } from '../../../server/core/index.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { collectAll } from '../../helpers/streams.ts';

function setUp(backend: ImageBackend, randomSeed?: () => number) {
  const added: ImageRecord[] = [];
  const store = { addImage: (image: ImageRecord) => void added.push(image) } as unknown as Parameters<typeof createImageGenerator>[0]['store'];
  let next = 0;
  const images = createImageGenerator({
    backend,
    store,
    logger: silentLogger,
    clock: Date,
    saveFile: async () => {},
    newImageId: () => `id${++next}`,
    ...(randomSeed ? { randomSeed } : {}),
  });
  return { images, added };
}

/** A backend of the given name whose parts each test writes; one it does not write is never asked. */
function scriptedBackend(name: ImageBackend['name'], parts: Partial<ImageBackend>): ImageBackend {
  return {
    name,
    url: 'http://x',
    generate: async () => Promise.reject(new Error('not asked')),
    checkHealth: async () => ({ reachable: true, detail: '' }),
    ...parts,
  };
}

const input = (count: number, seed = 10) => ({ conversationId: 'c1', turnId: null, prompt: 'a fox', settings: { ...DEFAULT_SETTINGS, seed }, promptVersion: null, signal: new AbortController().signal, count });

describe('a batch in the generator', () => {
  it('without a batch of its own: one job per seed, progress across the batch, each image its own id and record', async () => {
    const requests: ImageRequest[] = [];
    const backend = scriptedBackend('localai', {
      async generate(request, { onProgress }) {
        requests.push(request);
        onProgress({ fraction: 0.5, step: 2, steps: 4 });
        return { png: makePng(8, 8), seed: request.seed };
      },
    });
    const { images, added } = setUp(backend);
    const events = await collectAll(images.generate(input(3)));
    expect(requests.map((request) => request.seed)).toEqual([10, 11, 12]);
    expect(events.map((event) => event.type)).toEqual(['generation', 'progress', 'image', 'progress', 'image', 'progress', 'image']);
    expect(events.filter((event) => event.type === 'progress')).toEqual([0.5, 1.5, 2.5].map((done) => ({ type: 'progress', id: 'id1', fraction: done / 3 })));
    const made = events.filter((event): event is Extract<TurnEvent, { type: 'image' }> => event.type === 'image');
    expect(made.map((event) => [event.id, event.seed, event.batch])).toEqual([
      ['id1', 10, { index: 0, count: 3 }],
      ['id2', 11, { index: 1, count: 3 }],
      ['id3', 12, { index: 2, count: 3 }],
    ]);
    expect(added.map((image) => image.id)).toEqual(['id1', 'id2', 'id3']);
    expect(new Set(added.map((image) => image.createdAt)).size).toBe(1);
  });

  it('a cancel during the second image keeps the first and asks for no third', async () => {
    const controller = new AbortController();
    const requests: ImageRequest[] = [];
    const backend = scriptedBackend('a1111', {
      async generate(request, { signal }) {
        requests.push(request);
        if (requests.length === 2) {
          controller.abort();
          signal.throwIfAborted();
        }
        return { png: makePng(8, 8), seed: request.seed };
      },
    });
    const { images, added } = setUp(backend);
    const events = await collectAll(images.generate({ ...input(3), signal: controller.signal }));
    expect(events.filter((event) => event.type === 'image')).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'image_cancelled' });
    expect(requests).toHaveLength(2);
    expect(added).toHaveLength(1);
  });

  it("with a batch of its own: one job, its results' seeds, a single image still through generate", async () => {
    const batches: Array<ImageRequest & { count: number }> = [];
    let singles = 0;
    const backend = scriptedBackend('a1111', {
      async generate(request) {
        singles++;
        return { png: makePng(8, 8), seed: request.seed };
      },
      async generateBatch(request) {
        batches.push(request);
        return Array.from({ length: request.count }, (_, index) => ({ png: makePng(8, 8), seed: request.seed + index }));
      },
    });
    const { images } = setUp(backend, () => 77);
    const events = await collectAll(images.generate(input(4, -1)));
    expect(batches.map((request) => [request.seed, request.count])).toEqual([[77, 4]]);
    expect(events.filter((event) => event.type === 'image').map((event) => (event as { seed?: number }).seed)).toEqual([77, 78, 79, 80]);
    await collectAll(images.generate(input(1)));
    expect(singles).toBe(1);
  });

  it('a batch of its own that returns fewer than asked: the missing seeds made one job each, the count what is made', async () => {
    const singles: ImageRequest[] = [];
    const backend = scriptedBackend('openai', {
      async generate(request) {
        singles.push(request);
        return { png: makePng(8, 8), seed: request.seed };
      },
      // A server that ignores `n`: one image, whatever was asked.
      generateBatch: async (request) => [{ png: makePng(8, 8), seed: request.seed }],
    });
    const { images, added } = setUp(backend);
    const events = await collectAll(images.generate(input(3)));
    expect(singles.map((request) => request.seed)).toEqual([11, 12]);
    const made = events.filter((event): event is Extract<TurnEvent, { type: 'image' }> => event.type === 'image');
    expect(made.map((event) => [event.seed, event.batch])).toEqual([
      [10, { index: 0, count: 3 }],
      [11, { index: 1, count: 3 }],
      [12, { index: 2, count: 3 }],
    ]);
    expect(added).toHaveLength(3);
    expect(events.at(-1)).toMatchObject({ type: 'image', batch: { index: 2, count: 3 } });
  });

  it('a batch of its own cancelled with some images made: those are kept, counted as what was made, and no more asked', async () => {
    const controller = new AbortController();
    let singles = 0;
    const backend = scriptedBackend('a1111', {
      async generate(request) {
        singles++;
        return { png: makePng(8, 8), seed: request.seed };
      },
      async generateBatch(request) {
        controller.abort();
        return [0, 1].map((index) => ({ png: makePng(8, 8), seed: request.seed + index }));
      },
    });
    const { images, added } = setUp(backend);
    const events = await collectAll(images.generate({ ...input(4), signal: controller.signal }));
    expect(singles).toBe(0);
    expect(events.filter((event) => event.type === 'image').map((event) => (event as { batch?: unknown }).batch)).toEqual([
      { index: 0, count: 2 },
      { index: 1, count: 2 },
    ]);
    expect(added).toHaveLength(2);
  });

  it('a random batch is drawn so that its last seed is in range; a fixed one past the range is refused', async () => {
    let drawn: { min: number; max: number } | undefined;
    const backend = scriptedBackend('localai', {
      seedRange: { min: 1, max: 100 },
      generate: async (request) => ({ png: makePng(8, 8), seed: request.seed }),
    });
    const { images } = setUp(backend);
    const random = createImageGenerator({ backend, store: { addImage() {} } as never, logger: silentLogger, clock: Date, saveFile: async () => {}, randomSeed: (range) => ((drawn = range), range.max) });
    const made = await collectAll(random.generate(input(5, -1)));
    expect(drawn).toEqual({ min: 1, max: 96 });
    expect(made.filter((event) => event.type === 'image').map((event) => (event as { seed?: number }).seed)).toEqual([96, 97, 98, 99, 100]);
    const refused = await collectAll(images.generate(input(5, 97)));
    expect(refused.at(-1)).toMatchObject({ type: 'error', code: 'image_seed_out_of_range', message: expect.stringContaining('a batch of 5 from seed 97 (seeds 97 to 101)') });
  });

  it('an activity followed after its batch ended gives every image, and ends with the last', async () => {
    const backend = scriptedBackend('a1111', {
      generate: async (request) => ({ png: makePng(8, 8), seed: request.seed }),
    });
    const { images } = setUp(backend);
    const activities = createImageActivities({ images, logger: silentLogger });
    const begun = await activities.start({ conversationId: 'c1', turnId: null, prompt: 'a fox', settings: { ...DEFAULT_SETTINGS, seed: 3 }, promptVersion: null, count: 2 });
    if (!begun.ok) throw new Error('not started');
    const live = collectAll(begun.activity.follow());
    expect(begun.activity.finished).toBe(false);
    await begun.activity.settled;
    expect(begun.activity.finished).toBe(true);
    const later = await collectAll(begun.activity.follow());
    expect(later.map((event) => [event.type, (event as { seed?: number }).seed])).toEqual([
      ['generation', undefined],
      ['image', 3],
      ['image', 4],
    ]);
    expect((await live).filter((event) => event.type === 'image')).toHaveLength(2);
  });

  it('a batch of its own answered with no image is a bad answer, in words; one with more than asked keeps the ones asked', async () => {
    const answers: Array<(seed: number) => Array<{ png: Uint8Array; seed: number }>> = [() => [], (seed) => [0, 1, 2].map((index) => ({ png: makePng(8, 8), seed: seed + index }))];
    const backend = scriptedBackend('a1111', {
      generateBatch: async (request) => answers.shift()!(request.seed),
    });
    const { images, added } = setUp(backend);
    expect((await collectAll(images.generate(input(3)))).at(-1)).toEqual({
      type: 'error',
      code: 'image_bad_response',
      message: "AUTOMATIC1111 at http://x answered a batch of 3 without an image. Try again, and check the backend's console if it happens again. The prompt is kept: press Generate to try again.",
    });
    expect(added).toEqual([]);
    // Three for two: the first two kept.
    const made = (await collectAll(images.generate(input(2)))).filter((event): event is Extract<TurnEvent, { type: 'image' }> => event.type === 'image');
    expect(made.map((event) => [event.seed, event.batch])).toEqual([
      [10, { index: 0, count: 2 }],
      [11, { index: 1, count: 2 }],
    ]);
    expect(added.map((image) => image.seed)).toEqual([10, 11]);
  });

  it("progress: a batch job's own is passed on whole; a loop's is the batch's share, and one with no fraction is none", async () => {
    const progress = (events: TurnEvent[]) => events.filter((event) => event.type === 'progress').map(({ type: _type, id: _id, ...rest }) => rest);
    const job = scriptedBackend('a1111', {
      async generateBatch(request, { onProgress }) {
        onProgress({ fraction: 0.5, step: 10, steps: 20, etaSeconds: 3 });
        return Array.from({ length: request.count }, () => ({ png: makePng(8, 8) }));
      },
    });
    expect(progress(await collectAll(setUp(job).images.generate(input(2))))).toEqual([{ fraction: 0.5, step: 10, steps: 20, etaSeconds: 3 }]);

    // A server that counts steps but no fraction (the loop's share cannot be told): nothing, not an empty bar.
    const loop = scriptedBackend('localai', {
      async generate(_request, { onProgress }) {
        onProgress({ step: 2, steps: 4 });
        return { png: makePng(8, 8) };
      },
    });
    expect(progress(await collectAll(setUp(loop).images.generate(input(2))))).toEqual([]);
  });
});

describe('a comparison of two prompts in the generator', () => {
  const sides = { sides: [{ prompt: 'a fox', promptVersion: 1 }, { prompt: 'a red fox', promptVersion: 2 }] as [{ prompt: string; promptVersion: number }, { prompt: string; promptVersion: number }] };
  const fractions = (events: TurnEvent[]) => events.filter((event) => event.type === 'progress').map((event) => (event as { fraction?: number }).fraction);

  it('one job per image: each image its share of the whole bar, side A\'s images first, on the same seeds', async () => {
    const requests: ImageRequest[] = [];
    const backend = scriptedBackend('localai', {
      async generate(request, { onProgress }) {
        requests.push(request);
        onProgress({ fraction: 0.5 });
        return { png: makePng(8, 8) };
      },
    });
    const events = await collectAll(setUp(backend).images.generate({ ...input(2), compare: sides }));
    expect(requests.map((request) => [request.prompt, request.seed])).toEqual([
      ['a fox', 10],
      ['a fox', 11],
      ['a red fox', 10],
      ['a red fox', 11],
    ]);
    expect(fractions(events)).toEqual([0.5, 1.5, 2.5, 3.5].map((done) => done / 4));
  });

  it("a batch job per side: each side's job is its half of the bar", async () => {
    const backend = scriptedBackend('a1111', {
      async generateBatch(request, { onProgress }) {
        onProgress({ fraction: 0.5, step: 10, steps: 20 });
        return Array.from({ length: request.count }, (_, index) => ({ png: makePng(8, 8), seed: request.seed + index }));
      },
    });
    const events = await collectAll(setUp(backend).images.generate({ ...input(2), compare: sides }));
    expect(fractions(events)).toEqual([0.25, 0.75]);
    expect(events.filter((event) => event.type === 'image').map((event) => (event as { compare?: unknown }).compare)).toEqual([
      { id: 'id1', side: 'a', index: 0 },
      { id: 'id1', side: 'a', index: 1 },
      { id: 'id1', side: 'b', index: 0 },
      { id: 'id1', side: 'b', index: 1 },
    ]);
  });
});
