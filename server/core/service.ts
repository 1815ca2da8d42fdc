import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { formatUserNote, type ContextEntry } from '../protocol/index.ts';
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
import type { ConversationListing, ConversationRecord, ConversationStore, ImageRecord, StartedTurn, TranscriptTurn } from './conversation.ts';
import { isStorageError, type StorageError } from './errors.ts';
import { createEventBuffer, type EventBuffer } from './event-buffer.ts';
import type { DoneEvent, TurnEvent } from './events.ts';
import { describeConversation, describeStorageFailure, type ConversationSummary, type StorageAction } from './library.ts';
import type { Logger } from './logger.ts';
import type { ChatModel, ModelHealth } from './ports.ts';
import { createReplySaver } from './reply-saver.ts';
import { DEFAULT_REPLY_TIMEOUTS, type ReplyTimeouts } from './reply-watchdog.ts';
import { appendUserEntry, runTurn, type TurnOutcome } from './run-turn.ts';
import { NO_BACKEND_MESSAGE, type ImageBackendStatus, type ImageGenerator } from './generation.ts';
import { createImageActivities, type ImageActivity, type ImageInProgress } from './image-activities.ts';
import {
  applyReplyPane,
  applyUserSettings,
  decideReplyImage,
  decideReplyPane,
  findRedoVersion,
  findUndoVersion,
  isPinnableField,
  pinChangedFrom,
  PINNABLE_FIELDS,
  type PaneState,
  type PaneView,
  type PinnableField,
  type PromptVersion,
} from './pane.ts';
import { DEFAULT_SETTINGS, settingsPatchSchema, type Settings, type SettingsPatch } from './settings.ts';
import { messageSchema, promptSchema, titleSchema } from './text.ts';

export type ServiceErrorCode = 'not_found' | 'busy' | 'conflict' | 'invalid' | 'unavailable' | 'storage' | 'bad_archive' | 'too_large';

export interface ServiceError {
  code: ServiceErrorCode;
  message: string;
  /** Field → message, for 'invalid'. */
  fields?: Record<string, string>;
  /** For 'storage': the documented code (storage_full, storage_read_only, storage_failed). */
  storageCode?: string;
}

export type Result<T> = { ok: true; value: T } | { ok: false; error: ServiceError };

export interface ConversationView extends ConversationSummary {
  prompt: string;
  settings: Settings;
  /** The transcript; a reply left `running` by a process that is gone shows as `interrupted`. */
  turns: TranscriptTurn[];
  images: ImageRecord[];
  /** The prompt pane and the settings as stored, with what undo and redo would do. */
  pane: PaneView;
  /** The images being made now, oldest first. */
  generating: ImageInProgress[];
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
  /** The user's prompt: a new version (none when it is the current text already). */
  setPrompt(id: string, prompt: unknown): Result<PaneView>;
  /**
   * The user's settings: every model-proposed field given (steps, cfg, seed, negativePrompt) is pinned;
   * `unpin: [field…]` lets fields follow the model again (taking its waiting value).
   */
  setSettings(id: string, patch: unknown): Result<Settings>;
  /** The pane as stored, with what undo and redo would do. */
  getPane(id: string): PaneView | undefined;
  /** Every version of the prompt, oldest first. */
  listPromptVersions(id: string): PromptVersion[] | undefined;
  /** Back to the version the current one was changed from ('conflict' when there is none). */
  undoPrompt(id: string): Result<PaneView>;
  /** Forward to the newest version changed from the current one ('conflict' when there is none). */
  redoPrompt(id: string): Result<PaneView>;
  /** "Use suggestion" (true) or "Keep mine" (false) for the model's waiting prompt ('conflict' when none waits). */
  answerSuggestion(id: string, accept: unknown): Result<PaneView>;
  /** Takes the model's waiting value for a pinned setting: set by hand, so it stays pinned. */
  takeSettingSuggestion(id: string, field: unknown): Result<PaneView>;
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
  /** The page's Stop: aborts only the reply being written; images go on (their own Cancel stops them). */
  stopReply(id: string): boolean;
  /**
   * Follows an image being made (or ended within the last minute): its `generation` event and latest
   * `progress`, then its events until `image` or `error`. Following never cancels it.
   */
  followImage(id: string, imageId: string): Result<AsyncIterable<TurnEvent>>;
  /**
   * Cancels the images being made for this conversation (Generate's and a reply's automatic one),
   * interrupting the backend; a reply still being written goes on. False when no image was being made.
   */
  cancelImages(id: string): boolean;
  /** True while a reply is being written (until its outcome is stored), a stopped one included; not for its image. */
  isBusy(id: string): boolean;
  /**
   * For process shutdown: aborts every running reply and image (so image backends are interrupted: they
   * keep working after a disconnect) and waits, at most SHUTDOWN_WAIT_MS (or the shutdownWaitMs given), until their work has settled.
   */
  shutdown(): Promise<void>;
}

/** How long shutdown() waits for aborted work to settle: a stream whose client stopped reading may never finish. */
export const SHUTDOWN_WAIT_MS = 3_000;

/** How often the text of a streaming reply is saved: a crash loses at most this much of it. */
export const REPLY_SAVE_INTERVAL_MS = 1000;

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
  /** How long shutdown() waits for aborted work (default SHUTDOWN_WAIT_MS). */
  shutdownWaitMs?: number;
  /** The most pixels an imported image may have (--max-image-pixels); default checkPngImage's, 8192×8192. */
  maxImagePixels?: number;
}

/** One turn running as its own task. */
interface TurnTask {
  controller: AbortController;
  /** Settles once the outcome is stored and the task is over; never rejects. */
  settled: Promise<void>;
  /** Its `done` was pushed: the reply is over and the conversation takes the next message (its image may run on). */
  replied: boolean;
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
  create?: { prompt: string; settings: Settings; pinned: PinnableField[] };
}

const FAILED_DONE: DoneEvent = { type: 'done', attempts: 0, repairs: [], level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null };

export function createEaselService(deps: ServiceDeps): EaselService {
  // The latest turn task per conversation, removed (only by itself) once it settled. Awaiting each
  // entry's `settled` awaits every turn: a newer task settles only after the one before it.
  const running = new Map<string, TurnTask>();
  const replyTimeouts = deps.replyTimeouts ?? DEFAULT_REPLY_TIMEOUTS;
  // Every image being made, per conversation: an activity of its own, apart from the reply that asked for it.
  const activities = createImageActivities({ images: deps.images, logger: deps.logger });
  // Generate's streams still open (they end with their own `done`): shutdown lets them write it.
  const openImageStreams = new Set<Promise<void>>();
  // Conversations being deleted: nothing new may start in them.
  const deleting = new Set<string>();
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
      pane: describePane(record),
      generating: activities.listRunning(record.id).map((activity) => activity.describe()),
    };
  }

  /** The pane as stored, and whether undo and redo have somewhere to go. */
  function describePane(record: ConversationRecord): PaneView {
    const current = record.promptVersion === null ? undefined : deps.store.getPromptVersion(record.id, record.promptVersion);
    const children = current ? deps.store.listPromptVersionChildren(record.id, current.id) : [];
    return {
      ...paneStateOf(record),
      canUndo: findUndoVersion(current) !== null,
      canRedo: findRedoVersion(children) !== null,
    };
  }

  /** Moves the prompt to another stored version (undo, redo). */
  function movePrompt(id: string, pick: (record: ConversationRecord) => number | null, nothing: string): Result<PaneView> {
    const record = findRecord(id);
    if (!record) return notFound(id);
    const target = pick(record);
    if (target === null) return { ok: false, error: { code: 'conflict', message: nothing } };
    const moved = tryWrite('change', () => deps.store.selectPromptVersion(id, target));
    return moved.ok ? paneOf(id) : moved;
  }

  /** Inside tryWrite: a prompt typed by the user is a new version; the model hears of it with the next message. */
  function saveUserPrompt(id: string, prompt: string): number {
    return deps.store.addPromptVersion(id, { prompt, source: 'user', turnId: null }, isoNow(), { tellModel: true, clearSuggestion: false });
  }

  /** Inside tryWrite: values set by hand are pinned; the model hears of changed values with the next message. */
  function saveUserSettings(record: ConversationRecord, patch: SettingsPatch, unpin: readonly PinnableField[]) {
    const change = applyUserSettings(record, patch, unpin);
    deps.store.setSettings(record.id, change, { tellModel: !sameSettings(change.settings, record.settings) });
    return change;
  }

  function paneOf(id: string): Result<PaneView> {
    const record = findRecord(id);
    return record ? { ok: true, value: describePane(record) } : notFound(id);
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

  /** A vanished or damaged database is logged once, with its path, by the store; any other failure at each write. */
  function logStorageFailure(message: string, error: StorageError, fields: Record<string, unknown>): void {
    if (error.code === 'gone' || error.code === 'corrupt') return;
    deps.logger.error(message, { ...fields, error });
  }

  /** Runs a write; a store failure becomes a result saying what happened and what to do. */
  function tryWrite<T>(action: StorageAction, work: () => T): Result<T> {
    try {
      return { ok: true, value: work() };
    } catch (error) {
      if (!isStorageError(error)) throw error;
      logStorageFailure('a write to the conversation store failed', error, { action });
      const failure = describeStorageFailure(error, action);
      return { ok: false, error: { code: 'storage', message: failure.message, storageCode: failure.code } };
    }
  }

  /**
   * The turn's work, pushed into `buffer`. It waits for the previous (stopped) turn to be stored first,
   * so an old turn never writes after a new one began. Returns the automatic image it started, if any: that
   * image runs on after the reply's `done`, as an activity of its own.
   */
  async function runTask(id: string, plan: TurnPlan, task: TurnTask, buffer: EventBuffer<TurnEvent>, previous: Promise<void> | undefined): Promise<ImageActivity | undefined> {
    await previous;
    const image: { activity?: ImageActivity } = {};
    let started = false;
    try {
      for await (const event of turnEvents(id, plan, task.controller, image)) {
        // From `done` on, the conversation takes the next message: the image does not hold the chat.
        if (event.type === 'done') task.replied = true;
        if (event.type === 'started') started = true;
        buffer.push(event);
      }
    } catch (error) {
      if (isStorageError(error)) {
        // A read of the turn met a vanished or damaged database: the storage error, as for a write.
        logStorageFailure('the conversation could not be read during a turn', error, { conversationId: id });
        buffer.push({ type: 'error', ...describeStorageFailure(error, started ? 'reply' : plan.kind === 'regenerate' ? 'change' : 'message') });
      } else {
        deps.logger.error('turn failed unexpectedly', { conversationId: id, error });
        buffer.push({ type: 'error', code: 'internal_error', message: 'Something went wrong inside Easel while answering; the details are in the server log. Press Retry.' });
      }
      task.replied = true;
      buffer.push(FAILED_DONE);
    }
    return image.activity;
  }

  async function* turnEvents(id: string, plan: TurnPlan, controller: AbortController, image: { activity?: ImageActivity }): AsyncGenerator<TurnEvent> {
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
    let started: StartedTurn;
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
      logStorageFailure('the message could not be stored; nothing was sent to the model', error, { conversationId: id });
      yield { type: 'error', ...describeStorageFailure(error, plan.kind === 'regenerate' ? 'change' : 'message') };
      yield FAILED_DONE;
      return;
    }
    yield { type: 'started', conversationId: id, turnId: started.turnId, userTurnId: started.userTurnId };

    const saver = createReplySaver({
      save: (text) => deps.store.saveReplyText(started.turnId, text),
      onError: (error) => {
        // A vanished or damaged database is logged once by the store; a save a second would repeat it.
        if (isStorageError(error) && (error.code === 'gone' || error.code === 'corrupt')) return;
        deps.logger.warn('the reply could not be saved while streaming', { conversationId: id, error });
      },
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
    // Read, decided and written without an await in between: no edit can slip between the three.
    const before = deps.store.getConversation(id);
    const change = metadata && before ? decideReplyPane(paneStateOf(before), metadata, started.promptVersion, started.turnId) : undefined;
    const after = change && before ? applyReplyPane(paneStateOf(before), change) : undefined;
    const decision = metadata && after ? decideReplyImage(metadata, after, deps.images.configured) : { kind: 'none' as const };
    try {
      deps.store.finishTurn(
        id,
        {
          turnId: started.turnId,
          turn: outcome.turn,
          context: describeContextChange(turnContext, outcome.context),
          ...(change ? { pane: change } : {}),
          ...(decision.kind === 'skip' ? { imageNote: { reason: decision.reason, message: decision.message } } : {}),
        },
        isoNow(),
      );
    } catch (error) {
      if (!isStorageError(error)) throw error;
      logStorageFailure('the reply could not be stored', error, { conversationId: id });
      yield { type: 'error', ...describeStorageFailure(error, 'reply') };
      yield { ...outcome.done, level: 'error' };
      return;
    }
    const latest = deps.store.getConversation(id);
    if (change && latest) yield { type: 'pane', ...describePane(latest) };
    if (decision.kind === 'skip') yield { type: 'image_not_made', reason: decision.reason, message: decision.message };
    if (decision.kind === 'make' && latest && !controller.signal.aborted) {
      // Exactly what the pane shows now; what changes in the pane later never reaches this image.
      const begun = await activities.start({
        conversationId: id,
        turnId: started.turnId,
        prompt: latest.prompt,
        settings: latest.settings,
        promptVersion: latest.promptVersion,
      });
      if (begun.ok) image.activity = begun.activity;
      else yield begun.event;
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
    let readerGone = false;
    // A reader that stops early will read nothing more: the turn need not go on (an image after it does).
    const buffer = createEventBuffer<TurnEvent>(() => {
      readerGone = true;
      controller.abort(new Error('the event stream was closed'));
    });
    const task: TurnTask = { controller, settled: Promise.resolve(), replied: false };
    task.settled = runTask(id, plan, task, buffer, current?.settled)
      .then((activity) => {
        if (!activity) return buffer.close();
        // The reply is over; its image's events follow its `done` on the same stream, for as long as it is read.
        void (async () => {
          for await (const event of activity.follow()) {
            if (readerGone) break;
            buffer.push(event);
          }
        })().finally(() => buffer.close());
      })
      .finally(() => {
        signal.removeEventListener('abort', onAbort);
        // Only this task's own entry: a newer turn's must survive an older one finishing.
        if (running.get(id) === task) running.delete(id);
      });
    running.set(id, task);
    return buffer;
  }

  /** A stopped turn only has its outcome left to store, a replied one its task's end: a plain message queues behind it. */
  function isReplying(id: string): boolean {
    const current = running.get(id);
    return current !== undefined && !current.controller.signal.aborted && !current.replied;
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
        const images = activities.listRunning(id);
        service.stop(id);
        await running.get(id)?.settled;
        await Promise.all(images.map((activity) => activity.settled));
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
        {
          ...conversation,
          title: record.title,
          context: deps.store.readContext(id),
          promptVersions: deps.store.listPromptVersions(id),
          promptVersion: record.promptVersion,
          suggestion: record.suggestion,
          pinned: record.pinned,
          settingSuggestions: record.settingSuggestions,
        },
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
      const read = await readArchiveFiles(unpacked.files, { conversationId: id, newImageId: () => randomBytes(16).toString('hex'), maxPixels: deps.maxImagePixels });
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
      const record = findRecord(id);
      if (!record) return notFound(id);
      const parsed = promptSchema.safeParse(prompt);
      if (!parsed.success) return invalid(parsed.error, 'prompt');
      // Saving what is already there would tell the model about an edit nobody made.
      if (parsed.data === record.prompt) return { ok: true, value: describePane(record) };
      const saved = tryWrite('change', () => saveUserPrompt(id, parsed.data));
      return saved.ok ? paneOf(id) : saved;
    },

    setSettings(id, patch) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      const unpin = readUnpin(patch);
      if (!unpin.ok) return unpin;
      const values = isRecord(patch) ? Object.fromEntries(Object.entries(patch).filter(([key]) => key !== 'unpin')) : patch;
      const parsed = settingsPatchSchema.safeParse(values);
      if (!parsed.success) return invalid(parsed.error);
      const saved = tryWrite('change', () => saveUserSettings(record, parsed.data, unpin.value));
      return saved.ok ? { ok: true, value: saved.value.settings } : saved;
    },

    getPane(id) {
      const record = findRecord(id);
      return record ? describePane(record) : undefined;
    },

    listPromptVersions(id) {
      return findRecord(id) ? deps.store.listPromptVersions(id) : undefined;
    },

    undoPrompt(id) {
      return movePrompt(
        id,
        (record) => findUndoVersion(record.promptVersion === null ? undefined : deps.store.getPromptVersion(id, record.promptVersion)),
        'There is nothing to undo: this is the first version of the prompt.',
      );
    },

    redoPrompt(id) {
      return movePrompt(
        id,
        (record) => (record.promptVersion === null ? null : findRedoVersion(deps.store.listPromptVersionChildren(id, record.promptVersion))),
        'There is nothing to redo: this is the newest version of the prompt.',
      );
    },

    answerSuggestion(id, accept) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      if (typeof accept !== 'boolean') {
        return { ok: false, error: { code: 'invalid', message: 'accept must be true (use the suggestion) or false (keep yours).', fields: { accept: 'accept must be true or false.' } } };
      }
      const suggestion = record.suggestion;
      if (!suggestion) return { ok: false, error: { code: 'conflict', message: 'No suggestion is waiting: the prompt is as shown.' } };
      const answered = tryWrite('change', () => {
        // The model's own prompt: nothing new to tell it. Keeping yours leaves your edit's note for the next message.
        if (accept) deps.store.addPromptVersion(id, { prompt: suggestion.prompt, source: 'suggestion', turnId: suggestion.turnId }, isoNow(), { tellModel: false, clearSuggestion: true });
        else deps.store.setSuggestion(id, null);
      });
      return answered.ok ? paneOf(id) : answered;
    },

    takeSettingSuggestion(id, field) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      if (!isPinnableField(field)) {
        return { ok: false, error: { code: 'invalid', message: `${String(field)} is not a setting the assistant suggests (${PINNABLE_FIELDS.join(', ')}).` } };
      }
      const value = record.settingSuggestions[field];
      if (value === undefined) return { ok: false, error: { code: 'conflict', message: `The assistant suggests nothing for ${field} now.` } };
      const taken = tryWrite('change', () => saveUserSettings(record, { [field]: value }, []));
      return taken.ok ? paneOf(id) : taken;
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
        const settings = { ...DEFAULT_SETTINGS, ...patch?.data };
        // On the empty page every value changed from the defaults was set by hand.
        plan.create = { prompt: prompt?.data ?? '', settings, pinned: pinChangedFrom(DEFAULT_SETTINGS, settings) };
      } else if (record) {
        // What is on screen and not saved yet is saved first, so the model hears of it in this turn: an
        // edit it sees, which its next prompt supersedes.
        if (prompt && prompt.data !== record.prompt) {
          const saved = tryWrite('message', () => saveUserPrompt(id, prompt.data));
          if (!saved.ok) return saved;
        }
        const changed = patch ? pickChanged(record.settings, patch.data) : {};
        if (Object.keys(changed).length > 0) {
          const saved = tryWrite('message', () => saveUserSettings(record, changed, []));
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
        const created = tryWrite('change', () =>
          deps.store.createConversation({ id, createdAt: isoNow(), settings, prompt: prompt.data as string, pinned: pinChangedFrom(DEFAULT_SETTINGS, settings) }),
        );
        if (!created.ok) return created;
        record = created.value;
      }
      // The image records the version it was made from: the pane's, unless the prompt was overridden.
      const promptVersion = record && prompt.data === record.prompt ? record.promptVersion : null;
      let finish!: () => void;
      const finished = new Promise<void>((resolve) => (finish = resolve));
      openImageStreams.add(finished);
      async function* stream(): AsyncGenerator<TurnEvent> {
        let activity: ImageActivity | undefined;
        // Generate's image belongs to its request: the client hanging up, or reading no further, cancels it.
        const onAbort = () => activity?.cancel(new Error('the client hung up'));
        signal.addEventListener('abort', onAbort, { once: true });
        try {
          const begun = await activities.start({ conversationId: id, turnId: null, prompt: prompt.data as string, settings, promptVersion });
          if (!begun.ok) yield begun.event;
          else {
            activity = begun.activity;
            if (signal.aborted) onAbort();
            yield* activity.follow();
          }
          yield { type: 'done', attempts: 0, repairs: [], level: 'clean', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null };
        } finally {
          signal.removeEventListener('abort', onAbort);
          if (activity && !activity.finished) activity.cancel(new Error('the image is no longer awaited'));
          openImageStreams.delete(finished);
          finish();
        }
      }
      const events = stream();
      return { ok: true, value: { [Symbol.asyncIterator]: () => events } };
    },

    stop(id) {
      const reply = service.stopReply(id);
      const images = activities.cancel(id, new Error('stopped by the user'));
      return reply || images;
    },

    stopReply(id) {
      const task = running.get(id);
      // A reply that is over (its image may still run) has nothing left to stop.
      if (!task || task.replied) return false;
      task.controller.abort(new Error('stopped by the user'));
      return true;
    },

    cancelImages(id) {
      return activities.cancel(id, new Error('image cancelled by the user'));
    },

    followImage(id, imageId) {
      if (!findRecord(id)) return notFound(id);
      const activity = activities.find(id, imageId);
      if (!activity) return { ok: false, error: { code: 'not_found', message: 'No such image is being made in this conversation (it may have ended a while ago: GET the conversation to see its images).' } };
      return { ok: true, value: activity.follow() };
    },

    isBusy(id) {
      const task = running.get(id);
      return task !== undefined && !task.replied;
    },

    async shutdown() {
      const turns = [...running.values()];
      const reason = new Error('Easel is shutting down');
      for (const turn of turns) turn.controller.abort(reason);
      activities.cancelAll(reason);
      // Every turn's task stores its outcome; the image queue settles once each backend job (and interrupt) has.
      const settled = Promise.all([...turns.map((turn) => turn.settled), ...openImageStreams, activities.settled(), deps.images.settled()]);
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deps.shutdownWaitMs ?? SHUTDOWN_WAIT_MS)));
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

function paneStateOf(record: ConversationRecord): PaneState {
  return {
    prompt: record.prompt,
    promptVersion: record.promptVersion,
    suggestion: record.suggestion,
    settings: record.settings,
    pinned: record.pinned,
    settingSuggestions: record.settingSuggestions,
  };
}

/** The fields of a patch whose value differs from the stored one. */
function pickChanged(settings: Settings, patch: SettingsPatch): SettingsPatch {
  return Object.fromEntries(Object.entries(patch).filter(([key, value]) => settings[key as keyof Settings] !== value)) as SettingsPatch;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `unpin`: a list of the settings the model may set again. */
function readUnpin(patch: unknown): Result<PinnableField[]> {
  const unpin = isRecord(patch) ? patch['unpin'] : undefined;
  if (unpin === undefined) return { ok: true, value: [] };
  if (!Array.isArray(unpin) || !unpin.every(isPinnableField)) {
    const message = `unpin must be a list of ${PINNABLE_FIELDS.join(', ')}.`;
    return { ok: false, error: { code: 'invalid', message, fields: { unpin: message } } };
  }
  return { ok: true, value: unpin };
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
