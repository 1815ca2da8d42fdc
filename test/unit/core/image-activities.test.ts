// An image as an activity of its own (server/core/image-activities.ts), driven by a scripted image
// generator (the port the real one implements): what a reader joining late sees, how long an ended image
// can still be followed, and what a generator that fails, throws or ends without an image leaves behind.
import { describe, expect, it } from 'vitest';
import { createImageActivities, createLogger, DEFAULT_SETTINGS, type ImageGenerator, type TurnEvent } from '../../../server/core/index.ts';
import { collectAll } from '../../helpers/streams.ts';

/** A generator that yields the given events; `gate` holds it after the first (`generation`) until released. */
function scriptedImages(script: () => AsyncGenerator<TurnEvent>): ImageGenerator {
  return {
    configured: true,
    generate: () => script(),
    checkHealth: async () => ({ backend: 'a1111', url: null, configured: true, reachable: true, detail: '' }),
    settled: async () => {},
    listModels: async () => null,
    canVary: () => true,
  };
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

const input = { conversationId: 'c1', turnId: 3, prompt: 'a fox', settings: DEFAULT_SETTINGS, promptVersion: null };
const image: TurnEvent = { type: 'image', id: 'i1', url: '/images/i1.png', width: 512, height: 512, prompt: 'a fox' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What a reader has to read now: its events until it ends, or until none comes within a few milliseconds. */
async function readNow(reader: AsyncIterable<TurnEvent>): Promise<TurnEvent[]> {
  const events: TurnEvent[] = [];
  const iterator = reader[Symbol.asyncIterator]();
  for (;;) {
    const step = await Promise.race([iterator.next(), sleep(5).then(() => 'quiet' as const)]);
    if (step === 'quiet' || step.done) break;
    events.push(step.value);
  }
  // Not returned: a read still pending would hold the return up; the reader ends with the image.
  return events;
}

describe('createImageActivities', () => {
  it('describes a queued image as queued until its first progress, then with that progress', async () => {
    const step = gate();
    const more = gate();
    const activities = createImageActivities({
      images: scriptedImages(async function* () {
        yield { type: 'generation', id: 'i1', queued: true };
        await step.wait;
        yield { type: 'progress', id: 'i1', fraction: 0.5, step: 2, steps: 4 };
        await more.wait;
        yield image;
      }),
      logger: createLogger({ level: 'error', write: () => {} }),
    });
    const started = await activities.start(input);
    if (!started.ok) throw new Error('not started');
    // A generator that says queued but not where: no place, not an undefined one (toStrictEqual).
    expect(started.activity.describe()).toStrictEqual({ id: 'i1', turnId: 3, prompt: 'a fox', queued: true });
    step.open();
    await sleep(5);
    expect(started.activity.describe()).toEqual({ id: 'i1', turnId: 3, prompt: 'a fox', queued: false, progress: { fraction: 0.5, step: 2, steps: 4 } });
    more.open();
    await started.activity.settled;
  });

  it("a reader joining while it waits learns its place now, once the line moved; describe() says the same; neither once it started or ended", async () => {
    const [moved, started, finished] = [gate(), gate(), gate()];
    const activities = createImageActivities({
      images: scriptedImages(async function* () {
        yield { type: 'generation', id: 'i1', queued: true, place: 2 };
        await moved.wait;
        yield { type: 'progress', id: 'i1', place: 1 };
        await started.wait;
        yield { type: 'progress', id: 'i1', fraction: 0.5 };
        await finished.wait;
        yield image;
      }),
      logger: createLogger({ level: 'error', write: () => {} }),
    });
    const begun = await activities.start(input);
    if (!begun.ok) throw new Error('not started');
    const { activity } = begun;
    const described = { id: 'i1', turnId: 3, prompt: 'a fox' };
    const generation = { type: 'generation', id: 'i1', queued: true, place: 2 };
    expect(await readNow(activity.follow())).toEqual([generation]);
    expect(activity.describe()).toStrictEqual({ ...described, queued: true, place: 2 });
    moved.open();
    await sleep(5);
    expect(await readNow(activity.follow())).toEqual([generation, { type: 'progress', id: 'i1', place: 1 }]);
    expect(activity.describe()).toStrictEqual({ ...described, queued: true, place: 1 });
    started.open();
    await sleep(5);
    expect(await readNow(activity.follow())).toEqual([generation, { type: 'progress', id: 'i1', fraction: 0.5 }]);
    expect(activity.describe()).toStrictEqual({ ...described, queued: false, progress: { fraction: 0.5 } });
    finished.open();
    await activity.settled;
    expect(await readNow(activity.follow())).toEqual([generation, { type: 'progress', id: 'i1', fraction: 0.5 }, image]);
  });

  it('a reader joining after an image cancelled while it waited reads no place: it is out of the line', async () => {
    const moved = gate();
    const activities = createImageActivities({
      images: scriptedImages(async function* () {
        yield { type: 'generation', id: 'i1', queued: true, place: 2 };
        yield { type: 'progress', id: 'i1', place: 1 };
        await moved.wait;
        yield { type: 'error', code: 'image_cancelled', message: 'Image generation was cancelled.' };
      }),
      logger: createLogger({ level: 'error', write: () => {} }),
    });
    const begun = await activities.start(input);
    if (!begun.ok) throw new Error('not started');
    moved.open();
    await begun.activity.settled;
    expect((await collectAll(begun.activity.follow())).map((event) => event.type)).toEqual(['generation', 'error']);
  });

  it("a comparison is described with its two versions; another image without", async () => {
    const compare = { a: { promptVersion: 1, prompt: 'a fox' }, b: { promptVersion: 2, prompt: 'a red fox' } };
    for (const generation of [{ type: 'generation', id: 'i1', compare }, { type: 'generation', id: 'i1' }] as const) {
      const hold = gate();
      const activities = createImageActivities({
        images: scriptedImages(async function* () {
          yield generation;
          await hold.wait;
        }),
        logger: createLogger({ level: 'error', write: () => {} }),
      });
      const begun = await activities.start(input);
      if (!begun.ok) throw new Error('not started');
      expect(begun.activity.describe()).toStrictEqual({ id: 'i1', turnId: 3, prompt: 'a fox', queued: false, ...('compare' in generation ? { compare } : {}) });
      hold.open();
      await begun.activity.settled;
    }
  });

  it('an image that is not queued is not described as queued', async () => {
    const hold = gate();
    const activities = createImageActivities({
      images: scriptedImages(async function* () {
        yield { type: 'generation', id: 'i1' };
        await hold.wait;
      }),
      logger: createLogger({ level: 'error', write: () => {} }),
    });
    const started = await activities.start(input);
    if (!started.ok) throw new Error('not started');
    expect(started.activity.describe().queued).toBe(false);
    hold.open();
    await activities.settled();
  });

  it('a reader joining after the end reads the image itself, and one joining after a failure reads that failure', async () => {
    const failure: TurnEvent = { type: 'error', code: 'image_backend_error', message: 'A1111 said no.' };
    for (const last of [image, failure]) {
      const activities = createImageActivities({
        images: scriptedImages(async function* () {
          yield { type: 'generation', id: 'i1' };
          yield { type: 'progress', id: 'i1', fraction: 1 };
          yield last;
        }),
        logger: createLogger({ level: 'error', write: () => {} }),
      });
      const started = await activities.start(input);
      if (!started.ok) throw new Error('not started');
      await started.activity.settled;
      expect(await collectAll(started.activity.follow())).toEqual([{ type: 'generation', id: 'i1' }, { type: 'progress', id: 'i1', fraction: 1 }, last]);
    }
  });

  it('a generator that ends without an image, or throws, ends the image with words that say what to do', async () => {
    const logged: string[] = [];
    const logger = createLogger({ level: 'error', write: (line) => logged.push(line) });
    const silent = createImageActivities({
      images: scriptedImages(async function* () {
        yield { type: 'generation', id: 'i1' };
      }),
      logger,
    });
    const ended = await silent.start(input);
    if (!ended.ok) throw new Error('not started');
    await ended.activity.settled;
    expect(ended.activity.finished).toBe(true);
    expect(silent.listRunning('c1')).toEqual([]);
    expect((await collectAll(ended.activity.follow())).at(-1)).toEqual({
      type: 'error',
      code: 'image_failed',
      message: 'The image could not be made. The prompt is kept: press Generate to try again.',
    });

    const throwing = createImageActivities({
      images: scriptedImages(async function* () {
        yield { type: 'generation', id: 'i1' };
        throw new Error('socket hang up');
      }),
      logger,
    });
    const thrown = await throwing.start(input);
    if (!thrown.ok) throw new Error('not started');
    const live = collectAll(thrown.activity.follow());
    await thrown.activity.settled;
    expect((await live).at(-1)).toEqual({
      type: 'error',
      code: 'image_failed',
      message: 'The image could not be made; the details are in the server log. The prompt is kept: press Generate to try again.',
    });
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain('ERROR an image activity failed unexpectedly {"conversationId":"c1","error":{"name":"Error","message":"socket hang up"}}');
  });

  it('a generator that refuses at once, or yields nothing, gives the refusal and starts nothing', async () => {
    const refusal: TurnEvent = { type: 'error', code: 'image_backend_missing', message: 'No image backend.' };
    let closed = 0;
    const refusing = createImageActivities({
      images: scriptedImages(async function* () {
        try {
          yield refusal;
          yield { type: 'generation', id: 'never' };
        } finally {
          closed++;
        }
      }),
      logger: createLogger({ level: 'error', write: () => {} }),
    });
    expect(await refusing.start(input)).toEqual({ ok: false, event: refusal });
    expect(closed).toBe(1);
    expect(refusing.listRunning('c1')).toEqual([]);

    const empty = createImageActivities({ images: scriptedImages(async function* () {}), logger: createLogger({ level: 'error', write: () => {} }) });
    expect(await empty.start(input)).toEqual({ ok: false, event: { type: 'error', code: 'image_failed', message: 'The image could not be started.' } });
  });

  it('an ended image can be found for keepFinishedMs, then is forgotten without touching the others', async () => {
    const hold = gate();
    let count = 0;
    const activities = createImageActivities({
      images: scriptedImages(async function* () {
        const id = `i${++count}`;
        yield { type: 'generation', id };
        if (id === 'i2') await hold.wait;
        yield { type: 'image', id, url: `/images/${id}.png`, width: 512, height: 512, prompt: 'a fox' };
      }),
      logger: createLogger({ level: 'error', write: () => {} }),
      keepFinishedMs: 30,
    });
    const first = await activities.start(input);
    const second = await activities.start(input);
    if (!first.ok || !second.ok) throw new Error('not started');
    await first.activity.settled;
    expect(activities.find('c1', 'i1')).toBe(first.activity);
    await sleep(80);
    expect(activities.find('c1', 'i1')).toBeUndefined();
    // The running one stays, in the same conversation.
    expect(activities.find('c1', 'i2')).toBe(second.activity);
    expect(activities.listRunning('c1')).toEqual([second.activity]);
    hold.open();
    await activities.settled();
  });

  it('settled() waits for every image started so far', async () => {
    const hold = gate();
    const activities = createImageActivities({
      images: scriptedImages(async function* () {
        yield { type: 'generation', id: 'i1' };
        await hold.wait;
        yield image;
      }),
      logger: createLogger({ level: 'error', write: () => {} }),
    });
    await activities.start(input);
    let settled = false;
    const waiting = activities.settled().then(() => (settled = true));
    await sleep(10);
    expect(settled).toBe(false);
    hold.open();
    await waiting;
    expect(settled).toBe(true);
  });
});
