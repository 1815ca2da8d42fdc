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
    expect(started.activity.describe()).toEqual({ id: 'i1', turnId: 3, prompt: 'a fox', queued: true });
    step.open();
    await sleep(5);
    expect(started.activity.describe()).toEqual({ id: 'i1', turnId: 3, prompt: 'a fox', queued: false, progress: { fraction: 0.5, step: 2, steps: 4 } });
    more.open();
    await started.activity.settled;
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
