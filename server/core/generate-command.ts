// Generate: what one press of Generate (or POST …/generations) makes, checked before anything is stored: the
// prompt on screen saved first, then a single image, a batch (`count`), a comparison of two prompt versions
// (`promptVersions`), a variation of a stored picture (`from`) or a checked picture made again from its revised
// prompt (`fix`). The images run as activities of their own (image-activities.ts).
import { NO_BACKEND_MESSAGE } from './generation.ts';
import type { CompareVersion, TurnEvent } from './events.ts';
import { endImageStream, type ImageActivity } from './image-activities.ts';
import { imageSourceSchema, VARY_STRENGTH, type ImageRecord } from './image-record.ts';
import { invalid, notFound, refuse, type Refusal, type Result } from './results.ts';
import type { ServiceState } from './service-state.ts';
import { DEFAULT_SETTINGS, settingsPatchSchema, type Settings, type SettingsPatch } from './settings.ts';
import { promptSchema } from './text.ts';
import type { PinnableField } from './pane.ts';
import type { VisionCommands } from './vision-commands.ts';
import { LIMITS } from '../protocol/limits.ts';

export interface GenerateOverrides {
  prompt?: unknown;
  settings?: unknown;
  /** Vary: `{ imageId, strength }`, the stored image to start from (of any conversation) and how much to change it. */
  from?: unknown;
  /** How many images, 1–8 (default 1): a batch, seeds seed, seed + 1, …, each its own record. */
  count?: unknown;
  /**
   * Compare: `[a, b]`, two distinct prompt versions of this conversation, or `"previous"` (the pane's and the one it
   * was changed from), each made on the same seeds (`count` each), A's images first. Not with `prompt` (but for
   * the page's, saved first).
   */
  promptVersions?: unknown;
  /**
   * Fix and regenerate: the id of a checked picture of this conversation. Its latest check's revised prompt becomes
   * the prompt (a `vision` version) and the image is made on that picture's seed and size. Not with `prompt`
   * (but the page's, saved first), `promptVersions` or `from`.
   */
  fix?: unknown;
}

/** The most images one Generate makes. */
export const MAX_IMAGE_COUNT = 8;

export interface GenerateOptions {
  /** The page's empty page: the conversation is made first, with the overrides as its prompt and settings. */
  create?: boolean;
  /**
   * The overrides are what the user's screen shows: a prompt that differs from the stored one is saved as
   * their version first, so the image records the version it was made from (the API's overrides are not saved).
   */
  fromScreen?: boolean;
  /** The pane revision the request was made from: a Generate from an older pane is refused as 'stale' (absent: no check). */
  baseRevision?: unknown;
  /**
   * The image is the server's, like a reply (the page's Generate): the reader going away ends only its reading,
   * not the image. Without it (the API), hanging up or reading no further cancels the image.
   */
  outlivesReader?: boolean;
}


export interface GenerateCommandDeps {
  vision: Pick<VisionCommands, 'findRevisedPrompt' | 'takeRevisedPrompt'>;
  /** The model choices of a settings patch checked against what the servers list (their canonical names). */
  checkChoices<T extends SettingsPatch>(patch: T): Result<T>;
  /** A new conversation's settings and pins from what the empty page set. */
  newSettings(patch: SettingsPatch): { settings: Settings; pinned: PinnableField[] };
  /** Whether an id may name a new conversation. */
  isConversationId(id: string): boolean;
  /** Generate's streams still open: shutdown waits for them to write their `done`. */
  openImageStreams: Set<Promise<void>>;
}

export interface GenerateCommand {
  generate(id: string, overrides: GenerateOverrides, signal: AbortSignal, options?: GenerateOptions): Result<AsyncIterable<TurnEvent>>;
}

export function createGenerateCommand(state: ServiceState, commands: GenerateCommandDeps): GenerateCommand {
  const { deps, activities, findRecord, tryWrite, isoNow } = state;
  const { vision, checkChoices, newSettings, isConversationId, openImageStreams } = commands;

  /**
   * Vary's `from`: a stored image (of any conversation) and a strength, checked before anything is made or stored;
   * refused in the backend's own words when it cannot start from an image.
   */
  function readVaryFrom(value: unknown): Result<{ image: ImageRecord; strength: number } | undefined> {
    if (value === undefined) return { ok: true, value: undefined };
    const parsed = imageSourceSchema.safeParse(value);
    if (!parsed.success) {
      const message = `from must be { "imageId": the id of a stored image, "strength": a number from ${VARY_STRENGTH.min} to ${VARY_STRENGTH.max} } (how much of the image to change).`;
      return refuse('invalid', message, { from: message });
    }
    const image = deps.store.getImage(parsed.data.imageId);
    if (!image) {
      const message = `There is no image ${JSON.stringify(parsed.data.imageId)} to vary: it was deleted, or the id is wrong (GET a conversation to see its images' ids).`;
      return refuse('invalid', message, { from: message });
    }
    const canVary = deps.images.canVary();
    if (typeof canVary === 'string') return refuse('invalid', canVary, { from: canVary });
    return { ok: true, value: { image, strength: parsed.data.strength } };
  }

  /** What `fix` cannot go with: a prompt of the API's (the page's is saved first), a comparison, a Vary. */
  function readFixOverrides(overrides: GenerateOverrides, fromScreen: boolean): Refusal | undefined {
    const other = overrides.promptVersions !== undefined ? 'promptVersions' : overrides.from !== undefined ? 'from' : overrides.prompt !== undefined && !fromScreen ? 'prompt' : undefined;
    if (other === undefined) return undefined;
    const message = `Send fix or ${other}, not both: Fix and regenerate makes the checked picture again from its revised prompt.`;
    return refuse('invalid', message, { fix: message });
  }

  /**
   * Compare's `promptVersions`: two distinct versions of this conversation (each named when unknown), or
   * `"previous"`: the pane's version and the one it was changed from. Never with a `prompt` override, but for the
   * page's, which is saved first (so the typing on screen is side B); undefined when it is no comparison.
   */
  function readCompareVersions(id: string, overrides: GenerateOverrides, fromScreen: boolean): Result<[CompareVersion, CompareVersion] | undefined> {
    const value = overrides.promptVersions;
    if (value === undefined) return { ok: true, value: undefined };
    const wrong = (message: string) => refuse('invalid', message, { promptVersions: message });
    if (overrides.prompt !== undefined && !fromScreen) return wrong('Send promptVersions or prompt, not both: a comparison makes each version as it was stored.');
    let pair: [number, number];
    if (value === 'previous') {
      const current = findRecord(id)?.promptVersion ?? null;
      const parent = current === null ? null : (deps.store.getPromptVersion(id, current)?.parentId ?? null);
      if (current === null || parent === null) return wrong('There is no earlier version of the prompt to compare with: change the prompt first.');
      pair = [parent, current];
    } else if (Array.isArray(value) && value.length === 2 && value.every((version) => Number.isInteger(version))) {
      pair = value as [number, number];
    } else {
      return wrong('promptVersions must be two prompt version ids, [a, b], or "previous" (GET the conversation: its promptVersions list them).');
    }
    const [a, b] = pair;
    if (a === b) return wrong('promptVersions must be two different versions of the prompt: a comparison of one version with itself shows nothing.');
    const sides: CompareVersion[] = [];
    for (const versionId of [a, b]) {
      const version = deps.store.getPromptVersion(id, versionId);
      if (!version) return wrong(`There is no prompt version ${versionId} in this conversation (GET the conversation: its promptVersions list them).`);
      if (version.prompt.trim() === '') return wrong(`Prompt version ${versionId} is empty: nothing to make.`);
      sides.push({ prompt: version.prompt, promptVersion: version.id });
    }
    return { ok: true, value: sides as [CompareVersion, CompareVersion] };
  }

  function generate(id: string, overrides: GenerateOverrides, signal: AbortSignal, options: GenerateOptions = {}): Result<AsyncIterable<TurnEvent>> {
    // What the screen shows becomes the user's version first, whatever is refused after: the image records
    // the version it was made from.
    const fresh = state.checkBase(id, options.baseRevision);
    if (!fresh.ok) return fresh;
    if (options.fromScreen && overrides.prompt !== undefined) {
      const saved = state.saveScreenPrompt(id, overrides.prompt, 'change');
      if (!saved.ok) return saved;
      state.announce(id);
    }
    // Fix and regenerate: the checked picture's revised prompt, made on the picture's seed (taken below, once
    // nothing else is refused).
    let fixed: Partial<Settings> = {};
    const fixing = overrides.fix !== undefined;
    if (fixing) {
      const fixWith = readFixOverrides(overrides, options.fromScreen === true);
      if (fixWith !== undefined) return fixWith;
      const found = vision.findRevisedPrompt(id, overrides.fix);
      if (!found.ok) return found;
      fixed = found.value.settings;
      overrides = { ...overrides, prompt: found.value.prompt };
    }
    let record = findRecord(id);
    const creating = !record && options.create === true;
    if (!record && !creating) return notFound(id);
    if (creating && !isConversationId(id)) {
      return refuse('invalid', 'This new conversation has no valid id: reload the page and try again.');
    }
    if (!deps.images.configured) return refuse('unavailable', NO_BACKEND_MESSAGE);
    const base = record ?? { prompt: '', settings: DEFAULT_SETTINGS };
    const compared = readCompareVersions(id, overrides, options.fromScreen === true);
    if (!compared.ok) return compared;
    const sides = compared.value;
    const prompt = overrides.prompt === undefined ? { success: true as const, data: base.prompt } : promptSchema.safeParse(overrides.prompt);
    if (!prompt.success) return invalid(prompt.error, 'prompt');
    const patch = overrides.settings === undefined ? { success: true as const, data: {} } : settingsPatchSchema.safeParse(overrides.settings);
    if (!patch.success) return invalid(patch.error);
    const checked = checkChoices(patch.data);
    if (!checked.ok) return checked;
    if (sides === undefined && prompt.data.trim() === '') {
      return refuse('invalid', 'The prompt is empty: write one or chat until the assistant suggests one.', { prompt: 'The prompt is empty.' });
    }
    const from = readVaryFrom(overrides.from);
    if (!from.ok) return from;
    const vary = from.value;
    const count = overrides.count === undefined ? 1 : overrides.count;
    if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_IMAGE_COUNT) {
      const message = `count must be a whole number from 1 to ${MAX_IMAGE_COUNT}: how many images to make.`;
      return refuse('invalid', message, { count: message });
    }
    const batchCount: number = count;
    const made = creating ? newSettings(checked.value) : { settings: { ...base.settings, ...checked.value, ...fixed }, pinned: [] };
    // A variation keeps its starting image's shape unless the request names a size.
    const settings = vary === undefined ? made.settings : { ...made.settings, ...sizeOf(vary.image, checked.value) };
    if (fixing) {
      // The revised prompt becomes the prompt (a `vision` version) only now that the image will be made.
      const taken = vision.takeRevisedPrompt(id, overrides.fix);
      if (!taken.ok) return taken;
      record = findRecord(id);
    }
    if (creating) {
      // A first Generate makes the conversation, holding what was on screen.
      const created = tryWrite('change', () =>
        deps.store.createConversation({ id, createdAt: isoNow(), settings, prompt: prompt.data as string, pinned: made.pinned }),
      );
      if (!created.ok) return created;
      record = created.value;
      state.announce(id, 'created');
    }
    // The image records the version it was made from: the pane's, unless the prompt was overridden.
    const promptVersion = sides !== undefined ? sides[0].promptVersion : record && prompt.data === record.prompt ? record.promptVersion : null;
    const promptText = sides === undefined ? (prompt.data as string) : sides[0].prompt;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    openImageStreams.add(finished);
    async function* stream(): AsyncGenerator<TurnEvent> {
      let activity: ImageActivity | undefined;
      let last: TurnEvent | undefined;
      // The API's Generate belongs to its request: the client hanging up, or reading no further, cancels it
      // (unless it outlives its reader, as the page's does).
      const onAbort = () => {
        // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a cancel
        if (!options.outlivesReader) activity?.cancel(new Error('the client hung up'));
      };
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: the signal aborts once; a late call cancels what has already ended
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        const varied = vary === undefined ? {} : { from: { imageId: vary.image.id, strength: vary.strength, file: vary.image.file } };
        const begun = await activities.start({
          conversationId: id,
          turnId: null,
          prompt: promptText,
          settings,
          promptVersion,
          ...varied,
          ...(batchCount === 1 ? {} : { count: batchCount }),
          ...(sides === undefined ? {} : { compare: { sides } }),
        });
        if (!begun.ok) yield (last = begun.event);
        else {
          activity = begun.activity;
          if (signal.aborted) onAbort();
          for await (const event of activity.follow()) yield (last = event);
        }
        yield endImageStream(last);
      } finally {
        // Stryker disable next-line StringLiteral: the signal aborts once; a late call cancels what has already ended
        signal.removeEventListener('abort', onAbort);
        // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a cancel
        if (activity && !activity.finished && !options.outlivesReader) activity.cancel(new Error('the image is no longer awaited'));
        openImageStreams.delete(finished);
        finish();
      }
    }
    const events = stream();
    return { ok: true, value: { [Symbol.asyncIterator]: () => events } };
  }

  return { generate };
}

/**
 * A variation's size: its starting image's, to the nearest multiple of 8 within the settings' range, unless the
 * request names a width or height itself.
 */
function sizeOf(image: ImageRecord, patch: SettingsPatch): Pick<Settings, 'width' | 'height'> | Record<string, never> {
  if (patch.width !== undefined || patch.height !== undefined) return {};
  const { min, max, multipleOf } = LIMITS.size;
  const fit = (side: number) => Math.min(max, Math.max(min, Math.round(side / multipleOf) * multipleOf));
  return { width: fit(image.width), height: fit(image.height) };
}
