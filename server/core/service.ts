import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { formatUserNote, LIMITS, type Metadata } from '../protocol/index.ts';
import type { ConversationRecord, ConversationStore, ImageRecord, TranscriptTurn } from './conversation.ts';
import { createEventBuffer, type EventBuffer } from './event-buffer.ts';
import type { TurnEvent } from './events.ts';
import type { Logger } from './logger.ts';
import type { ChatModel, ModelHealth } from './ports.ts';
import { DEFAULT_REPLY_TIMEOUTS, type ReplyTimeouts } from './reply-watchdog.ts';
import { runTurn } from './run-turn.ts';
import { NO_BACKEND_MESSAGE, type ImageBackendStatus, type ImageGenerator } from './generation.ts';
import { DEFAULT_SETTINGS, settingsPatchSchema, type Settings } from './settings.ts';
import { typedText } from './text.ts';

export type ServiceErrorCode = 'not_found' | 'busy' | 'invalid' | 'unavailable';

export interface ServiceError {
  code: ServiceErrorCode;
  message: string;
  /** Field → message, for 'invalid'. */
  fields?: Record<string, string>;
}

export type Result<T> = { ok: true; value: T } | { ok: false; error: ServiceError };

export interface ConversationView {
  id: string;
  prompt: string;
  settings: Settings;
  turns: TranscriptTurn[];
  images: ImageRecord[];
}

export interface Health {
  ollama: ModelHealth;
  images: ImageBackendStatus;
}

export interface GenerateOverrides {
  prompt?: unknown;
  settings?: unknown;
}

export interface EaselService {
  checkHealth(signal?: AbortSignal): Promise<Health>;
  createConversation(): ConversationView;
  getConversation(id: string): ConversationView | undefined;
  setPrompt(id: string, prompt: unknown): Result<string>;
  setSettings(id: string, patch: unknown): Result<Settings>;
  /**
   * Starts a turn at once, as a task of its own: it runs, stores its outcome and frees the conversation
   * whether or not anyone reads the returned events. Aborting `signal` (the client hung up) or stop()
   * ends it. A second call while a reply runs is 'busy'; after stop() it is accepted at once and
   * begins once the stopped turn is stored.
   */
  sendMessage(id: string, text: unknown, signal: AbortSignal): Result<AsyncIterable<TurnEvent>>;
  /**
   * Makes an image from the conversation's prompt and settings, with optional overrides (the Generate
   * button, POST …/generations). Runs beside a chat reply; images queue one at a time per backend.
   */
  generate(id: string, overrides: GenerateOverrides, signal: AbortSignal): Result<AsyncIterable<TurnEvent>>;
  /**
   * Aborts the running reply (and the request to Ollama) and any image being made. False when nothing ran.
   * The conversation takes a new message at once; the stopped turn is stored before it.
   */
  stop(id: string): boolean;
  /**
   * Cancels the images being made for this conversation (Generate's and a reply's automatic one),
   * interrupting the backend; a reply still being written goes on. False when no image was being made.
   */
  cancelImages(id: string): boolean;
  /** True while a turn's task runs (until its outcome is stored), a stopped one included. */
  isBusy(id: string): boolean;
  /**
   * For process shutdown: aborts every running reply and image (so image backends are interrupted: they
   * keep working after a disconnect) and waits, at most SHUTDOWN_WAIT_MS, until their work has settled.
   */
  shutdown(): Promise<void>;
}

/** How long shutdown() waits for aborted work to settle: a stream whose client stopped reading may never finish. */
export const SHUTDOWN_WAIT_MS = 3_000;

export const MAX_MESSAGE_CHARS = 8000;

const messageSchema = typedText(z.string({ error: 'text must be a string' }), 'The message')
  .trim()
  .min(1, 'Type a message first: it is empty.')
  .max(MAX_MESSAGE_CHARS, `A message can hold at most ${MAX_MESSAGE_CHARS} characters; shorten it.`);

const promptSchema = typedText(z.string({ error: 'prompt must be a string' }), 'The prompt').max(LIMITS.promptMaxChars, `A prompt can hold at most ${LIMITS.promptMaxChars} characters.`);

export interface ServiceDeps {
  store: ConversationStore;
  llm: ChatModel;
  logger: Logger;
  clock: { now(): number };
  numCtx: number;
  newId?: () => string;
  images: ImageGenerator;
  /** Limits on a silent model, and when to say what it is waiting for. Default DEFAULT_REPLY_TIMEOUTS. */
  replyTimeouts?: ReplyTimeouts;
}

/** One turn running as its own task. */
interface TurnTask {
  controller: AbortController;
  /** Settles once the outcome is stored and the task is over; never rejects. */
  settled: Promise<void>;
}

export function createEaselService(deps: ServiceDeps): EaselService {
  // The latest turn task per conversation, removed (only by itself) once it settled. Awaiting each
  // entry's `settled` awaits every turn: a newer task settles only after the one before it.
  const running = new Map<string, TurnTask>();
  const replyTimeouts = deps.replyTimeouts ?? DEFAULT_REPLY_TIMEOUTS;
  // The controllers of the images being made, per conversation: what cancelImages aborts.
  const generating = new Map<string, Set<AbortController>>();
  // Generate's streams still open (they end with their own `done`): shutdown lets them write it.
  const openImageStreams = new Set<Promise<void>>();
  function trackImage(id: string, controller: AbortController): () => void {
    const set = generating.get(id) ?? new Set<AbortController>();
    set.add(controller);
    generating.set(id, set);
    return () => {
      set.delete(controller);
      if (set.size === 0) generating.delete(id);
    };
  }
  const newId = deps.newId ?? randomUUID;
  const isoNow = () => new Date(deps.clock.now()).toISOString();

  function view(record: ConversationRecord): ConversationView {
    const turns = deps.store.listTurns(record.id);
    return {
      id: record.id,
      prompt: record.prompt,
      settings: record.settings,
      turns,
      images: deps.store.listImages(record.id),
    };
  }

  function notFound(id: string): { ok: false; error: ServiceError } {
    return { ok: false, error: { code: 'not_found', message: `There is no conversation ${JSON.stringify(id)}. Start a new one.` } };
  }

  /**
   * The turn's work, pushed into `buffer`. It waits for the previous (stopped) turn to be stored first,
   * so an old turn never writes after a new one began.
   */
  async function runTask(record: ConversationRecord, text: string, controller: AbortController, buffer: EventBuffer<TurnEvent>, previous: Promise<void> | undefined): Promise<void> {
    await previous;
    try {
      for await (const event of turnEvents(record, text, controller)) buffer.push(event);
    } catch (error) {
      deps.logger.error('turn failed unexpectedly', { conversationId: record.id, error });
      buffer.push({ type: 'error', code: 'internal_error', message: 'Something went wrong inside Easel while answering; the details are in the server log. Press Retry.' });
      buffer.push({ type: 'done', attempts: 0, repairs: [], level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null });
    }
  }

  async function* turnEvents(record: ConversationRecord, text: string, controller: AbortController): AsyncGenerator<TurnEvent> {
    const { conversation } = deps.store.beginTurn(record.id, { role: 'user', text }, isoNow());
    const note = formatUserNote({
      ...(conversation.pending.promptEdited ? { editedPrompt: conversation.prompt } : {}),
      ...(conversation.pending.settingsChanged ? { settings: conversation.settings } : {}),
    });
    const turn = runTurn(
      { llm: deps.llm, logger: deps.logger, now: deps.clock.now, numCtx: deps.numCtx, conversationId: record.id, timeouts: replyTimeouts },
      {
        context: conversation.context,
        userText: text,
        note,
        prompt: conversation.prompt,
        settings: conversation.settings,
        signal: controller.signal,
      },
    );
    let step = await turn.next();
    while (!step.done) {
      yield step.value;
      step = await turn.next();
    }
    const outcome = step.value;
    const metadata = outcome.metadata;
    const settings = metadata ? applyMetadata(conversation.settings, metadata) : undefined;
    const stored = deps.store.finishTurn(
      record.id,
      {
        turn: outcome.turn,
        context: outcome.context,
        ...(metadata && metadata.prompt !== '' ? { prompt: metadata.prompt } : {}),
        ...(settings ? { settings } : {}),
      },
      isoNow(),
    );
    const latest = deps.store.getConversation(record.id) ?? conversation;
    if (metadata && shouldAutoGenerate(metadata, latest.settings) && deps.images.configured && !controller.signal.aborted) {
      // The reply is written; from here the turn's work is the image, so cancelImages may abort it.
      const untrack = trackImage(record.id, controller);
      try {
        yield* deps.images.generate({
          conversationId: record.id,
          turnId: stored.id,
          prompt: latest.prompt,
          settings: latest.settings,
          signal: controller.signal,
        });
      } finally {
        untrack();
      }
    }
    yield outcome.done;
  }

  return {
    async checkHealth(signal) {
      const [ollama, images] = await Promise.all([deps.llm.checkHealth(signal), deps.images.checkHealth(signal)]);
      return { ollama, images };
    },

    createConversation() {
      const record = deps.store.createConversation({ id: newId(), createdAt: isoNow(), settings: DEFAULT_SETTINGS });
      return view(record);
    },

    getConversation(id) {
      const record = deps.store.getConversation(id);
      return record ? view(record) : undefined;
    },

    setPrompt(id, prompt) {
      if (!deps.store.getConversation(id)) return notFound(id);
      const parsed = promptSchema.safeParse(prompt);
      if (!parsed.success) return invalid(parsed.error, 'prompt');
      deps.store.setPrompt(id, parsed.data, isoNow());
      return { ok: true, value: parsed.data };
    },

    setSettings(id, patch) {
      const record = deps.store.getConversation(id);
      if (!record) return notFound(id);
      const parsed = settingsPatchSchema.safeParse(patch);
      if (!parsed.success) return invalid(parsed.error);
      const settings = { ...record.settings, ...parsed.data };
      deps.store.setSettings(id, settings, isoNow());
      return { ok: true, value: settings };
    },

    sendMessage(id, text, signal) {
      const record = deps.store.getConversation(id);
      if (!record) return notFound(id);
      const parsed = messageSchema.safeParse(text);
      if (!parsed.success) return invalid(parsed.error, 'text');
      const current = running.get(id);
      // A stopped turn only has its outcome left to store: the next message queues behind it.
      if (current && !current.controller.signal.aborted) {
        return {
          ok: false,
          error: { code: 'busy', message: 'A reply is still being written in this conversation. Wait for it or press Stop.' },
        };
      }
      const controller = new AbortController();
      const onAbort = () => controller.abort(signal.reason);
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      // A reader that stops early will read nothing more: the turn need not go on.
      const buffer = createEventBuffer<TurnEvent>(() => controller.abort(new Error('the event stream was closed')));
      const task: TurnTask = { controller, settled: Promise.resolve() };
      task.settled = runTask(record, parsed.data, controller, buffer, current?.settled).finally(() => {
        signal.removeEventListener('abort', onAbort);
        // Only this task's own entry: a newer turn's must survive an older one finishing.
        if (running.get(id) === task) running.delete(id);
        buffer.close();
      });
      running.set(id, task);
      return { ok: true, value: buffer };
    },

    generate(id, overrides, signal) {
      const record = deps.store.getConversation(id);
      if (!record) return notFound(id);
      if (!deps.images.configured) return { ok: false, error: { code: 'unavailable', message: NO_BACKEND_MESSAGE } };
      const prompt = overrides.prompt === undefined ? { success: true as const, data: record.prompt } : promptSchema.safeParse(overrides.prompt);
      if (!prompt.success) return invalid(prompt.error, 'prompt');
      const patch = overrides.settings === undefined ? { success: true as const, data: {} } : settingsPatchSchema.safeParse(overrides.settings);
      if (!patch.success) return invalid(patch.error);
      if (prompt.data.trim() === '') {
        return { ok: false, error: { code: 'invalid', message: 'The prompt is empty: write one or chat until the assistant suggests one.', fields: { prompt: 'The prompt is empty.' } } };
      }
      const controller = new AbortController();
      signal.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
      const untrack = trackImage(id, controller);
      const settings = { ...record.settings, ...patch.data };
      let finish!: () => void;
      const finished = new Promise<void>((resolve) => (finish = resolve));
      openImageStreams.add(finished);
      async function* stream(): AsyncGenerator<TurnEvent> {
        try {
          yield* deps.images.generate({ conversationId: id, turnId: null, prompt: prompt.data as string, settings, signal: controller.signal });
          yield { type: 'done', attempts: 0, repairs: [], level: 'clean', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null };
        } finally {
          untrack();
          openImageStreams.delete(finished);
          finish();
        }
      }
      const events = stream();
      return { ok: true, value: { [Symbol.asyncIterator]: () => events } };
    },

    stop(id) {
      const controllers = new Set([running.get(id)?.controller, ...(generating.get(id) ?? [])].filter((c): c is AbortController => c !== undefined));
      for (const controller of controllers) controller.abort(new Error('stopped by the user'));
      return controllers.size > 0;
    },

    cancelImages(id) {
      const controllers = generating.get(id);
      if (!controllers) return false;
      for (const controller of controllers) controller.abort(new Error('image cancelled by the user'));
      return true;
    },

    isBusy(id) {
      return running.has(id);
    },

    async shutdown() {
      const turns = [...running.values()];
      const images = [...generating.values()].flatMap((set) => [...set]);
      for (const controller of [...turns.map((turn) => turn.controller), ...images]) controller.abort(new Error('Easel is shutting down'));
      // Every turn's task stores its outcome; the image queue settles once each backend job (and interrupt) has.
      const settled = Promise.all([...turns.map((turn) => turn.settled), ...openImageStreams, deps.images.settled()]);
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_WAIT_MS)));
      await Promise.race([settled, deadline]);
      clearTimeout(timer);
    },
  };
}

function shouldAutoGenerate(metadata: Metadata, settings: Settings): boolean {
  return metadata.generate_image && metadata.prompt.trim() !== '' && settings.autoGenerate;
}

/** The model's suggested values become the conversation's settings; other settings stay as the user set them. */
function applyMetadata(settings: Settings, metadata: Metadata): Settings {
  return {
    ...settings,
    steps: metadata.steps,
    cfg: metadata.cfg,
    seed: metadata.seed,
    ...(metadata.negative_prompt ? { negativePrompt: metadata.negative_prompt } : {}),
  };
}

function invalid(error: z.ZodError, field?: string): { ok: false; error: ServiceError } {
  const fields: Record<string, string> = {};
  for (const issue of error.issues) {
    const key = issue.path.length > 0 ? issue.path.join('.') : (field ?? 'body');
    if (issue.code === 'unrecognized_keys') {
      for (const name of issue.keys) fields[name] = `${name} is not a setting Easel knows.`;
      continue;
    }
    fields[key] ??= issue.message;
  }
  const message = Object.entries(fields)
    .map(([key, text]) => (text.startsWith(key) ? text : `${key}: ${text}`))
    .join(' ');
  return { ok: false, error: { code: 'invalid', message, fields } };
}
