// AUTOMATIC1111 / Forge / SD.Next / stable-diffusion.cpp's sd-server, through the /sdapi/v1 API.
// Line numbers cite A1111 v1.10.1 (82a973c0) and stable-diffusion.cpp master-827 (97d29908).
import { setTimeout as sleep } from 'node:timers/promises';
import { ImageBackendError } from '../core/errors.ts';
import { MAX_BACKEND_ANSWER_BYTES, MAX_ERROR_TEXT_BYTES, MAX_IMAGE_JSON_BYTES } from '../core/image-limits.ts';
import { checkWithin, createImageServerFetch, DEFAULT_HEALTH_TIMEOUT_MS, DEFAULT_IMAGE_TIMEOUT_MS, describeImageTooLarge, runImageJob, type ConnectionWords } from '../image-backend/index.ts';
import type { ImageBackend, ImageBackendHealth, ImageProgress, ImageRequest, ImageResult } from '../core/ports.ts';
import { describeImageBytes, readPngChunks } from '../png/index.ts';
import { isRecord, parseJson, readCappedText, readTextPrefix, truncate } from '../util/index.ts';

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

const SD_SERVER = 'stable-diffusion.cpp sd-server';

/**
 * The backend's own words from a FastAPI 422 detail list, A1111's {error, detail, body, errors}, or
 * sd-server's {"error": "server_error", "message": …} (routes_sdapi.cpp:398-404).
 */
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
  const parts = [body['error'], body['errors'], detail, body['body'], body['message']]
    .filter((part): part is string => typeof part === 'string' && part.trim() !== '');
  return parts.length > 0 ? truncate([...new Set(parts)].join(': ')) : truncate(bodyText);
}

/**
 * A poll of /sdapi/v1/progress (modules/api/api.py:602-628), shown only once it describes our sampling:
 * - job_count 0 is idle (our request may still wait for the queue lock) and −1 is a job that began but
 *   has not started sampling (shared_state.py:113, processing.py:929-930); sampling_steps may then still be
 *   the previous job's, since State.begin() leaves it alone.
 * - sampling_step is 0-based (k-diffusion calls back after step i) and also 0 before the first step and
 *   after the last (State.nextjob(), when progress reads 1.0 while the image is still being saved), so a 0
 *   says nothing: no "step 0 of N", no 100 % at the start or before the image is there.
 * `progress` is A1111's own 0.01 + job_no/job_count + sampling_step/(job_count·sampling_steps).
 */
function readProgress(body: unknown): ImageProgress | undefined {
  if (!isRecord(body) || !isRecord(body['state'])) return undefined;
  const state = body['state'];
  const jobCount = state['job_count'];
  const step = state['sampling_step'];
  const steps = state['sampling_steps'];
  if (typeof jobCount !== 'number' || jobCount <= 0) return undefined;
  // Stryker disable next-line ConditionalExpression,EqualityOperator: steps <= 0 → false or < 0: 0 < step < steps already makes steps positive
  if (typeof step !== 'number' || typeof steps !== 'number' || steps <= 0 || step <= 0 || step >= steps) return undefined;
  const progress = body['progress'];
  const fraction = typeof progress === 'number' ? progress : (step + 1) / steps;
  const progressEvent: ImageProgress = { fraction: Math.min(MAX_RUNNING_FRACTION, Math.max(0, fraction)), step: step + 1, steps };
  // eta_relative: "ETA in secs" (models.py:191), elapsed/progress − elapsed; whole seconds keep the events few.
  const eta = body['eta_relative'];
  if (typeof eta === 'number' && Number.isFinite(eta) && eta >= 0) progressEvent.etaSeconds = Math.ceil(eta);
  return progressEvent;
}

/** 100 % is said by the image itself: A1111's last step reads 1.0 while it still decodes and saves. */
const MAX_RUNNING_FRACTION = 0.99;

function readInfo(info: unknown): Record<string, unknown> {
  if (isRecord(info)) return info;
  if (typeof info !== 'string') return {};
  const parsed = parseJson(info);
  return isRecord(parsed) ? parsed : {};
}

function readNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/**
 * What the server really used, from `info` (A1111's Processed.js(), processing.py:571-607; sd-server's
 * prepare_info_field, routes_sdapi.cpp:266-306, built after its clamps: steps 1–100, seed resolved).
 * sd-server names the sampler "NONE" when it picks its default itself: that is no name.
 */
function readUsedSettings(info: Record<string, unknown>): Omit<ImageResult, 'png'> {
  const allSeeds = info['all_seeds'];
  const used: Omit<ImageResult, 'png'> = {};
  const seed = readNumber(info['seed']) ?? readNumber(Array.isArray(allSeeds) ? allSeeds[0] : undefined);
  const steps = readNumber(info['steps']);
  const cfg = readNumber(info['cfg_scale']);
  const sampler = info['sampler_name'];
  const model = info['sd_model_name'];
  if (seed !== undefined) used.seed = seed;
  if (steps !== undefined) used.steps = steps;
  if (cfg !== undefined) used.cfg = cfg;
  if (typeof sampler === 'string' && sampler !== '' && sampler !== 'NONE') used.sampler = sampler;
  if (typeof model === 'string' && model !== '') used.model = model;
  return used;
}

export function createA1111Backend(options: A1111BackendOptions): ImageBackend {
  const url = options.url.replace(/\/+$/, '');
  const pollIntervalMs = options.pollIntervalMs ?? 500;
  const timeoutMs = options.timeoutMs ?? DEFAULT_IMAGE_TIMEOUT_MS;
  const healthTimeoutMs = options.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  // Learnt from the server: its capabilities, a 404 on /progress, or `info.version` (routes_sdapi.cpp:299).
  let isSdServer = false;
  const label = () => (isSdServer ? "stable-diffusion.cpp's sd-server" : 'AUTOMATIC1111');
  // Every request: a redirect is refused, never followed (server/image-backend/).
  const fetchImpl = createImageServerFetch(options.fetch ?? globalThis.fetch, { label, url });

  // Which of the servers of this API answers is not known until one does: the advice names them all.
  const connection: ConnectionWords = {
    product: 'The image backend',
    url,
    startHint: "AUTOMATIC1111 / Forge / SD.Next with --api (or stable-diffusion.cpp's sd-server)",
  };

  // sd-server has no interrupt: a running image cannot be stopped (routes_sdcpp.cpp:592-596), only abandoned.
  const stopWords = () => ({ product: label(), url, cannotStop: isSdServer ? { finishes: 'sd-server' } : undefined });

  /**
   * Sent at the stop itself, not when txt2img returns: A1111 keeps working after a disconnect. Best effort: the
   * job is abandoned either way, so runImageJob does not report a failed interrupt.
   */
  async function interrupt(): Promise<void> {
    if (isSdServer) return;
    const response = await fetchImpl(`${url}/sdapi/v1/interrupt`, { method: 'POST', signal: AbortSignal.timeout(healthTimeoutMs) });
    await response.body?.cancel();
  }

  async function pollProgress(stop: AbortSignal, onProgress: (progress: ImageProgress) => void): Promise<void> {
    // Stryker disable next-line StringLiteral: a poll's key is the JSON of an object, never equal to it
    let lastReported = '';
    while (!stop.aborted) {
      try {
        await sleep(pollIntervalMs, undefined, { signal: stop });
        const response = await fetchImpl(`${url}/sdapi/v1/progress?skip_current_image=true`, {
          signal: AbortSignal.any([stop, AbortSignal.timeout(healthTimeoutMs)]),
        });
        // sd-server has no progress endpoint (its routes: routes_sdapi.cpp:407-534): no percentage.
        if (response.status === 404) {
          await response.body?.cancel();
          isSdServer = true;
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
    // Stryker disable next-line Regex: base64 has no : or ,, so only a prefix can match
    const png = new Uint8Array(Buffer.from(first.replace(/^data:[^,]*,/, ''), 'base64'));
    const chunks = readPngChunks(png);
    if (!chunks.ok) {
      const format = describeImageBytes(png);
      const hint = format === 'JPEG' || format === 'WebP' ? ' Set Settings → Saving images → File format to png.' : '';
      throw new ImageBackendError('bad_response', `${label()} at ${url} sent an image Easel cannot use: ${chunks.error.message}${hint}`);
    }
    const info = readInfo(isRecord(body) ? body['info'] : undefined);
    if (info['version'] === 'stable-diffusion.cpp') isSdServer = true;
    // A server of this API that says nothing still honours what it was sent: seed, steps, cfg_scale.
    return { png, seed: request.seed, steps: request.steps, cfg: request.cfg, ...readUsedSettings(info) };
  }

  async function generate(
    request: ImageRequest,
    { signal, onProgress }: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void },
  ): Promise<ImageResult> {
    const polling = new AbortController();
    let poller: Promise<void> = Promise.resolve();
    try {
      return await runImageJob({ signal, timeoutMs, interrupt, stopWords, connection }, async (jobSignal) => {
        if (!isSdServer) {
          poller = pollProgress(AbortSignal.any([jobSignal, polling.signal]), (progress) => {
            // A failing listener must not break the generation it listens to.
            try {
              onProgress(progress);
            } catch {}
          });
        }
        const response = await fetchImpl(`${url}/sdapi/v1/txt2img`, {
          method: 'POST',
          // Stryker disable next-line StringLiteral: FastAPI reads a body with an empty content type as JSON (fastapi/routing.py), and sd-server ignores the header
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
          signal: jobSignal,
        });
        // The image arrives as base64 inside JSON, so the cap counts the JSON; an error answer is only quoted.
        const body = response.ok ? await readCappedText(response, MAX_IMAGE_JSON_BYTES) : { ok: true as const, value: await readTextPrefix(response, MAX_ERROR_TEXT_BYTES) };
        // A1111 answers an interrupted job with 200 and a half-finished image: ours was stopped, and is not read.
        jobSignal.throwIfAborted();
        if (!body.ok) {
          const hint = isSdServer ? 'Lower the image size.' : "Lower the image size, or check that --image-url points to AUTOMATIC1111's API.";
          throw describeImageTooLarge(body.error, { product: label(), url, hint });
        }
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
            `${label()} at ${url} refused the image (HTTP ${response.status}): ${describeA1111Error(text)}. Check its console and the generation settings.`,
          );
        }
        return readResult(text, request);
      });
    } finally {
      // After the job, whose timer is gone by then: a timeout while polling ends cannot stop a finished image.
      polling.abort();
      await poller;
    }
  }

  /** sd-server alone answers GET /sdcpp/v1/capabilities (routes_sdcpp.cpp:411); its model is named there. */
  async function readCapabilities(signal: AbortSignal): Promise<Record<string, unknown> | undefined> {
    try {
      const response = await fetchImpl(`${url}/sdcpp/v1/capabilities`, { signal });
      if (!response.ok) {
        await response.body?.cancel();
        return undefined;
      }
      const body = parseJson(await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES));
      // Stryker disable BlockStatement: the catch below emptied: the function then returns undefined all the same
      return isRecord(body) ? body : undefined;
    } catch {
      // Stryker restore BlockStatement
      return undefined;
    }
  }

  async function checkHealth(signal?: AbortSignal): Promise<ImageBackendHealth> {
    return checkWithin({ healthTimeoutMs, signal, connection, slowHint: 'it may be busy loading a model' }, async (combined) => {
      const [response, capabilities] = await Promise.all([fetchImpl(`${url}/sdapi/v1/options`, { signal: combined }), readCapabilities(combined)]);
      const text = await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES);
      if (capabilities !== undefined) {
        isSdServer = true;
        const model = isRecord(capabilities['model']) ? capabilities['model']['name'] : undefined;
        return {
          reachable: true,
          server: SD_SERVER,
          detail: `stable-diffusion.cpp's sd-server answers at ${url}${typeof model === 'string' && model !== '' ? ` with model ${model}` : ''}. It reports no progress and cannot stop an image once it runs.`,
        };
      }
      if (response.ok) {
        const options = parseJson(text);
        const model = isRecord(options) ? options['sd_model_checkpoint'] : undefined;
        return {
          reachable: true,
          server: 'AUTOMATIC1111',
          detail: `AUTOMATIC1111 answers at ${url}${typeof model === 'string' && model !== '' ? ` with model ${model}` : ''}.`,
        };
      }
      // A1111 without --api has no /sdapi at all (sd-server has /sdapi/v1/options since it grew capabilities).
      if (response.status === 404) {
        return {
          reachable: true,
          detail: `A server answers at ${url} but has no /sdapi/v1/options: start AUTOMATIC1111 or Forge with --api, or point --image-url at your image server.`,
        };
      }
      return { reachable: true, detail: `The server at ${url} answers /sdapi/v1/options with HTTP ${response.status}: ${describeA1111Error(text)}.` };
    });
  }

  return { name: 'a1111', url, generate, checkHealth };
}
