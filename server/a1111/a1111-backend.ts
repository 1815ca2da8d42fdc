// AUTOMATIC1111 / Forge / SD.Next / stable-diffusion.cpp's sd-server, through the /sdapi/v1 API.
// Line numbers cite A1111 v1.10.1 (82a973c0) and stable-diffusion.cpp master-827 (97d29908).
//
// Checkpoint, sampler and scheduler: listModels reads /sdapi/v1/sd-models, /samplers, /schedulers and /options; a
// request's choices travel in that request alone (override_settings, sampler_name, scheduler), never as a global
// POST /options. Neither server refuses a name it does not know: A1111 v1.10 drops an unknown checkpoint from the
// overrides and paints with its current one (processing.py:828-830), turns an unknown sampler into samplers[0],
// "DPM++ 2M", and an unknown scheduler into "Automatic" (get_sampler_and_scheduler, sd_samplers.py:100-122); sd-server
// keeps its defaults (routes_sdapi.cpp:154-162) and has only the model it was started with. So what the image was
// made with is read from the answer (info, infotext), never taken from the request. A1111 before v1.9 did refuse an
// unknown sampler (validate_sampler_name on the name as sent: HTTP 404 "Sampler not found").
import { setTimeout as sleep } from 'node:timers/promises';
import { ImageBackendError } from '../core/errors.ts';
import { MAX_BACKEND_ANSWER_BYTES, MAX_ERROR_TEXT_BYTES, MAX_IMAGE_JSON_BYTES } from '../core/image-limits.ts';
import { checkWithin, createImageServerFetch, DEFAULT_HEALTH_TIMEOUT_MS, DEFAULT_IMAGE_TIMEOUT_MS, describeImageTooLarge, listWithin, runImageJob, type ConnectionWords } from '../image-backend/index.ts';
import type { ImageBackend, ImageBackendHealth, ImageModelOptions, ImageProgress, ImageRequest, ImageResult } from '../core/ports.ts';
import { describeImageBytes, parseA1111Parameters, readPngChunks } from '../png/index.ts';
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
  // An HTTPException's `errors` is str(e), "404: Sampler not found" (Starlette), which only repeats its detail.
  const errors = body['errors'];
  const repeatsDetail = typeof errors === 'string' && typeof detail === 'string' && /^\d{3}: /.test(errors) && errors.slice(5) === detail;
  const parts = [body['error'], repeatsDetail ? undefined : errors, detail, body['body'], body['message']]
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

/** A name the server gave: a non-empty string other than sd.cpp's "NONE" (its word for "the default, chosen later"). */
function readName(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' && value !== 'NONE' ? value : undefined;
}

/**
 * The infotext of the image at `position` of `images` (Processed.js() `infotexts`, processing.py:571-607, one per
 * image, a returned grid's first: processing.py:1053-1059 at A1111 45b8a499; sd-server's, routes_sdapi.cpp:386).
 */
function readInfotext(info: Record<string, unknown>, position: number): ReturnType<typeof parseA1111Parameters> | undefined {
  const infotexts = info['infotexts'];
  const text: unknown = Array.isArray(infotexts) ? infotexts[position] : undefined;
  return typeof text === 'string' ? parseA1111Parameters(text) : undefined;
}

/**
 * What the server really used, from `info` (A1111's Processed.js(), processing.py:571-607; sd-server's
 * prepare_info_field, routes_sdapi.cpp:266-306, built after its clamps: steps 1–100, seed resolved).
 * sd-server names the sampler "NONE" when it picks its default itself: that is no name.
 * - The checkpoint: sd_model_name, p.sd_model_name, the checkpoint loaded when the image was made
 *   (processing.py:890), so an override A1111 dropped names the one that really painted; infotext's "Model" (780) is
 *   the same value, read when info lacks it. A1111 names it by its file (name_for_extra, sd_models.py:88), which is
 *   the model_name listModels gives for a file at the top of models/Stable-diffusion; sd-server by its file name with
 *   extension (routes_sdapi.cpp:291-295).
 * - The scheduler: Processed.js() has no field for it; A1111 says it as infotext's "Schedule type" (p.scheduler,
 *   processing.py:773, the label fix_p_invalid_sampler_and_scheduler settled on, sd_samplers.py:125-129), sd-server in
 *   extra_generation_params["Schedule type"] when one was chosen (routes_sdapi.cpp:283-286).
 */
function readUsedSettings(info: Record<string, unknown>, index = 0, position = index): Omit<ImageResult, 'png'> {
  const allSeeds = info['all_seeds'];
  const used: Omit<ImageResult, 'png'> = {};
  const infotext = readInfotext(info, position);
  const extra = isRecord(info['extra_generation_params']) ? info['extra_generation_params'] : {};
  // A batch's image `index` has all_seeds[index] (seed + index, processing.py:835-838 at A1111 45b8a499;
  // routes_sdapi.cpp:387): no grid there. `seed` is the first image's.
  const listed = readNumber(Array.isArray(allSeeds) ? allSeeds[index] : undefined);
  const seed = index === 0 ? (readNumber(info['seed']) ?? listed) : listed;
  const steps = readNumber(info['steps']);
  const cfg = readNumber(info['cfg_scale']);
  const sampler = readName(info['sampler_name']);
  const scheduler = readName(extra['Schedule type']) ?? readName(infotext?.scheduler);
  const model = readName(info['sd_model_name']) ?? readName(infotext?.model);
  if (seed !== undefined) used.seed = seed;
  if (steps !== undefined) used.steps = steps;
  if (cfg !== undefined) used.cfg = cfg;
  if (sampler !== undefined) used.sampler = sampler;
  if (scheduler !== undefined) used.scheduler = scheduler;
  if (model !== undefined) used.model = model;
  return used;
}

/**
 * The choices of one request, added to its txt2img body only when asked, so that a request without them is sent
 * as before. The checkpoint goes in override_settings, which process_images sets for this image alone and puts
 * back afterwards (processing.py:823-858) when override_settings_restore_afterwards is true, its default
 * (processing.py:175): sent all the same, so that a server with another default does not keep the switch. A
 * global POST /sdapi/v1/options would change the checkpoint of every client of the server. sampler_name and
 * scheduler are read as sent (api.py:441; sd-server's routes_sdapi.cpp:108-109).
 */
function describeChoices(request: ImageRequest): Record<string, unknown> {
  return {
    ...(request.checkpoint === undefined ? {} : { override_settings: { sd_model_checkpoint: request.checkpoint }, override_settings_restore_afterwards: true }),
    ...(request.sampler === undefined ? {} : { sampler_name: request.sampler }),
    ...(request.scheduler === undefined ? {} : { scheduler: request.scheduler }),
  };
}

/** txt2img, or img2img for a Vary (ImageRequest.init). */
function routeOf(request: ImageRequest): 'txt2img' | 'img2img' {
  return request.init === undefined ? 'txt2img' : 'img2img';
}

/**
 * A Vary's fields of an /sdapi/v1/img2img body; none for txt2img.
 * - A1111 (api.py:492-563 in v1.10.1, the same lines in Forge's import of it, 04c6ab68): `init_images` is a list of
 *   base64 images, each read by decode_base64_to_image (api.py:77-99: a data: URL's prefix is dropped; what does not
 *   decode is HTTP 500 "Invalid encoded image"); without it the request is refused with HTTP 404 "Init image not
 *   found" (api.py:495-497). `denoising_strength` is a float, 0.75 when absent (models.py:115-133 at A1111 45b8a499),
 *   and comes back in info and the infotext as "Denoising strength" (processing.py:1507, :738). `resize_mode` 1 is
 *   "Crop and resize" (StableDiffusionProcessingImg2Img.resize_mode, processing.py:1463; images.resize_image): an
 *   image of another shape is cropped to the size asked, not stretched.
 * - sd-server (routes_sdapi.cpp:196-237 at 97d29908): the first of `init_images`, a data: prefix dropped
 *   (common.cpp:1716-1747), cropped and resized to width × height (media_io.cpp:559-580); `denoising_strength`
 *   taken when ≥ 0 and capped at 1 (routes_sdapi.cpp:233-236), and said in info (:287-289). An image it cannot
 *   decode is skipped without a word, leaving text-to-image.
 */
function describeInit(request: ImageRequest): Record<string, unknown> {
  if (request.init === undefined) return {};
  return {
    init_images: [Buffer.from(request.init.png).toString('base64')],
    denoising_strength: request.init.strength,
    resize_mode: 1,
  };
}

/** One entry of /sdapi/v1/sd-models (SDModelItem: title, model_name, hash, sha256, filename, config; api.py:726-728). */
interface ListedCheckpoint {
  title: string;
  name: string;
}

/**
 * The name a request takes for a checkpoint: its model_name, which A1111's checkpoint_aliases holds (sd_models.py:98)
 * and override_settings therefore accepts, by exact match only (processing.py:828, checkpoint_aliases.get; no
 * get_closet_checkpoint_match there). The title would do too, but it changes: "name" while A1111 has no hash of the
 * file, "name [shorthash]" once it loaded it (sd_models.py:95, 107-128). model_name stays, and is what the image
 * reports back (info's sd_model_name, infotext's "Model": name_for_extra, the same for a file at the top of
 * models/Stable-diffusion; a file in a subfolder is reported without the folder its model_name starts with).
 * sd-server lists its one model with title and model_name both its file's stem (routes_sdapi.cpp:514-526).
 */
function readCheckpoints(body: unknown): ListedCheckpoint[] | undefined {
  if (!Array.isArray(body)) return undefined;
  return body.flatMap((entry: unknown) => {
    if (!isRecord(entry)) return [];
    const title = typeof entry['title'] === 'string' ? entry['title'] : '';
    const name = readName(entry['model_name']) ?? title;
    return name === '' ? [] : [{ title, name }];
  });
}

/** A1111's title without its " [shorthash]": the checkpoint's path below models/Stable-diffusion. */
function stripHash(title: string): string {
  return title.replace(/\s*\[[0-9a-f]+\]\s*$/i, '');
}

/**
 * The checkpoint /sdapi/v1/options names (A1111: the loaded one's title, written at load; sd-server: its model's
 * stem, routes_sdapi.cpp:528-534), as listModels names it; null when none listed matches.
 */
function findCurrent(checkpoints: ListedCheckpoint[], options: unknown): string | null {
  const value = isRecord(options) ? options['sd_model_checkpoint'] : undefined;
  if (typeof value !== 'string' || value === '') return null;
  const match =
    checkpoints.find((checkpoint) => checkpoint.title === value || checkpoint.name === value) ??
    checkpoints.find((checkpoint) => checkpoint.title !== '' && stripHash(checkpoint.title) === stripHash(value));
  return match?.name ?? null;
}

/** Names from /samplers (`name`: api.py:692-693) or /schedulers (`label`, see listModels); [] for a 404 or no list. */
function readNames(body: unknown, key: 'name' | 'label'): string[] {
  if (!Array.isArray(body)) return [];
  const names = body.flatMap((entry: unknown) => {
    if (!isRecord(entry)) return [];
    const name = readName(entry[key]) ?? readName(entry['name']);
    return name === undefined ? [] : [name];
  });
  return [...new Set(names)];
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

  /**
   * The images of an answer, in seed order, a grid never among them: A1111 puts one first only when the request
   * saves its images and its "Always return a grid" is on (do_not_save_grid = not save_images, api.py:446, 514;
   * processing.py:1048-1059 at A1111 45b8a499), and says so in info.index_of_first_image; Easel never asks to save,
   * and skips whatever comes before the first image all the same (a server that does not say: the last `count`).
   */
  function readResults(text: string, request: ImageRequest, count: number): ImageResult[] {
    const body = parseJson(text);
    const images = isRecord(body) ? body['images'] : undefined;
    const listed: unknown[] = Array.isArray(images) ? images : [];
    const info = readInfo(isRecord(body) ? body['info'] : undefined);
    if (info['version'] === 'stable-diffusion.cpp') isSdServer = true;
    const said = readNumber(info['index_of_first_image']);
    const firstImage = said !== undefined && Number.isInteger(said) && said >= 0 ? said : Math.max(0, listed.length - count);
    const made = listed.slice(firstImage, firstImage + count);
    if (made.length === 0 || made.some((image) => typeof image !== 'string' || image === '')) {
      throw new ImageBackendError(
        'bad_response',
        `AUTOMATIC1111 at ${url} answered ${routeOf(request)} without an image (${truncate(text.slice(0, 120)) || 'empty answer'}). Check that --image-url points to an AUTOMATIC1111-compatible API.`,
      );
    }
    return made.map((image, index) => {
      // Stryker disable next-line Regex: base64 has no : or ,, so only a prefix can match
      const png = new Uint8Array(Buffer.from(String(image).replace(/^data:[^,]*,/, ''), 'base64'));
      const chunks = readPngChunks(png);
      if (!chunks.ok) {
        const format = describeImageBytes(png);
        const hint = format === 'JPEG' || format === 'WebP' ? ' Set Settings → Saving images → File format to png.' : '';
        throw new ImageBackendError('bad_response', `${label()} at ${url} sent an image Easel cannot use: ${chunks.error.message}${hint}`);
      }
      // A server of this API that says nothing still honours what it was sent: seed (+ its place in the batch), steps, cfg_scale.
      return { png, seed: request.seed + index, steps: request.steps, cfg: request.cfg, ...readUsedSettings(info, index, firstImage + index) };
    });
  }

  async function generate(request: ImageRequest, options: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void }): Promise<ImageResult> {
    const [result] = await run(request, 1, options);
    return result as ImageResult;
  }

  /**
   * A batch in one request: batch_size images sampled together, seeds seed, seed + 1, … (A1111: p.all_seeds,
   * processing.py:835-838 at A1111 45b8a499; sd-server: batch_size is its batch_count, 1–8, and all_seeds seed + i,
   * routes_sdapi.cpp:106, 127, 360-390). One job: /progress covers all of it (job_count is n_iter, 1).
   */
  function generateBatch(request: ImageRequest & { count: number }, options: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void }): Promise<ImageResult[]> {
    return run(request, request.count, options);
  }

  async function run(
    request: ImageRequest,
    count: number,
    { signal, onProgress }: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void },
  ): Promise<ImageResult[]> {
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
        const response = await fetchImpl(`${url}/sdapi/v1/${routeOf(request)}`, {
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
            batch_size: count,
            n_iter: 1,
            ...describeChoices(request),
            ...describeInit(request),
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
        // FastAPI's {"detail":"Not Found"} is a missing route; A1111's own {error, detail, …} with 404 is a refusal
        // (validate_sampler_name before v1.10: "Sampler not found"), said below in its words.
        const parsed = parseJson(text);
        if (response.status === 404 && !(isRecord(parsed) && typeof parsed['error'] === 'string')) {
          throw new ImageBackendError(
            'backend_error',
            `The server at ${url} has no /sdapi/v1/${routeOf(request)} (HTTP 404: ${describeA1111Error(text)}). Start AUTOMATIC1111 with --api, or point --image-url at it.`,
          );
        }
        if (!response.ok) {
          throw new ImageBackendError(
            'backend_error',
            `${label()} at ${url} refused the image (HTTP ${response.status}): ${describeA1111Error(text)}. Check its console and the generation settings.`,
          );
        }
        return readResults(text, request, count);
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


  /** GET an /sdapi/v1 route's JSON; undefined when the server has no such route (HTTP 404). */
  async function readSdapi(path: string, signal: AbortSignal): Promise<unknown> {
    const response = await fetchImpl(`${url}/sdapi/v1${path}`, { signal });
    const text = await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES);
    if (response.status === 404) return undefined;
    if (!response.ok) {
      throw new ImageBackendError('backend_error', `${label()} at ${url} could not list its models (GET /sdapi/v1${path}, HTTP ${response.status}): ${describeA1111Error(text)}.`);
    }
    const body = parseJson(text);
    if (body === undefined) throw new ImageBackendError('bad_response', `${label()} at ${url} answered GET /sdapi/v1${path} with no JSON (${truncate(text.slice(0, 120)) || 'empty answer'}).`);
    return body;
  }

  /**
   * The same four routes on both servers. A1111: every checkpoint file (api.py:726-728), the loaded one's title in
   * /options (get_config, api.py:667-676), every sampler (692-693) and scheduler (695-704); /schedulers came with
   * the scheduler split of v1.9.0, so an older A1111 answers it 404: no scheduler to choose. sd-server: its one
   * model as the only checkpoint and the current one (routes_sdapi.cpp:514-534), its sample methods and schedulers
   * each after a "default" entry (478-512). A scheduler is listed by its label: A1111 takes a label as well as a name
   * (schedulers_map, sd_schedulers.py:145) and reports the label back ("Karras"), so a choice and what the image
   * says it used read alike; sd-server's label is its name.
   */
  async function listModels(signal?: AbortSignal): Promise<ImageModelOptions> {
    return listWithin({ healthTimeoutMs, signal, connection, slowProduct: label(), slowHint: 'it may be busy loading a model' }, async (combined) => {
      const [models, options, samplers, schedulers] = await Promise.all(['/sd-models', '/options', '/samplers', '/schedulers'].map((path) => readSdapi(path, combined)));
      const checkpoints = readCheckpoints(models);
      if (checkpoints === undefined) {
        throw new ImageBackendError(
          'bad_response',
          `The server at ${url} has no checkpoint list at /sdapi/v1/sd-models (${models === undefined ? 'HTTP 404' : 'not a list'}). Start AUTOMATIC1111 with --api, or point --image-url at it.`,
        );
      }
      return {
        checkpoints: [...new Set(checkpoints.map((checkpoint) => checkpoint.name))],
        current: findCurrent(checkpoints, options),
        samplers: readNames(samplers, 'name'),
        schedulers: readNames(schedulers, 'label'),
      };
    });
  }

  // Both servers of this API have /sdapi/v1/img2img: A1111 (api.py:492-563) and sd-server (routes_sdapi.cpp:411-413).
  return { name: 'a1111', url, canVary: true, generate, generateBatch, checkHealth, listModels };
}
