// The vision model looks at the pictures: Check compares a stored picture with what the user asked for and
// proposes a corrected prompt (a suggestion beside the user's, never over it); Describe writes a prompt from a
// picture the user brings. The request carries the PNG itself in the message's `images` and a JSON schema in
// `format`; the answer is repaired, validated, and asked for once more when it cannot be read.
import {
  buildCheckMessages,
  buildCheckReminder,
  buildDescribeMessages,
  buildDescribeReminder,
  critiqueJsonSchema,
  describeJsonSchema,
  fitPromptToFamily,
  parseCritique,
  parseDescription,
  resolveFamily,
  type ChatMessage,
  type Critique,
  type Description,
  type FamilyStyle,
  type VisionMessages,
} from '../protocol/index.ts';
import { isChatModelError } from './errors.ts';
import type { TurnErrorCode } from './error-codes.ts';
import type { DoneEvent, TurnEvent } from './events.ts';
import type { ImageCheck } from './image-check.ts';
import type { ImageRecord } from './image-record.ts';
import { describeReferenceTypes, isReferenceImage, isReferenceType, type PictureReader } from './reference-commands.ts';
import { invalid, notFound, refuse, type Result } from './results.ts';
import type { ServiceState } from './service-state.ts';
import { DEFAULT_SETTINGS, settingsPatchSchema, type Settings } from './settings.ts';
import { LIMITS } from '../protocol/limits.ts';

/** How many of the user's latest messages the vision model reads as "what was asked". */
const REQUEST_MESSAGES = 4;
/** Each of them at most this long (a pasted essay is not what a picture is checked against). */
const REQUEST_MESSAGE_CHARS = 600;
/** The longest a vision call may take, a model load included; Cancel or hanging up ends it sooner. */
export const VISION_TIMEOUT_MS = 5 * 60_000;

export const NO_VISION_MODEL =
  'No vision model is set, so Easel cannot look at pictures. Pull one (`ollama pull gemma3`, or Pull in Settings → Models), then choose it as the vision model in Settings → Models or start Easel with --vision-model gemma3.';

export interface VisionDeps {
  /** --vision-model: the vision model of every conversation that chose none. */
  defaultModel?: string;
  /** Reads a picture to describe: the same types and limits as a reference image. */
  readPicture: PictureReader;
  /** Makes a new conversation with this id (Describe on the empty page) from what the page shows, as a first message would. */
  createConversation?: (id: string, init: NewConversation) => Result<unknown>;
  /** The longest one check or description may take (default VISION_TIMEOUT_MS). */
  timeoutMs?: number;
}

export interface CheckOptions {
  /** Ends the call when it aborts (the client hung up, Cancel). */
  signal: AbortSignal;
}

/** What the empty page shows: the prompt typed and the settings set, kept by the conversation a picture starts. */
export interface NewConversation {
  prompt?: unknown;
  /** Checked as a settings change (settingsPatchSchema). */
  settings?: unknown;
}

export interface DescribeOptions extends CheckOptions {
  /** The conversation does not exist yet (the empty page): a good picture and a vision model create it, with this. */
  create?: NewConversation;
}

export interface VisionCommands {
  /**
   * Checks a stored picture of the conversation: `critique` (kept with the picture), then `pane` (the revised
   * prompt waits as a suggestion when something was missed), then `done`. Refused before anything is sent when
   * there is no such picture, no vision model, or the model cannot see.
   */
  checkImage(id: string, imageId: string, options: CheckOptions): Promise<Result<AsyncIterable<TurnEvent>>>;
  /**
   * Writes a prompt from a picture (PNG, JPEG or WebP of type `type`, refused like a reference image when it is
   * not one): `description`, then `pane` (the prompt is the new current version, source `vision`, one undo away),
   * then `done`.
   */
  describePicture(id: string, bytes: Uint8Array, type: string, options: DescribeOptions): Promise<Result<AsyncIterable<TurnEvent>>>;
  /** The vision model a conversation uses: its own choice, else --vision-model; null when there is none. */
  visionModelOf(settings: Pick<Settings, 'visionModel'>): string | null;
  /** Ends the conversation's checks and descriptions in flight (Cancel); false when none ran. */
  cancelChecks(id: string): boolean;
  /**
   * Fix and regenerate, checked first (nothing written): the latest check of the picture gives its revised prompt,
   * and the picture its seed and size. Refused when the picture was never checked.
   */
  findRevisedPrompt(id: string, imageId: unknown): Result<RevisedPrompt>;
  /**
   * Fix and regenerate, once everything else is checked: the revised prompt becomes the current prompt (a `vision`
   * version: the waiting suggestion taken, or a new version).
   */
  takeRevisedPrompt(id: string, imageId: unknown): Result<RevisedPrompt>;
}

type VisionAnswer<T> = { ok: true; value: T; attempts: number } | { ok: false; code: TurnErrorCode; message: string; attempts: number };

export function createVisionCommands(state: ServiceState, vision: VisionDeps): VisionCommands {
  const { deps } = state;
  const timeoutMs = vision.timeoutMs ?? VISION_TIMEOUT_MS;
  /** The vision calls in line, one after the other. */
  let lane: Promise<unknown> = Promise.resolve();

  function visionModelOf(settings: Pick<Settings, 'visionModel'>): string | null {
    return settings.visionModel ?? vision.defaultModel ?? null;
  }

  /** The model, checked against what Ollama lists (asked again when it is not known yet). */
  async function pickModel(settings: Settings, signal: AbortSignal): Promise<Result<string>> {
    const model = visionModelOf(settings);
    if (model === null) return refuse('unavailable', NO_VISION_MODEL);
    await state.catalog.refreshFor({ visionModel: model }, signal);
    const checked = state.catalog.checkChoice({ visionModel: model });
    // Ollama not answering is no fault of the choice: 503, as for a message.
    if (!checked.ok && state.catalog.chatProblem() !== null) return refuse('unavailable', checked.error.message);
    if (!checked.ok) return checked;
    return { ok: true, value: checked.value.visionModel ?? model };
  }

  /** The style of the checkpoint that painted (or will paint): the prompt is written for it. */
  function styleFor(settings: Settings, checkpoint: string | null): FamilyStyle {
    return resolveFamily(settings.family, checkpoint ?? settings.checkpoint ?? state.catalog.serverCheckpoint()).style;
  }

  /** One call, then one more with a reminder when the answer cannot be read; the schema constrains both. */
  async function ask<T>(
    model: string,
    messages: VisionMessages,
    png: Uint8Array,
    format: Record<string, unknown>,
    parse: (text: string) => { ok: true; value: T } | { ok: false; message: string },
    reminderText: string,
    signal: AbortSignal,
    kind: Kind,
  ): Promise<VisionAnswer<T>> {
    const conversation: ChatMessage[] = [
      { role: 'system', content: messages.system },
      { role: 'user', content: messages.user, images: [png] },
    ];
    let attempts = 0;
    // Stryker disable next-line StringLiteral: read only by the reminder, which comes after a failed parse has set it
    let problem = '';
    for (const reminder of [undefined, reminderText]) {
      if (reminder !== undefined) conversation.push({ role: 'user', content: `${reminder} (${problem})` });
      attempts += 1;
      let text = '';
      try {
        for await (const chunk of deps.llm.chat({ model, messages: conversation, format, options: { temperature: 0 }, signal })) {
          if (chunk.type === 'text') text += chunk.text;
        }
      } catch (error) {
        if (signal.aborted) return { ok: false, code: 'vision_cancelled', message: describeAbort(signal, kind), attempts };
        if (isChatModelError(error)) return { ok: false, code: 'vision_failed', message: `The vision model ${model} could not answer: ${error.message}`, attempts };
        throw error;
      }
      const parsed = parse(text);
      if (parsed.ok) return { ok: true, value: parsed.value, attempts };
      problem = parsed.message;
      deps.logger.warn('the vision model answered in a shape Easel cannot read', { model, attempt: attempts, problem });
      conversation.push({ role: 'assistant', content: text });
    }
    return {
      ok: false,
      code: 'vision_bad_response',
      message: `The vision model ${model} answered twice in a shape Easel cannot read (${problem}). Try again, or choose another vision model (gemma3 and qwen2.5vl follow the format best).`,
      attempts,
    };
  }

  function describeAbort(signal: AbortSignal, kind: Kind): string {
    return signal.reason instanceof DOMException && signal.reason.name === 'TimeoutError'
      ? `The vision model took longer than ${Math.round(timeoutMs / 1000)} s to answer, so Easel stopped waiting. Try again once it is loaded, or choose a smaller vision model.`
      : kind === 'check'
        ? 'The check was cancelled.'
        : 'The description was cancelled.';
  }

  /**
   * One vision call at a time, after the image server is done (a small GPU holds one model at a time): the time
   * limit counts from when it is this call's turn, not while it waits for pictures or for other checks.
   */
  async function askInTurn<T>(kind: Kind, model: string, messages: VisionMessages, png: Uint8Array, signal: AbortSignal): Promise<VisionAnswer<T>> {
    let leave!: () => void;
    const mine = new Promise<void>((resolve) => (leave = resolve));
    const before = lane;
    lane = lane.then(() => mine);
    try {
      // The image server is asked once this call's turn has come: an image started meanwhile goes first too.
      await Promise.race([before.then(() => deps.images.settled()), abortion(signal)]);
      if (signal.aborted) return { ok: false, code: 'vision_cancelled', message: describeAbort(signal, kind), attempts: 0 };
      const bounded = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
      const [format, parse, reminder] = kind === 'check' ? [critiqueJsonSchema, parseCritique, buildCheckReminder()] : [describeJsonSchema, parseDescription, buildDescribeReminder()];
      return (await ask(model, messages, png, format, parse as (text: string) => { ok: true; value: T } | { ok: false; message: string }, reminder, bounded, kind)) as VisionAnswer<T>;
    } finally {
      leave();
    }
  }

  /** The user's latest messages, newest last: what a picture is checked against. */
  function readRequest(id: string): string[] {
    const turns = deps.store.listTurns(id).filter((turn) => turn.role === 'user' && turn.status !== 'replaced');
    return turns.slice(-REQUEST_MESSAGES).map((turn) => turn.text.slice(0, REQUEST_MESSAGE_CHARS));
  }

  function done(attempts: number, level: DoneEvent['level']): DoneEvent {
    return { type: 'done', attempts, repairs: [], level, evalCount: 0, tokensPerSecond: 0, firstTokenMs: null };
  }

  /** Each conversation's checks and descriptions in flight: Cancel ends them (cancelChecks). */
  const inFlight = new Map<string, Set<AbortController>>();

  /** The latest check of a picture of this conversation: its revised prompt, and the picture's seed and size. */
  function findRevisedPrompt(id: string, imageId: unknown): Result<RevisedPrompt> {
    if (!state.findRecord(id)) return notFound(id);
    const image = typeof imageId === 'string' ? deps.store.getImage(imageId) : undefined;
    if (!image || image.conversationId !== id) {
      const message = `fix must be the id of a picture of this conversation that was checked (there is no ${JSON.stringify(imageId)}).`;
      return refuse('invalid', message, { fix: message });
    }
    const check = deps.store.listImageChecks(id).findLast((stored) => stored.imageId === image.id);
    if (!check) return refuse('conflict', 'This picture has not been checked yet: press Check first, then Fix and regenerate.');
    return { ok: true, value: { prompt: check.revisedPrompt, settings: { width: image.width, height: image.height, ...(image.seed === null ? {} : { seed: image.seed }) } } };
  }

  /** A stream that runs `work` once read, ended by `signal` or by cancelChecks(id) (askInTurn bounds its time). */
  function stream(id: string, signal: AbortSignal, work: (signal: AbortSignal) => AsyncGenerator<TurnEvent>): AsyncIterable<TurnEvent> {
    return {
      [Symbol.asyncIterator]: async function* () {
        const cancel = new AbortController();
        const running = inFlight.get(id) ?? new Set();
        inFlight.set(id, running);
        running.add(cancel);
        try {
          yield* work(AbortSignal.any([signal, cancel.signal]));
        } finally {
          running.delete(cancel);
          if (running.size === 0) inFlight.delete(id);
        }
      },
    };
  }

  return {
    visionModelOf,

    cancelChecks(id) {
      const running = inFlight.get(id);
      if (!running) return false;
      // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a cancel
      for (const controller of running) controller.abort(new Error('cancelled by the user'));
      return true;
    },

    findRevisedPrompt,

    takeRevisedPrompt(id, imageId) {
      const found = findRevisedPrompt(id, imageId);
      if (!found.ok) return found;
      const record = state.findRecord(id);
      const revised = found.value.prompt;
      if (record && revised !== record.prompt) {
        const waiting = record.suggestion;
        const taken = state.tryWrite('change', () =>
          waiting !== null && waiting.imageId === imageId && waiting.prompt === revised
            ? deps.store.takeSuggestion(id, waiting, state.isoNow())
            : deps.store.addUserPromptVersion(id, revised, state.isoNow(), 'vision'),
        );
        if (!taken.ok) return taken;
        state.announce(id);
      }
      return found;
    },

    async checkImage(id, imageId, { signal }) {
      const record = state.findRecord(id);
      if (!record) return notFound(id);
      const image = deps.store.getImage(imageId);
      if (!image || image.conversationId !== id) return refuse('not_found', `There is no image ${imageId} in this conversation.`);
      if (isReferenceImage(image)) {
        return refuse('invalid', 'A reference image was not made from a prompt, so there is nothing to check it against. Describe writes a prompt from it instead.');
      }
      const model = await pickModel(record.settings, signal);
      if (!model.ok) return model;
      const png = await readPicture(image);
      if (!png.ok) return png;
      const style = styleFor(record.settings, image.model);
      const messages = buildCheckMessages({ request: readRequest(id), prompt: image.prompt, style });
      return {
        ok: true,
        value: stream(id, signal, async function* (bounded) {
          // Deleted before this was read (cancelChecks reaches only what runs): nothing to ask the model.
          if (!state.findRecord(id)) {
            yield { type: 'error', code: 'not_found', message: 'The conversation was deleted before its picture was checked.' };
            yield done(0, 'error');
            return;
          }
          // Every page shows that the picture is being checked (its critique, or why not, follows).
          state.feed.publish(id, { type: 'check_started', imageId: image.id, model: model.value });
          const answer = await askInTurn<Critique>('check', model.value, messages, png.value, bounded);
          // Every failure after check_started is said to every page too, in the words of this stream.
          const fail = (code: TurnErrorCode, message: string, attempts: number): TurnEvent[] => {
            state.feed.publish(id, { type: 'check_failed', imageId: image.id, code, message });
            return [{ type: 'error', code, message }, done(attempts, code === 'vision_cancelled' ? 'stopped' : 'error')];
          };
          if (!answer.ok) {
            yield* fail(answer.code, answer.message, answer.attempts);
            return;
          }
          // Deleted meanwhile (the picture, or its conversation): nothing to keep it with.
          if (!state.findRecord(id) || !deps.store.getImage(image.id)) {
            yield* fail('not_found', 'The picture was deleted while it was checked, so its check was not kept.', answer.attempts);
            return;
          }
          // Written for the checkpoint's family, and made right for it as the chat model's prompts are.
          const critique = { ...answer.value, revisedPrompt: fitWithin(answer.value.revisedPrompt, style) };
          const kept = keepCheck(record.id, image, model.value, critique);
          if (!kept.ok) {
            yield* fail('storage_failed', kept.error.message, answer.attempts);
            return;
          }
          const event: TurnEvent = { type: 'critique', ...toCritiqueEvent(kept.value) };
          // Every page of the conversation shows it under the picture, as this stream's reader does.
          state.feed.publish(id, event);
          yield event;
          const pane = suggest(id, image.id, critique);
          if (pane) yield pane;
          yield done(answer.attempts, answer.attempts === 1 ? 'clean' : 'reminder');
        }),
      };
    },

    async describePicture(id, bytes, type, { signal, create }) {
      const creating = create !== undefined && !state.findRecord(id) && vision.createConversation !== undefined;
      // The empty page's settings (its vision model among them) count before the conversation exists.
      // Stryker disable next-line OptionalChaining: creating is true only when create is defined
      const patch = creating ? settingsPatchSchema.safeParse(create?.settings ?? {}) : undefined;
      if (patch && !patch.success) return invalid(patch.error);
      const settings = state.findRecord(id)?.settings ?? (patch?.success ? { ...DEFAULT_SETTINGS, ...patch.data } : undefined);
      if (!settings) return notFound(id);
      if (!isReferenceType(type)) return refuse('invalid', describeReferenceTypes(type));
      const model = await pickModel(settings, signal);
      if (!model.ok) return model;
      const picture = await vision.readPicture(bytes, type);
      if (!picture.ok) return picture;
      const png = picture.value.png;
      // Only a good picture, and a vision model to read it, make a conversation.
      if (creating) {
        const created = vision.createConversation?.(id, { ...create, ...(patch?.success ? { settings: patch.data } : {}) });
        if (created && !created.ok) return created;
      }
      const record = state.findRecord(id);
      if (!record) return notFound(id);
      const style = styleFor(record.settings, null);
      const messages = buildDescribeMessages({ style });
      return {
        ok: true,
        value: stream(id, signal, async function* (bounded) {
          if (!state.findRecord(id)) {
            yield { type: 'error', code: 'not_found', message: 'The conversation was deleted before the picture was described.' };
            yield done(0, 'error');
            return;
          }
          const answer = await askInTurn<Description>('describe', model.value, messages, png, bounded);
          if (!answer.ok) {
            yield { type: 'error', code: answer.code, message: answer.message };
            yield done(answer.attempts, answer.code === 'vision_cancelled' ? 'stopped' : 'error');
            return;
          }
          if (!state.findRecord(id)) {
            yield { type: 'error', code: 'not_found', message: 'The conversation was deleted while the picture was described.' };
            yield done(answer.attempts, 'error');
            return;
          }
          const prompt = fitWithin(answer.value.prompt, style);
          yield { type: 'description', prompt, subject: answer.value.subject };
          // The user asked for it: the description is the prompt now, one undo away (the chat model hears of it).
          const written = state.tryWrite('change', () => deps.store.addUserPromptVersion(id, prompt, state.isoNow(), 'vision'));
          if (!written.ok) {
            yield { type: 'error', code: 'storage_failed', message: written.error.message };
            yield done(answer.attempts, 'error');
            return;
          }
          state.announce(id);
          const pane = state.paneOf(id);
          if (pane.ok) yield { type: 'pane', ...pane.value };
          yield done(answer.attempts, answer.attempts === 1 ? 'clean' : 'reminder');
        }),
      };
    },
  };

  async function readPicture(image: ImageRecord): Promise<Result<Uint8Array>> {
    try {
      return { ok: true, value: await deps.imageFiles.read(image.file) };
    } catch (error) {
      deps.logger.error('a picture to check could not be read', { imageId: image.id, error });
      return refuse('storage', `The picture's file (${image.file}) could not be read from the images folder, so it cannot be checked. Check the data folder (--data-dir).`);
    }
  }

  function keepCheck(conversationId: string, image: ImageRecord, model: string, critique: Critique): Result<ImageCheck> {
    return state.tryWrite('change', () => deps.store.addImageCheck({ conversationId, imageId: image.id, model, ...critique, createdAt: state.isoNow() }));
  }

  /**
   * The revised prompt waits beside the user's when something was missed and it says something else: taking it
   * (Use suggestion, Fix and regenerate) makes it a version. The user's prompt is never replaced here.
   */
  function suggest(id: string, imageId: string, critique: Critique): TurnEvent | undefined {
    const record = state.findRecord(id);
    if (!record || critique.misses.length === 0 || critique.revisedPrompt === record.prompt) return undefined;
    // The chat model's prompt waiting beside the user's stays: the critique's Fix and regenerate takes the revised one.
    if (record.suggestion !== null && record.suggestion.imageId === undefined) return undefined;
    const stored = state.tryWrite('change', () => deps.store.setSuggestion(id, { prompt: critique.revisedPrompt, turnId: null, imageId }));
    if (!stored.ok) return undefined;
    state.announce(id);
    const pane = state.paneOf(id);
    return pane.ok ? { type: 'pane', ...pane.value } : undefined;
  }
}

/** The critique as its event carries it. */
export function toCritiqueEvent(check: ImageCheck): Omit<Extract<TurnEvent, { type: 'critique' }>, 'type'> {
  return { imageId: check.imageId, checkId: check.id, model: check.model, matches: check.matches, misses: check.misses, revisedPrompt: check.revisedPrompt };
}

/** Resolves when the signal aborts (never rejects). */
function abortion(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: a signal aborts once, and a promise resolves once: `once` changes nothing
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

type Kind = 'check' | 'describe';

/** What Fix and regenerate makes: the revised prompt, on the checked picture's seed and size. */
export interface RevisedPrompt {
  prompt: string;
  settings: Pick<Settings, 'width' | 'height'> & { seed?: number };
}

/** Made right for the family, unless that makes it longer than a prompt may be: then as the model wrote it. */
function fitWithin(prompt: string, style: FamilyStyle): string {
  const fitted = fitPromptToFamily(prompt, style);
  return fitted.length <= LIMITS.promptMaxChars ? fitted : prompt;
}
