import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { formatUserNote, LIMITS, type ContextEntry, type Metadata } from '../protocol/index.ts';
import {
  buildArchiveFiles,
  IMPORT_LIMITS,
  MAX_IMPORT_BYTES,
  nameArchive,
  readArchiveFiles,
  type ArchiveCodec,
  type ImageFiles,
} from './archive.ts';
import { describeContextChange, dropTrailingReplies, rewindToBefore } from './context-change.ts';
import type { ConversationListing, ConversationRecord, ConversationStore, ImageRecord, TranscriptTurn } from './conversation.ts';
import { isStorageError } from './errors.ts';
import { createEventBuffer, type EventBuffer } from './event-buffer.ts';
import type { DoneEvent, TurnEvent } from './events.ts';
import { describeConversation, describeStorageFailure, MAX_TITLE_CHARS, type ConversationSummary, type StorageAction } from './library.ts';
import type { Logger } from './logger.ts';
import type { ChatModel, ModelHealth } from './ports.ts';
import { createReplySaver } from './reply-saver.ts';
import { DEFAULT_REPLY_TIMEOUTS, type ReplyTimeouts } from './reply-watchdog.ts';
import { appendUserEntry, runTurn, type TurnOutcome } from './run-turn.ts';
import { NO_BACKEND_MESSAGE, type ImageBackendStatus, type ImageGenerator } from './generation.ts';
import { DEFAULT_SETTINGS, settingsPatchSchema, type Settings } from './settings.ts';
import { typedText } from './text.ts';

export type ServiceErrorCode = 'not_found' | 'busy' | 'invalid' | 'unavailable' | 'storage' | 'bad_archive' | 'too_large';

export interface ServiceError {
  code: ServiceErrorCode;
  message: string;
  /** Field → message, for 'invalid'. */
  fields?: Record<string, string>;
}

export type Result<T> = { ok: true; value: T } | { ok: false; error: ServiceError };

export interface ConversationView extends ConversationSummary {
  prompt: string;
  settings: Settings;
  /** The transcript; a reply left `running` by a process that is gone shows as `interrupted`. */
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

export interface SendOptions {
  /**
   * The conversation does not exist yet: this message creates it, with this id (a UUID), in the same
   * transaction that stores the message. The page's empty "new conversation" page sends this.
   */
  create?: boolean;
  /** Edit: this message replaces the last user message and the reply after it (both kept, marked `replaced`). */
  replaceLast?: boolean;
  /** The prompt on screen: saved first when it differs from the stored one (the model hears of it in this turn). */
  prompt?: unknown;
  /** Settings on screen (a patch): saved first when they differ from the stored ones. */
  settings?: unknown;
}

export interface EaselService {
  checkHealth(signal?: AbortSignal): Promise<Health>;
  /** An empty conversation (POST /api/conversations). The page never creates one before its first message. */
  createConversation(): Result<ConversationView>;
  getConversation(id: string): ConversationView | undefined;
  getSummary(id: string): ConversationSummary | undefined;
  /** Newest activity first; `query` finds conversations holding every word (messages, titles, prompts). */
  listConversations(query?: string): ConversationSummary[];
  /** An empty title gives the conversation back its title from the first message. */
  renameConversation(id: string, title: unknown): Result<ConversationSummary>;
  /** Stops its reply or image first; removes every record of it and its image files. */
  deleteConversation(id: string): Promise<Result<void>>;
  exportConversation(id: string): Promise<Result<{ fileName: string; bytes: Uint8Array }>>;
  /** A zip made by exportConversation, stored as a new conversation (new id, new image names). */
  importConversation(bytes: Uint8Array): Promise<Result<{ id: string }>>;
  setPrompt(id: string, prompt: unknown): Result<string>;
  setSettings(id: string, patch: unknown): Result<Settings>;
  /**
   * Starts a turn at once, as a task of its own: it runs, stores its outcome and frees the conversation
   * whether or not anyone reads the returned events. Aborting `signal` (the client hung up) or stop()
   * ends it. A second call while a reply runs is 'busy'; after stop() it is accepted at once and
   * begins once the stopped turn is stored.
   */
  sendMessage(id: string, text: unknown, signal: AbortSignal, options?: SendOptions): Result<AsyncIterable<TurnEvent>>;
  /** Asks the model again for the last user message; the last reply is kept in the transcript as `replaced`. */
  regenerate(id: string, signal: AbortSignal): Result<AsyncIterable<TurnEvent>>;
  /**
   * Makes an image from the conversation's prompt and settings, with optional overrides (the Generate
   * button, POST …/generations). Runs beside a chat reply; images queue one at a time per backend.
   * With `create` (the page's empty page) the conversation is made first, with the overrides as its prompt and settings.
   */
  generate(id: string, overrides: GenerateOverrides, signal: AbortSignal, options?: { create?: boolean }): Result<AsyncIterable<TurnEvent>>;
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

/** How often the text of a streaming reply is saved: a crash loses at most this much of it. */
export const REPLY_SAVE_INTERVAL_MS = 1000;

const messageSchema = typedText(z.string({ error: 'text must be a string' }), 'The message')
  .trim()
  .min(1, 'Type a message first: it is empty.')
  .max(MAX_MESSAGE_CHARS, `A message can hold at most ${MAX_MESSAGE_CHARS} characters; shorten it.`);

const promptSchema = typedText(z.string({ error: 'prompt must be a string' }), 'The prompt').max(LIMITS.promptMaxChars, `A prompt can hold at most ${LIMITS.promptMaxChars} characters.`);

const titleSchema = typedText(z.string({ error: 'title must be a string' }), 'The title')
  .trim()
  .max(MAX_TITLE_CHARS, `A title can hold at most ${MAX_TITLE_CHARS} characters.`)
  .refine((title) => !title.includes('\n'), 'A title is one line.');

const CONVERSATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A conversation id as Easel makes them (a random UUID): the only kind a first message may create. */
export function isConversationId(value: string): boolean {
  return CONVERSATION_ID.test(value);
}

export interface ServiceDeps {
  store: ConversationStore;
  llm: ChatModel;
  logger: Logger;
  clock: { now(): number };
  numCtx: number;
  newId?: () => string;
  images: ImageGenerator;
  /** The PNG files of the images folder: deleted with their conversation, read by export, written by import. */
  imageFiles: ImageFiles;
  /** The zip format of export and import. */
  archive: ArchiveCodec;
  /** Limits on a silent model, and when to say what it is waiting for. Default DEFAULT_REPLY_TIMEOUTS. */
  replyTimeouts?: ReplyTimeouts;
  /** Default REPLY_SAVE_INTERVAL_MS; tests shorten it. */
  replySaveIntervalMs?: number;
}

/** One turn running as its own task. */
interface TurnTask {
  controller: AbortController;
  /** Settles once the outcome is stored and the task is over; never rejects. */
  settled: Promise<void>;
}

/** What a turn does, decided when it is asked for. */
interface TurnPlan {
  kind: 'send' | 'edit' | 'regenerate';
  /** The user's message (for Regenerate: the last one, asked again). */
  text: string;
  /** Edit: the text of the message it replaces (found in the working context to rewind it). */
  replacedText?: string;
  /** Turns marked `replaced` in the transaction that starts this one. */
  replaces: number[];
  /** The conversation is created by this message, with these. */
  create?: { prompt: string; settings: Settings };
}

const FAILED_DONE: DoneEvent = { type: 'done', attempts: 0, repairs: [], level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null };

export function createEaselService(deps: ServiceDeps): EaselService {
  // The latest turn task per conversation, removed (only by itself) once it settled. Awaiting each
  // entry's `settled` awaits every turn: a newer task settles only after the one before it.
  const running = new Map<string, TurnTask>();
  const replyTimeouts = deps.replyTimeouts ?? DEFAULT_REPLY_TIMEOUTS;
  // The controllers of the images being made, per conversation: what cancelImages aborts.
  const generating = new Map<string, Set<AbortController>>();
  // Generate's streams still open (they end with their own `done`): shutdown lets them write it.
  const openImageStreams = new Set<Promise<void>>();
  // Conversations being deleted: nothing new may start in them.
  const deleting = new Set<string>();
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

  function summarize(record: ConversationRecord, turns: readonly TranscriptTurn[]): ConversationSummary {
    const shown = turns.filter((turn) => turn.status !== 'replaced');
    const listing: ConversationListing = {
      id: record.id,
      title: record.title,
      firstMessage: shown.find((turn) => turn.role === 'user')?.text ?? null,
      lastMessage: shown.findLast((turn) => turn.text !== '')?.text ?? null,
      prompt: record.prompt,
      createdAt: record.createdAt,
      updatedAt: record.updatedAt,
    };
    return describeConversation(listing);
  }

  function view(record: ConversationRecord): ConversationView {
    const busy = running.has(record.id);
    // A reply still `running` in the store but not here was left by a turn that could not finish.
    const turns = deps.store
      .listTurns(record.id)
      .map((turn) => (turn.status === 'running' && !busy ? { ...turn, status: 'interrupted' as const } : turn));
    return {
      ...summarize(record, turns),
      prompt: record.prompt,
      settings: record.settings,
      turns,
      images: deps.store.listImages(record.id),
    };
  }

  function findRecord(id: string): ConversationRecord | undefined {
    return deleting.has(id) ? undefined : deps.store.getConversation(id);
  }

  function notFound(id: string): { ok: false; error: ServiceError } {
    return { ok: false, error: { code: 'not_found', message: `There is no conversation ${JSON.stringify(id)}. Start a new one.` } };
  }

  function busy(): { ok: false; error: ServiceError } {
    return { ok: false, error: { code: 'busy', message: 'A reply is still being written in this conversation. Wait for it or press Stop.' } };
  }

  /** Runs a write; a store failure becomes a result saying what happened and what to do. */
  function tryWrite<T>(action: StorageAction, work: () => T): Result<T> {
    try {
      return { ok: true, value: work() };
    } catch (error) {
      if (!isStorageError(error)) throw error;
      deps.logger.error('a write to the conversation store failed', { action, error });
      return { ok: false, error: { code: 'storage', message: describeStorageFailure(error, action).message } };
    }
  }

  /**
   * The turn's work, pushed into `buffer`. It waits for the previous (stopped) turn to be stored first,
   * so an old turn never writes after a new one began.
   */
  async function runTask(id: string, plan: TurnPlan, controller: AbortController, buffer: EventBuffer<TurnEvent>, previous: Promise<void> | undefined): Promise<void> {
    await previous;
    try {
      for await (const event of turnEvents(id, plan, controller)) buffer.push(event);
    } catch (error) {
      deps.logger.error('turn failed unexpectedly', { conversationId: id, error });
      buffer.push({ type: 'error', code: 'internal_error', message: 'Something went wrong inside Easel while answering; the details are in the server log. Press Retry.' });
      buffer.push(FAILED_DONE);
    }
  }

  async function* turnEvents(id: string, plan: TurnPlan, controller: AbortController): AsyncGenerator<TurnEvent> {
    const record = findRecord(id);
    if (!record && !plan.create) {
      yield { type: 'error', code: 'not_found', message: 'This conversation was deleted; your message was not sent. Start a new conversation.' };
      yield FAILED_DONE;
      return;
    }
    const base = record ?? {
      prompt: plan.create?.prompt ?? '',
      settings: plan.create?.settings ?? DEFAULT_SETTINGS,
      // What the user set on the empty page, the model hears with the first message.
      pending: { promptEdited: (plan.create?.prompt ?? '') !== '', settingsChanged: !sameSettings(plan.create?.settings ?? DEFAULT_SETTINGS, DEFAULT_SETTINGS) },
    };
    // From here until beginTurn nothing awaits: the context read and the transaction see the same state.
    const stored = record ? deps.store.readContext(id) : [];
    let prior: ContextEntry[];
    let carriedNote: string | undefined;
    if (plan.kind === 'edit') ({ context: prior, note: carriedNote } = rewindToBefore(stored, plan.replacedText ?? ''));
    else if (plan.kind === 'regenerate') prior = dropTrailingReplies(stored);
    else prior = stored.slice();
    const pendingNote = formatUserNote({
      ...(base.pending.promptEdited ? { editedPrompt: base.prompt } : {}),
      ...(base.pending.settingsChanged ? { settings: base.settings } : {}),
    });
    const note = [carriedNote, pendingNote].filter(Boolean).join('\n') || undefined;
    const turnContext = appendUserEntry(prior, { kind: 'user', text: plan.text, ...(note ? { note } : {}) });
    let started: { userTurnId: number | null; turnId: number };
    try {
      started = deps.store.beginTurn(
        id,
        {
          ...(plan.create ? { create: { createdAt: isoNow(), ...plan.create } } : {}),
          ...(plan.kind === 'regenerate' ? {} : { user: { text: plan.text } }),
          replaces: plan.replaces,
          context: describeContextChange(stored, turnContext),
        },
        isoNow(),
      );
    } catch (error) {
      if (!isStorageError(error)) throw error;
      deps.logger.error('the message could not be stored; nothing was sent to the model', { conversationId: id, error });
      yield { type: 'error', ...describeStorageFailure(error, plan.kind === 'regenerate' ? 'change' : 'message') };
      yield FAILED_DONE;
      return;
    }
    yield { type: 'started', conversationId: id, turnId: started.turnId, userTurnId: started.userTurnId };

    const saver = createReplySaver({
      save: (text) => deps.store.saveReplyText(started.turnId, text),
      onError: (error) => deps.logger.warn('the reply could not be saved while streaming', { conversationId: id, error }),
      intervalMs: deps.replySaveIntervalMs ?? REPLY_SAVE_INTERVAL_MS,
      now: deps.clock.now,
    });
    const turn = runTurn(
      { llm: deps.llm, logger: deps.logger, now: deps.clock.now, numCtx: deps.numCtx, conversationId: id, timeouts: replyTimeouts },
      { context: prior, userText: plan.text, note, prompt: base.prompt, settings: base.settings, signal: controller.signal },
    );
    let shown = '';
    let outcome: TurnOutcome;
    try {
      let step = await turn.next();
      while (!step.done) {
        const event = step.value;
        // The shown text, as the page and API show it: saved as it streams.
        if (event.type === 'delta') shown += event.text;
        else if (event.type === 'retry') shown = '';
        else if (event.type === 'reset') shown = event.message;
        if (event.type === 'delta' || event.type === 'retry' || event.type === 'reset') saver.update(shown);
        yield event;
        step = await turn.next();
      }
      outcome = step.value;
    } finally {
      saver.stop();
    }
    const metadata = outcome.metadata;
    const settings = metadata ? applyMetadata(base.settings, metadata) : undefined;
    let stored_: TranscriptTurn;
    try {
      stored_ = deps.store.finishTurn(
        id,
        {
          turnId: started.turnId,
          turn: outcome.turn,
          context: describeContextChange(turnContext, outcome.context),
          ...(metadata && metadata.prompt !== '' ? { prompt: metadata.prompt } : {}),
          ...(settings ? { settings } : {}),
        },
        isoNow(),
      );
    } catch (error) {
      if (!isStorageError(error)) throw error;
      deps.logger.error('the reply could not be stored', { conversationId: id, error });
      yield { type: 'error', ...describeStorageFailure(error, 'reply') };
      yield { ...outcome.done, level: 'error' };
      return;
    }
    const latest = deps.store.getConversation(id);
    if (latest && metadata && shouldAutoGenerate(metadata, latest.settings) && deps.images.configured && !controller.signal.aborted) {
      // The reply is written; from here the turn's work is the image, so cancelImages may abort it.
      const untrack = trackImage(id, controller);
      try {
        yield* deps.images.generate({
          conversationId: id,
          turnId: stored_.id,
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

  /** Starts the task of a planned turn; the caller checked that the conversation may take it. */
  function startTurn(id: string, plan: TurnPlan, signal: AbortSignal): AsyncIterable<TurnEvent> {
    const current = running.get(id);
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    // A reader that stops early will read nothing more: the turn need not go on.
    const buffer = createEventBuffer<TurnEvent>(() => controller.abort(new Error('the event stream was closed')));
    const task: TurnTask = { controller, settled: Promise.resolve() };
    task.settled = runTask(id, plan, controller, buffer, current?.settled).finally(() => {
      signal.removeEventListener('abort', onAbort);
      // Only this task's own entry: a newer turn's must survive an older one finishing.
      if (running.get(id) === task) running.delete(id);
      buffer.close();
    });
    running.set(id, task);
    return buffer;
  }

  /** A stopped turn only has its outcome left to store: a plain message queues behind it. */
  function isReplying(id: string): boolean {
    const current = running.get(id);
    return current !== undefined && !current.controller.signal.aborted;
  }

  const service: EaselService = {
    async checkHealth(signal) {
      const [ollama, images] = await Promise.all([deps.llm.checkHealth(signal), deps.images.checkHealth(signal)]);
      return { ollama, images };
    },

    createConversation() {
      const created = tryWrite('change', () => deps.store.createConversation({ id: newId(), createdAt: isoNow(), settings: DEFAULT_SETTINGS }));
      return created.ok ? { ok: true, value: view(created.value) } : created;
    },

    getConversation(id) {
      const record = findRecord(id);
      return record ? view(record) : undefined;
    },

    getSummary(id) {
      const record = findRecord(id);
      return record ? summarize(record, deps.store.listTurns(record.id)) : undefined;
    },

    listConversations(query) {
      return deps.store
        .listConversations(query === undefined ? {} : { query })
        .filter((listing) => !deleting.has(listing.id))
        .map(describeConversation);
    },

    renameConversation(id, title) {
      if (!findRecord(id)) return notFound(id);
      const parsed = titleSchema.safeParse(title);
      if (!parsed.success) return invalid(parsed.error, 'title');
      const renamed = tryWrite('change', () => deps.store.renameConversation(id, parsed.data === '' ? null : parsed.data));
      if (!renamed.ok) return renamed;
      const summary = service.getSummary(id);
      return summary ? { ok: true, value: summary } : notFound(id);
    },

    async deleteConversation(id) {
      if (!findRecord(id)) return notFound(id);
      deleting.add(id);
      try {
        // Its reply and images stop first, so nothing writes into a conversation that is gone.
        service.stop(id);
        await running.get(id)?.settled;
        const deleted = tryWrite('delete', () => deps.store.deleteConversation(id));
        if (!deleted.ok) return deleted;
        if (!deleted.value) return notFound(id);
        // The records are gone first: a file left behind by a crash here is only unused, never missing.
        for (const file of deleted.value.files) {
          await deps.imageFiles.remove(file).catch((error: unknown) => deps.logger.warn('an image file of a deleted conversation could not be removed', { file, error }));
        }
        return { ok: true, value: undefined };
      } finally {
        deleting.delete(id);
      }
    },

    async exportConversation(id) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      const conversation = view(record);
      const exportedAt = isoNow();
      const files = await buildArchiveFiles(
        { ...conversation, title: record.title, context: deps.store.readContext(id) },
        {
          exportedAt,
          readImage: (file) =>
            deps.imageFiles.read(file).catch((error: unknown) => {
              deps.logger.warn('an image file is missing and was left out of the export', { conversationId: id, file, error });
              return undefined;
            }),
        },
      );
      return { ok: true, value: { fileName: nameArchive(conversation.title, exportedAt), bytes: deps.archive.pack(files) } };
    },

    async importConversation(bytes) {
      if (bytes.byteLength > MAX_IMPORT_BYTES) return { ok: false, error: { code: 'too_large', message: tooLargeMessage(bytes.byteLength) } };
      const unpacked = deps.archive.unpack(bytes, IMPORT_LIMITS);
      if (!unpacked.ok) {
        const code = unpacked.error.code === 'malformed' ? 'bad_archive' : unpacked.error.code === 'too_large' ? 'too_large' : 'invalid';
        return { ok: false, error: { code, message: unpacked.error.message } };
      }
      const id = newId();
      const read = await readArchiveFiles(unpacked.files, { conversationId: id, newImageId: () => randomBytes(16).toString('hex') });
      if (!read.ok) return { ok: false, error: { code: 'invalid', message: read.error.message } };
      const written: string[] = [];
      const removeWritten = async () => {
        for (const name of written) await deps.imageFiles.remove(name).catch(() => undefined);
      };
      try {
        for (const file of read.value.files) {
          await deps.imageFiles.save(file.name, file.bytes);
          written.push(file.name);
        }
      } catch (error) {
        await removeWritten();
        deps.logger.error('an imported image could not be written', { error });
        const code = (error as NodeJS.ErrnoException).code;
        const message =
          code === 'ENOSPC' || code === 'EDQUOT'
            ? `Nothing was imported: the disk holding the images folder is full (${code}). Free some disk space, then import the file again.`
            : `Nothing was imported: an image could not be written to the images folder${code ? ` (${code})` : ''}. Check that Easel may write to its data folder (--data-dir), then import the file again.`;
        return { ok: false, error: { code: 'storage', message } };
      }
      const stored = tryWrite('import', () => deps.store.importConversation(read.value.conversation));
      if (!stored.ok) {
        await removeWritten();
        return stored;
      }
      return { ok: true, value: { id } };
    },

    setPrompt(id, prompt) {
      if (!findRecord(id)) return notFound(id);
      const parsed = promptSchema.safeParse(prompt);
      if (!parsed.success) return invalid(parsed.error, 'prompt');
      const saved = tryWrite('change', () => deps.store.setPrompt(id, parsed.data, isoNow()));
      return saved.ok ? { ok: true, value: parsed.data } : saved;
    },

    setSettings(id, patch) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      const parsed = settingsPatchSchema.safeParse(patch);
      if (!parsed.success) return invalid(parsed.error);
      const settings = { ...record.settings, ...parsed.data };
      const saved = tryWrite('change', () => deps.store.setSettings(id, settings, isoNow()));
      return saved.ok ? { ok: true, value: settings } : saved;
    },

    sendMessage(id, text, signal, options = {}) {
      const record = findRecord(id);
      const creating = !record && options.create === true;
      if (!record && !creating) return notFound(id);
      if (creating && (!isConversationId(id) || deleting.has(id))) {
        return { ok: false, error: { code: 'invalid', message: 'This new conversation has no valid id: reload the page and send again.' } };
      }
      const parsed = messageSchema.safeParse(text);
      if (!parsed.success) return invalid(parsed.error, 'text');
      const prompt = options.prompt === undefined ? undefined : promptSchema.safeParse(options.prompt);
      if (prompt && !prompt.success) return invalid(prompt.error, 'prompt');
      const patch = options.settings === undefined ? undefined : settingsPatchSchema.safeParse(options.settings);
      if (patch && !patch.success) return invalid(patch.error);
      if (options.replaceLast ? running.has(id) : isReplying(id)) return busy();

      const plan: TurnPlan = { kind: 'send', text: parsed.data, replaces: [] };
      if (creating) {
        plan.create = { prompt: prompt?.data ?? '', settings: { ...DEFAULT_SETTINGS, ...patch?.data } };
      } else if (record) {
        // What is on screen and not saved yet is saved first, so the model hears of it in this turn.
        if (prompt && prompt.data !== record.prompt) {
          const saved = tryWrite('message', () => deps.store.setPrompt(id, prompt.data, isoNow()));
          if (!saved.ok) return saved;
        }
        const settings = { ...record.settings, ...patch?.data };
        if (patch && !sameSettings(settings, record.settings)) {
          const saved = tryWrite('message', () => deps.store.setSettings(id, settings, isoNow()));
          if (!saved.ok) return saved;
        }
      }
      if (options.replaceLast) {
        const last = record ? deps.store.listLastExchange(id) : [];
        const user = last[0];
        if (!user || user.role !== 'user') {
          return { ok: false, error: { code: 'invalid', message: 'There is no message to edit yet: send one first.' } };
        }
        plan.kind = 'edit';
        plan.replacedText = user.text;
        plan.replaces = last.map((turn) => turn.id);
      }
      return { ok: true, value: startTurn(id, plan, signal) };
    },

    regenerate(id, signal) {
      if (!findRecord(id)) return notFound(id);
      if (running.has(id)) return busy();
      const last = deps.store.listLastExchange(id);
      const user = last[0];
      if (!user || user.role !== 'user') {
        return { ok: false, error: { code: 'invalid', message: 'There is no reply to regenerate yet: send a message first.' } };
      }
      const plan: TurnPlan = { kind: 'regenerate', text: user.text, replaces: last.slice(1).map((turn) => turn.id) };
      return { ok: true, value: startTurn(id, plan, signal) };
    },

    generate(id, overrides, signal, options = {}) {
      let record = findRecord(id);
      const creating = !record && options.create === true;
      if (!record && !creating) return notFound(id);
      if (creating && !isConversationId(id)) {
        return { ok: false, error: { code: 'invalid', message: 'This new conversation has no valid id: reload the page and try again.' } };
      }
      if (!deps.images.configured) return { ok: false, error: { code: 'unavailable', message: NO_BACKEND_MESSAGE } };
      const base = record ?? { prompt: '', settings: DEFAULT_SETTINGS };
      const prompt = overrides.prompt === undefined ? { success: true as const, data: base.prompt } : promptSchema.safeParse(overrides.prompt);
      if (!prompt.success) return invalid(prompt.error, 'prompt');
      const patch = overrides.settings === undefined ? { success: true as const, data: {} } : settingsPatchSchema.safeParse(overrides.settings);
      if (!patch.success) return invalid(patch.error);
      if (prompt.data.trim() === '') {
        return { ok: false, error: { code: 'invalid', message: 'The prompt is empty: write one or chat until the assistant suggests one.', fields: { prompt: 'The prompt is empty.' } } };
      }
      const settings = { ...base.settings, ...patch.data };
      if (creating) {
        // A first Generate makes the conversation, holding what was on screen.
        const created = tryWrite('change', () => deps.store.createConversation({ id, createdAt: isoNow(), settings, prompt: prompt.data as string }));
        if (!created.ok) return created;
        record = created.value;
      }
      const controller = new AbortController();
      signal.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
      const untrack = trackImage(id, controller);
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
  return service;
}

function tooLargeMessage(bytes: number): string {
  return `The file is ${Math.round(bytes / 1024 / 1024)} MB; Easel imports conversations of at most ${MAX_IMPORT_BYTES / 1024 / 1024} MB.`;
}

function sameSettings(a: Settings, b: Settings): boolean {
  return (Object.keys(a) as Array<keyof Settings>).every((key) => a[key] === b[key]);
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
