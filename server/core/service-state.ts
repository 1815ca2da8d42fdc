// What the service's parts share: its dependencies, the turns and images running now, and the small rules
// every command uses (find a conversation, run a write, describe the pane). Made once by createEaselService.
import { randomUUID } from 'node:crypto';
import type { ArchiveCodec, ImageFiles } from './archive.ts';
import type { ConversationListing, ConversationRecord, ConversationStore, TranscriptTurn } from './conversation.ts';
import type { ImageCheck } from './image-check.ts';
import type { ImageRecord } from './image-record.ts';
import { isLoggedByStore, isStorageError, type StorageError } from './errors.ts';
import type { LibraryEvent, LiveEvent, TurnEvent } from './events.ts';
import { createLiveFeed, type LiveFeed } from './live-feed.ts';
import { createModelCatalog, type ModelCatalog } from './model-catalog.ts';
import type { ImageGenerator } from './generation.ts';
import { createImageActivities, type ImageActivities, type ImageActivity, type ImageInProgress } from './image-activities.ts';
import { describeConversation, describeStorageFailure, type ConversationSummary, type StorageAction } from './library.ts';
import type { Logger } from './logger.ts';
import { applyUserSettings, describeFamily, findRedoVersion, findUndoVersion, type PaneState, type PaneView, type PinnableField, type SettingsChange } from './pane.ts';
import type { ChatModel } from './ports.ts';
import type { ReplyTimeouts } from './reply-watchdog.ts';
import { notFound, readBaseRevision, stale, type Result } from './results.ts';
import type { Settings, SettingsPatch } from './settings.ts';
import { promptSchema } from './text.ts';

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
  /** --vision-model: the vision model of every conversation that chose none (Check, Describe). */
  visionModel?: string;
  /** The longest one check or description may take; default VISION_TIMEOUT_MS (tests shorten it). */
  visionTimeoutMs?: number;
}

/** The library feed's one key. */
export const LIBRARY_KEY = 'library';

/** How the library's row of a conversation changed. */
export type LibraryChange = 'created' | 'renamed' | 'updated';

export interface ConversationView extends ConversationSummary {
  prompt: string;
  settings: Settings;
  /** The transcript; a reply left `running` by a process that is gone shows as `interrupted`. */
  turns: TranscriptTurn[];
  images: ImageRecord[];
  /** What the vision model found in its pictures (Check), oldest first. */
  checks: ImageCheck[];
  /** The prompt pane and the settings as stored, with what undo and redo would do. */
  pane: PaneView;
  /** The images being made now, oldest first. */
  generating: ImageInProgress[];
}

/** One turn running as its own task. */
export interface TurnTask {
  controller: AbortController;
  /** Settles once the outcome is stored and the task is over; never rejects. */
  settled: Promise<void>;
  /** Its `done` was pushed: the reply is over and the conversation takes the next message (its image may run on). */
  replied: boolean;
}

/**
 * Where a conversation's turn is: `idle` (none), `replying`, `stopping` (stopped, its outcome not stored yet:
 * the next message waits for it), `image-only` (the reply is over and stored; its automatic image runs on).
 */
export const TURN_STATES = ['idle', 'replying', 'stopping', 'image-only'] as const;
export type TurnState = (typeof TURN_STATES)[number];

export interface ServiceState {
  deps: ServiceDeps;
  /** What the servers offer to chat and paint with, as last asked. */
  catalog: ModelCatalog;
  /**
   * The latest turn task per conversation, removed (only by itself) once it settled. Awaiting each entry's
   * `settled` awaits every turn: a newer task settles only after the one before it.
   */
  running: Map<string, TurnTask>;
  /** Every image being made, per conversation: an activity of its own, apart from the reply that asked for it. */
  activities: ImageActivities;
  /** Conversations being deleted: nothing new may start in them. */
  deleting: Set<string>;
  /** Calls `watcher` with every event of every image, as it happens (before any reader gets it). */
  watchImages(watcher: (activity: ImageActivity, event: TurnEvent) => void): void;
  /** Every page following a conversation: its reply's and images' events and each change, numbered. */
  feed: LiveFeed<LiveEvent>;
  /** Every page's library list (one key, LIBRARY_KEY): conversations created, renamed, updated, deleted. */
  libraryFeed: LiveFeed<LibraryEvent>;
  /** The text each running reply shows now: a snapshot's running turn shows exactly this. */
  shown: Map<string, { turnId: number; text: string }>;
  /**
   * Tells the followers what changed in a conversation since it was last told: the pane (by its revision),
   * the title, the library's row (`change` names how, for the library). Cheap when nothing changed.
   */
  announce(id: string, change?: LibraryChange): void;
  /** A pane event went out with a reply's events: announce need not send it again. */
  notePaneSent(id: string, paneRevision: number): void;
  /** The conversation is gone: its followers are told and ended, the library's rows drop it. */
  announceDeleted(id: string): void;
  newId(): string;
  isoNow(): string;
  /** The one answer to "is it busy?": each command asks which state, not which of the task's flags. */
  turnStateOf(id: string): TurnState;
  /** The stored conversation, unless it is being deleted. */
  findRecord(id: string): ConversationRecord | undefined;
  /** The conversation's title and preview, as the list shows them. */
  summarize(record: ConversationRecord): ConversationSummary;
  view(record: ConversationRecord): ConversationView;
  /** The pane as stored, and whether undo and redo have somewhere to go. */
  describePane(record: ConversationRecord): PaneView;
  paneOf(id: string): Result<PaneView>;
  /**
   * A change made from the pane revision `baseRevision` (absent: no check) may go on only while that is the
   * stored one: otherwise 'stale', with the pane as it stands, and nothing changes.
   */
  checkBase(id: string, baseRevision: unknown): Result<void>;
  /** Runs a write; a store failure becomes a result saying what happened and what to do. */
  tryWrite<T>(action: StorageAction, work: () => T): Result<T>;
  /** A vanished or damaged database is logged once, with its path, by the store; any other failure at each write. */
  logStorageFailure(message: string, error: StorageError, fields: Record<string, unknown>): void;
  /**
   * The prompt the user typed, saved as their version (the model hears of it with the next message) when it
   * differs from the stored one: on its own, or before a command acts (undo, redo, "Use suggestion", Generate). Text the prompt rule refuses is not saved
   * and the command goes on (Undo is how one leaves it); a store that cannot write ends the command.
   */
  saveScreenPrompt(id: string, prompt: unknown, action: StorageAction): Result<void>;
  /** Inside tryWrite: values set by hand are pinned; the model hears of changed values with the next message. */
  saveUserSettings(record: ConversationRecord, patch: SettingsPatch, unpin: readonly PinnableField[]): SettingsChange;
}

export function createServiceState(deps: ServiceDeps): ServiceState {
  const running = new Map<string, TurnTask>();
  const imageWatchers = new Set<(activity: ImageActivity, event: TurnEvent) => void>();
  const catalog = createModelCatalog({ llm: deps.llm, images: deps.images, logger: deps.logger, visionModel: deps.visionModel });
  const activities = createImageActivities({
    images: deps.images,
    logger: deps.logger,
    onEvent(activity, event) {
      for (const watcher of imageWatchers) watcher(activity, event);
      // An image's events are generation, progress, image and error: none has a turnId of its own.
      if (event.type !== 'started') feed.publish(activity.conversationId, { ...event, imageId: activity.id, turnId: activity.turnId });
      // A new image moves its conversation up the library.
      // Stryker disable next-line ConditionalExpression: announce sends only what changed: on every event it would cost reads, not say more
      if (event.type === 'image') announce(activity.conversationId);
    },
  });
  const deleting = new Set<string>();
  const isoNow = () => new Date(deps.clock.now()).toISOString();
  const feed = createLiveFeed<LiveEvent>();
  const libraryFeed = createLiveFeed<LibraryEvent>();
  const shown = new Map<string, { turnId: number; text: string }>();
  // What the followers were last told of each conversation: announce sends only what differs.
  const told = new Map<string, { paneRevision: number; title: string; updatedAt: string; preview: string }>();

  function announce(id: string, change: LibraryChange = 'updated'): void {
    // Telling the followers never fails what was done: a store that cannot be read now is said where it is written.
    try {
      tell(id, change);
    } catch (error) {
      if (!isStorageError(error)) deps.logger.warn('the followers could not be told of a change', { conversationId: id, error });
    }
  }

  function tell(id: string, change: LibraryChange): void {
    const record = findRecord(id);
    if (!record) return;
    const summary = summarize(record);
    const before = told.get(id);
    told.set(id, { paneRevision: record.paneRevision, title: summary.title, updatedAt: summary.updatedAt, preview: summary.preview });
    if (before?.paneRevision !== record.paneRevision) feed.publish(id, { type: 'pane', ...describePane(record) });
    if (before?.title !== summary.title) feed.publish(id, { type: 'title', title: summary.title });
    // A conversation made is one not told before; a rename to the title it had changes no row.
    const rowChanged = before === undefined || before.title !== summary.title || before.updatedAt !== summary.updatedAt || before.preview !== summary.preview;
    if (rowChanged) libraryFeed.publish(LIBRARY_KEY, { type: change, conversation: summary });
  }

  function findRecord(id: string): ConversationRecord | undefined {
    return deleting.has(id) ? undefined : deps.store.getConversation(id);
  }

  function summarize(record: ConversationRecord): ConversationSummary {
    // The store chooses the first and last message with the list's own query: one rule, in SQL.
    const listing: ConversationListing = deps.store.getListing(record.id) ?? {
      id: record.id,
      title: record.title,
      firstMessage: null,
      lastMessage: null,
      prompt: record.prompt,
      createdAt: record.createdAt,
      updatedAt: record.updatedAt,
    };
    return describeConversation(listing);
  }

  function describePane(record: ConversationRecord): PaneView {
    const current = record.promptVersion === null ? undefined : deps.store.getPromptVersion(record.id, record.promptVersion);
    const children = current ? deps.store.listPromptVersionChildren(record.id, current.id) : [];
    return {
      ...paneStateOf(record),
      canUndo: findUndoVersion(current) !== null,
      canRedo: findRedoVersion(children) !== null,
      family: describeFamily(record.settings, catalog.serverCheckpoint()),
    };
  }

  function turnStateOf(id: string): TurnState {
    const task = running.get(id);
    if (!task) return 'idle';
    if (task.replied) return 'image-only';
    return task.controller.signal.aborted ? 'stopping' : 'replying';
  }

  function view(record: ConversationRecord): ConversationView {
    const busy = turnStateOf(record.id) !== 'idle';
    // A reply still `running` in the store but not here was left by a turn that could not finish.
    const turns = deps.store
      .listTurns(record.id)
      .map((turn) => (turn.status === 'running' && !busy ? { ...turn, status: 'interrupted' as const } : turn));
    return {
      ...summarize(record),
      prompt: record.prompt,
      settings: record.settings,
      turns,
      images: deps.store.listImages(record.id),
      checks: deps.store.listImageChecks(record.id),
      pane: describePane(record),
      generating: activities.listRunning(record.id).map((activity) => activity.describe()),
    };
  }

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

  function logStorageFailure(message: string, error: StorageError, fields: Record<string, unknown>): void {
    if (isLoggedByStore(error)) return;
    deps.logger.error(message, { ...fields, error });
  }

  return {
    deps,
    catalog,
    running,
    activities,
    watchImages: (watcher) => void imageWatchers.add(watcher),
    deleting,
    feed,
    libraryFeed,
    shown,
    announce,
    notePaneSent(id, paneRevision) {
      const before = told.get(id);
      if (before) before.paneRevision = paneRevision;
    },
    announceDeleted(id) {
      told.delete(id);
      shown.delete(id);
      feed.publish(id, { type: 'deleted' });
      feed.close(id);
      libraryFeed.publish(LIBRARY_KEY, { type: 'deleted', id });
    },
    newId: deps.newId ?? randomUUID,
    isoNow,
    turnStateOf,
    findRecord,
    summarize,
    view,
    describePane,
    paneOf(id) {
      const record = findRecord(id);
      return record ? { ok: true, value: describePane(record) } : notFound(id);
    },
    checkBase(id, baseRevision) {
      const base = readBaseRevision(baseRevision);
      if (!base.ok) return base;
      const record = base.value === undefined ? undefined : findRecord(id);
      if (record && record.paneRevision !== base.value) return stale(describePane(record));
      return { ok: true, value: undefined };
    },
    tryWrite,
    logStorageFailure,
    saveScreenPrompt(id, prompt, action) {
      const record = findRecord(id);
      const parsed = promptSchema.safeParse(prompt);
      // Saving what is already there would tell the model about an edit nobody made.
      if (!record || !parsed.success || parsed.data === record.prompt) return { ok: true, value: undefined };
      const text = parsed.data;
      const saved = tryWrite(action, () => deps.store.addUserPromptVersion(id, text, isoNow()));
      return saved.ok ? { ok: true, value: undefined } : saved;
    },
    saveUserSettings(record, patch, unpin) {
      const change = applyUserSettings(record, patch, unpin, catalog.serverCheckpoint());
      deps.store.setSettings(record.id, change, { tellModel: !sameSettings(change.settings, record.settings) });
      return change;
    },
  };
}

export function sameSettings(a: Settings, b: Settings): boolean {
  return (Object.keys(a) as Array<keyof Settings>).every((key) => a[key] === b[key]);
}

export function paneStateOf(record: ConversationRecord): PaneState {
  return {
    paneRevision: record.paneRevision,
    prompt: record.prompt,
    promptVersion: record.promptVersion,
    suggestion: record.suggestion,
    settings: record.settings,
    pinned: record.pinned,
    settingSuggestions: record.settingSuggestions,
  };
}
