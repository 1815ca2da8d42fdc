import { randomBytes, randomInt } from 'node:crypto';
import { formatA1111Parameters, readPngSize, writePngText } from '../png/index.ts';
import { LIMITS } from '../protocol/limits.ts';
import type { ConversationStore, ImageRecord } from './conversation.ts';
import { isImageBackendError } from './errors.ts';
import type { TurnEvent } from './events.ts';
import type { Logger } from './logger.ts';
import type { ImageBackend, ImageProgress } from './ports.ts';
import type { Settings } from './settings.ts';

export interface ImageBackendStatus {
  backend: ImageBackend['name'] | 'none';
  url: string | null;
  configured: boolean;
  reachable: boolean;
  detail: string;
}

export interface GenerateInput {
  conversationId: string;
  /** The assistant turn that asked for it; null for the Generate button / API. */
  turnId: number | null;
  prompt: string;
  settings: Settings;
  signal: AbortSignal;
}

export interface ImageGenerator {
  readonly configured: boolean;
  /** Yields `generation`, then `progress`…, then `image` or `error`. Never throws. */
  generate(input: GenerateInput): AsyncGenerator<TurnEvent>;
  checkHealth(signal?: AbortSignal): Promise<ImageBackendStatus>;
}

export interface ImageGeneratorDeps {
  backend: ImageBackend | null;
  store: ConversationStore;
  logger: Logger;
  clock: { now(): number };
  /** Writes the finished PNG under the images directory; names are never reused. */
  saveFile(name: string, bytes: Uint8Array): Promise<void>;
  /** Frees the GPU before an image (--unload-llm). */
  unloadLlm?: () => Promise<void>;
  randomSeed?: () => number;
  newImageId?: () => string;
}

export const NO_BACKEND_MESSAGE =
  'No image backend is configured, so Easel only crafts prompts. Start it with --image-backend a1111, comfyui or openai (and --image-url) to make pictures.';

/** One generation at a time per backend; later requests wait their turn (and say so). */
export function createImageGenerator(deps: ImageGeneratorDeps): ImageGenerator {
  const randomSeed = deps.randomSeed ?? (() => randomInt(0, LIMITS.seed.max + 1));
  const newImageId = deps.newImageId ?? (() => randomBytes(16).toString('hex'));
  let queue: Promise<void> = Promise.resolve();
  let pending = 0;

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
    try {
      yield { type: 'generation', id, ...(queued ? { queued: true } : {}) };
      await waitOrAbort(previous, input.signal);
      if (deps.unloadLlm) {
        await deps.unloadLlm().catch((error: unknown) => deps.logger.warn('could not unload the chat model before the image', { error }));
      }
      const { settings } = input;
      const seed = settings.seed === -1 ? randomSeed() : settings.seed;
      const request = {
        prompt: input.prompt,
        negativePrompt: settings.negativePrompt,
        steps: settings.steps,
        cfg: settings.cfg,
        seed,
        width: settings.width,
        height: settings.height,
      };
      const progress = createChannel<ImageProgress>();
      const job = backend.generate(request, { signal: input.signal, onProgress: (p) => progress.push(p) });
      job.then(progress.close, progress.close);
      for await (const p of progress) yield { type: 'progress', id, ...p };
      const result = await job;

      const size = readPngSize(result.png);
      const width = size.ok ? size.value.width : request.width;
      const height = size.ok ? size.value.height : request.height;
      const parameters = formatA1111Parameters({ ...request, seed: result.seed, width, height, ...(result.model ? { model: result.model } : {}) });
      const file = `${id}.png`;
      await deps.saveFile(file, writePngText(result.png, 'parameters', parameters));
      const image: ImageRecord = {
        id,
        conversationId: input.conversationId,
        turnId: input.turnId,
        file,
        url: `/images/${file}`,
        prompt: input.prompt,
        negativePrompt: settings.negativePrompt,
        steps: settings.steps,
        cfg: settings.cfg,
        seed: result.seed,
        width,
        height,
        model: result.model ?? null,
        createdAt: new Date(deps.clock.now()).toISOString(),
      };
      deps.store.addImage(image);
      yield { type: 'image', id, url: image.url, seed: image.seed, width, height, prompt: image.prompt };
    } catch (error) {
      yield { type: 'error', ...describeImageFailure(error, input.signal) };
      if (!isImageBackendError(error) && !input.signal.aborted) deps.logger.error('image generation failed', { error });
      else deps.logger.warn('image generation did not finish', { error });
    } finally {
      pending--;
      release();
    }
  }

  return {
    configured: deps.backend !== null,
    generate,
    async checkHealth(signal) {
      const backend = deps.backend;
      if (!backend) return { backend: 'none', url: null, configured: false, reachable: false, detail: NO_BACKEND_MESSAGE };
      const health = await backend.checkHealth(signal);
      return { backend: backend.name, url: backend.url, configured: true, reachable: health.reachable, detail: health.detail };
    },
  };
}

function describeImageFailure(error: unknown, signal: AbortSignal): { code: string; message: string } {
  const keep = 'The prompt is kept: press Generate to try again.';
  if (signal.aborted || (isImageBackendError(error) && error.code === 'cancelled')) {
    return { code: 'image_cancelled', message: `Image generation was cancelled. ${keep}` };
  }
  if (isImageBackendError(error)) return { code: `image_${error.code}`, message: `${error.message} ${keep}` };
  return { code: 'image_failed', message: `The image could not be made; the details are in the server log. ${keep}` };
}

function waitOrAbort(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(() => {
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
