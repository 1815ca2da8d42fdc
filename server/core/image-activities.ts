// An image is an activity of its own, not part of the reply that asked for it: it runs to its end whether or
// not anyone watches, and any number of readers can follow it (the reply's stream, a reloaded page, the API).
import { createEventBuffer, type EventBuffer } from './event-buffer.ts';
import type { DoneEvent, ImageEvent, TurnEvent } from './events.ts';
import type { GenerateInput, ImageGenerator } from './generation.ts';
import type { Logger } from './logger.ts';

type ProgressEvent = Extract<TurnEvent, { type: 'progress' }>;
type GenerationEvent = Extract<TurnEvent, { type: 'generation' }>;
/** How an image ends: the image, or an error (cancelled included). */
type FinalEvent = ImageEvent | Extract<TurnEvent, { type: 'error' }>;

/** An image being made, as a reader joining now sees it. */
export interface ImageInProgress {
  id: string;
  /** The reply that asked for it; null for Generate. */
  turnId: number | null;
  prompt: string;
  /** Still waiting for another image to finish first. */
  queued: boolean;
  /** While queued: its place in the image backend's line (1: the next one to start). */
  place?: number;
  progress?: Omit<ProgressEvent, 'type' | 'id'>;
  /** A comparison: its two prompt versions (its `generation` event's), so a reload draws its two columns. */
  compare?: GenerationEvent['compare'];
}

export interface FollowImageOptions {
  skipImages?: Iterable<string>;
}

export interface ImageActivity {
  readonly id: string;
  readonly conversationId: string;
  readonly turnId: number | null;
  /**
   * The `generation` event, the images made so far (a batch's), the latest `progress`, then every event until the
   * end: the last `image`, or an `error`. `skipImages`: the ids of images the follower shows already (a page drawn
   * from a snapshot): those are not replayed. Without it a follower, even one joining after the end, gets every image.
   */
  follow(options?: FollowImageOptions): AsyncIterable<TurnEvent>;
  cancel(reason: Error): void;
  /** Settles once the image ended (made, failed or cancelled); never rejects. */
  readonly settled: Promise<void>;
  readonly finished: boolean;
  describe(): ImageInProgress;
}

export interface ImageActivities {
  /**
   * Starts an image and resolves once it is queued (its `generation` event is known). When the generator
   * refuses at once (no backend), resolves with that error event instead.
   */
  start(input: Omit<GenerateInput, 'signal'>): Promise<{ ok: true; activity: ImageActivity } | { ok: false; event: TurnEvent }>;
  /** The images still being made for a conversation, oldest first. */
  listRunning(conversationId: string): ImageActivity[];
  /** A running image, or one that ended less than `keepFinishedMs` ago (a reader may join just after the end). */
  find(conversationId: string, id: string): ImageActivity | undefined;
  /** Cancels every image of the conversation being made; false when none was. */
  cancel(conversationId: string, reason: Error): boolean;
  /** Cancels one image (a batch or a comparison: all of it) by its `generation` id; false when it is not being made. */
  cancelOne(conversationId: string, id: string, reason: Error): boolean;
  /** Cancels every image being made. */
  cancelAll(reason: Error): void;
  /** Settles once every image started so far has ended. */
  settled(): Promise<void>;
}

export interface ImageActivitiesDeps {
  images: ImageGenerator;
  logger: Logger;
  /** How long an ended image can still be followed. Default 60 s. */
  keepFinishedMs?: number;
  /** Every event of every image, from its `generation` to its end, as it happens (the live feed). */
  onEvent?: (activity: ImageActivity, event: TurnEvent) => void;
}

export function createImageActivities(deps: ImageActivitiesDeps): ImageActivities {
  const keepFinishedMs = deps.keepFinishedMs ?? 60_000;
  // Per conversation, by image id: the running ones and, for a while, the ended ones.
  const byConversation = new Map<string, Map<string, ImageActivity>>();

  function remember(activity: ImageActivity): void {
    const entries = byConversation.get(activity.conversationId) ?? new Map<string, ImageActivity>();
    entries.set(activity.id, activity);
    byConversation.set(activity.conversationId, entries);
  }

  function forget(activity: ImageActivity): void {
    const entries = byConversation.get(activity.conversationId);
    if (entries?.get(activity.id) !== activity) return;
    entries.delete(activity.id);
    // Stryker disable next-line ConditionalExpression: memory only: an empty map lists and finds nothing
    if (entries.size === 0) byConversation.delete(activity.conversationId);
  }

  async function start(input: Omit<GenerateInput, 'signal'>): Promise<{ ok: true; activity: ImageActivity } | { ok: false; event: TurnEvent }> {
    const controller = new AbortController();
    const events = deps.images.generate({ ...input, signal: controller.signal });
    const first = await events.next();
    if (first.done || first.value.type !== 'generation') {
      await events.return(undefined);
      const event: TurnEvent = first.done ? { type: 'error', code: 'image_failed', message: 'The image could not be started.' } : first.value;
      return { ok: false, event };
    }
    const generation: GenerationEvent = first.value;
    let progress: ProgressEvent | undefined;
    /** Its place in line once the line moved since the `generation` event told it (a move only goes up the line). */
    let moved: number | undefined;
    /** A batch's images made so far (one for a single image): a reader joining late sees them. */
    const made: ImageEvent[] = [];
    /** How it ended: its last image, or an error (set once the generator is done: a batch goes on after its first image). */
    let final: FinalEvent | undefined;
    const readers = new Set<EventBuffer<TurnEvent>>();

    const activity: ImageActivity = {
      id: generation.id,
      conversationId: input.conversationId,
      turnId: input.turnId,
      follow(options = {}) {
        // Stryker disable next-line ArrayDeclaration: the default skips nothing, and a made-up id in it is no image's: nothing either
        const skip = new Set(options.skipImages ?? []);
        // Stryker disable next-line ArrowFunction: memory only until the image ends: a reader nobody reads is dropped with it
        const reader: EventBuffer<TurnEvent> = createEventBuffer<TurnEvent>(() => readers.delete(reader));
        reader.push(generation);
        // Still waiting, and the line moved since: its place now.
        if (!final && !progress && moved !== undefined) reader.push({ type: 'progress', id: generation.id, place: moved });
        // Ended: its last progress, then what it made, as it happened; still running: what it made so far, then
        // how far it is now.
        if (progress && final) reader.push(progress);
        for (const image of made) if (!skip.has(image.id)) reader.push(image);
        if (progress && !final) reader.push(progress);
        if (final) {
          if (final.type === 'error') reader.push(final);
          reader.close();
        } else {
          readers.add(reader);
        }
        return reader;
      },
      cancel(reason) {
        controller.abort(reason);
      },
      settled: Promise.resolve(),
      get finished() {
        return final !== undefined;
      },
      describe() {
        const waiting = generation.queued === true && progress === undefined;
        const place = moved ?? generation.place;
        return {
          id: generation.id,
          turnId: input.turnId,
          prompt: input.prompt,
          queued: waiting,
          ...(waiting && place !== undefined ? { place } : {}),
          ...(progress ? { progress: withoutType(progress) } : {}),
          ...(generation.compare === undefined ? {} : { compare: generation.compare }),
        };
      },
    };

    const publish = (event: TurnEvent) => {
      for (const reader of readers) reader.push(event);
      deps.onEvent?.(activity, event);
    };
    deps.onEvent?.(activity, generation);
    // The generator runs to its end on its own: no reader holds it up, none is needed for it to finish.
    (activity as { settled: Promise<void> }).settled = (async () => {
      try {
        let ended: FinalEvent | undefined;
        for await (const event of { [Symbol.asyncIterator]: () => events }) {
          // A move in line is not progress: the image still waits.
          if (event.type === 'progress' && event.place !== undefined) moved = event.place;
          else if (event.type === 'progress') progress = event;
          if (event.type === 'image') made.push(event);
          if (event.type === 'image' || event.type === 'error') ended = event;
          publish(event);
        }
        final = ended;
      } catch (error) {
        deps.logger.error('an image activity failed unexpectedly', { conversationId: input.conversationId, error });
        final = { type: 'error', code: 'image_failed', message: 'The image could not be made; the details are in the server log. The prompt is kept: press Generate to try again.' };
        publish(final);
      } finally {
        if (final === undefined) {
          final = { type: 'error', code: 'image_failed', message: 'The image could not be made. The prompt is kept: press Generate to try again.' };
          deps.onEvent?.(activity, final);
        }
        for (const reader of readers) reader.close();
        readers.clear();
        const timer = setTimeout(() => forget(activity), keepFinishedMs);
        // Stryker disable next-line OptionalChaining: Node's timers always have unref
        timer.unref?.();
      }
    })();
    remember(activity);
    return { ok: true, activity };
  }

  function listRunning(conversationId: string): ImageActivity[] {
    return [...(byConversation.get(conversationId)?.values() ?? [])].filter((activity) => !activity.finished);
  }

  return {
    start,
    listRunning,
    find: (conversationId, id) => byConversation.get(conversationId)?.get(id),
    cancel(conversationId, reason) {
      const running = listRunning(conversationId);
      for (const activity of running) activity.cancel(reason);
      return running.length > 0;
    },
    cancelOne(conversationId, id, reason) {
      const activity = byConversation.get(conversationId)?.get(id);
      if (activity === undefined || activity.finished) return false;
      activity.cancel(reason);
      return true;
    },
    cancelAll(reason) {
      for (const entries of byConversation.values()) for (const activity of entries.values()) activity.cancel(reason);
    },
    async settled() {
      await Promise.all([...byConversation.values()].flatMap((entries) => [...entries.values()].map((activity) => activity.settled)));
    },
  };
}

function withoutType(event: ProgressEvent): Omit<ProgressEvent, 'type' | 'id'> {
  const { type: _type, id: _id, ...rest } = event;
  return rest;
}

/**
 * How a Generate's stream ends: `done` as every event stream does (the API's one end marker), no model call in
 * it, and its level read from how the image ended: `clean` made, `stopped` cancelled, `error` otherwise.
 */
export function endImageStream(last: TurnEvent | undefined): DoneEvent {
  const level = last?.type === 'image' ? 'clean' : last?.type === 'error' && last.code === 'image_cancelled' ? 'stopped' : 'error';
  return { type: 'done', attempts: 0, repairs: [], level, evalCount: 0, tokensPerSecond: 0, firstTokenMs: null };
}
