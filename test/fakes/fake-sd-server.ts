// A real HTTP server that behaves like stable-diffusion.cpp's sd-server (examples/server/, master-827,
// 97d29908): the A1111-style /sdapi/v1/txt2img and img2img (init_images, denoising_strength) with their clamps and
// `info`, batches (batch_size: one image per seed, seed + i), the OpenAI-style /v1/images/generations that reads
// only prompt, n and size unless given <sd_cpp_extra_args>, and /v1/images/edits (multipart, image[] as the init
// image, its strength in <sd_cpp_extra_args>), the native
// /sdcpp/v1 capabilities and jobs, a PNG with sd.cpp's own `parameters` tEXt (raw UTF-8), its one model and its
// samplers and schedulers on /sdapi/v1 (sd-models, options, samplers, schedulers), and what it lacks: no
// /sdapi/v1/progress, no /sdapi/v1/interrupt (cpp-httplib answers 404 with an empty body), no override_settings
// (build_sdapi_img_gen_request never reads it: the model is the one -m loaded).
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeSolidPng, insertTextChunk, makePng } from './png-bytes.ts';
import { parseBody, readBodyBytes, readMultipart, sendJson } from './http-body.ts';

export interface FakeSdServerOptions {
  /** Simulated time per sampling step. */
  stepDelayMs?: number;
  /** The -m path; its basename names the model (sd_basename), its stem in /sdapi/v1/options. */
  modelPath?: string;
  /** --embed-image-metadata off: the PNG carries no `parameters` text (common.h:207, default on). */
  embedImageMetadata?: boolean;
  /** /sdapi/v1/txt2img and /v1/images/generations answer with this status and body (objects as JSON). */
  failWith?: { status: number; body: unknown };
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** Parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: unknown;
}

/** What one generation really ran with: what sd-server reports in `info` and in the PNG. */
export interface SdRun {
  route: '/sdapi/v1/txt2img' | '/sdapi/v1/img2img' | '/v1/images/generations' | '/v1/images/edits' | '/sdcpp/v1/img_gen';
  prompt: string;
  negativePrompt: string;
  seed: number;
  steps: number;
  cfg: number;
  width: number;
  height: number;
  sampler: string;
  /** sd.cpp's scheduler name, or 'NONE' when none was chosen (the model's default, picked later). */
  scheduler: string;
  /** The img2img strength it ran with (0.75 unless asked otherwise), when it had an init image; undefined for txt2img. */
  strength?: number;
  /** The colour of the init image it started from (a solid PNG of png-bytes.ts), when it had one. */
  init?: [number, number, number];
  /** How many images the run made (batch_count), each with seed + i. */
  count: number;
}

export interface FakeSdServer {
  url: string;
  requests: RecordedRequest[];
  /** Every generation, with the values it really used (after sd.cpp's clamps and defaults). */
  runs: SdRun[];
  close(): Promise<void>;
}

// src/stable-diffusion.cpp:3288-3310, sample_method_to_str.
const SAMPLE_METHODS = [
  'euler',
  'euler_a',
  'heun',
  'dpm2',
  'dpm++2s_a',
  'dpm++2m',
  'dpm++2mv2',
  'ipndm',
  'ipndm_v',
  'lcm',
  'ddim_trailing',
  'tcd',
  'res_multistep',
  'res_2s',
  'er_sde',
  'euler_cfg_pp',
  'euler_a_cfg_pp',
  'euler_ge',
  'dpm++2m_sde',
  'dpm++2m_sde_bt',
  'lms',
];
// routes_sdapi.cpp:46-81, get_sdapi_sample_method: sd.cpp's own names first, then A1111's, lower-cased (the
// *_cfg_pp keys both map to euler_cfg_pp there, as written).
const SDAPI_SAMPLERS: Record<string, string> = {
  'euler a': 'euler_a',
  k_euler_a: 'euler_a',
  euler: 'euler',
  k_euler: 'euler',
  heun: 'heun',
  k_heun: 'heun',
  dpm2: 'dpm2',
  k_dpm_2: 'dpm2',
  lcm: 'lcm',
  ddim: 'ddim_trailing',
  'dpm++ 2m': 'dpm++2m',
  k_dpmpp_2m: 'dpm++2m',
  'dpm++ 2m sde': 'dpm++2m_sde',
  k_dpmpp_2m_sde: 'dpm++2m_sde',
  'dpm++ 2m sde gpu': 'dpm++2m_sde_bt',
  k_dpmpp_2m_sde_gpu: 'dpm++2m_sde_bt',
  'res multistep': 'res_multistep',
  k_res_multistep: 'res_multistep',
  'res 2s': 'res_2s',
  k_res_2s: 'res_2s',
  euler_cfg_pp: 'euler_cfg_pp',
  k_euler_cfg_pp: 'euler_cfg_pp',
  euler_a_cfg_pp: 'euler_cfg_pp',
  k_euler_a_cfg_pp: 'euler_cfg_pp',
};
// src/stable-diffusion.cpp:3331-3348, scheduler_to_str; str_to_scheduler (3360-3370) also takes "normal" for discrete.
const SCHEDULERS = ['discrete', 'karras', 'exponential', 'ays', 'gits', 'sgm_uniform', 'simple', 'smoothstep', 'kl_optimal', 'lcm', 'bong_tangent', 'ltx2', 'logit_normal', 'flux2', 'flux', 'beta'];

/** str_to_scheduler (stable-diffusion.cpp:3360-3370): undefined for SCHEDULER_COUNT, a name it does not know. */
function toScheduler(name: string): string | undefined {
  if (name === 'normal') return 'discrete';
  return SCHEDULERS.includes(name) ? name : undefined;
}

/** nlohmann's type_error for j.value() of the wrong type, which sd-server answers as a 500 (routes_sdapi.cpp:398-404). */
class JsonTypeError extends Error {}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** nlohmann json::value(key, default): the default when absent, a type_error when of another type. */
function valueOf<T extends 'string' | 'number' | 'integer'>(j: Record<string, unknown>, key: string, type: T, fallback: T extends 'string' ? string : number): T extends 'string' ? string : number {
  const value = j[key];
  if (value === undefined || value === null) return fallback;
  const ok = type === 'string' ? typeof value === 'string' : typeof value === 'number' && (type === 'number' || Number.isInteger(value));
  if (!ok) throw new JsonTypeError(`[json.exception.type_error.302] type must be ${type === 'string' ? 'string' : 'number'}, but is ${Array.isArray(value) ? 'array' : typeof value}`);
  return (type === 'integer' ? Math.trunc(value as number) : value) as T extends 'string' ? string : number;
}

/** std::to_string(float): six decimals. */
function cppFloat(value: number): string {
  return value === Infinity ? 'inf' : value.toFixed(6);
}

interface GenParams {
  prompt: string;
  negativePrompt: string;
  seed: number;
  steps: number;
  cfg: number;
  width: number;
  height: number;
  batchCount: number;
  /** sd.cpp's name, or undefined for SAMPLE_METHOD_COUNT ("NONE": the model's default, chosen later). */
  sampleMethod: string | undefined;
  /** sd.cpp's name, or undefined for SCHEDULER_COUNT (the default for the sampler, chosen later). */
  scheduler: string | undefined;
  /** SDGenerationParams::strength: `--strength`, default 0.75 (common.cpp:1157-1159). */
  strength: number;
  /** The decoded init image (its colour: the fake reads solid PNGs), or undefined: text to image. */
  init: [number, number, number] | undefined;
}

/**
 * decode_base64_image (common.cpp:1716-1747): whatever comes before the first comma is dropped (a data: URL), and
 * the rest must decode to an image of at least 3 channels (media_io.cpp:537-549); the fake reads what png-bytes.ts
 * makes. undefined: the image is skipped, as sd-server does without a word (routes_sdapi.cpp:200-209).
 */
function decodeInitImage(encoded: string): [number, number, number] | undefined {
  const comma = encoded.indexOf(',');
  return decodeInitBytes(Buffer.from(comma === -1 ? encoded : encoded.slice(comma + 1), 'base64'));
}

function decodeInitBytes(bytes: Uint8Array): [number, number, number] | undefined {
  try {
    return decodeSolidPng(bytes).rgb;
  } catch {
    return undefined;
  }
}

/**
 * routes_openai.cpp:11-21: the first <sd_cpp_extra_args>…</sd_cpp_extra_args> block is parsed, every block is
 * removed, and the prompt is not trimmed. ECMAScript's `.` does not match a newline.
 */
function extractExtraArgs(prompt: string): { prompt: string; extra: string } {
  const match = /<sd_cpp_extra_args>(.*?)<\/sd_cpp_extra_args>/.exec(prompt);
  if (match === null) return { prompt, extra: '' };
  return { prompt: prompt.replace(/<sd_cpp_extra_args>(.*?)<\/sd_cpp_extra_args>/g, ''), extra: match[1] ?? '' };
}

/**
 * SDGenerationParams::from_json_str (common.cpp:1890-2058): keys of the wrong type are skipped
 * (load_if_exists: ints need is_number_integer(), floats is_number()); steps and cfg are nested.
 */
function applyExtraArgs(params: GenParams, text: string): boolean {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return false;
  }
  if (!isRecord(json)) return false;
  const int = (value: unknown) => (typeof value === 'number' && Number.isInteger(value) ? value : undefined);
  if (typeof json['negative_prompt'] === 'string') params.negativePrompt = json['negative_prompt'];
  params.seed = int(json['seed']) ?? params.seed;
  params.width = int(json['width']) ?? params.width;
  params.height = int(json['height']) ?? params.height;
  params.batchCount = int(json['batch_count']) ?? params.batchCount;
  // common.cpp:1949: a float key.
  if (typeof json['strength'] === 'number') params.strength = json['strength'];
  const sample = json['sample_params'];
  if (isRecord(sample)) {
    params.steps = int(sample['sample_steps']) ?? params.steps;
    if (typeof sample['sample_method'] === 'string' && SAMPLE_METHODS.includes(sample['sample_method'])) params.sampleMethod = sample['sample_method'];
    // common.cpp:2021-2026.
    const scheduler = typeof sample['scheduler'] === 'string' ? toScheduler(sample['scheduler']) : undefined;
    if (scheduler !== undefined) params.scheduler = scheduler;
    const guidance = sample['guidance'];
    if (isRecord(guidance) && typeof guidance['txt_cfg'] === 'number') params.cfg = guidance['txt_cfg'];
  }
  return true;
}

/** resolve_and_validate(…, strict = true) (common.cpp:2329-2337, 2388-2391). */
function resolveAndValidate(params: GenParams): boolean {
  // `if (seed < 0) { srand((int)time(nullptr)); seed = rand(); }`: glibc's rand() is 0…2147483647.
  if (params.seed < 0) params.seed = Math.floor(Math.random() * 2_147_483_648);
  params.batchCount = Math.min(8, Math.max(1, params.batchCount));
  params.steps = Math.min(100, Math.max(1, params.steps));
  // common.cpp:2383-2386: "can only work with strength in [0.0, 1.0]".
  if (params.strength < 0 || params.strength > 1) return false;
  return params.cfg >= 0;
}

export async function createFakeSdServer(options: FakeSdServerOptions = {}): Promise<FakeSdServer> {
  const stepDelayMs = options.stepDelayMs ?? 5;
  const modelPath = options.modelPath ?? '/models/v1-5-pruned-emaonly.safetensors';
  const modelName = modelPath.replace(/^.*\//, '');
  const modelStem = modelName.replace(/\.[^.]*$/, '');
  const requests: RecordedRequest[] = [];
  const runs: SdRun[] = [];
  const jobs = new Map<string, { status: 'queued' | 'generating' | 'completed' | 'cancelled'; created: number }>();
  let jobCounter = 0;
  let closed = false;
  const closing = new AbortController();
  // runtime->sd_ctx_mutex: one generation at a time, the others wait (routes_sdapi.cpp:339-346).
  let mutex: Promise<void> = Promise.resolve();

  /** get_image_params (common.cpp:3012-3104), the text written into the PNG and `infotexts`. */
  function describeRun(run: GenParams, seed: number = run.seed): string {
    const sdcpp = JSON.stringify({
      schema: 'sdcpp.image.params/v1',
      mode: 'img_gen',
      generator: { name: 'stable-diffusion.cpp', version: 'master-827', commit: '97d2990' },
      seed,
      width: run.width,
      height: run.height,
      prompt: { positive: run.prompt, negative: run.negativePrompt },
      sampling: { sample_method: run.sampleMethod ?? 'NONE', sample_steps: run.steps, txt_cfg: run.cfg },
      models: { model: modelName },
    });
    const negative = run.negativePrompt === '' ? '' : `Negative prompt: ${run.negativePrompt}\n`;
    return (
      `${run.prompt}\n${negative}Steps: ${run.steps}, CFG scale: ${cppFloat(run.cfg)}, Guidance: ${cppFloat(3.5)}, Eta: ${cppFloat(Infinity)}, ` +
      // common.cpp:3061-3072: the scheduler, when one was chosen, follows the sampler's name after a space.
      `Seed: ${seed}, Size: ${run.width}x${run.height}, Model: ${modelName}, RNG: cuda, Sampler: ${run.sampleMethod ?? 'NONE'}${run.scheduler === undefined ? '' : ` ${run.scheduler}`}, ` +
      `Version: stable-diffusion.cpp, SDCPP: ${sdcpp}`
    );
  }

  /**
   * Runs one generation under the mutex: batch_count images, each with seed + i (routes_sdapi.cpp:360-390: the
   * infotext's seed is seed + i / images_per_batch, 1 image per batch here); each PNG holds sd.cpp's parameters as
   * raw UTF-8 tEXt.
   */
  async function generate(route: SdRun['route'], params: GenParams): Promise<Array<{ png: Uint8Array; text: string; seed: number }>> {
    const previous = mutex;
    let release!: () => void;
    mutex = new Promise<void>((resolve) => (release = resolve));
    await previous;
    try {
      for (let step = 0; step < params.steps && !closed; step++) {
        try {
          await sleep(stepDelayMs, undefined, { signal: closing.signal });
        } catch {
          break;
        }
      }
      runs.push({
        route,
        prompt: params.prompt,
        negativePrompt: params.negativePrompt,
        seed: params.seed,
        steps: params.steps,
        cfg: params.cfg,
        width: params.width,
        height: params.height,
        sampler: params.sampleMethod ?? 'NONE',
        scheduler: params.scheduler ?? 'NONE',
        ...(params.init === undefined ? {} : { strength: params.strength, init: params.init }),
        count: params.batchCount,
      });
      return Array.from({ length: params.batchCount }, (_, index) => {
        const seed = params.seed + index;
        const text = describeRun(params, seed);
        const own: [number, number, number] = [seed & 0xff, (seed >>> 8) & 0xff, params.steps & 0xff];
        // A variation keeps (1 − strength) of its starting colour: a test can tell it started from that image.
        const start = params.init;
        const rgb = start === undefined ? own : (start.map((value, channel) => Math.round(value * (1 - params.strength) + own[channel]! * params.strength)) as [number, number, number]);
        const png = makePng(params.width, params.height, rgb);
        // embed_meta ? params : "" (routes_sdapi.cpp:366-377): an empty string writes no chunk.
        return { png: (options.embedImageMetadata ?? true) ? insertTextChunk(png, 'parameters', text, 'raw-utf8') : png, text, seed };
      });
    } finally {
      release();
    }
  }

  function defaults(): GenParams {
    // common.h:201 `int64_t seed = 42`; sd_sample_params_init (stable-diffusion.cpp:3650-3662): 20 steps, cfg 7.
    return { prompt: '', negativePrompt: '', seed: 42, steps: 20, cfg: 7, width: 512, height: 512, batchCount: 1, sampleMethod: undefined, scheduler: undefined, strength: 0.75, init: undefined };
  }

  /** build_sdapi_img_gen_request (routes_sdapi.cpp:94-264) and the txt2img and img2img handler (310-413). */
  async function handleSdapi(img2img: boolean, text: string, response: ServerResponse): Promise<void> {
    if (text === '') return sendJson(response, 400, { error: 'empty body' });
    const j = JSON.parse(text) as unknown;
    if (!isRecord(j)) throw new JsonTypeError('[json.exception.type_error.306] cannot use value() with array');
    const params = defaults();
    params.prompt = valueOf(j, 'prompt', 'string', '');
    params.negativePrompt = valueOf(j, 'negative_prompt', 'string', '');
    params.width = valueOf(j, 'width', 'integer', 512);
    params.height = valueOf(j, 'height', 'integer', 512);
    params.steps = valueOf(j, 'steps', 'integer', 20);
    params.cfg = valueOf(j, 'cfg_scale', 'number', 7);
    params.seed = valueOf(j, 'seed', 'integer', -1);
    params.batchCount = valueOf(j, 'batch_size', 'integer', 1);
    const samplerName = valueOf(j, 'sampler_name', 'string', '');
    const schedulerName = valueOf(j, 'scheduler', 'string', '');
    if (params.width <= 0 || params.height <= 0) return sendJson(response, 400, { error: 'width and height must be positive' });
    if (params.prompt === '') return sendJson(response, 400, { error: 'prompt required' });
    const extracted = extractExtraArgs(params.prompt);
    params.prompt = extracted.prompt;
    if (extracted.extra !== '' && !applyExtraArgs(params, extracted.extra)) return sendJson(response, 400, { error: 'invalid sd_cpp_extra_args' });
    // routes_sdapi.cpp:154-162: a sampler or scheduler it cannot name keeps the default, without a word.
    const method = SAMPLE_METHODS.includes(samplerName) ? samplerName : SDAPI_SAMPLERS[samplerName.toLowerCase()];
    if (method !== undefined) params.sampleMethod = method;
    const scheduler = toScheduler(schedulerName);
    if (scheduler !== undefined) params.scheduler = scheduler;
    if (img2img) {
      // routes_sdapi.cpp:196-237: the first of init_images (one that does not decode is skipped, and the request
      // goes on as text to image); denoising_strength ≥ 0 is taken, capped at 1.
      const images = j['init_images'];
      if (Array.isArray(images) && images.length > 0) params.init = decodeInitImage(String(images[0]));
      const strength = valueOf(j, 'denoising_strength', 'number', -1);
      if (strength >= 0) params.strength = Math.min(strength, 1);
    }
    if (!resolveAndValidate(params)) return sendJson(response, 400, { error: 'invalid params' });
    if (options.failWith !== undefined) return sendJson(response, options.failWith.status, options.failWith.body);
    const made = await generate(img2img ? '/sdapi/v1/img2img' : '/sdapi/v1/txt2img', params);
    // prepare_info_field (routes_sdapi.cpp:266-306), built after the clamps: what was really used.
    const info: Record<string, unknown> = { prompt: params.prompt };
    if (params.negativePrompt !== '') info['negative_prompt'] = params.negativePrompt;
    Object.assign(info, {
      seed: params.seed,
      cfg_scale: params.cfg,
      width: params.width,
      height: params.height,
      steps: params.steps,
      sampler_name: params.sampleMethod ?? 'NONE',
      // routes_sdapi.cpp:283-286: only a scheduler that was chosen.
      ...(params.scheduler === undefined ? {} : { extra_generation_params: { 'Schedule type': params.scheduler } }),
      // routes_sdapi.cpp:287-289: img2img only.
      ...(img2img ? { denoising_strength: params.strength } : {}),
      sd_model_name: modelName,
      version: 'stable-diffusion.cpp',
      // routes_sdapi.cpp:386-389: one entry per image, all_seeds seed + i.
      infotexts: made.map((image) => image.text),
      all_prompts: made.map(() => params.prompt),
      all_negative_prompts: made.map(() => params.negativePrompt),
      all_seeds: made.map((image) => image.seed),
    });
    // routes_sdapi.cpp:356-393: `parameters` is the request verbatim; `info` is a string of JSON.
    if (!response.destroyed) sendJson(response, 200, { images: made.map((image) => Buffer.from(image.png).toString('base64')), parameters: j, info: JSON.stringify(info) });
  }

  /** build_openai_generation_request (routes_openai.cpp:23-78): prompt, n, size, output_format; nothing else. */
  async function handleOpenAiGeneration(text: string, response: ServerResponse): Promise<void> {
    if (text === '') return sendJson(response, 400, { error: 'empty body' });
    const j = JSON.parse(text) as unknown;
    if (!isRecord(j)) throw new JsonTypeError('[json.exception.type_error.306] cannot use value() with array');
    const params = defaults();
    params.prompt = valueOf(j, 'prompt', 'string', '');
    params.batchCount = Math.max(1, valueOf(j, 'n', 'integer', 1));
    const size = /^(\d+)x(\d+)/.exec(valueOf(j, 'size', 'string', ''));
    if (size !== null) {
      params.width = Number(size[1]);
      params.height = Number(size[2]);
    }
    if (params.prompt === '') return sendJson(response, 400, { error: 'prompt required' });
    const extracted = extractExtraArgs(params.prompt);
    params.prompt = extracted.prompt;
    if (extracted.extra !== '' && !applyExtraArgs(params, extracted.extra)) return sendJson(response, 400, { error: 'invalid sd_cpp_extra_args' });
    if (!resolveAndValidate(params)) return sendJson(response, 400, { error: 'invalid params' });
    if (options.failWith !== undefined) return sendJson(response, options.failWith.status, options.failWith.body);
    const made = await generate('/v1/images/generations', params);
    // routes_openai.cpp:282-317: always b64_json, whatever response_format said; one entry per image.
    if (!response.destroyed) sendJson(response, 200, { created: Math.floor(Date.now() / 1000), data: made.map((image) => ({ b64_json: Buffer.from(image.png).toString('base64') })), output_format: 'png' });
  }

  /**
   * build_openai_edit_request (routes_openai.cpp:80-221) and its handler (331-394): multipart only; prompt and an
   * image[] (or the legacy `image`) required; n and size read; every image decoded and the first made the init image
   * (:160-179; one that does not decode is skipped); the strength only through <sd_cpp_extra_args> (:208-212).
   */
  async function handleOpenAiEdit(bytes: Buffer, contentType: string | undefined, response: ServerResponse): Promise<void> {
    const form = await readMultipart(bytes, contentType);
    if (form === undefined) return sendJson(response, 400, { error: 'Content-Type must be multipart/form-data' });
    const params = defaults();
    const field = (name: string) => {
      const value = form.get(name);
      return typeof value === 'string' ? value : '';
    };
    params.prompt = field('prompt');
    if (params.prompt === '') return sendJson(response, 400, { error: 'prompt required' });
    const files = [...form.getAll('image[]'), ...(form.getAll('image[]').length === 0 ? form.getAll('image') : [])].filter((value): value is File => typeof value !== 'string');
    if (files.length === 0) return sendJson(response, 400, { error: 'at least one image[] required' });
    const n = Number.parseInt(field('n'), 10);
    if (Number.isFinite(n)) params.batchCount = n;
    const size = /^(\d+)x(\d+)/.exec(field('size'));
    if (size !== null) {
      params.width = Number(size[1]);
      params.height = Number(size[2]);
    }
    const decoded = await Promise.all(files.map(async (file) => decodeInitBytes(new Uint8Array(await file.arrayBuffer()))));
    params.init = decoded.find((image) => image !== undefined);
    const extracted = extractExtraArgs(params.prompt);
    params.prompt = extracted.prompt;
    if (extracted.extra !== '' && !applyExtraArgs(params, extracted.extra)) return sendJson(response, 400, { error: 'invalid sd_cpp_extra_args' });
    if (!resolveAndValidate(params)) return sendJson(response, 400, { error: 'invalid params' });
    if (options.failWith !== undefined) return sendJson(response, options.failWith.status, options.failWith.body);
    const made = await generate('/v1/images/edits', params);
    if (!response.destroyed) sendJson(response, 200, { created: Math.floor(Date.now() / 1000), data: made.map((image) => ({ b64_json: Buffer.from(image.png).toString('base64') })), output_format: 'png' });
  }

  /** POST /sdcpp/v1/img_gen (routes_sdcpp.cpp:416-476): queued as a job, answered 202 at once. */
  function handleImgGen(text: string, response: ServerResponse): void {
    const j = parseBody(text);
    const params = defaults();
    if (!isRecord(j) || !applyExtraArgs(params, text) || !resolveAndValidate(params)) return sendJson(response, 400, { error: 'invalid generation parameters' });
    params.prompt = typeof j['prompt'] === 'string' ? j['prompt'] : '';
    const id = `job-${++jobCounter}`;
    const job = { status: 'queued' as 'queued' | 'generating' | 'completed' | 'cancelled', created: Math.floor(Date.now() / 1000) };
    jobs.set(id, job);
    const previous = mutex;
    void previous.then(() => {
      if (job.status === 'cancelled') return;
      job.status = 'generating';
      return generate('/sdcpp/v1/img_gen', params).then(() => {
        job.status = 'completed';
      });
    });
    sendJson(response, 202, { id, kind: 'img_gen', status: 'queued', created: job.created, poll_url: `/sdcpp/v1/jobs/${id}` });
  }

  /** POST /sdcpp/v1/jobs/{id}/cancel (routes_sdcpp.cpp:562-600): a generating job cannot be stopped. */
  function handleCancel(id: string, response: ServerResponse): void {
    const job = jobs.get(id);
    if (job === undefined) return sendJson(response, 404, { error: 'job not found' });
    if (job.status === 'generating') return sendJson(response, 409, { error: 'job is currently generating and cannot be interrupted yet' });
    if (job.status === 'queued') job.status = 'cancelled';
    sendJson(response, 200, { id, kind: 'img_gen', status: job.status, created: job.created });
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const address = new URL(request.url ?? '/', 'http://127.0.0.1');
    const bytes = await readBodyBytes(request);
    const text = bytes.toString('utf8');
    const method = request.method ?? 'GET';
    const form = await readMultipart(bytes, request.headers['content-type']);
    requests.push({ method, path: address.pathname, body: form === undefined ? parseBody(text) : Object.fromEntries([...form.keys()].map((key) => [key, form.getAll(key)])) });
    const route = `${method} ${address.pathname}`;
    const jobRoute = /^\/sdcpp\/v1\/jobs\/([A-Za-z0-9_-]+)(\/cancel)?$/.exec(address.pathname);
    if (jobRoute !== null) {
      const id = jobRoute[1] ?? '';
      if (method === 'POST' && jobRoute[2] !== undefined) return handleCancel(id, response);
      if (method === 'GET' && jobRoute[2] === undefined) {
        const job = jobs.get(id);
        return job === undefined ? sendJson(response, 404, { error: 'job not found' }) : sendJson(response, 200, { id, kind: 'img_gen', status: job.status, created: job.created });
      }
    }
    switch (route) {
      // main.cpp:137-142 without --serve-html-path.
      case 'GET /':
        return void response.writeHead(200, { 'content-type': 'text/plain' }).end('Stable Diffusion Server is running');
      case 'POST /sdapi/v1/txt2img':
        return handleSdapi(false, text, response);
      // routes_sdapi.cpp:411-413.
      case 'POST /sdapi/v1/img2img':
        return handleSdapi(true, text, response);
      case 'POST /v1/images/generations':
        return handleOpenAiGeneration(text, response);
      // routes_openai.cpp:331.
      case 'POST /v1/images/edits':
        return handleOpenAiEdit(bytes, request.headers['content-type'], response);
      case 'POST /sdcpp/v1/img_gen':
        return handleImgGen(text, response);
      // routes_openai.cpp:250-255.
      case 'GET /v1/models':
        return sendJson(response, 200, { data: [{ id: 'sd-cpp-local', object: 'model', owned_by: 'local' }] });
      // routes_sdapi.cpp:528-534: only these two keys.
      case 'GET /sdapi/v1/options':
        return sendJson(response, 200, { samples_format: 'png', sd_model_checkpoint: modelStem });
      // routes_sdapi.cpp:514-526: its one model; the filename without its folder, a made-up hash.
      case 'GET /sdapi/v1/sd-models':
        return sendJson(response, 200, [{ title: modelStem, model_name: modelStem, filename: modelName, hash: '8888888888', sha256: '8'.repeat(64), config: null }]);
      // routes_sdapi.cpp:478-493: "default" (a name it does not know: the default), then every sample method.
      case 'GET /sdapi/v1/samplers':
        return sendJson(
          response,
          200,
          ['default', ...SAMPLE_METHODS].map((name) => ({ name, aliases: [name], options: {} })),
        );
      // routes_sdapi.cpp:495-512: "default", every scheduler, and "normal" after discrete; name and label only.
      case 'GET /sdapi/v1/schedulers':
        return sendJson(
          response,
          200,
          ['default', ...SCHEDULERS.flatMap((name) => (name === 'discrete' ? [name, 'normal'] : [name]))].map((name) => ({ name, label: name })),
        );
      // make_capabilities_json (routes_sdcpp.cpp:280-350), in part.
      case 'GET /sdcpp/v1/capabilities':
        return sendJson(response, 200, {
          model: { name: modelName, stem: modelStem, path: modelPath },
          current_mode: 'img_gen',
          supported_modes: ['img_gen'],
          defaults: { sample_steps: 20, cfg_scale: 7, seed: 42, width: 512, height: 512 },
          limits: { min_width: 64, max_width: 4096, min_height: 64, max_height: 4096, max_batch_count: 8 },
          samplers: SAMPLE_METHODS,
          features: { cancel_queued: true, cancel_generating: false },
        });
      // No /sdapi/v1/progress, no /sdapi/v1/interrupt: no handler, and no set_error_handler, so cpp-httplib
      // answers 404 with an empty body.
      default:
        return void response.writeHead(404).end();
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (response.headersSent) return;
      // routes_sdapi.cpp:398-404 and routes_openai.cpp:322-328: a thrown exception, JSON parse errors included.
      const message = error instanceof SyntaxError ? `[json.exception.parse_error.101] parse error: ${error.message}` : String(error instanceof Error ? error.message : error);
      sendJson(response, 500, { error: 'server_error', message });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    runs,
    async close() {
      closed = true;
      closing.abort();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
