// AUTOMATIC1111 / Forge / SD.Next / stable-diffusion.cpp's sd-server, through the /sdapi/v1 API.
import { setTimeout as sleep } from 'node:timers/promises';
import { ImageBackendError } from '../core/errors.ts';
import { MAX_BACKEND_ANSWER_BYTES, MAX_ERROR_TEXT_BYTES, MAX_IMAGE_BYTES, MAX_IMAGE_JSON_BYTES } from '../core/image-limits.ts';
import type { ImageBackend, ImageBackendHealth, ImageProgress, ImageRequest, ImageResult } from '../core/ports.ts';
import { describeImageBytes, readPngChunks } from '../png/index.ts';
import {
  describeTooLarge,
  formatBytes,
  formatDuration,
  isRecord,
  NOT_LISTENING_CODES,
  parseJson,
  readCappedText,
  readErrorCode,
  readTextPrefix,
  truncate,
  type BodyTooLarge,
} from '../util/index.ts';

export interface A1111BackendOptions {
  /** Base URL, e.g. http://127.0.0.1:7860 */
  url: string;
  /** How often /sdapi/v1/progress is polled while an image is generated. */
  pollIntervalMs?: number;
  /** After this long the job is interrupted and generate rejects with 'timeout'. Default 10 minutes. */
  timeoutMs?: number;
  /** Limit for checkHealth and for each progress poll. Default 3 s. */
  healthTimeoutMs?: number;
  fetch?: typeof fetch;
}

type StopReason = 'cancelled' | 'timeout';

const DEFAULT_TIMEOUT_MS = 10 * 60_000;
const DEFAULT_HEALTH_TIMEOUT_MS = 3_000;

/** The backend's own words from a FastAPI 422 detail list or A1111's {error, detail, body, errors}. */
export function describeA1111Error(bodyText: string): string {
  const body = parseJson(bodyText);
  if (!isRecord(body)) return truncate(bodyText) || '(empty answer)';
  const detail = body['detail'];
  if (Array.isArray(detail)) {
    const problems = detail.map((item) => {
      if (!isRecord(item)) return String(item);
      const loc = Array.isArray(item['loc']) ? item['loc'].filter((part) => part !== 'body').join('.') : '';
      const message = typeof item['msg'] === 'string' ? item['msg'] : JSON.stringify(item);
      return loc === '' ? message : `${loc}: ${message}`;
    });
    return truncate(problems.join('; '));
  }
  const parts = [body['error'], body['errors'], detail, body['body']]
    .filter((part): part is string => typeof part === 'string' && part.trim() !== '');
  return parts.length > 0 ? truncate([...new Set(parts)].join(': ')) : truncate(bodyText);
}

function readProgress(body: unknown): ImageProgress | undefined {
  if (!isRecord(body) || !isRecord(body['state'])) return undefined;
  const state = body['state'];
  const step = state['sampling_step'];
  const steps = state['sampling_steps'];
  const progress = body['progress'];
  // job_count 0 means A1111 is idle (our request may still be waiting for its queue lock).
  if (state['job_count'] === 0 || typeof steps !== 'number' || steps <= 0 || typeof step !== 'number') return undefined;
  const fraction = typeof progress === 'number' ? progress : step / steps;
  return { fraction: Math.min(1, Math.max(0, fraction)), step, steps };
}

function readInfo(info: unknown): Record<string, unknown> {
  if (isRecord(info)) return info;
  if (typeof info !== 'string') return {};
  const parsed = parseJson(info);
  return isRecord(parsed) ? parsed : {};
}

export function createA1111Backend(options: A1111BackendOptions): ImageBackend {
  const url = options.url.replace(/\/+$/, '');
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const pollIntervalMs = options.pollIntervalMs ?? 500;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const healthTimeoutMs = options.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;

  function toConnectionError(error: unknown): ImageBackendError {
    const code = readErrorCode(error);
    if (code !== undefined && !NOT_LISTENING_CODES.has(code)) {
      return new ImageBackendError(
        'unreachable',
        `The connection to the image backend at ${url} broke before the image arrived (${code}). Check its console for a crash, then try again.`,
        { cause: error },
      );
    }
    return new ImageBackendError(
      'unreachable',
      `The image backend at ${url} is not answering${code === undefined ? '' : ` (${code})`}. Start AUTOMATIC1111 / Forge / SD.Next with --api (or stable-diffusion.cpp's sd-server), or set --image-url to where it runs.`,
      { cause: error },
    );
  }

  function toStoppedError(reason: StopReason, cause?: unknown): ImageBackendError {
    if (reason === 'timeout') {
      return new ImageBackendError(
        'timeout',
        `AUTOMATIC1111 at ${url} did not finish the image within ${formatDuration(timeoutMs)}, so Easel asked it to stop. Lower the steps or size, or raise the image timeout.`,
        { cause },
      );
    }
    return new ImageBackendError('cancelled', `The image was cancelled; AUTOMATIC1111 at ${url} was asked to stop.`, { cause });
  }

  function toTooLargeError(error: BodyTooLarge): ImageBackendError {
    return new ImageBackendError(
      'too_large',
      `AUTOMATIC1111 at ${url} sent ${describeTooLarge(error)}, more than Easel accepts for one image (${formatBytes(MAX_IMAGE_BYTES)} of PNG); Easel stopped reading it and kept nothing. Lower the image size, or check that --image-url points to AUTOMATIC1111's API.`,
    );
  }

  /** Best effort: the job is abandoned either way, so a failed interrupt is not reported. */
  async function interrupt(): Promise<void> {
    try {
      const response = await fetchImpl(`${url}/sdapi/v1/interrupt`, { method: 'POST', signal: AbortSignal.timeout(healthTimeoutMs) });
      await response.body?.cancel();
    } catch {
      // Backend gone or slow: nothing more to stop.
    }
  }

  async function pollProgress(stop: AbortSignal, onProgress: (progress: ImageProgress) => void): Promise<void> {
    let lastReported = '';
    while (!stop.aborted) {
      try {
        await sleep(pollIntervalMs, undefined, { signal: stop });
        const response = await fetchImpl(`${url}/sdapi/v1/progress?skip_current_image=true`, {
          signal: AbortSignal.any([stop, AbortSignal.timeout(healthTimeoutMs)]),
        });
        // sd-server has no progress endpoint: generate without a percentage.
        if (response.status === 404) {
          await response.body?.cancel();
          return;
        }
        if (!response.ok) {
          await response.body?.cancel();
          continue;
        }
        const body = await readCappedText(response, MAX_BACKEND_ANSWER_BYTES);
        if (!body.ok) continue;
        const progress = readProgress(parseJson(body.value));
        const key = JSON.stringify(progress);
        if (progress === undefined || key === lastReported || stop.aborted) continue;
        lastReported = key;
        onProgress(progress);
      } catch {
        // A missed poll only delays the next percentage; the generation itself decides success.
      }
    }
  }

  function readResult(text: string, request: ImageRequest): ImageResult {
    const body = parseJson(text);
    const images = isRecord(body) ? body['images'] : undefined;
    const first: unknown = Array.isArray(images) ? images[0] : undefined;
    if (typeof first !== 'string' || first === '') {
      throw new ImageBackendError(
        'bad_response',
        `AUTOMATIC1111 at ${url} answered txt2img without an image (${truncate(text.slice(0, 120)) || 'empty answer'}). Check that --image-url points to an AUTOMATIC1111-compatible API.`,
      );
    }
    const png = new Uint8Array(Buffer.from(first.replace(/^data:[^,]*,/, ''), 'base64'));
    const chunks = readPngChunks(png);
    if (!chunks.ok) {
      const format = describeImageBytes(png);
      const hint = format === 'JPEG' || format === 'WebP' ? ' Set Settings → Saving images → File format to png.' : '';
      throw new ImageBackendError('bad_response', `AUTOMATIC1111 at ${url} sent an image Easel cannot use: ${chunks.error.message}${hint}`);
    }
    const info = readInfo(isRecord(body) ? body['info'] : undefined);
    const allSeeds = info['all_seeds'];
    const firstSeed: unknown = Array.isArray(allSeeds) ? allSeeds[0] : undefined;
    const seed = typeof info['seed'] === 'number' ? info['seed'] : typeof firstSeed === 'number' ? firstSeed : request.seed;
    const model = info['sd_model_name'];
    return typeof model === 'string' && model !== '' ? { png, seed, model } : { png, seed };
  }

  async function generate(
    request: ImageRequest,
    { signal, onProgress }: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void },
  ): Promise<ImageResult> {
    if (signal.aborted) throw toStoppedError('cancelled', signal.reason);
    const job = new AbortController();
    let stopReason: StopReason | undefined;
    let interrupted: Promise<void> = Promise.resolve();
    // Interrupt at once rather than when txt2img returns: A1111 keeps working after a disconnect.
    const stop = (reason: StopReason) => {
      if (stopReason !== undefined) return;
      stopReason = reason;
      interrupted = interrupt();
      job.abort();
    };
    const onAbort = () => stop('cancelled');
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => stop('timeout'), timeoutMs);
    const polling = new AbortController();
    const poller = pollProgress(AbortSignal.any([job.signal, polling.signal]), (progress) => {
      // A failing listener must not break the generation it listens to.
      try {
        onProgress(progress);
      } catch {}
    });
    try {
      const response = await fetchImpl(`${url}/sdapi/v1/txt2img`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          prompt: request.prompt,
          negative_prompt: request.negativePrompt,
          steps: request.steps,
          cfg_scale: request.cfg,
          seed: request.seed,
          width: request.width,
          height: request.height,
          batch_size: 1,
          n_iter: 1,
        }),
        signal: job.signal,
      });
      // The image arrives as base64 inside JSON, so the cap counts the JSON; an error answer is only quoted.
      const body = response.ok ? await readCappedText(response, MAX_IMAGE_JSON_BYTES) : { ok: true as const, value: await readTextPrefix(response, MAX_ERROR_TEXT_BYTES) };
      // A1111 answers an interrupted job with 200 and a half-finished image: ours was stopped.
      if (stopReason !== undefined) throw toStoppedError(stopReason);
      if (!body.ok) throw toTooLargeError(body.error);
      const text = body.value;
      if (response.status === 404) {
        throw new ImageBackendError(
          'backend_error',
          `The server at ${url} has no /sdapi/v1/txt2img (HTTP 404: ${describeA1111Error(text)}). Start AUTOMATIC1111 with --api, or point --image-url at it.`,
        );
      }
      if (!response.ok) {
        throw new ImageBackendError(
          'backend_error',
          `AUTOMATIC1111 at ${url} refused the image (HTTP ${response.status}): ${describeA1111Error(text)}. Check its console and the generation settings.`,
        );
      }
      return readResult(text, request);
    } catch (error) {
      if (stopReason !== undefined) {
        await interrupted;
        throw toStoppedError(stopReason, error);
      }
      if (error instanceof ImageBackendError) throw error;
      throw toConnectionError(error);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      polling.abort();
      await poller;
    }
  }

  async function checkHealth(signal?: AbortSignal): Promise<ImageBackendHealth> {
    const timeout = AbortSignal.timeout(healthTimeoutMs);
    try {
      const response = await fetchImpl(`${url}/sdapi/v1/options`, {
        signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
      });
      const text = await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES);
      if (response.ok) {
        const options = parseJson(text);
        const model = isRecord(options) ? options['sd_model_checkpoint'] : undefined;
        return {
          reachable: true,
          detail: `AUTOMATIC1111 answers at ${url}${typeof model === 'string' && model !== '' ? ` with model ${model}` : ''}.`,
        };
      }
      // sd-server and A1111 without --api have no options endpoint but do answer HTTP.
      if (response.status === 404) {
        return {
          reachable: true,
          detail: `A server answers at ${url} but has no /sdapi/v1/options: fine for sd-server; AUTOMATIC1111 needs --api.`,
        };
      }
      return { reachable: true, detail: `The server at ${url} answers /sdapi/v1/options with HTTP ${response.status}: ${describeA1111Error(text)}.` };
    } catch (error) {
      if (signal?.aborted === true) return { reachable: false, detail: 'The health check was cancelled.' };
      if (timeout.aborted) {
        return { reachable: false, detail: `The image backend at ${url} did not answer within ${formatDuration(healthTimeoutMs)}; it may be busy loading a model.` };
      }
      return { reachable: false, detail: toConnectionError(error).message };
    }
  }

  return { name: 'a1111', url, generate, checkHealth };
}
