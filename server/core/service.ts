// The service: what the page and the API ask of Easel, composed of one part per concern. The library, the
// pane, the archive, Generate, the gallery, references and the vision model are commands of their own
// (*-commands.ts, generate-command.ts); turns run here as tasks, each through the turn pipeline (turn-pipeline.ts).
import { createArchiveCommands, type ArchiveCommands } from './archive-commands.ts';
import { createFollowCommands, type FollowCommands } from './follow-commands.ts';
import { isStorageError } from './errors.ts';
import { createEventBuffer, type EventBuffer } from './event-buffer.ts';
import { applyShownText, type TurnEvent } from './events.ts';
import { describeStorageFailure } from './library.ts';
import { createLibraryCommands, type LibraryCommands } from './library-commands.ts';
import { createGalleryCommands, makeThumbnailsOnSave, type GalleryCommands, type GalleryDeps } from './gallery-commands.ts';
import { createPictureReader, createReferenceCommands, type ReferenceCommands, type ReferenceDeps } from './reference-commands.ts';
import { createGenerateCommand, type GenerateOptions, type GenerateOverrides } from './generate-command.ts';
import { createRefineLoop } from './refine-loop.ts';
import { createVisionCommands, type NewConversation, type VisionCommands } from './vision-commands.ts';
import type { ModelHealth } from './ports.ts';
import { DEFAULT_REPLY_TIMEOUTS } from './reply-watchdog.ts';
import type { ImageBackendStatus } from './generation.ts';
import type { FollowImageOptions, ImageActivity } from './image-activities.ts';
import { applyUserSettings, pinChangedFrom, type PinnableField } from './pane.ts';
import { createPaneCommands, type PaneCommands } from './pane-commands.ts';
import { busy, invalid, notFound, refuse, type Result } from './results.ts';
import { createServiceState, type ServiceDeps, type TurnTask } from './service-state.ts';
import { DEFAULT_SETTINGS, OLLAMA_MODEL_NAME, pickChoices, settingsPatchSchema, type Settings, type SettingsPatch } from './settings.ts';
import { messageSchema, promptSchema } from './text.ts';
import { createTurnPipeline, FAILED_DONE, type TurnPlan } from './turn-pipeline.ts';

export type { Result, ServiceError, ServiceErrorCode } from './results.ts';
export { MAX_IMAGE_COUNT, type GenerateOptions, type GenerateOverrides } from './generate-command.ts';
export type { ConversationView, ServiceDeps } from './service-state.ts';
export type { OnScreen, SettingsOptions } from './pane-commands.ts';
import type { ModelsView, PullEvent } from './model-catalog.ts';

export interface Health {
  ollama: ModelHealth;
  images: ImageBackendStatus;
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
  /** The pane revision the screen shows: from an older one the message is refused as 'stale', nothing saved or sent. */
  baseRevision?: unknown;
}

/** What the page and the API ask of Easel: the library, the pane and the archive (their own modules), turns and images. */
export interface EaselService extends LibraryCommands, PaneCommands, ArchiveCommands, FollowCommands, GalleryCommands, ReferenceCommands, VisionCommands {
  checkHealth(signal?: AbortSignal): Promise<Health>;
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
  generate(id: string, overrides: GenerateOverrides, signal: AbortSignal, options?: GenerateOptions): Result<AsyncIterable<TurnEvent>>;
  /**
   * Aborts the running reply (and the request to Ollama) and any image being made. False when nothing ran.
   * The conversation takes a new message at once; the stopped turn is stored before it.
   */
  stop(id: string): boolean;
  /** The page's Stop: aborts only the reply being written; images go on (their own Cancel stops them). */
  stopReply(id: string): boolean;
  /**
   * Follows an image being made (or ended within the last minute): its `generation` event and latest
   * `progress`, then its events until `image` or `error`. Following never cancels it. `skipImages`: the ids of the
   * images the follower has already (its snapshot's), not replayed.
   */
  followImage(id: string, imageId: string, options?: FollowImageOptions): Result<AsyncIterable<TurnEvent>>;
  /**
   * Cancels the images being made for this conversation (Generate's and a reply's automatic one),
   * interrupting the backend; a reply still being written goes on. False when no image was being made.
   */
  cancelImages(id: string): boolean;
  /**
   * Cancels one image being made or waiting in line (a batch or a comparison: all of it, by its `generation` id);
   * the others go on, and the ones behind it move up. False when it is not (or no longer) being made.
   */
  cancelImage(id: string, imageId: string): boolean;
  /** True while a reply is being written (until its outcome is stored), a stopped one included; not for its image. */
  isBusy(id: string): boolean;
  /** What Ollama and the image server offer now (GET /api/models); a server that cannot be asked says why. Never throws. */
  listModels(signal?: AbortSignal): Promise<ModelsView>;
  /**
   * Asks the servers again when a settings patch names a model, checkpoint, sampler or scheduler their last
   * answers did not list (one pulled or copied in since), so that the command that follows (setSettings,
   * generate, sendMessage, each checking the choice) refuses only a name the server really lacks. Never throws.
   */
  prepareModelChoice(patch: unknown, signal?: AbortSignal): Promise<void>;
  /** Pulls a chat model through Ollama: progress, then `done` or `error`. Aborting `signal` cancels the pull. */
  pullModel(name: unknown, signal: AbortSignal): Result<AsyncIterable<PullEvent>>;
  /**
   * For process shutdown: aborts every running reply and image (so image backends are interrupted: they
   * keep working after a disconnect) and waits, at most SHUTDOWN_WAIT_MS (or the shutdownWaitMs given), until their work has settled.
   */
  shutdown(): Promise<void>;
}

/** How long shutdown() waits for aborted work to settle: a stream whose client stopped reading may never finish. */
export const SHUTDOWN_WAIT_MS = 3_000;

export { REPLY_SAVE_INTERVAL_MS } from './turn-pipeline.ts';

const CONVERSATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A conversation id as Easel makes them (a random UUID): the only kind a first message may create. */
export function isConversationId(value: string): boolean {
  return CONVERSATION_ID.test(value);
}


export function createEaselService(deps: ServiceDeps & GalleryDeps & Pick<ReferenceDeps, 'converter'>): EaselService {
  const state = createServiceState(makeThumbnailsOnSave(deps));


  const { running, activities, deleting, findRecord, tryWrite, logStorageFailure, isoNow, turnStateOf } = state;
  const replyTimeouts = deps.replyTimeouts ?? DEFAULT_REPLY_TIMEOUTS;
  // Generate's streams still open (they end with their own `done`): shutdown lets them write it.
  const openImageStreams = new Set<Promise<void>>();
  const runPipeline = createTurnPipeline(state, replyTimeouts);

  /**
   * The turn's work, pushed into `buffer`. It waits for the previous (stopped) turn to be stored first,
   * so an old turn never writes after a new one began. Returns the automatic image it started, if any: that
   * image runs on after the reply's `done`, as an activity of its own.
   */
  async function runTask(id: string, plan: TurnPlan, task: TurnTask, buffer: EventBuffer<TurnEvent>, previous: Promise<void> | undefined): Promise<ImageActivity | undefined> {
    await previous;
    let started = false;
    let turnId: number | null = null;
    // Every event goes to the stream that asked for the turn and to every page following the conversation.
    const send = (event: TurnEvent) => {
      buffer.push(event);
      state.feed.publish(id, event.type === 'started' ? event : { ...event, turnId });
    };
    try {
      const events = runPipeline(id, plan, task.controller);
      for (let step = await events.next(); ; step = await events.next()) {
        if (step.done) return step.value;
        const event = step.value;
        // From `done` on, the conversation takes the next message: the image does not hold the chat.
        // Stryker disable next-line ConditionalExpression,BooleanLiteral: done is the turn's last event: the task leaves running right after it
        if (event.type === 'done') task.replied = true;
        if (event.type === 'started') {
          started = true;
          turnId = event.turnId;
          state.shown.set(id, { turnId, text: '' });
        }
        const shown = state.shown.get(id);
        if (shown && shown.turnId === turnId) shown.text = applyShownText(shown.text, event);
        if (event.type === 'pane') state.notePaneSent(id, event.paneRevision);
        send(event);
        // The title and the library's row follow the message stored, and the reply's end.
        if (event.type === 'started') state.announce(id, plan.create ? 'created' : 'updated');
        if (event.type === 'done') {
          state.shown.delete(id);
          state.announce(id);
        }
      }
    } catch (error) {
      if (isStorageError(error)) {
        // A read of the turn met a vanished or damaged database: the storage error, as for a write.
        logStorageFailure('the conversation could not be read during a turn', error, { conversationId: id });
        send({ type: 'error', ...describeStorageFailure(error, started ? 'reply' : plan.kind === 'regenerate' ? 'change' : 'message') });
      } else {
        deps.logger.error('turn failed unexpectedly', { conversationId: id, error });
        send({ type: 'error', code: 'internal_error', message: 'Something went wrong inside Easel while answering; the details are in the server log. Press Retry.' });
      }
      // Stryker disable next-line BooleanLiteral: the failed done is the turn's last event: the task leaves running right after it
      task.replied = true;
      state.shown.delete(id);
      send(FAILED_DONE);
      return undefined;
    }
  }

  /**
   * Starts the task of a planned turn; the caller checked that the conversation may take it. The task is the
   * server's, not the request's: `signal` (the client hung up) and a reader that stops early end only the
   * returned events; the reply goes on for every page following the conversation, until Stop, shutdown or a failure.
   */
  function startTurn(id: string, plan: TurnPlan, signal: AbortSignal): AsyncIterable<TurnEvent> {
    const current = running.get(id);
    const controller = new AbortController();
    let readerGone = false;
    // Stryker disable next-line ArrowFunction,BooleanLiteral: memory only: readerGone only ends the image's follower below early; the image runs on either way
    const buffer = createEventBuffer<TurnEvent>(() => (readerGone = true));
    const onAbort = () => {
      // Stryker disable next-line BooleanLiteral: memory only: the buffer is closed below, so the image's follower pushes into nothing either way
      readerGone = true;
      buffer.close();
    };
    // Stryker disable ObjectLiteral,BooleanLiteral: { once: true } below: the signal aborts once; a late call closes a closed buffer
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    // Stryker restore ObjectLiteral,BooleanLiteral
    const task: TurnTask = { controller, settled: Promise.resolve(), replied: false };
    task.settled = runTask(id, plan, task, buffer, current?.settled)
      .then((activity) => {
        if (!activity) return buffer.close();
        // The reply is over; its image's events follow its `done` on the same stream, for as long as it is read.
        void (async () => {
          for await (const event of activity.follow()) {
            // Stryker disable next-line ConditionalExpression: memory only: the buffer is dropped with the stream; the image runs on either way
            if (readerGone) break;
            buffer.push(event);
          }
        })().finally(() => buffer.close());
      })
      .finally(() => {
        // Stryker disable next-line StringLiteral: the signal aborts once; a late call aborts what has already ended
        signal.removeEventListener('abort', onAbort);
        // Only this task's own entry: a newer turn's must survive an older one finishing.
        if (running.get(id) === task) running.delete(id);
      });
    running.set(id, task);
    return buffer;
  }

  function stopReply(id: string): boolean {
    // A reply that is over (its image may still run) has nothing left to stop.
    const turn = turnStateOf(id);
    if (turn !== 'replying' && turn !== 'stopping') return false;
    // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a Stop
    running.get(id)?.controller.abort(new Error('stopped by the user'));
    return true;
  }

  function stop(id: string): boolean {
    const reply = stopReply(id);
    // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a cancel
    const images = activities.cancel(id, new Error('stopped by the user'));
    // The vision model's checks and the check-and-correct loop too (a deleted conversation leaves nothing running).
    const checks = cancelChecks(id);
    return reply || images || checks;
  }

  /** Ends the vision model's checks in flight and the check-and-correct loop, even a check of it still being prepared. */
  function cancelChecks(id: string): boolean {
    return [vision.cancelChecks(id), loop.cancel(id)].some(Boolean);
  }

  /** A command on one conversation, and then its followers told what it changed. */
  function announcing<A extends unknown[], R>(command: (id: string, ...args: A) => R): (id: string, ...args: A) => R {
    return (id, ...args) => {
      const result = command(id, ...args);
      state.announce(id);
      return result;
    };
  }

  const pane = createPaneCommands(state);
  /** The model choices of a settings patch, checked (a name the servers lack refused) and named as they list them. */
  function checkChoices<T extends SettingsPatch>(patch: T): Result<T> {
    const choice = state.catalog.checkChoice(pickChoices(patch));
    return choice.ok ? { ok: true, value: { ...patch, ...choice.value } } : choice;
  }

  /**
   * A new conversation's settings: what the screen set, with the family's size, steps and CFG where it set none
   * (a checkpoint picked on the empty page brings its family as a change of it would); pinned is what was set.
   */
  function newSettings(patch: SettingsPatch): { settings: Settings; pinned: PinnableField[] } {
    // The empty page sends its whole form: a value still the default's was not set.
    const set = pickChanged(DEFAULT_SETTINGS, patch);
    const { settings } = applyUserSettings({ settings: DEFAULT_SETTINGS, pinned: [], settingSuggestions: {} }, set, [], state.catalog.serverCheckpoint());
    return { settings, pinned: pinChangedFrom(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, ...set }) };
  }

  /**
   * A new conversation a picture starts on the empty page (a reference, Describe), holding what the page shows:
   * its prompt and its settings (checked, model choices too), as a first message's does; one that exists by then is joined.
   */
  function createEmptyConversation(id: string, init: NewConversation = {}): Result<unknown> {
    if (!isConversationId(id) || deleting.has(id)) return refuse('invalid', 'This new conversation has no valid id: reload the page and try again.');
    // Another picture dropped at the same moment made it while this one was being read: this one joins it.
    if (state.findRecord(id)) return { ok: true, value: undefined };
    const prompt = init.prompt === undefined ? { success: true as const, data: '' } : promptSchema.safeParse(init.prompt);
    if (!prompt.success) return invalid(prompt.error, 'prompt');
    const patch = settingsPatchSchema.safeParse(init.settings ?? {});
    if (!patch.success) return invalid(patch.error);
    const checked = checkChoices(patch.data);
    if (!checked.ok) return checked;
    // The library hears of it once it is stored (announce never throws).
    return tryWrite('change', () => {
      const created = deps.store.createConversation({ id, createdAt: isoNow(), prompt: prompt.data, ...newSettings(checked.value) });
      state.announce(id, 'created');
      return created;
    });
  }

  const vision = createVisionCommands(state, {
    readPicture: createPictureReader(deps.converter, deps.maxImagePixels),
    createConversation: createEmptyConversation,
    // Absent or undefined alike: the vision commands fall back to their defaults with ??.
    defaultModel: deps.visionModel,
    timeoutMs: deps.visionTimeoutMs,
  });
  const { generate } = createGenerateCommand(state, { vision, checkChoices, newSettings, isConversationId, openImageStreams });

  const service: EaselService = {
    ...createLibraryCommands(state, { stop }, deps.thumbnails),
    ...pane,
    setPrompt: announcing(pane.setPrompt),
    setSettings: announcing(pane.setSettings),
    undoPrompt: announcing(pane.undoPrompt),
    redoPrompt: announcing(pane.redoPrompt),
    answerSuggestion: announcing(pane.answerSuggestion),
    takeSettingSuggestion: announcing(pane.takeSettingSuggestion),
    pickComparedPrompt: announcing(pane.pickComparedPrompt),
    ...createArchiveCommands(state),
    ...createGalleryCommands(state, deps.thumbnails),
    ...vision,
    cancelChecks,
    ...createReferenceCommands(state, {
      ...(deps.converter ? { converter: deps.converter } : {}),
      ...(deps.thumbnails ? { thumbnails: deps.thumbnails } : {}),
      createConversation: createEmptyConversation,
    }),
    ...createFollowCommands(state, () => service.listConversations()),

    async checkHealth(signal) {
      const [ollama, images] = await Promise.all([deps.llm.checkHealth(signal), deps.images.checkHealth(signal)]);
      return { ollama, images };
    },

    sendMessage(id, text, signal, options = {}) {
      const record = findRecord(id);
      const creating = !record && options.create === true;
      if (!record && !creating) return notFound(id);
      if (creating && (!isConversationId(id) || deleting.has(id))) {
        return refuse('invalid', 'This new conversation has no valid id: reload the page and send again.');
      }
      const parsed = messageSchema.safeParse(text);
      if (!parsed.success) return invalid(parsed.error, 'text');
      const fresh = state.checkBase(id, options.baseRevision);
      if (!fresh.ok) return fresh;
      const prompt = options.prompt === undefined ? undefined : promptSchema.safeParse(options.prompt);
      if (prompt && !prompt.success) return invalid(prompt.error, 'prompt');
      const parsedPatch = options.settings === undefined ? undefined : settingsPatchSchema.safeParse(options.settings);
      if (parsedPatch && !parsedPatch.success) return invalid(parsedPatch.error);
      // The model choices on screen are checked as a settings change's (those unchanged are not asked about).
      const patch = parsedPatch === undefined ? undefined : checkChoices(record ? pickChanged(record.settings, parsedPatch.data) : parsedPatch.data);
      if (patch && !patch.ok) return patch;
      // A new message waits for a stopped turn, or runs beside an image; an edit rewrites the last exchange, so needs none.
      const turn = turnStateOf(id);
      if (options.replaceLast ? turn !== 'idle' : turn === 'replying') return busy();

      const plan: TurnPlan = { kind: 'send', text: parsed.data, replaces: [] };
      if (creating) {
        // On the empty page every value changed from the defaults was set by hand.
        plan.create = { prompt: prompt?.data ?? '', ...newSettings(patch?.value ?? {}) };
      } else if (record) {
        // What is on screen and not saved yet is saved first, so the model hears of it in this turn: an
        // edit it sees, which its next prompt supersedes.
        if (prompt) {
          const saved = state.saveScreenPrompt(id, prompt.data, 'message');
          if (!saved.ok) return saved;
        }
        const changed = patch ? patch.value : {};
        // Stryker disable next-line ConditionalExpression,EqualityOperator: the same settings written again tell the model nothing (tellModel is false when they are the same)
        if (Object.keys(changed).length > 0) {
          const saved = tryWrite('message', () => state.saveUserSettings(record, changed, []));
          if (!saved.ok) return saved;
        }
      }
      if (options.replaceLast) {
        const last = record ? deps.store.listLastExchange(id) : [];
        const user = last[0];
        // Stryker disable next-line ConditionalExpression: the last exchange begins at the last user message, and no reply comes before a conversation's first message
        if (!user || user.role !== 'user') {
          return refuse('invalid', 'There is no message to edit yet: send one first.');
        }
        plan.kind = 'edit';
        plan.replacedText = user.text;
        plan.replaces = last.map((turn) => turn.id);
      }
      return { ok: true, value: startTurn(id, plan, signal) };
    },

    regenerate(id, signal) {
      if (!findRecord(id)) return notFound(id);
      if (turnStateOf(id) !== 'idle') return busy();
      const last = deps.store.listLastExchange(id);
      const user = last[0];
      // Stryker disable next-line ConditionalExpression: the last exchange begins at the last user message, and no reply comes before a conversation's first message
      if (!user || user.role !== 'user') {
        return refuse('invalid', 'There is no reply to regenerate yet: send a message first.');
      }
      const plan: TurnPlan = { kind: 'regenerate', text: user.text, replaces: last.slice(1).map((turn) => turn.id) };
      return { ok: true, value: startTurn(id, plan, signal) };
    },


    generate,
    stop,
    stopReply,
    listModels: (signal) => state.catalog.list(signal),
    prepareModelChoice: async (patch, signal) => {
      const parsed = settingsPatchSchema.safeParse(patch);
      // Only a valid change is worth asking the servers about: every refusal is said by the command itself.
      if (parsed.success) await state.catalog.refreshFor(pickChoices(parsed.data), signal);
    },

    pullModel(name, signal) {
      if (typeof name !== 'string' || !OLLAMA_MODEL_NAME.test(name)) {
        const message = 'name must be an Ollama model name such as mistral:7b or gemma3:4b.';
        return refuse('invalid', message, { name: message });
      }
      return { ok: true, value: { [Symbol.asyncIterator]: () => state.catalog.pull(name, signal) } };
    },

    cancelImages(id) {
      // The checks end with the images (the page's Cancel beside "Checking…"), and so does the check-and-correct loop.
      const checks = cancelChecks(id);
      // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a cancel
      return activities.cancel(id, new Error('image cancelled by the user')) || checks;
    },

    cancelImage(id, imageId) {
      // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a cancel
      return activities.cancelOne(id, imageId, new Error('image cancelled by the user'));
    },

    followImage(id, imageId, options) {
      if (!findRecord(id)) return notFound(id);
      const activity = activities.find(id, imageId);
      if (!activity) return refuse('not_found', 'No such image is being made in this conversation (it may have ended a while ago: GET the conversation to see its images).');
      return { ok: true, value: activity.follow(options) };
    },

    isBusy(id) {
      const turn = turnStateOf(id);
      return turn === 'replying' || turn === 'stopping';
    },

    async shutdown() {
      const turns = [...running.values()];
      // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a Stop or a cancel
      const reason = new Error('Easel is shutting down');
      for (const turn of turns) turn.controller.abort(reason);
      activities.cancelAll(reason);
      // Every turn's task stores its outcome; the image queue settles once each backend job (and interrupt) has.
      const settled = Promise.all([...turns.map((turn) => turn.settled), ...openImageStreams, activities.settled(), deps.images.settled(), loop.stopAll()]);
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deps.shutdownWaitMs ?? SHUTDOWN_WAIT_MS)));
      await Promise.race([settled, deadline]);
      clearTimeout(timer);
    },
  };
  // With autoCheck, each new picture is checked, and with autoRefine corrected, by the service's own commands.
  const loop = createRefineLoop({
    state,
    vision,
    logger: deps.logger,
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: the loop reads the corrected picture's stream to its end and never aborts it: no reader leaves it early
    makeCorrected: (id, imageId) => service.generate(id, { fix: imageId }, new AbortController().signal, { outlivesReader: true }),
  });
  return service;
}





/** The fields of a patch whose value differs from the stored one. */
function pickChanged(settings: Settings, patch: SettingsPatch): SettingsPatch {
  return Object.fromEntries(Object.entries(patch).filter(([key, value]) => settings[key as keyof Settings] !== value)) as SettingsPatch;
}
