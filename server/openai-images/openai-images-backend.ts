// Image servers with an OpenAI-style POST /v1/images/generations, in three dialects:
// - `openai`: a server that follows OpenAI's Images API, sent only what that API defines. When the server turns
//   out to be stable-diffusion.cpp's sd-server (it answers /sdcpp/v1/capabilities), seed, steps, CFG and the
//   negative prompt travel in <sd_cpp_extra_args> inside the prompt, the only way its /v1 route reads them.
// - `localai`: LocalAI, which reads `step`, takes the negative prompt as "positive|negative" and keeps 32 bits
//   of the seed (mudler/LocalAI 82c191af).
// No progress and no interrupt endpoint exist in either.
//
// The model: a request's checkpoint goes out as `model` (over --image-model), and listModels reads GET /v1/models.
// - LocalAI honours `model`: SetModelAndConfig loads that model's config, and answers 404 "model %q not found. To
//   see available models, call GET /v1/models" for a name it has neither configured nor as a file
//   (core/http/middleware/request.go:143-168; a name holding "/" skips that check, :157, for diffusers to download
//   it). Its /v1/models lists every model, chat ones too (core/http/endpoints/openai/list.go:23-39; its `filter`
//   is a name regex, core/config/model_config_filter.go:9-23); GET /v1/models/capabilities lists the same names
//   with each one's capabilities (list_capabilities.go:23-49, routes/openai.go:279-281, since b0959d475), so the
//   image models can be told: those with "image", the same test its image route uses to pick a default model
//   (routes/openai.go:248, BuildUsecaseFilterFn(FLAG_IMAGE); model_capabilities.go:162). Without `model` that
//   route takes the first image model of a Go map (model_config_loader.go:331): which one cannot be told, so
//   `current` is only ever --image-model.
// - sd-server's /v1/models answers one fixed id, "sd-cpp-local" (examples/server/routes_openai.cpp:250-255), and
//   its /v1/images/generations never reads `model` (routes_openai.cpp:23-78): it paints with the one model it
//   loaded, whatever is asked.
// - OpenAI's own /v1/models lists every model with id, object, created and owned_by only: nothing tells an image
//   model from a chat one, so all are listed.
// No sampler or scheduler travels through any of these: OpenAI's API has none, LocalAI's GenerateImageRequest
// carries neither (core/backend/image.go:29-48; the model YAML chooses them), and sd-server's sample_method and
// scheduler inside <sd_cpp_extra_args> (examples/common/common.cpp:2015-2026) are not offered here (auto takes the
// a1111 adapter for sd-server, whose /sdapi/v1 route lists them). listModels says [] for both, so the core refuses
// a request naming one before it reaches generate; generate itself sends neither.
import { ImageBackendError } from '../core/errors.ts';
import { MAX_BACKEND_ANSWER_BYTES, MAX_ERROR_TEXT_BYTES, MAX_IMAGE_BYTES, MAX_IMAGE_JSON_BYTES } from '../core/image-limits.ts';
import type { ImageBackend, ImageBackendHealth, ImageModelOptions, ImageProgress, ImageRequest, ImageResult } from '../core/ports.ts';
import {
  checkWithin,
  createImageServerFetch,
  DEFAULT_HEALTH_TIMEOUT_MS,
  DEFAULT_IMAGE_TIMEOUT_MS,
  describeImageTooLarge,
  listWithin,
  runImageJob,
  type ConnectionWords,
} from '../image-backend/index.ts';
import { describeImageBytes, readPngChunks } from '../png/index.ts';
import { isRecord, parseJson, readCappedBytes, readCappedText, readTextPrefix, truncate, type BodyTooLarge } from '../util/index.ts';

export type OpenAiImagesDialect = 'openai' | 'localai';

/** One entry of a model list with the id a request takes, the rest as the server sent it. */
type ListedModel = Record<string, unknown> & { id: string };

/**
 * The entries of `{object: "list", data: [{id, object: "model", …}]}` (OpenAI's; LocalAI's schema.ModelsDataResponse,
 * core/schema/openai.go:153-156 and :260-263; sd-server's routes_openai.cpp:250-255) that have an id.
 */
function readListedModels(body: unknown): ListedModel[] {
  // Stryker disable next-line ArrayDeclaration: a string is not a record, so the next filter drops it
  const data = isRecord(body) && Array.isArray(body['data']) ? body['data'] : [];
  return data.filter(isRecord).filter((model): model is ListedModel => typeof model['id'] === 'string' && model['id'] !== '');
}

export interface OpenAiImagesBackendOptions {
  /** Base URL, with or without a trailing /v1, e.g. http://127.0.0.1:8080 */
  url: string;
  /** Default `openai`. */
  dialect?: OpenAiImagesDialect;
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

const SD_SERVER = 'stable-diffusion.cpp sd-server';

/**
 * LocalAI hands the seed to its backend as `int32(seed)` (core/backend/image.go:40): above 2147483647 it wraps to
 * a negative number, which stable-diffusion.cpp takes as "random" (src/stable-diffusion.cpp:4000-4005); its
 * diffusers backend also makes 0 random (backend/python/diffusers/backend.py:775-778, `if request.seed > 0`).
 */
const LOCALAI_SEEDS = { min: 1, max: 2_147_483_647 };

/**
 * LocalAI splits the prompt at "|" into positive and negative and drops anything after a second one
 * (core/http/endpoints/openai/image.go:161-166), so a "|" of the user's would cut the prompt: it is sent as "/".
 */
function escapeLocalAiPrompt(text: string): string {
  return text.replaceAll('|', '/');
}

/**
 * sd-server's /v1/images/generations reads only prompt, n, size and output_format (routes_openai.cpp:23-78);
 * the rest goes in the prompt as <sd_cpp_extra_args>{json}</sd_cpp_extra_args>, on one line (the regex's `.`
 * stops at a newline), steps and CFG nested as SDGenerationParams names them (common.cpp:1930-2030). Ours comes
 * first, so sd.cpp's non-greedy regex finds it even when the user's prompt holds such a tag; every `<` in the
 * JSON is \u003c, so no text inside it can close the block early.
 */
function embedSdCppExtraArgs(request: ImageRequest): string {
  const extra = JSON.stringify({
    seed: request.seed,
    negative_prompt: request.negativePrompt,
    sample_params: { sample_steps: request.steps, guidance: { txt_cfg: request.cfg } },
    // A Vary's strength: SDGenerationParams' `strength` (common.cpp:1949), refused outside 0–1 (:2383-2386).
    ...(request.init === undefined ? {} : { strength: request.init.strength }),
  }).replaceAll('<', '\\u003c');
  return `<sd_cpp_extra_args>${extra}</sd_cpp_extra_args>${request.prompt}`;
}

/**
 * The server's words from `{ error: { message } }` (OpenAI, LocalAI), `{ error: "…", message? }` (sd-server:
 * `{"error": "server_error", "message": e.what()}`, routes_openai.cpp:322-328), `{ detail }` or plain text.
 */
export function describeOpenAiError(bodyText: string): string {
  const body = parseJson(bodyText);
  if (!isRecord(body)) return truncate(bodyText) || '(empty answer)';
  const error = body['error'];
  if (isRecord(error) && typeof error['message'] === 'string' && error['message'] !== '') return truncate(error['message']);
  if (typeof error === 'string' && error !== '') {
    return truncate(typeof body['message'] === 'string' && body['message'] !== '' ? `${error}: ${body['message']}` : error);
  }
  if (typeof body['message'] === 'string') return truncate(body['message']);
  if (typeof body['detail'] === 'string') return truncate(body['detail']);
  return truncate(bodyText);
}

/**
 * Why a Vary cannot be made, per server:
 * - LocalAI's /v1/images/generations takes a starting image (`file`, base64 or a URL: core/http/endpoints/openai/
 *   image.go:91-98, 259-310) but no strength: its GenerateImageRequest has none (core/backend/image.go:29-48), and its
 *   stable-diffusion.cpp backend always uses 0.75 (backend/go/stablediffusion-ggml/gosd.go:204-205; diffusers keeps
 *   its pipeline's own default). A variation of the strength asked for cannot be made, so none is sent.
 * - OpenAI's Images API edits an image by instruction (/v1/images/edits: image, prompt, mask, n, size) and has no
 *   strength either.
 * - sd-server's /v1/images/edits (routes_openai.cpp:80-221, 331-394) takes the image as `image[]` (or `image`) and
 *   makes it the init image (:177-179); its strength travels in <sd_cpp_extra_args> (:208-212): it can vary.
 */
const LOCALAI_CANNOT_VARY =
  'LocalAI cannot vary an image by a chosen strength: its image API takes a starting image but no strength (its stable-diffusion.cpp backend always changes it by 0.75), so Easel does not offer it.';
const OPENAI_CANNOT_VARY =
  "This server speaks OpenAI's Images API, whose edits take no strength, so Easel cannot vary an image with it (AUTOMATIC1111, ComfyUI or stable-diffusion.cpp's sd-server can).";

/** The server's words as a sentence: a full stop only when they end without one ("…YOUR_KEY)." stays as it is). */
function asSentence(words: string): string {
  return /[.!?…]$/.test(words) ? words : `${words}.`;
}

export function createOpenAiImagesBackend(options: OpenAiImagesBackendOptions): ImageBackend {
  const dialect = options.dialect ?? 'openai';
  const url = options.url.replace(/\/+$/, '');
  const apiBase = `${url.replace(/\/v1$/, '')}/v1`;
  const origin = new URL(url).origin;
  const timeoutMs = options.timeoutMs ?? DEFAULT_IMAGE_TIMEOUT_MS;
  const healthTimeoutMs = options.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  const authorization: Record<string, string> = options.apiKey === undefined || options.apiKey === '' ? {} : { authorization: `Bearer ${options.apiKey}` };
  const label = dialect === 'localai' ? 'LocalAI' : 'The image server';
  // Every request, the linked image's included: a redirect is refused, never followed (server/image-backend/).
  const fetchImpl = createImageServerFetch(options.fetch ?? globalThis.fetch, { label, url });
  // Learnt once from an answer of /sdcpp/v1/capabilities; a failed probe is asked again next time.
  let isSdServer: boolean | undefined;

  /** sd-server alone has GET /sdcpp/v1/capabilities (routes_sdcpp.cpp:411). */
  async function probeSdServer(signal: AbortSignal): Promise<boolean> {
    // Stryker disable next-line BooleanLiteral: true for LocalAI: buildRequest and checkHealth take the LocalAI branch before they look at sd-server
    if (dialect !== 'openai') return false;
    if (isSdServer !== undefined) return isSdServer;
    try {
      const response = await fetchImpl(`${origin}/sdcpp/v1/capabilities`, { headers: authorization, signal });
      await response.body?.cancel();
      isSdServer = response.ok;
    } catch {
      // Unknown this time: the request goes out plain, and the next one asks again.
    }
    return isSdServer === true;
  }

  /** The body each dialect sends, and what the image is then known to be made with (a batch's first image). */
  function buildRequest(request: ImageRequest, sdServer: boolean, count = 1): { body: Record<string, unknown>; claims: Omit<ImageResult, 'png'> } {
    // The checkpoint asked for, else --image-model; neither: the server's own choice, and none is claimed.
    const model = request.checkpoint !== undefined && request.checkpoint !== '' ? request.checkpoint : options.model;
    // Stryker disable next-line ConditionalExpression: { model: undefined }: JSON.stringify leaves an undefined field out
    const named = model === undefined ? {} : { model };
    const common = { n: count, size: `${request.width}x${request.height}`, response_format: 'b64_json', ...named };
    if (dialect === 'localai') {
      const prompt = escapeLocalAiPrompt(request.prompt);
      const negativePrompt = escapeLocalAiPrompt(request.negativePrompt);
      // image.go:168-175 reads `step`; the seed is honoured now that it fits 31 bits. CFG is the model YAML's
      // (gosd.go:160, 229): a request cfg_scale is ignored, so none is sent or claimed.
      return {
        body: { ...common, prompt: negativePrompt === '' ? prompt : `${prompt}|${negativePrompt}`, step: request.steps, seed: request.seed },
        // The model is honoured or refused (request.go:153-168), so the one sent is the one used.
        claims: { seed: request.seed, steps: request.steps, prompt, negativePrompt, ...named },
      };
    }
    if (sdServer) {
      // `model` is sent but never read (routes_openai.cpp:23-78): sd-server paints with its one model, unnamed here.
      // The same strict clamp as every sd-server route (routes_openai.cpp:73-76; common.cpp:2334-2337).
      return {
        body: { ...common, prompt: embedSdCppExtraArgs(request) },
        claims: { seed: request.seed, steps: Math.min(100, Math.max(1, request.steps)), cfg: request.cfg },
      };
    }
    // OpenAI's API has no seed, steps, CFG or negative prompt: none is sent, none claimed.
    return { body: { ...common, prompt: request.prompt }, claims: { negativePrompt: '', ...named } };
  }

  const connection: ConnectionWords =
    dialect === 'localai' ? { product: 'LocalAI', url, startHint: 'LocalAI' } : { product: 'The OpenAI-compatible image server', url, startHint: 'the image server' };

  function keyRefused(status: number, text: string): ImageBackendError {
    return new ImageBackendError('backend_error', `${label} at ${url} refused the API key (HTTP ${status}): ${asSentence(describeOpenAiError(text))} Check the image API key Easel was given.`);
  }

  function toHttpError(status: number, text: string, route = 'generations'): ImageBackendError {
    const words = describeOpenAiError(text);
    if (status === 401 || status === 403) return keyRefused(status, text);
    // A 404 with an OpenAI error body is "model not found"; without one, the route is missing.
    const body = parseJson(text);
    if (status === 404 && !(isRecord(body) && isRecord(body['error']))) {
      return new ImageBackendError('backend_error', `The server at ${url} has no ${apiBase}/images/${route} (HTTP 404: ${words}). Check that --image-url points to an OpenAI-compatible image server.`);
    }
    return new ImageBackendError('backend_error', `${label} at ${url} refused the image (HTTP ${status}): ${asSentence(words)} Check its console and the model it serves.`);
  }

  function toTooLargeError(error: BodyTooLarge): ImageBackendError {
    return describeImageTooLarge(error, { product: label, url, hint: 'Lower the image size, or check that --image-url points to an image API.' });
  }

  /**
   * Downloads an image the server linked to, only from the server's own origin (scheme, host and port of
   * --image-url), and like every request here without following a redirect: an answer must never make Easel
   * fetch another host.
   */
  async function downloadLinkedImage(link: string, signal: AbortSignal): Promise<Uint8Array> {
    let target: URL;
    try {
      target = new URL(link, `${url}/`);
    } catch {
      throw new ImageBackendError('bad_response', `${label} at ${url} answered with an image link Easel cannot read (${truncate(link.slice(0, 120))}).`);
    }
    if (target.origin !== origin) {
      throw new ImageBackendError(
        'bad_response',
        `${label} at ${url} linked its image on another server (${target.protocol.startsWith('http') ? target.origin : target.protocol}); Easel only downloads images from ${origin} itself, so it fetched nothing. Configure the server to answer with b64_json, or to link its images on its own address.`,
      );
    }
    const response = await fetchImpl(target, { signal });
    if (!response.ok) {
      await response.body?.cancel();
      throw new ImageBackendError('backend_error', `${label} at ${url} could not serve the image it made (HTTP ${response.status}).`);
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
      throw new ImageBackendError('bad_response', `${label} at ${url} sent an image Easel cannot use: ${chunks.error.message}${hint}`);
    }
    return png;
  }

  /** The images of `data`, at most `count`, in order (a batch's: sd-server's seed + i, routes_openai.cpp:287-317). */
  async function readImages(text: string, signal: AbortSignal, count: number): Promise<Uint8Array[]> {
    const body = parseJson(text);
    const data: unknown[] = isRecord(body) && Array.isArray(body['data']) ? body['data'].slice(0, count) : [];
    const images: Uint8Array[] = [];
    for (const item of data) {
      if (isRecord(item) && typeof item['b64_json'] === 'string' && item['b64_json'] !== '') {
        // Stryker disable next-line Regex: base64 has no : or ,, so only a prefix can match
        images.push(checkPng(new Uint8Array(Buffer.from(item['b64_json'].replace(/^data:[^,]*,/, ''), 'base64'))));
        // Some servers ignore response_format and answer with a link to the file.
      } else if (isRecord(item) && typeof item['url'] === 'string' && item['url'] !== '') {
        images.push(checkPng(await downloadLinkedImage(item['url'], signal)));
      } else break;
    }
    if (images.length === 0) {
      throw new ImageBackendError(
        'bad_response',
        `${label} at ${url} answered without an image (${truncate(text.slice(0, 120)) || 'empty answer'}). Check that it serves an image model.`,
      );
    }
    return images;
  }

  async function generate(request: ImageRequest, options: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void }): Promise<ImageResult> {
    const [result] = await run(request, 1, options);
    return result as ImageResult;
  }

  /**
   * A batch as one request with `n` (OpenAI's API; sd-server's batch_count, routes_openai.cpp:34, 64 and 118-124,
   * 158, each image seeded seed + i, :288-296). Not LocalAI's: it runs the request n times with the same seed
   * (core/http/endpoints/openai/image.go:155-160), n copies of one image, so the core asks once per seed instead.
   */
  function generateBatch(request: ImageRequest & { count: number }, options: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void }): Promise<ImageResult[]> {
    return run(request, request.count, options);
  }

  async function run(request: ImageRequest, count: number, { signal }: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void }): Promise<ImageResult[]> {
    // No interrupt: a stop only abandons the request, and the server may finish the image anyway.
    const stopWords = () => ({ product: label, url, cannotStop: 'no-interrupt' as const });
    return runImageJob({ signal, timeoutMs, stopWords, connection }, async (jobSignal) => {
      const sdServer = await probeSdServer(AbortSignal.any([jobSignal, AbortSignal.timeout(healthTimeoutMs)]));
      const { body: requestBody, claims } = buildRequest(request, sdServer, count);
      if (request.init !== undefined && !sdServer) throw new ImageBackendError('backend_error', dialect === 'localai' ? LOCALAI_CANNOT_VARY : OPENAI_CANNOT_VARY);
      const response =
        request.init === undefined
          ? await fetchImpl(`${apiBase}/images/generations`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', ...authorization },
              body: JSON.stringify(requestBody),
              signal: jobSignal,
            })
          : await fetchImpl(`${apiBase}/images/edits`, { method: 'POST', headers: authorization, body: toEditForm(requestBody, request.init.png), signal: jobSignal });
      // b64_json arrives inside JSON, so the cap counts the JSON; an error answer is only quoted.
      if (!response.ok) throw toHttpError(response.status, await readTextPrefix(response, MAX_ERROR_TEXT_BYTES), request.init === undefined ? 'generations' : 'edits');
      const body = await readCappedText(response, MAX_IMAGE_JSON_BYTES);
      if (!body.ok) throw toTooLargeError(body.error);
      const images = await readImages(body.value, jobSignal, count);
      // A batch's image i has seed + i where a seed is claimed at all (sd-server).
      return images.map((png, index) => ({ png, ...claims, ...(claims.seed === undefined ? {} : { seed: claims.seed + index }) }));
    });
  }

  /**
   * sd-server's /v1/images/edits form (routes_openai.cpp:80-221): multipart (anything else is refused, :84-87), the
   * prompt with its <sd_cpp_extra_args> (:89-93, :208-212), the image as `image[]` (:95-110), `n` (:118-124), `size`
   * as WxH (:126-138) and output_format png (:140-142). It answers as /v1/images/generations does (:356-384).
   */
  function toEditForm(body: Record<string, unknown>, png: Uint8Array): FormData {
    const form = new FormData();
    form.append('prompt', String(body['prompt']));
    form.append('image[]', new Blob([png as Uint8Array<ArrayBuffer>], { type: 'image/png' }), 'easel-init.png');
    form.append('n', String(body['n']));
    form.append('size', String(body['size']));
    form.append('output_format', 'png');
    return form;
  }

  /** LocalAI's readiness: 200 when ready, 503 {"status":"starting"} during a startup preload (routes/health.go:31-39). */
  async function readReadiness(signal: AbortSignal): Promise<'ready' | 'starting' | undefined> {
    if (dialect !== 'localai') return undefined;
    try {
      const response = await fetchImpl(`${origin}/readyz`, { signal });
      await response.body?.cancel();
      // Stryker disable BlockStatement: the catch below emptied: the function then returns undefined all the same
      return response.ok ? 'ready' : response.status === 503 ? 'starting' : undefined;
    } catch {
      // Stryker restore BlockStatement
      return undefined;
    }
  }

  async function checkHealth(signal?: AbortSignal): Promise<ImageBackendHealth> {
    return checkWithin({ healthTimeoutMs, signal, connection, slowProduct: label }, async (combined) => {
      const [response, readiness, sdServer] = await Promise.all([
        fetchImpl(`${apiBase}/models`, { headers: authorization, signal: combined }),
        readReadiness(combined),
        probeSdServer(combined),
      ]);
      const text = await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES);
      const server = dialect === 'localai' ? { server: 'LocalAI' } : sdServer ? { server: SD_SERVER } : {};
      if (response.status === 401 || response.status === 403) {
        return { reachable: true, ...server, detail: `${label} at ${url} answers but refuses the API key (HTTP ${response.status}): ${asSentence(describeOpenAiError(text))}` };
      }
      if (readiness === 'starting') {
        return { reachable: true, ...server, detail: `LocalAI at ${url} is starting (a startup preload runs); images can be made once it is ready.` };
      }
      if (!response.ok) return { reachable: true, ...server, detail: `The server at ${url} answers ${apiBase}/models with HTTP ${response.status}.` };
      const ids = readListedModels(parseJson(text)).map((model) => model.id);
      const listed = ids.length === 0 ? '' : ` (models: ${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ', …' : ''})`;
      if (dialect === 'localai') return { reachable: true, ...server, detail: `LocalAI answers at ${url}${listed}.` };
      if (sdServer) {
        return {
          reachable: true,
          ...server,
          detail: `stable-diffusion.cpp's sd-server answers at ${url}; Easel passes it seed, steps, CFG and the negative prompt in <sd_cpp_extra_args>. --image-backend a1111 suits it better (its /sdapi/v1 route reports what it used).`,
        };
      }
      return { reachable: true, detail: `The OpenAI-compatible image server answers at ${url}${listed}. Its API takes no seed, steps, CFG or negative prompt, so Easel sends and records none.` };
    });
  }


  /** GET a model list under /v1; undefined when the server has no such route (HTTP 404). */
  async function readModelList(path: string, signal: AbortSignal): Promise<ListedModel[] | undefined> {
    const response = await fetchImpl(`${apiBase}${path}`, { headers: authorization, signal });
    const text = await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES);
    if (response.status === 404) return undefined;
    if (response.status === 401 || response.status === 403) throw keyRefused(response.status, text);
    if (!response.ok) {
      throw new ImageBackendError('backend_error', `${label} at ${url} could not list its models (GET ${apiBase}${path}, HTTP ${response.status}): ${asSentence(describeOpenAiError(text))}`);
    }
    const body = parseJson(text);
    if (!isRecord(body) || !Array.isArray(body['data'])) {
      throw new ImageBackendError('bad_response', `${label} at ${url} answered GET ${apiBase}${path} without a model list (${truncate(text.slice(0, 120)) || 'empty answer'}).`);
    }
    return readListedModels(body);
  }

  /**
   * LocalAI's image models: those /v1/models/capabilities says make an "image" (list_capabilities.go:35-42). A
   * model without capabilities there has no config (a loose file): LocalAI's own image route never takes one as
   * its default either (model_config_filter.go:29-32), so it is left out. A LocalAI before that route (404) lists
   * every model on /v1/models, chat ones too, with nothing to tell them apart: then all are listed.
   */
  async function readLocalAiImageModels(signal: AbortSignal): Promise<ListedModel[] | undefined> {
    const described = await readModelList('/models/capabilities', signal);
    if (described === undefined) return readModelList('/models', signal);
    return described.filter((model) => Array.isArray(model['capabilities']) && model['capabilities'].includes('image'));
  }

  async function listModels(signal?: AbortSignal): Promise<ImageModelOptions> {
    return listWithin({ healthTimeoutMs, signal, connection, slowProduct: label }, async (combined) => {
      const [listed, sdServer] = await Promise.all([
        dialect === 'localai' ? readLocalAiImageModels(combined) : readModelList('/models', combined),
        probeSdServer(combined),
      ]);
      if (listed === undefined) {
        throw new ImageBackendError('backend_error', `The server at ${url} has no ${apiBase}/models (HTTP 404). Check that --image-url points to an OpenAI-compatible image server.`);
      }
      const checkpoints = [...new Set(listed.map((model) => model.id))];
      // sd-server lists the one model it paints with whatever is asked (routes_openai.cpp:250-255); the others paint
      // with --image-model when Easel names none, and with a model of their choosing otherwise.
      const current = sdServer ? (checkpoints.length === 1 ? (checkpoints[0] ?? null) : null) : (options.model ?? null);
      return { checkpoints, current, samplers: [], schedulers: [] };
    });
  }

  return {
    name: dialect,
    url,
    ...(dialect === 'localai' ? { seedRange: LOCALAI_SEEDS } : {}),
    /** LocalAI and OpenAI's API cannot; sd-server can, once it is known to be the one answering. */
    get canVary(): true | string | undefined {
      if (dialect === 'localai') return LOCALAI_CANNOT_VARY;
      return isSdServer === undefined ? undefined : isSdServer ? true : OPENAI_CANNOT_VARY;
    },
    // Before each image: whether sd-server answers, so canVary is known before a Vary is sent. Never throws.
    ...(dialect === 'openai' ? { prepare: async (signal: AbortSignal) => void (await probeSdServer(AbortSignal.any([signal, AbortSignal.timeout(healthTimeoutMs)]))) } : {}),
    generate,
    ...(dialect === 'openai' ? { generateBatch } : {}),
    checkHealth,
    listModels,
  };
}
