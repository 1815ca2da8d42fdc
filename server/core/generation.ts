import { randomBytes, randomInt } from 'node:crypto';
import { addDenoisingStrength, checkPngImage, formatA1111Parameters, parseA1111Parameters, readPngText, writePngText } from '../png/index.ts';
import { LIMITS } from '../protocol/limits.ts';
import type { ConversationStore } from './conversation.ts';
import { COMPARE_SIDES, type CompareSide, type ImageRecord, type ImageSource } from './image-record.ts';
import { ImageBackendError, isImageBackendError, isLoggedByStore, isStorageError } from './errors.ts';
import type { CompareVersion, ImageEvent, TurnEvent } from './events.ts';
import { IMAGE_BACKEND_FAILURES, type TurnErrorCode } from './error-codes.ts';
import { describeStorageFailure } from './library.ts';
import type { Logger } from './logger.ts';
import type { ImageBackend, ImageModelOptions, ImageProgress, ImageRequest, ImageResult, SeedRange, UsedImageSettings } from './ports.ts';
import type { Settings } from './settings.ts';

export interface ImageBackendStatus {
  backend: ImageBackend['name'] | 'none';
  url: string | null;
  configured: boolean;
  reachable: boolean;
  detail: string;
  /** The server that answered, when the adapter can tell (e.g. "stable-diffusion.cpp sd-server"). */
  server?: string;
  /** True when --image-backend auto chose `backend` by asking the server. */
  auto?: true;
  /** Whether it can start an image from another one (Vary): true, or why not; absent while that cannot be told. */
  canVary?: true | string;
}

export interface GenerateInput {
  conversationId: string;
  /** The assistant turn that asked for it; null for the Generate button / API. */
  turnId: number | null;
  prompt: string;
  settings: Settings;
  /** The prompt version `prompt` is; null when it is none (an API override). */
  promptVersion: number | null;
  /** Vary: the stored image to start from (its record's id and file) and how much of it to change. */
  from?: ImageSource & { file: string };
  /** How many images (1–8, default 1): seeds seed, seed + 1, …; each its own record and `image` event. */
  count?: number;
  /**
   * Compare: two versions of the prompt made on the same seeds, side A's images first, then side B's; `prompt`
   * and `promptVersion` are then side A's. Each image's event has `compare: { id (the generation's), side, index }`.
   */
  compare?: { sides: [CompareVersion, CompareVersion] };
  signal: AbortSignal;
}

function pickVersion({ promptVersion, prompt }: CompareVersion): CompareVersion {
  return { promptVersion, prompt };
}

export interface ImageGenerator {
  readonly configured: boolean;
  /** Yields `generation`, then `progress`…, then `image` or `error`. Never throws. */
  generate(input: GenerateInput): AsyncGenerator<TurnEvent>;
  checkHealth(signal?: AbortSignal): Promise<ImageBackendStatus>;
  /**
   * Whether the backend can start an image from another one (Vary): true, or the one sentence saying why not
   * (no backend: how to configure one); undefined while that cannot be told yet (see ImageBackend.canVary).
   */
  canVary(): true | string | undefined;
  /**
   * What the image server can paint with, asked now; null without a backend. The adapter's name comes with it
   * (with --image-backend auto, the one it found). Throws ImageBackendError when the server cannot be asked.
   */
  listModels(signal: AbortSignal): Promise<{ backend: ImageBackend['name']; options: ImageModelOptions } | null>;
  /** Resolves once every generation started so far has settled on the backend (a cancelled one's interrupt sent). */
  settled(): Promise<void>;
}

export interface ImageGeneratorDeps {
  backend: ImageBackend | null;
  store: ConversationStore;
  logger: Logger;
  clock: { now(): number };
  /**
   * Writes the finished PNG under the images directory; names are never reused. It must leave no partial
   * file when it fails (write to a temporary name, then rename).
   */
  saveFile(name: string, bytes: Uint8Array): Promise<void>;
  /** Removes a saved PNG whose record could not be stored (a file already gone is not an error). */
  removeFile?(name: string): Promise<void>;
  /** Reads a stored PNG of the images folder: the starting image of a Vary. Absent: no image can be varied. */
  readFile?(name: string): Promise<Uint8Array>;
  /** Where images are saved, named in the message when a write fails. */
  imagesDir?: string;
  /**
   * Frees the GPU before an image (--unload-llm): every chat model Ollama holds, not only this conversation's
   * (with a chat model per conversation, the one in memory may be another conversation's).
   */
  unloadLlm?: () => Promise<void>;
  /** A random seed from `min` to `max`, both included. */
  randomSeed?: (range: SeedRange) => number;
  /** Written as the PNG text's Version field ("Easel 0.1.0") when Easel writes that text. */
  writer?: string;
  /** The most pixels an image may have (--max-image-pixels); default checkPngImage's, 8192×8192. */
  maxImagePixels?: number;
  newImageId?: () => string;
}

export const NO_BACKEND_MESSAGE =
  'No image backend is configured, so Easel only crafts prompts. Start it with --image-url pointing at your image server (Easel finds out which one it is), or name it with --image-backend a1111, comfyui, localai or openai, to make pictures.';

const BACKEND_LABELS: Record<ImageBackend['name'], string> = {
  a1111: 'AUTOMATIC1111',
  comfyui: 'ComfyUI',
  openai: 'The OpenAI-compatible image server',
  localai: 'LocalAI',
  auto: 'The image server',
};

/** A1111's range (`random.randrange(4294967294)`), and what every backend without a narrower one takes. */
const DEFAULT_SEED_RANGE: SeedRange = { min: 0, max: LIMITS.seed.max };

/** What the image was really made with: the record, the event and the PNG text are built from this one value. */
interface MadeWith extends UsedImageSettings {
  prompt: string;
  negativePrompt: string;
}

/** A parameters text the backend wrote itself (A1111, sd.cpp): it has a parameters line, not just a prompt. */
function readOwnParameters(png: Uint8Array): ReturnType<typeof parseA1111Parameters> | undefined {
  const text = readPngText(png)['parameters'];
  if (text === undefined) return undefined;
  const parsed = parseA1111Parameters(text);
  return parsed.steps !== undefined || parsed.seed !== undefined ? parsed : undefined;
}

/**
 * The adapter's claims, overridden by the backend's own PNG text when it wrote one: that text is what the
 * server says it used, and it is kept in the file, so the record must say the same. sd.cpp writes
 * "Sampler: NONE" when it picked its default itself: not a name.
 */
function describeMadeWith(request: ImageRequest, result: ImageResult, own: ReturnType<typeof readOwnParameters>): MadeWith {
  const sampler = own?.sampler !== undefined && own.sampler !== 'NONE' ? own.sampler : result.sampler;
  const scheduler = own?.scheduler ?? result.scheduler;
  const pick = <T>(value: T | undefined, fallback: T | undefined): T | undefined => value ?? fallback;
  const madeWith: MadeWith = { prompt: result.prompt ?? request.prompt, negativePrompt: result.negativePrompt ?? request.negativePrompt };
  const seed = pick(own?.seed, result.seed);
  const steps = pick(own?.steps, result.steps);
  const cfg = pick(own?.cfg, result.cfg);
  const model = pick(own?.model, result.model);
  if (seed !== undefined) madeWith.seed = seed;
  if (steps !== undefined) madeWith.steps = steps;
  if (cfg !== undefined) madeWith.cfg = cfg;
  // Stryker disable next-line ConditionalExpression: a key holding undefined is left out by every reader (the event, the record's null, the PNG text)
  if (sampler !== undefined && sampler !== '') madeWith.sampler = sampler;
  // Stryker disable next-line ConditionalExpression: a key holding undefined is left out by every reader (the event, the record's null, the PNG text)
  if (scheduler !== undefined && scheduler !== '') madeWith.scheduler = scheduler;
  // Stryker disable next-line ConditionalExpression: a key holding undefined is left out by every reader (the event, the record's null, the PNG text)
  if (model !== undefined && model !== '') madeWith.model = model;
  return madeWith;
}

/** A fixed seed the backend cannot take as it is (LocalAI keeps 31 bits): refused before anything is sent. */
class SeedOutOfRangeError extends Error {
  override readonly name = 'SeedOutOfRangeError';
}

/** A Vary the backend cannot make (its canVary sentence): refused before anything is sent. */
class CannotVaryError extends Error {
  override readonly name = 'CannotVaryError';
}

/** The starting image of a Vary could not be read from the images folder: nothing was sent. */
class SourceUnreadableError extends Error {
  override readonly name = 'SourceUnreadableError';
}

/** A write of a finished image failed: the disk, not the backend, is at fault. */
class ImageSaveError extends Error {
  override readonly name = 'ImageSaveError';
}

/**
 * One generation at a time per backend, always; later requests wait their turn (and say so). A job's slot
 * is handed on only when its own backend work has settled AND every job before it has, so cancelling a
 * queued job never lets the next one start beside the running one.
 */
export function createImageGenerator(deps: ImageGeneratorDeps): ImageGenerator {
  const randomSeed = deps.randomSeed ?? ((range: SeedRange) => randomInt(range.min, range.max + 1));
  const newImageId = deps.newImageId ?? (() => randomBytes(16).toString('hex'));
  let queue: Promise<void> = Promise.resolve();
  let pending = 0;
  /** Jobs the backend is working on now (sent, not yet answered or settled after a cancel). */
  let onBackend = 0;
  /** The jobs waiting for their turn, in order: the first one is next (place 1). */
  const waiting: Array<{ moved: (place: number) => void }> = [];

  /** A waiting job leaves the line (it starts, or it ended first): each one behind it moves up a place. */
  function leaveLine(entry: (typeof waiting)[number]): void {
    const at = waiting.indexOf(entry);
    if (at === -1) return;
    waiting.splice(at, 1);
    for (let behind = at; behind < waiting.length; behind++) waiting[behind]!.moved(behind + 1);
  }

  async function* generate(input: GenerateInput): AsyncGenerator<TurnEvent> {
    const id = newImageId();
    const backend = deps.backend;
    if (!backend) {
      yield { type: 'error', code: 'image_backend_missing', message: NO_BACKEND_MESSAGE };
      return;
    }
    const queued = pending > 0;
    pending++;
    const previous = queue;
    let release!: () => void;
    queue = new Promise<void>((resolve) => (release = resolve));
    // Aborted when the caller stops iterating, so an abandoned job is interrupted rather than left running.
    const abandoned = new AbortController();
    const signal = AbortSignal.any([input.signal, abandoned.signal]);
    /** The backend job running now (the batch's, or the current image's when the core loops). */
    let job: Promise<unknown> | undefined;
    /** Its place in line while it waits: told at first, then each time the line moves (a `progress` with `place`). */
    const moves = createChannel<number>();
    const inLine = { moved: (place: number) => moves.push(place) };
    try {
      if (queued) waiting.push(inLine);
      yield {
        type: 'generation',
        id,
        ...(queued ? { queued: true, place: waiting.length } : {}),
        ...(input.compare === undefined ? {} : { compare: { a: pickVersion(input.compare.sides[0]), b: pickVersion(input.compare.sides[1]) } }),
      };
      const started = waitOrAbort(previous, signal).finally(() => {
        leaveLine(inLine);
        moves.close();
      });
      started.catch(noop);
      // A job not in line is never told a place: its channel closes as it starts.
      for await (const place of moves) yield { type: 'progress', id, place };
      await started;
      if (deps.unloadLlm) {
        await deps.unloadLlm().catch((error: unknown) => deps.logger.warn('could not unload the chat model before the image', { error }));
      }
      if (backend.prepare !== undefined) await waitOrAbort(backend.prepare(signal), signal);
      const { settings } = input;
      const count = input.count ?? 1;
      const range = backend.seedRange ?? DEFAULT_SEED_RANGE;
      // A batch takes seed, seed + 1, …: each of them must be one the backend takes as it is.
      const last = settings.seed + count - 1;
      if (settings.seed !== -1 && (settings.seed < range.min || last > range.max)) {
        const asked = count === 1 ? `seed ${settings.seed}` : `a batch of ${count} from seed ${settings.seed} (seeds ${settings.seed} to ${last})`;
        throw new SeedOutOfRangeError(
          `${BACKEND_LABELS[backend.name]} at ${backend.url} takes seeds from ${range.min} to ${range.max} only, so ${asked} cannot be used: it would not make the image it names. Pick a seed in that range, or −1 for a random one.`,
        );
      }
      // A random batch: a random first seed, and the ones after it, all in range and all different.
      const seed = settings.seed === -1 ? randomSeed({ min: range.min, max: range.max - (count - 1) }) : settings.seed;
      // Vary: read after `prepare`, when --image-backend auto knows its adapter; refused before anything is sent.
      const init = input.from === undefined ? undefined : { png: await readSource(backend, input.from), strength: input.from.strength };
      const request: ImageRequest = {
        prompt: input.prompt,
        negativePrompt: settings.negativePrompt,
        steps: settings.steps,
        cfg: settings.cfg,
        seed,
        width: settings.width,
        height: settings.height,
        // Only what the user chose: null leaves the server's own, so a request stays as it always was.
        ...(settings.checkpoint === null ? {} : { checkpoint: settings.checkpoint }),
        ...(settings.sampler === null ? {} : { sampler: settings.sampler }),
        ...(settings.scheduler === null ? {} : { scheduler: settings.scheduler }),
        ...(init === undefined ? {} : { init }),
      };
      const source: ImageSource | null = input.from === undefined ? null : { imageId: input.from.imageId, strength: input.from.strength };
      // The images of a batch share the moment the first was saved: the page shows them as one entry.
      let batchAt: string | undefined;
      // Compare: each side in turn, on the same seeds; otherwise the one prompt.
      const sides: Array<{ prompt: string; promptVersion: number | null; side?: CompareSide }> =
        input.compare === undefined ? [{ prompt: input.prompt, promptVersion: input.promptVersion }] : input.compare.sides.map((side, at) => ({ ...side, side: COMPARE_SIDES[at] as CompareSide }));
      /** The id the `generation` event named, for the first image; each later one gets its own. */
      let firstId: string | undefined = id;

      /** One finished image: checked, its parameters text, written, recorded; its event. */
      const save = async (result: ImageResult, index: number, asked: ImageRequest, side: (typeof sides)[number], of = count): Promise<ImageEvent> => {
        const imageId = firstId ?? newImageId();
        firstId = undefined;
        // One check for every backend, before anything is written: a broken image is refused whole.
        const checked = await checkPngImage(result.png, { maxPixels: deps.maxImagePixels });
        if (!checked.ok) {
          throw new ImageBackendError(
            'bad_response',
            `${BACKEND_LABELS[backend.name]} at ${backend.url} sent an image Easel cannot use: ${checked.error.message} Nothing was saved; try again, and check the backend's console if it happens again.`,
          );
        }
        const { width, height } = checked.value;
        const own = readOwnParameters(result.png);
        const madeWith = describeMadeWith(asked, result, own);
        const strength = source === null ? {} : { denoisingStrength: source.strength };
        // The backend's own text (A1111's, sd.cpp's with its SDCPP block) is richer than ours: keep it, with the
        // strength of a Vary where it lacks one (sd.cpp's names none).
        const ownText = own === undefined ? undefined : (readPngText(result.png)['parameters'] as string);
        const bytes =
          ownText === undefined
            ? // Stryker disable next-line ConditionalExpression: formatA1111Parameters leaves out a field without a value, as A1111 does
              writePngText(result.png, 'parameters', formatA1111Parameters({ ...madeWith, ...strength, width, height, ...(deps.writer === undefined ? {} : { version: deps.writer }) }))
            : source === null
              ? result.png
              : writeIfChanged(result.png, ownText, addDenoisingStrength(ownText, source.strength));
        const file = `${imageId}.png`;
        await deps.saveFile(file, bytes).catch((error: unknown) => {
          throw new ImageSaveError(`could not write ${file}`, { cause: error });
        });
        batchAt ??= new Date(deps.clock.now()).toISOString();
        const image: ImageRecord = {
          id: imageId,
          conversationId: input.conversationId,
          turnId: input.turnId,
          file,
          url: `/images/${file}`,
          prompt: madeWith.prompt,
          negativePrompt: madeWith.negativePrompt,
          steps: madeWith.steps ?? null,
          cfg: madeWith.cfg ?? null,
          seed: madeWith.seed ?? null,
          sampler: madeWith.sampler ?? null,
          scheduler: madeWith.scheduler ?? null,
          width,
          height,
          model: madeWith.model ?? null,
          promptVersion: side.promptVersion,
          source,
          compareSide: side.side ?? null,
          createdAt: batchAt,
        };
        try {
          deps.store.addImage(image);
        } catch (error) {
          // No record, no file: an image the library does not know would never be shown or deleted.
          await deps.removeFile?.(file).catch(noop);
          throw error;
        }
        return {
          type: 'image',
          id: imageId,
          url: image.url,
          width,
          height,
          ...madeWith,
          ...(side.promptVersion === null ? {} : { promptVersion: side.promptVersion }),
          ...(source === null ? {} : { source }),
          ...(of === 1 ? {} : { batch: { index, count: of } }),
          ...(side.side === undefined ? {} : { compare: { id, side: side.side, index } }),
        };
      };

      /** Runs one backend job, its progress as events (scaled to the batch when the core loops), then its answer. */
      async function* runJob<T>(start: (onProgress: (progress: ImageProgress) => void) => Promise<T>, share?: { index: number; count: number }): AsyncGenerator<TurnEvent, T> {
        const progress = createChannel<ImageProgress>();
        const current = start((p) => {
          const shown = share === undefined ? p : scaleProgress(p, share);
          if (Object.keys(shown).length > 0) progress.push(shown);
        });
        job = current;
        onBackend++;
        current.then(progress.close, progress.close).finally(() => onBackend--);
        for await (const p of progress) yield { type: 'progress', id, ...p };
        return await current;
      }

      const total = count * sides.length;
      for (const [at, side] of sides.entries()) {
        const prompted = { ...request, prompt: side.prompt };
        /** The first seed of this side no batch job made: all of them when the core loops. */
        let next = 0;
        if (count > 1 && backend.generateBatch !== undefined) {
          // One job for the whole batch (A1111's batch_size, ComfyUI's latent batch, `n`): its results in seed order.
          const generateBatch = backend.generateBatch.bind(backend);
          const batch = { ...prompted, count };
          const results = yield* runJob((onProgress) => generateBatch(batch, { signal, onProgress }), sides.length === 1 ? undefined : { index: at, count: sides.length });
          if (results.length === 0) {
            throw new ImageBackendError('bad_response', `${BACKEND_LABELS[backend.name]} at ${backend.url} answered a batch of ${count} without an image. Try again, and check the backend's console if it happens again.`);
          }
          // Fewer than asked after a cancel: the ones made, counted as what they are.
          const kept = results.slice(0, count);
          const of = signal.aborted ? kept.length : count;
          for (const [index, result] of kept.entries()) yield await save(result, index, prompted, side, of);
          // Fewer than asked otherwise (an OpenAI-style server that ignores `n`): the loop below makes the missing
          // seeds one job each, so the batch is what it says (its `count`) and its followers' progress ends.
          next = of === count ? kept.length : count;
        }
        // One job per image, seed after seed; each image is kept as it comes, and a cancel stops the rest.
        for (let index = next; index < count; index++) {
          const asked = { ...prompted, seed: seed + index };
          const result = yield* runJob((onProgress) => backend.generate(asked, { signal, onProgress }), total === 1 ? undefined : { index: at * count + index, count: total });
          yield await save(result, index, asked, side);
        }
      }
    } catch (error) {
      if (isStorageError(error)) {
        // The database, not the image: said as every storage failure is (a vanished or damaged file is logged once by the store).
        yield { type: 'error', ...describeStorageFailure(error, 'image') };
        if (!isLoggedByStore(error)) deps.logger.error('the image could not be recorded', { error });
        return;
      }
      yield { type: 'error', ...describeImageFailure(error, signal, deps.imagesDir) };
      if (error instanceof ImageSaveError || error instanceof SourceUnreadableError) deps.logger.error(error instanceof ImageSaveError ? 'the finished image could not be saved' : 'the image to vary could not be read', { error });
      else if (!isImageBackendError(error) && !(error instanceof SeedOutOfRangeError) && !(error instanceof CannotVaryError) && !signal.aborted) deps.logger.error('image generation failed', { error });
      else deps.logger.warn('image generation did not finish', { error });
    } finally {
      leaveLine(inLine);
      pending--;
      // Stryker disable next-line StringLiteral: no adapter reads the reason's words: any abort is a cancel
      abandoned.abort(new Error('the image is no longer awaited'));
      const settled = job?.then(noop, noop) ?? Promise.resolve();
      void Promise.all([previous, settled]).then(release);
    }
  }

  /**
   * The starting image of a Vary, read after `prepare`: a backend that says it cannot vary is refused in its own
   * words; one that still cannot tell is sent the image, and its adapter refuses what it cannot make.
   */
  async function readSource(backend: ImageBackend, from: ImageSource & { file: string }): Promise<Uint8Array> {
    if (typeof backend.canVary === 'string') throw new CannotVaryError(backend.canVary);
    if (deps.readFile === undefined) throw new SourceUnreadableError(`no images folder to read ${from.file} from`);
    try {
      return await deps.readFile(from.file);
    } catch (error) {
      throw new SourceUnreadableError(`could not read ${from.file}`, { cause: error });
    }
  }

  return {
    configured: deps.backend !== null,
    generate,
    settled: () => queue,
    canVary: () => (deps.backend === null ? NO_BACKEND_MESSAGE : deps.backend.canVary),
    async checkHealth(signal) {
      const backend = deps.backend;
      if (!backend) return { backend: 'none', url: null, configured: false, reachable: false, detail: NO_BACKEND_MESSAGE };
      const health = await backend.checkHealth(signal);
      // Too busy to answer while it makes one of our images: it is there (the image's progress says so), not down.
      const busy = !health.reachable && health.slow === true && onBackend > 0;
      // Read after the check: --image-backend auto knows its adapter only once it has probed.
      return {
        backend: backend.name,
        url: backend.url,
        configured: true,
        reachable: health.reachable || busy,
        detail: busy ? `${BACKEND_LABELS[backend.name]} at ${backend.url} is busy making an image.` : health.detail,
        ...(health.server === undefined ? {} : { server: health.server }),
        ...(health.found === undefined ? {} : { found: health.found }),
        ...(backend.auto === true ? { auto: true as const } : {}),
        ...(backend.canVary === undefined ? {} : { canVary: backend.canVary }),
      };
    },
    async listModels(signal) {
      const backend = deps.backend;
      if (!backend) return null;
      if (backend.prepare !== undefined) await waitOrAbort(backend.prepare(signal), signal);
      // A server without choices to offer (an adapter that cannot list) paints with its own.
      const options = (await backend.listModels?.(signal)) ?? { checkpoints: [], current: null, samplers: [], schedulers: [] };
      return { backend: backend.name, options };
    },
  };
}

function noop(): void {}

/**
 * A loop's progress as the batch's: image `index` of `count` covers its share of the bar. Its step count is the
 * image's own, not the batch's, so it is left out, and so is an estimate of the time left.
 */
function scaleProgress(progress: ImageProgress, share: { index: number; count: number }): ImageProgress {
  return progress.fraction === undefined ? {} : { fraction: (share.index + progress.fraction) / share.count };
}

/** The PNG with its parameters text replaced, or as it came when the text is unchanged. */
function writeIfChanged(png: Uint8Array, before: string, after: string): Uint8Array {
  return after === before ? png : writePngText(png, 'parameters', after);
}

const DISK_FULL_CODES = new Set(['ENOSPC', 'EDQUOT']);

function describeImageFailure(error: unknown, signal: AbortSignal, imagesDir: string | undefined): { code: TurnErrorCode; message: string } {
  const keep = 'The prompt is kept: press Generate to try again.';
  if (error instanceof ImageSaveError) {
    const code = (error.cause as NodeJS.ErrnoException | undefined)?.code;
    const where = imagesDir === undefined ? 'the images folder of the data dir' : imagesDir;
    if (code !== undefined && DISK_FULL_CODES.has(code)) {
      return {
        code: 'image_disk_full',
        message: `The image was made but could not be saved: the disk holding ${where} is full (${code}), and nothing was written. Free some disk space, then press Generate again; the prompt is kept.`,
      };
    }
    return {
      code: 'image_save_failed',
      message: `The image was made but could not be saved in ${where}${code === undefined ? '' : ` (${code})`}, and nothing was written. Check that this folder exists and that Easel may write to it (permissions, a read-only disk, --data-dir), then press Generate again; the prompt is kept.`,
    };
  }
  if (error instanceof SeedOutOfRangeError) return { code: 'image_seed_out_of_range', message: `${error.message} ${keep}` };
  if (error instanceof CannotVaryError) return { code: 'image_cannot_vary', message: `${error.message} Nothing was sent; Generate makes an image from the prompt alone.` };
  if (error instanceof SourceUnreadableError) {
    const code = (error.cause as NodeJS.ErrnoException | undefined)?.code;
    return {
      code: 'image_source_unreadable',
      message: `The image to vary could not be read from ${imagesDir ?? 'the images folder of the data dir'}${code === undefined ? '' : ` (${code})`}: its file may have been removed. Nothing was sent; pick another image, or press Generate.`,
    };
  }
  if (signal.aborted || (isImageBackendError(error) && error.code === 'cancelled')) {
    return { code: 'image_cancelled', message: `Image generation was cancelled. ${keep}` };
  }
  if (isImageBackendError(error)) return { code: IMAGE_BACKEND_FAILURES[error.code], message: `${error.message} ${keep}` };
  return { code: 'image_failed', message: `The image could not be made; the details are in the server log. ${keep}` };
}

function waitOrAbort(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: the promise settles once; a late reject does nothing
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(() => {
      // Stryker disable next-line StringLiteral: the promise settles once; a late reject does nothing
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}

/** A callback-to-async-iterator bridge: progress arrives by callback, leaves by `for await`. */
function createChannel<T>() {
  const items: T[] = [];
  let closed = false;
  let wake: (() => void) | null = null;
  const notify = () => {
    wake?.();
    wake = null;
  };
  return {
    push(item: T) {
      // Stryker disable next-line ConditionalExpression: the reader ends at close() once nothing is queued, so nothing pushed after it is read
      if (closed) return;
      items.push(item);
      notify();
    },
    close: () => {
      closed = true;
      notify();
    },
    async *[Symbol.asyncIterator](): AsyncGenerator<T> {
      for (;;) {
        if (items.length > 0) {
          yield items.shift() as T;
          continue;
        }
        if (closed) return;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}
