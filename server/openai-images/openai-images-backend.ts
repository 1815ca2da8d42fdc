// OpenAI-compatible image servers (LocalAI, stable-diffusion.cpp's sd-server, …):
// POST /v1/images/generations. No progress and no interrupt endpoint exist.
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
  readCappedBytes,
  readCappedText,
  readErrorCode,
  readTextPrefix,
  truncate,
  type BodyTooLarge,
} from '../util/index.ts';

export interface OpenAiImagesBackendOptions {
  /** Base URL, with or without a trailing /v1, e.g. http://127.0.0.1:8080 */
  url: string;
  /** Sent as `model` when given. */
  model?: string;
  /** Sent as `Authorization: Bearer …` when given. */
  apiKey?: string;
  /** After this long the request is abandoned and generate rejects with 'timeout'. Default 10 minutes. */
  timeoutMs?: number;
  /** Limit for checkHealth. Default 3 s. */
  healthTimeoutMs?: number;
  fetch?: typeof fetch;
}

type StopReason = 'cancelled' | 'timeout';

const DEFAULT_TIMEOUT_MS = 10 * 60_000;
const DEFAULT_HEALTH_TIMEOUT_MS = 3_000;

/** The server's words from `{ error: { message } }`, `{ error: "…" }`, `{ detail }` or plain text. */
export function describeOpenAiError(bodyText: string): string {
  const body = parseJson(bodyText);
  if (!isRecord(body)) return truncate(bodyText) || '(empty answer)';
  const error = body['error'];
  if (isRecord(error) && typeof error['message'] === 'string' && error['message'] !== '') return truncate(error['message']);
  if (typeof error === 'string' && error !== '') return truncate(error);
  if (typeof body['message'] === 'string') return truncate(body['message']);
  if (typeof body['detail'] === 'string') return truncate(body['detail']);
  return truncate(bodyText);
}

export function createOpenAiImagesBackend(options: OpenAiImagesBackendOptions): ImageBackend {
  const url = options.url.replace(/\/+$/, '');
  const apiBase = `${url.replace(/\/v1$/, '')}/v1`;
  const origin = new URL(url).origin;
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const healthTimeoutMs = options.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  const authorization: Record<string, string> = options.apiKey === undefined || options.apiKey === '' ? {} : { authorization: `Bearer ${options.apiKey}` };

  function toConnectionError(error: unknown): ImageBackendError {
    const code = readErrorCode(error);
    if (code !== undefined && !NOT_LISTENING_CODES.has(code)) {
      return new ImageBackendError(
        'unreachable',
        `The connection to the image server at ${url} broke before the image arrived (${code}). Check its console for a crash, then try again.`,
        { cause: error },
      );
    }
    return new ImageBackendError(
      'unreachable',
      `The OpenAI-compatible image server at ${url} is not answering${code === undefined ? '' : ` (${code})`}. Start LocalAI or sd-server, or set --image-url to where it runs.`,
      { cause: error },
    );
  }

  function toStoppedError(reason: StopReason, cause?: unknown): ImageBackendError {
    if (reason === 'timeout') {
      return new ImageBackendError(
        'timeout',
        `The image server at ${url} did not finish the image within ${formatDuration(timeoutMs)}; Easel stopped waiting (this API cannot interrupt it). Lower the steps or size, or raise the image timeout.`,
        { cause },
      );
    }
    return new ImageBackendError('cancelled', `The image was cancelled; Easel stopped waiting for ${url} (this API has no interrupt, so the server may finish it anyway).`, { cause });
  }

  function toHttpError(status: number, text: string): ImageBackendError {
    const words = describeOpenAiError(text);
    if (status === 401 || status === 403) {
      return new ImageBackendError('backend_error', `The image server at ${url} refused the API key (HTTP ${status}): ${words}. Check the image API key Easel was given.`);
    }
    // A 404 with an OpenAI error body is "model not found"; without one, the route is missing.
    const body = parseJson(text);
    if (status === 404 && !(isRecord(body) && isRecord(body['error']))) {
      return new ImageBackendError('backend_error', `The server at ${url} has no ${apiBase}/images/generations (HTTP 404: ${words}). Check that --image-url points to an OpenAI-compatible image server.`);
    }
    return new ImageBackendError('backend_error', `The image server at ${url} refused the image (HTTP ${status}): ${words}. Check its console and the model it serves.`);
  }

  function toTooLargeError(error: BodyTooLarge): ImageBackendError {
    return new ImageBackendError(
      'too_large',
      `The image server at ${url} sent ${describeTooLarge(error)}, more than Easel accepts for one image (${formatBytes(MAX_IMAGE_BYTES)} of PNG); Easel stopped reading it and kept nothing. Lower the image size, or check that --image-url points to an image API.`,
    );
  }

  /**
   * Downloads an image the server linked to, only from the server's own origin (scheme, host and port of
   * --image-url) and without following redirects: an answer must never make Easel fetch another host.
   */
  async function downloadLinkedImage(link: string, signal: AbortSignal): Promise<Uint8Array> {
    let target: URL;
    try {
      target = new URL(link, `${url}/`);
    } catch {
      throw new ImageBackendError('bad_response', `The image server at ${url} answered with an image link Easel cannot read (${truncate(link.slice(0, 120))}).`);
    }
    if (target.origin !== origin) {
      throw new ImageBackendError(
        'bad_response',
        `The image server at ${url} linked its image on another server (${target.protocol.startsWith('http') ? target.origin : target.protocol}); Easel only downloads images from ${origin} itself, so it fetched nothing. Configure the server to answer with b64_json, or to link its images on its own address.`,
      );
    }
    const response = await fetchImpl(target, { signal, redirect: 'manual' });
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel();
      throw new ImageBackendError(
        'bad_response',
        `The image server at ${url} redirected its image link (HTTP ${response.status}); Easel does not follow an image link elsewhere, so it fetched nothing more. Configure the server to answer with b64_json.`,
      );
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw new ImageBackendError('backend_error', `The image server at ${url} could not serve the image it made (HTTP ${response.status}).`);
    }
    const body = await readCappedBytes(response, MAX_IMAGE_BYTES);
    if (!body.ok) throw toTooLargeError(body.error);
    return body.value;
  }

  function checkPng(png: Uint8Array): Uint8Array {
    const chunks = readPngChunks(png);
    if (!chunks.ok) {
      const format = describeImageBytes(png);
      const hint = format === 'JPEG' || format === 'WebP' ? ' Configure the server to return PNG.' : '';
      throw new ImageBackendError('bad_response', `The image server at ${url} sent an image Easel cannot use: ${chunks.error.message}${hint}`);
    }
    return png;
  }

  async function readImage(text: string, signal: AbortSignal): Promise<Uint8Array> {
    const body = parseJson(text);
    const data = isRecord(body) ? body['data'] : undefined;
    const first: unknown = Array.isArray(data) ? data[0] : undefined;
    if (isRecord(first) && typeof first['b64_json'] === 'string' && first['b64_json'] !== '') {
      return checkPng(new Uint8Array(Buffer.from(first['b64_json'].replace(/^data:[^,]*,/, ''), 'base64')));
    }
    // Some servers ignore response_format and answer with a link to the file.
    if (isRecord(first) && typeof first['url'] === 'string' && first['url'] !== '') {
      return checkPng(await downloadLinkedImage(first['url'], signal));
    }
    throw new ImageBackendError(
      'bad_response',
      `The image server at ${url} answered without an image (${truncate(text.slice(0, 120)) || 'empty answer'}). Check that it serves an image model.`,
    );
  }

  async function generate(
    request: ImageRequest,
    { signal }: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void },
  ): Promise<ImageResult> {
    if (signal.aborted) throw toStoppedError('cancelled', signal.reason);
    const job = new AbortController();
    let stopReason: StopReason | undefined;
    const stop = (reason: StopReason) => {
      stopReason ??= reason;
      job.abort();
    };
    const onAbort = () => stop('cancelled');
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => stop('timeout'), timeoutMs);
    try {
      const response = await fetchImpl(`${apiBase}/images/generations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...authorization },
        body: JSON.stringify({
          prompt: request.prompt,
          n: 1,
          size: `${request.width}x${request.height}`,
          response_format: 'b64_json',
          ...(options.model === undefined ? {} : { model: options.model }),
          seed: request.seed,
          steps: request.steps,
          ...(request.negativePrompt === '' ? {} : { negative_prompt: request.negativePrompt }),
        }),
        signal: job.signal,
      });
      // b64_json arrives inside JSON, so the cap counts the JSON; an error answer is only quoted.
      if (!response.ok) throw toHttpError(response.status, await readTextPrefix(response, MAX_ERROR_TEXT_BYTES));
      const body = await readCappedText(response, MAX_IMAGE_JSON_BYTES);
      if (!body.ok) throw toTooLargeError(body.error);
      const text = body.value;
      const png = await readImage(text, job.signal);
      if (stopReason !== undefined) throw toStoppedError(stopReason);
      return options.model === undefined ? { png, seed: request.seed } : { png, seed: request.seed, model: options.model };
    } catch (error) {
      if (stopReason !== undefined) throw toStoppedError(stopReason, error);
      if (error instanceof ImageBackendError) throw error;
      throw toConnectionError(error);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  async function checkHealth(signal?: AbortSignal): Promise<ImageBackendHealth> {
    const timeout = AbortSignal.timeout(healthTimeoutMs);
    try {
      const response = await fetchImpl(`${apiBase}/models`, {
        headers: authorization,
        signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
      });
      const text = await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES);
      if (response.status === 401 || response.status === 403) {
        return { reachable: true, detail: `The image server at ${url} answers but refuses the API key (HTTP ${response.status}): ${describeOpenAiError(text)}.` };
      }
      if (!response.ok) return { reachable: true, detail: `The server at ${url} answers ${apiBase}/models with HTTP ${response.status}.` };
      const body = parseJson(text);
      const data = isRecord(body) && Array.isArray(body['data']) ? body['data'] : [];
      const ids = data.filter(isRecord).map((model) => model['id']).filter((id): id is string => typeof id === 'string');
      const listed = ids.length === 0 ? '' : ` (models: ${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ', …' : ''})`;
      return { reachable: true, detail: `The OpenAI-compatible image server answers at ${url}${listed}.` };
    } catch (error) {
      if (signal?.aborted === true) return { reachable: false, detail: 'The health check was cancelled.' };
      if (timeout.aborted) return { reachable: false, detail: `The image server at ${url} did not answer within ${formatDuration(healthTimeoutMs)}.` };
      return { reachable: false, detail: toConnectionError(error).message };
    }
  }

  return { name: 'openai', url, generate, checkHealth };
}
