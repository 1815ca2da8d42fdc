// A real HTTP server that behaves like AUTOMATIC1111's /sdapi/v1 API (FastAPI + pydantic v1), as of
// v1.10.1 (82a973c0): txt2img and img2img (init_images, denoising_strength; "Init image not found" without one),
// batches (batch_size: all_seeds seed, seed+1, …; a grid first only when the request saves images), 422 detail lists, the global progress state with its real formula, an interrupt
// that still answers 200 with an image, and a PNG that already holds A1111's own `parameters` text. Its
// checkpoints, samplers and schedulers: /sdapi/v1/sd-models, /samplers, /schedulers and /options, and a request's
// override_settings.sd_model_checkpoint, sampler_name and scheduler taken, corrected or refused as A1111 does.
// Line numbers cite v1.10.1 unless they say otherwise.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeSolidPng, insertTextChunk, makePng } from './png-bytes.ts';
import { parseBody, readBody, sendJson, sendRedirect, streamLargeBody, type LargeBody, type RedirectEverything } from './http-body.ts';

export interface FakeA1111Options {
  /** Simulated time per sampling step. */
  stepDelayMs?: number;
  /**
   * Time between State.begin() (job_count −1) and the start of sampling (job_count = n_iter, then
   * launch_sampling sets sampling_steps): loading the model, encoding the prompt. Default 0.
   */
  setupDelayMs?: number;
  /**
   * Time after the last step (State.nextjob(): job_no + 1, so /progress says 1.0) before the answer:
   * decoding, saving and encoding the image (processing.py:1014 → api.py:490). Default 0.
   */
  finishDelayMs?: number;
  /** txt2img and img2img answer with this status and body (objects are sent as JSON). */
  failWith?: { status: number; body: unknown };
  /**
   * Settings → "Always return a grid" (opts.return_grid, on by default): a batch whose request saves its images
   * (`save_images`, so do_not_save_grid is false: api.py:446, 514) gets the grid as its first image, and
   * info.index_of_first_image 1 (processing.py:1048-1059 at A1111 45b8a499). Default true.
   */
  returnGrid?: boolean;
  /** txt2img never answers. */
  hang?: boolean;
  /**
   * /sdapi/v1/options gets no answer while a txt2img request is in flight: a server too busy making an image to
   * answer anything else in time (a GPU machine under load; the real one answers it from a thread pool).
   */
  busyWhileMaking?: boolean;
  /**
   * The model_name of the checkpoint loaded at start (the server's current one); default v1-5-pruned-emaonly,
   * the model A1111 downloads itself. It is added to `checkpoints` when they do not hold it.
   */
  modelName?: string;
  /**
   * The checkpoint files under models/Stable-diffusion, in the order A1111 lists them, as paths below that folder
   * ("SDXL/juggernautXL_v9.safetensors"): a string is a file whose hash A1111 has cached, an object with
   * `hashed: false` one it has never hashed (title without " [hash]", hash and sha256 null until loaded). Default:
   * the `modelName` file alone. setCheckpoints() replaces them later, as a refresh after files changed would.
   */
  checkpoints?: (string | FakeCheckpoint)[];
  /**
   * 'v1.8.0': A1111 before the scheduler split (v1.9.0): no /sdapi/v1/schedulers, no `scheduler` field, its own
   * sampler names ("DPM++ 2M Karras"), and a sampler it does not know refused with HTTP 404 "Sampler not found"
   * (validate_sampler_name on the name as sent). Default 'v1.10.1'.
   */
  release?: FakeA1111Release;
  /** /sdapi/v1/interrupt answers after this delay (the real one answers at once; this plays a busy server). */
  interruptDelayMs?: number;
  /**
   * txt2img answers with these bytes (base64) in place of the rendered PNG: broken or odd images, or a
   * decompression bomb (png-bytes.ts, makePngBomb) as a compromised server would send.
   */
  image?: Uint8Array;
  /**
   * txt2img paints the prompt with this (a PNG of the asked size) in place of its solid colour, the parameters text
   * added as usual: a picture with something in it, for a vision model to look at (the report card's checks).
   */
  paint?: (prompt: string, width: number, height: number) => Uint8Array;
  /** Every route answers with this redirect (http-body.ts: a misconfigured reverse proxy, a compromised server). */
  redirect?: RedirectEverything;
  /**
   * Settings → "Save text information about generation parameters as chunks to png files" off: the PNG carries
   * no `parameters` text (processing.py:1087-1090, `if opts.enable_pnginfo`). On by default (shared_options.py:352).
   */
  enablePnginfo?: boolean;
  /**
   * txt2img answers with a JSON body of this many bytes, `{"images":["AAAA…"]}`, streamed and never held whole.
   * FastAPI's JSONResponse sends a Content-Length (starlette/responses.py, Response.init_headers).
   */
  hugeAnswer?: Omit<LargeBody, 'prefix' | 'suffix' | 'contentType'>;
  /**
   * The state a job before ours left behind (made in A1111's own UI, say): State.end() resets only
   * `job` and `job_count` (modules/shared_state.py:129-133), so /progress keeps that job's job_no,
   * sampling_step and sampling_steps, with job_count 0 and progress 0 (modules/api/api.py:605-606).
   */
  previousJob?: { steps: number };
  /**
   * Time between a txt2img request's arrival and the start of its job: A1111 waits for its queue_lock
   * before State.begin() (modules/api/api.py:467-475). Meanwhile /progress still describes the previous job.
   */
  startDelayMs?: number;
}

export type FakeA1111Release = 'v1.10.1' | 'v1.8.0';

/** A checkpoint file as a test lists it: its path below models/Stable-diffusion, and whether A1111 has its hash. */
export interface FakeCheckpoint {
  file: string;
  hashed?: boolean;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  /** Parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: unknown;
  /** performance.now() when the request arrived. */
  at: number;
}

export interface FakeA1111 {
  url: string;
  requests: RecordedRequest[];
  /** Every /sdapi/v1/progress answer's progress and eta_relative, in order. */
  progressAnswers: Array<{ progress: number; eta_relative: number }>;
  /** How many times /sdapi/v1/interrupt was called. */
  readonly interrupts: number;
  /** The most txt2img requests that were ever in flight at once (arrived, not yet answered or dropped). */
  readonly maxConcurrentTxt2Img: number;
  /** Bytes of a hugeAnswer handed to the socket so far: what Easel could have read at most. */
  readonly hugeBytesSent: number;
  /** The model_name of the checkpoint in memory now (shared.sd_model): the one the last image was made with. */
  readonly loadedCheckpoint: string;
  /** opts.sd_model_checkpoint now, as GET /sdapi/v1/options says it: the checkpoint an image without an override takes. */
  readonly optionsCheckpoint: string;
  /** Replaces the checkpoint files (list_models after a refresh); the loaded one stays in memory. */
  setCheckpoints(checkpoints: (string | FakeCheckpoint)[]): void;
  close(): Promise<void>;
}

type FieldType = 'str' | 'int' | 'float' | 'bool' | 'dict' | 'list';

// A subset of StableDiffusionTxt2ImgProcessingAPI; like pydantic, unknown keys are ignored.
const TXT2IMG_FIELDS: Record<string, FieldType> = {
  prompt: 'str',
  negative_prompt: 'str',
  styles: 'str',
  seed: 'int',
  subseed: 'int',
  sampler_name: 'str',
  sampler_index: 'str',
  scheduler: 'str',
  batch_size: 'int',
  n_iter: 'int',
  steps: 'int',
  cfg_scale: 'float',
  width: 'int',
  height: 'int',
  restore_faces: 'bool',
  tiling: 'bool',
  denoising_strength: 'float',
  send_images: 'bool',
  save_images: 'bool',
  // StableDiffusionProcessing's own fields (processing.py:174-175): Dict[str, Any], default True.
  override_settings: 'dict',
  override_settings_restore_afterwards: 'bool',
};

// StableDiffusionImg2ImgProcessingAPI (models.py:115-133 at A1111 45b8a499): the same fields, and the image to start
// from: init_images a list (default None), denoising_strength a float (default 0.75), resize_mode and mask.
const IMG2IMG_FIELDS: Record<string, FieldType> = {
  ...TXT2IMG_FIELDS,
  init_images: 'list',
  resize_mode: 'int',
  mask: 'str',
  include_init_images: 'bool',
};

const FIELD_ERRORS: Record<FieldType, { msg: string; type: string }> = {
  str: { msg: 'str type expected', type: 'type_error.str' },
  int: { msg: 'value is not a valid integer', type: 'type_error.integer' },
  float: { msg: 'value is not a valid float', type: 'type_error.float' },
  bool: { msg: 'value could not be parsed to a boolean', type: 'type_error.bool' },
  dict: { msg: 'value is not a valid dict', type: 'type_error.dict' },
  list: { msg: 'value is not a valid list', type: 'type_error.list' },
};

interface Detail {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** pydantic v1 coercion: numbers and numeric strings become ints/floats; null keeps the default. */
function coerceField(type: FieldType, value: unknown): { ok: true; value: unknown } | { ok: false } {
  if (value === null) return { ok: true, value: null };
  switch (type) {
    case 'str':
      return typeof value === 'string' ? { ok: true, value } : { ok: false };
    case 'bool':
      return typeof value === 'boolean' ? { ok: true, value } : { ok: false };
    case 'dict':
      return typeof value === 'object' && !Array.isArray(value) ? { ok: true, value } : { ok: false };
    case 'list':
      return Array.isArray(value) ? { ok: true, value } : { ok: false };
    case 'int':
    case 'float': {
      const number = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
      if (!Number.isFinite(number)) return { ok: false };
      return { ok: true, value: type === 'int' ? Math.trunc(number) : number };
    }
  }
}

function validateRequest(text: string, fields: Record<string, FieldType>): { ok: true; value: Record<string, unknown> } | { ok: false; detail: Detail[] } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return {
      ok: false,
      detail: [{ loc: ['body', 0], msg: 'Expecting value: line 1 column 1 (char 0)', type: 'value_error.jsondecode' }],
    };
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, detail: [{ loc: ['body'], msg: 'value is not a valid dict', type: 'type_error.dict' }] };
  }
  const values: Record<string, unknown> = {};
  const detail: Detail[] = [];
  for (const [key, value] of Object.entries(body)) {
    const type = fields[key];
    if (type === undefined) continue;
    const coerced = coerceField(type, value);
    if (coerced.ok) values[key] = coerced.value;
    else detail.push({ loc: ['body', key], ...FIELD_ERRORS[type] });
  }
  return detail.length > 0 ? { ok: false, detail } : { ok: true, value: values };
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' ? value : fallback;
}

function stringOr(value: unknown, fallback: string): string {
  return typeof value === 'string' ? value : fallback;
}

/** Python's str() of a float, as A1111 prints `cfg_scale: float`: 7 → "7.0". */
function pythonFloat(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

/** modules/infotext_utils.py:56-60, quote(): only a comma, a newline or a colon makes a value JSON-quoted. */
function quote(value: string): string {
  return /[,\n:]/.test(value) ? JSON.stringify(value) : value;
}

interface InfotextValues {
  prompt: string;
  negativePrompt: string;
  steps: number;
  sampler: string;
  /** p.scheduler, a label; undefined before v1.9, which has no "Schedule type". */
  scheduler: string | undefined;
  cfg: number;
  seed: number;
  width: number;
  height: number;
  modelHash: string | null;
  modelName: string;
  /** img2img's denoising_strength (extra_generation_params["Denoising strength"], processing.py:1507); undefined for txt2img. */
  denoisingStrength: number | undefined;
  version: string;
}

/**
 * create_infotext (modules/processing.py:705-816): the prompt, "Negative prompt: …" only when there is one
 * (814), then the generation parameters in their dict order (770-800) with None values left out (812):
 * "Schedule type" is p.scheduler (773), "Model hash" p.sd_model_hash (779), "Model" p.sd_model_name (780), the
 * checkpoint really loaded (process_images_inner, 890-891), whatever the request asked for.
 */
function createInfotext(values: InfotextValues): string {
  const parameters: [string, string | null | undefined][] = [
    ['Steps', String(values.steps)],
    ['Sampler', values.sampler],
    ['Schedule type', values.scheduler],
    ['CFG scale', pythonFloat(values.cfg)],
    ['Seed', String(values.seed)],
    ['Size', `${values.width}x${values.height}`],
    // add_model_hash_to_info, add_model_name_to_info, add_version_to_infotext: on by default (shared_options.py:355-360).
    ['Model hash', values.modelHash],
    ['Model', values.modelName],
    // processing.py:738 (A1111 45b8a499): after the model and VAE, before the version; str() of the float.
    ['Denoising strength', values.denoisingStrength === undefined ? undefined : pythonFloat(values.denoisingStrength)],
    ['Version', values.version],
  ];
  const line = parameters
    .filter((parameter): parameter is [string, string] => typeof parameter[1] === 'string')
    .map(([key, value]) => `${key}: ${quote(value)}`)
    .join(', ');
  const negative = values.negativePrompt === '' ? '' : `\nNegative prompt: ${values.negativePrompt}`;
  return `${values.prompt}${negative}\n${line}`.trim();
}

// modules/sd_models.py:162-163 (list_models): the sha256 A1111 expects of the v1-5-pruned-emaonly it downloads.
const V1_5_SHA256 = '6ce0161689b3853acaa03779ec93eafe75a02f4ced659bee03f50797806fa2fa';

/** SamplerData as GET /sdapi/v1/samplers lists it (api.py:692-693): options through SamplerItem's dict[str, str]. */
interface FakeSampler {
  name: string;
  aliases: string[];
  options: Record<string, string>;
}

// v1.10.1's all_samplers (sd_samplers.py:11-16): samplers_k_diffusion in its order (sd_samplers_kdiffusion.py, DPM++ 2M
// first), then the timesteps and LCM samplers, in part. samplers[0], DPM++ 2M, is the default of
// get_sampler_and_scheduler (sd_samplers.py:102, 116).
const SAMPLERS_V1_10: FakeSampler[] = [
  { name: 'DPM++ 2M', aliases: ['k_dpmpp_2m'], options: { scheduler: 'karras' } },
  { name: 'DPM++ SDE', aliases: ['k_dpmpp_sde'], options: { scheduler: 'karras', second_order: 'True', brownian_noise: 'True' } },
  { name: 'DPM++ 2M SDE', aliases: ['k_dpmpp_2m_sde'], options: { scheduler: 'exponential', brownian_noise: 'True' } },
  { name: 'DPM++ 2M SDE Heun', aliases: ['k_dpmpp_2m_sde_heun'], options: { scheduler: 'exponential', brownian_noise: 'True', solver_type: 'heun' } },
  { name: 'DPM++ 2S a', aliases: ['k_dpmpp_2s_a'], options: { scheduler: 'karras', uses_ensd: 'True', second_order: 'True' } },
  { name: 'DPM++ 3M SDE', aliases: ['k_dpmpp_3m_sde'], options: { scheduler: 'exponential', discard_next_to_last_sigma: 'True', brownian_noise: 'True' } },
  { name: 'Euler a', aliases: ['k_euler_a', 'k_euler_ancestral'], options: { uses_ensd: 'True' } },
  { name: 'Euler', aliases: ['k_euler'], options: {} },
  { name: 'LMS', aliases: ['k_lms'], options: {} },
  { name: 'Heun', aliases: ['k_heun'], options: { second_order: 'True' } },
  { name: 'DPM2', aliases: ['k_dpm_2'], options: { scheduler: 'karras', discard_next_to_last_sigma: 'True', second_order: 'True' } },
  { name: 'DPM2 a', aliases: ['k_dpm_2_a'], options: { scheduler: 'karras', discard_next_to_last_sigma: 'True', uses_ensd: 'True', second_order: 'True' } },
  { name: 'DPM fast', aliases: ['k_dpm_fast'], options: { uses_ensd: 'True' } },
  { name: 'DPM adaptive', aliases: ['k_dpm_ad'], options: { uses_ensd: 'True' } },
  { name: 'DDIM', aliases: ['ddim'], options: {} },
  { name: 'PLMS', aliases: ['plms'], options: {} },
  { name: 'UniPC', aliases: ['unipc'], options: {} },
  { name: 'LCM', aliases: ['k_lcm'], options: {} },
];

// Before v1.9 a scheduler was part of the sampler's name (sd_samplers_kdiffusion.py of v1.6-v1.8), in part.
const SAMPLERS_V1_8: FakeSampler[] = [
  { name: 'DPM++ 2M Karras', aliases: ['k_dpmpp_2m_ka'], options: { scheduler: 'karras' } },
  { name: 'DPM++ SDE Karras', aliases: ['k_dpmpp_sde_ka'], options: { scheduler: 'karras', second_order: 'True', brownian_noise: 'True' } },
  { name: 'Euler a', aliases: ['k_euler_a', 'k_euler_ancestral'], options: { uses_ensd: 'True' } },
  { name: 'Euler', aliases: ['k_euler'], options: {} },
  { name: 'DPM++ 2M', aliases: ['k_dpmpp_2m'], options: {} },
  { name: 'DDIM', aliases: [], options: {} },
];

/** sd_schedulers.Scheduler (sd_schedulers.py:18-26) as GET /sdapi/v1/schedulers lists it (api.py:695-704). */
interface FakeScheduler {
  name: string;
  label: string;
  aliases: string[] | null;
  default_rho: number;
  need_inner_model: boolean;
}

// sd_schedulers.py:130-143; schedulers_map (145) finds one by name or by label.
const SCHEDULERS: FakeScheduler[] = [
  { name: 'automatic', label: 'Automatic', aliases: null, default_rho: -1, need_inner_model: false },
  { name: 'uniform', label: 'Uniform', aliases: null, default_rho: -1, need_inner_model: true },
  { name: 'karras', label: 'Karras', aliases: null, default_rho: 7, need_inner_model: false },
  { name: 'exponential', label: 'Exponential', aliases: null, default_rho: -1, need_inner_model: false },
  { name: 'polyexponential', label: 'Polyexponential', aliases: null, default_rho: 1, need_inner_model: false },
  { name: 'sgm_uniform', label: 'SGM Uniform', aliases: ['SGMUniform'], default_rho: -1, need_inner_model: true },
  { name: 'kl_optimal', label: 'KL Optimal', aliases: null, default_rho: -1, need_inner_model: false },
  { name: 'align_your_steps', label: 'Align Your Steps', aliases: null, default_rho: -1, need_inner_model: false },
  { name: 'simple', label: 'Simple', aliases: null, default_rho: -1, need_inner_model: true },
  { name: 'normal', label: 'Normal', aliases: null, default_rho: -1, need_inner_model: true },
  { name: 'ddim', label: 'DDIM', aliases: null, default_rho: -1, need_inner_model: true },
  { name: 'beta', label: 'Beta', aliases: null, default_rho: -1, need_inner_model: true },
];

const AUTOMATIC = SCHEDULERS[0] as FakeScheduler;

function findScheduler(name: unknown): FakeScheduler | undefined {
  return typeof name === 'string' ? SCHEDULERS.find((scheduler) => scheduler.name === name || scheduler.label === name) : undefined;
}

/**
 * get_sampler_and_scheduler (sd_samplers.py:100-122): a scheduler named at the end of the sampler's name is split
 * off ("DPM++ 2M Karras"); a sampler it does not know becomes samplers[0] and a scheduler it does not know
 * "Automatic", silently; with convertAutomatic the sampler's own default scheduler reads "Automatic".
 */
function getSamplerAndScheduler(samplerName: string | null, schedulerName: unknown, convertAutomatic: boolean): [string, string] {
  const defaultSampler = SAMPLERS_V1_10[0] as FakeSampler;
  let found = findScheduler(schedulerName) ?? AUTOMATIC;
  let name = samplerName === null || samplerName === '' ? defaultSampler.name : samplerName;
  for (const scheduler of SCHEDULERS) {
    const option = [scheduler.label, scheduler.name, ...(scheduler.aliases ?? [])].find((candidate) => name.endsWith(` ${candidate}`));
    if (option !== undefined) {
      found = scheduler;
      name = name.slice(0, -(option.length + 1));
    }
  }
  const sampler = SAMPLERS_V1_10.find((candidate) => candidate.name === name) ?? defaultSampler;
  if (convertAutomatic && sampler.options['scheduler'] === found.name) found = AUTOMATIC;
  return [sampler.name, found.label];
}

/** CheckpointInfo (modules/sd_models.py:56-100): the names and hashes A1111 derives from a checkpoint's file. */
interface Checkpoint {
  /** Its path below models/Stable-diffusion, e.g. "SDXL/juggernautXL_v9.safetensors" (89: `name`). */
  name: string;
  /** The path with "/" as "_", without extension (89). */
  modelName: string;
  /** The file's own name without extension (88): what infotext's "Model" and info's sd_model_name say. */
  nameForExtra: string;
  sha256: string | null;
  /** sha256[0:10] (93): what /sd-models calls `hash`, infotext "Model hash". */
  shorthash: string | null;
}

/** `name [shorthash]` once hashed, `name` before (95); calculate_shorthash retitles it at load (107-128). */
function titleOf(checkpoint: Checkpoint): string {
  return checkpoint.shorthash === null ? checkpoint.name : `${checkpoint.name} [${checkpoint.shorthash}]`;
}

function describeCheckpoint(entry: string | FakeCheckpoint): Checkpoint {
  const { file, hashed = true } = typeof entry === 'string' ? { file: entry } : entry;
  const sha256 = file === 'v1-5-pruned-emaonly.safetensors' ? V1_5_SHA256 : createHash('sha256').update(file).digest('hex');
  return {
    name: file,
    modelName: file.replaceAll('/', '_').replace(/\.[^./]*$/, ''),
    nameForExtra: (file.split('/').pop() ?? file).replace(/\.[^.]*$/, ''),
    sha256: hashed ? sha256 : null,
    shorthash: hashed ? sha256.slice(0, 10) : null,
  };
}

/** Hashes a checkpoint at load, as calculate_shorthash does (sd_models.py:107-128): its title gains " [hash]". */
function hashCheckpoint(checkpoint: Checkpoint): void {
  if (checkpoint.sha256 !== null) return;
  checkpoint.sha256 = checkpoint.name === 'v1-5-pruned-emaonly.safetensors' ? V1_5_SHA256 : createHash('sha256').update(checkpoint.name).digest('hex');
  checkpoint.shorthash = checkpoint.sha256.slice(0, 10);
}

/**
 * checkpoint_aliases (sd_models.py:98-105): every id of every checkpoint, a later one winning a shared id; the
 * old 8-digit model_hash ids are left out (no answer of the API shows that hash).
 */
function findCheckpoint(checkpoints: Checkpoint[], id: unknown): Checkpoint | undefined {
  if (typeof id !== 'string') return undefined;
  const ids = (checkpoint: Checkpoint) => [
    checkpoint.modelName,
    titleOf(checkpoint),
    checkpoint.name,
    checkpoint.nameForExtra,
    ...(checkpoint.shorthash === null || checkpoint.sha256 === null
      ? []
      : [checkpoint.shorthash, checkpoint.sha256, `${checkpoint.name} [${checkpoint.shorthash}]`, `${checkpoint.nameForExtra} [${checkpoint.shorthash}]`]),
  ];
  return checkpoints.findLast((checkpoint) => ids(checkpoint).includes(id));
}

export async function createFakeA1111(options: FakeA1111Options = {}): Promise<FakeA1111> {
  const stepDelayMs = options.stepDelayMs ?? 20;
  const modelName = options.modelName ?? 'v1-5-pruned-emaonly';
  const release = options.release ?? 'v1.10.1';
  const samplers = release === 'v1.8.0' ? SAMPLERS_V1_8 : SAMPLERS_V1_10;
  // list_models (sd_models.py:153-177) registers the files; the one `modelName` names is in memory, hashed at load.
  let checkpoints: Checkpoint[] = [];
  const setCheckpoints = (entries: (string | FakeCheckpoint)[]) => {
    checkpoints = entries.map(describeCheckpoint);
  };
  setCheckpoints(options.checkpoints ?? [`${modelName}.safetensors`]);
  const listed = checkpoints.find((checkpoint) => checkpoint.modelName === modelName);
  let loaded: Checkpoint = listed ?? describeCheckpoint(`${modelName}.safetensors`);
  if (listed === undefined) checkpoints.push(loaded);
  hashCheckpoint(loaded);
  // opts.sd_model_checkpoint: load_model_weights writes the loaded checkpoint's title into it (sd_models.py, "if not
  // SkipWritingToConfig.skip"); an image without an override loads whatever it names (select_checkpoint, 218-240).
  let optionsCheckpoint = titleOf(loaded);
  const requests: RecordedRequest[] = [];
  const progressAnswers: Array<{ progress: number; eta_relative: number }> = [];
  // shared.state, exactly the keys of State.dict() (modules/shared_state.py:95-108), plus time_start.
  const state = {
    skipped: false,
    interrupted: false,
    stopping_generation: false,
    job: '',
    job_count: 0,
    job_timestamp: '0',
    job_no: options.previousJob === undefined ? 0 : 1,
    sampling_step: 0,
    sampling_steps: options.previousJob?.steps ?? 0,
  };
  let timeStart = performance.now();
  let interrupts = 0;
  let inFlight = 0;
  let maxConcurrentTxt2Img = 0;
  let hugeBytesSent = 0;
  let closed = false;
  const closing = new AbortController();
  // A1111 runs one job at a time behind a queue lock.
  let queue: Promise<void> = Promise.resolve();

  /** Waits; false once the fake is closing, so no timer outlives close(). */
  async function wait(ms: number): Promise<boolean> {
    if (ms <= 0) return !closed;
    try {
      await sleep(ms, undefined, { signal: closing.signal });
      return true;
    } catch {
      return false;
    }
  }

  /** modules/api/api.py:602-628, progressapi. */
  function readProgress(): { progress: number; eta_relative: number } {
    if (state.job_count === 0) return { progress: 0, eta_relative: 0 };
    // "avoid dividing zero"
    let progress = 0.01;
    if (state.job_count > 0) progress += state.job_no / state.job_count;
    if (state.sampling_steps > 0) progress += (1 / state.job_count) * (state.sampling_step / state.sampling_steps);
    const timeSinceStart = (performance.now() - timeStart) / 1000;
    const eta = timeSinceStart / progress;
    return { progress: Math.min(progress, 1), eta_relative: eta - timeSinceStart };
  }

  /**
   * select_checkpoint (sd_models.py:218-240): the checkpoint opts.sd_model_checkpoint names, or the first listed
   * ("Checkpoint … not found; loading fallback …" on stderr); reload_model_weights loads it, hashing it and writing
   * its title back into the option (load_model_weights).
   */
  function loadSelectedCheckpoint(): Checkpoint {
    const selected = findCheckpoint(checkpoints, optionsCheckpoint) ?? checkpoints[0] ?? loaded;
    hashCheckpoint(selected);
    loaded = selected;
    optionsCheckpoint = titleOf(selected);
    return selected;
  }

  /**
   * process_images (processing.py:819-860) for sd_model_checkpoint: a name checkpoint_aliases does not hold is
   * dropped from the overrides without a word, and the current checkpoint paints (828-830); a known one is set and
   * loaded (832-836). Returns what to restore afterwards: stored_opts (823) when override_settings_restore_afterwards
   * (853-855), which puts the option back but leaves the model in memory until the next image reloads.
   */
  function applyCheckpointOverride(values: Record<string, unknown>): string | undefined {
    const overrides = values['override_settings'];
    const asked = typeof overrides === 'object' && overrides !== null ? (overrides as Record<string, unknown>)['sd_model_checkpoint'] : undefined;
    const stored = asked === undefined ? undefined : optionsCheckpoint;
    if (findCheckpoint(checkpoints, asked) !== undefined) optionsCheckpoint = asked as string;
    loadSelectedCheckpoint();
    return values['override_settings_restore_afterwards'] === false ? undefined : stored;
  }

  /**
   * decode_base64_to_image (api.py:77-99 in v1.10.1): a data: URL's prefix is dropped, then the bytes must be an
   * image PIL reads, else HTTPException(500, "Invalid encoded image"). The fake reads only PNGs, and takes the colour
   * of a solid one (png-bytes.ts) to paint from.
   */
  function decodeInitImage(encoding: unknown): { ok: true; rgb: [number, number, number] | undefined; width: number; height: number } | { ok: false } {
    if (typeof encoding !== 'string') return { ok: false };
    const data = encoding.startsWith('data:image/') ? (encoding.split(';')[1]?.split(',')[1] ?? '') : encoding;
    const bytes = new Uint8Array(Buffer.from(data, 'base64'));
    if (bytes.length < 8 || bytes[0] !== 0x89 || bytes[1] !== 0x50) return { ok: false };
    try {
      const solid = decodeSolidPng(bytes);
      return { ok: true, rgb: solid.rgb, width: solid.width, height: solid.height };
    } catch {
      return { ok: false };
    }
  }

  async function runJob(
    values: Record<string, unknown>,
    sampling: { sampler: string; scheduler: string | null },
    mode: 'txt2img' | 'img2img',
  ): Promise<Record<string, unknown>> {
    const steps = numberOr(values['steps'], 50);
    const width = numberOr(values['width'], 512);
    const height = numberOr(values['height'], 512);
    const requestedSeed = numberOr(values['seed'], -1);
    const batchSize = Math.max(1, numberOr(values['batch_size'], 1));
    const nIter = Math.max(1, numberOr(values['n_iter'], 1));
    const count = batchSize * nIter;
    // img2img: denoising_strength defaults to 0.75 (models.py:121 at A1111 45b8a499); the init image's colour is kept
    // as much as the strength leaves of it.
    const strength = mode === 'img2img' ? numberOr(values['denoising_strength'], 0.75) : undefined;
    const init = mode === 'img2img' ? decodeInitImage((values['init_images'] as unknown[])[0]) : undefined;
    // get_fixed_seed: -1 → int(random.randrange(4294967294)) (processing.py:675-687).
    const seed = requestedSeed === -1 ? Math.floor(Math.random() * 4_294_967_294) : requestedSeed;
    // process_images_inner: one seed per image of the batch, seed + x (processing.py:835-838 at A1111 45b8a499).
    const allSeeds = Array.from({ length: count }, (_, index) => seed + index);
    // fix_p_invalid_sampler_and_scheduler (processing.py:844; sd_samplers.py:125-129) puts the label in p.scheduler.
    const [sampler, scheduler] = release === 'v1.8.0' ? [sampling.sampler, undefined] : getSamplerAndScheduler(sampling.sampler, sampling.scheduler, false);
    await wait(options.startDelayMs ?? 0);
    // State.begin(job="scripts_txt2img" | "scripts_img2img") (api.py:475, 546; shared_state.py:110-127): sampling_steps is not reset.
    Object.assign(state, {
      sampling_step: 0,
      job_count: -1,
      job_no: 0,
      job_timestamp: '20250101000000',
      skipped: false,
      interrupted: false,
      stopping_generation: false,
      job: `scripts_${mode}`,
    });
    timeStart = performance.now();
    const restore = applyCheckpointOverride(values);
    const used = loaded;
    await wait(options.setupDelayMs ?? 0);
    // processing.py:929-930: `if state.job_count == -1: state.job_count = p.n_iter`.
    state.job_count = nIter;
    // processing.py:938-939: an interrupt before the iteration leaves no image at all.
    const sampled = !(state.interrupted || closed);
    if (sampled) {
      for (let iteration = 0; iteration < nIter && !state.interrupted; iteration++) {
        // launch_sampling (sd_samplers_common.py:265-269). img2img samples t_enc + 1 steps, t_enc =
        // int(min(denoising_strength, 0.999) * steps) (setup_img2img_steps, sd_samplers_common.py:22-31, and
        // sd_samplers_kdiffusion.py:142, 188 at A1111 45b8a499; img2img_fix_steps off, its default).
        const stepsToRun = strength === undefined ? steps : Math.trunc(Math.min(strength, 0.999) * steps) + 1;
        Object.assign(state, { sampling_steps: stepsToRun, sampling_step: 0 });
        // k-diffusion calls back after step i with the 0-based i (k_diffusion/sampling.py:122,131); the sampler
        // returns the latent so far when interrupted (sd_samplers_common.py:280-281).
        for (let step = 0; step < stepsToRun; step++) {
          if (!(await wait(stepDelayMs)) || state.interrupted) break;
          state.sampling_step = step;
        }
        // State.nextjob() (processing.py:1014; shared_state.py:87-93): /progress now says 1.0 after the last.
        state.job_no += 1;
        state.sampling_step = 0;
      }
      await wait(options.finishDelayMs ?? 0);
    }
    // process_images's finally (849-858) restores the option, then State.end() resets only job and job_count
    // (shared_state.py:129-133).
    if (restore !== undefined) optionsCheckpoint = restore;
    Object.assign(state, { job: '', job_count: 0 });
    const prompt = stringOr(values['prompt'], '');
    const negativePrompt = stringOr(values['negative_prompt'], '');
    const cfgScale = numberOr(values['cfg_scale'], 7);
    const infotextOf = (imageSeed: number) =>
      createInfotext({ prompt, negativePrompt, steps, sampler, scheduler, cfg: cfgScale, seed: imageSeed, width, height, modelHash: used.shorthash, modelName: used.nameForExtra, denoisingStrength: strength, version: release });
    const infotexts = sampled ? allSeeds.map(infotextOf) : [];
    const pngOf = (imageSeed: number, text: string): Uint8Array => {
      const own: [number, number, number] = [imageSeed & 0xff, (imageSeed >>> 8) & 0xff, (imageSeed >>> 16) & 0xff];
      // A variation keeps (1 − strength) of its starting colour: a test can tell it started from that image.
      const start = init?.ok === true ? init.rgb : undefined;
      const rgb: [number, number, number] = start === undefined || strength === undefined ? own : (start.map((value, index) => Math.round(value * (1 - strength) + own[index]! * strength)) as [number, number, number]);
      const rendered = options.paint?.(prompt, width, height) ?? makePng(width, height, rgb);
      // processing.py:1087-1090 puts the infotext in image.info["parameters"]; encode_pil_to_base64 writes it
      // into the PNG (api.py:102-113) when samples_format is png, the default (shared_options.py:36).
      return options.image ?? ((options.enablePnginfo ?? true) ? insertTextChunk(rendered, 'parameters', text, 'pillow') : rendered);
    };
    const images = sampled ? allSeeds.map((imageSeed, index) => pngOf(imageSeed, infotexts[index] ?? '')) : [];
    // The grid (processing.py:1048-1059 at A1111 45b8a499): only when opts.return_grid (or grid_save) and the request
    // saves its images (do_not_save_grid = not save_images, api.py:446, 514), and not for a single image
    // (grid_only_if_multiple, on by default). It comes first, with the main infotext, and index_of_first_image says so.
    let indexOfFirstImage = 0;
    if (sampled && (options.returnGrid ?? true) && values['save_images'] === true && images.length >= 2) {
      const gridText = infotextOf(seed);
      infotexts.unshift(gridText);
      images.unshift(insertTextChunk(makePng(width * Math.min(images.length, 4), height * Math.ceil(images.length / 4), [255, 255, 255]), 'parameters', gridText, 'pillow'));
      indexOfFirstImage = 1;
    }
    // Processed.js() (processing.py:571-607), in its key order.
    const info = {
      prompt,
      all_prompts: allSeeds.map(() => prompt),
      negative_prompt: negativePrompt,
      all_negative_prompts: allSeeds.map(() => negativePrompt),
      seed,
      all_seeds: allSeeds,
      subseed: 1234,
      all_subseeds: allSeeds.map(() => 1234),
      subseed_strength: 0,
      width,
      height,
      sampler_name: sampler,
      cfg_scale: cfgScale,
      steps,
      batch_size: batchSize,
      restore_faces: false,
      face_restoration_model: null,
      sd_model_name: used.nameForExtra,
      sd_model_hash: used.shorthash,
      sd_vae_name: null,
      sd_vae_hash: null,
      seed_resize_from_w: -1,
      seed_resize_from_h: -1,
      denoising_strength: strength ?? null,
      extra_generation_params: strength === undefined ? {} : { 'Denoising strength': strength },
      index_of_first_image: indexOfFirstImage,
      infotexts,
      styles: [],
      job_timestamp: state.job_timestamp,
      clip_skip: 1,
      is_using_inpainting_conditioning: false,
      version: release,
    };
    // img2imgapi drops the init images from `parameters` unless include_init_images (api.py:561-563).
    const parameters = { ...values, seed: requestedSeed, steps, width, height, cfg_scale: cfgScale, ...(mode === 'img2img' && values['include_init_images'] !== true ? { init_images: null, mask: null } : {}) };
    return {
      images: images.map((png) => Buffer.from(png).toString('base64')),
      parameters,
      info: JSON.stringify(info),
    };
  }

  async function handleGeneration(mode: 'txt2img' | 'img2img', text: string, contentType: string | undefined, response: ServerResponse): Promise<void> {
    // FastAPI reads the body as JSON only with no content type or application/json (or +json); any other
    // type leaves it bytes, which the model refuses (fastapi/routing.py:203-214 in 0.94.0, the version
    // A1111 pins in requirements_versions.txt).
    const subtype = contentType?.split(';')[0]?.trim().toLowerCase();
    const readsJson = contentType === undefined || contentType === '' || subtype === 'application/json' || (subtype?.startsWith('application/') === true && subtype.endsWith('+json'));
    if (!readsJson && text !== '') {
      return sendJson(response, 422, { detail: [{ loc: ['body'], msg: 'value is not a valid dict', type: 'type_error.dict' }] });
    }
    const validated = validateRequest(text, mode === 'txt2img' ? TXT2IMG_FIELDS : IMG2IMG_FIELDS);
    if (!validated.ok) return sendJson(response, 422, { detail: validated.detail });
    const values = validated.value;
    if (mode === 'img2img') {
      // img2imgapi (api.py:495-497): no init_images is HTTPException(404, "Init image not found"), answered by
      // api_middleware's handle_exception as {error, detail, body, errors: str(e)}.
      if (values['init_images'] === undefined || values['init_images'] === null) {
        return sendJson(response, 404, { error: 'HTTPException', detail: 'Init image not found', body: '', errors: '404: Init image not found' });
      }
      // p.init_images = [decode_base64_to_image(x) for x in init_images] (api.py:539): one that does not decode is 500.
      const images = values['init_images'] as unknown[];
      if (images.length === 0 || images.some((image) => !decodeInitImage(image).ok)) {
        return sendJson(response, 500, { error: 'HTTPException', detail: 'Invalid encoded image', body: '', errors: '500: Invalid encoded image' });
      }
    }
    if (options.failWith !== undefined) return sendJson(response, options.failWith.status, options.failWith.body);
    if (options.hang === true) return;
    if (options.hugeAnswer !== undefined) {
      const body = { ...options.hugeAnswer, contentType: 'application/json', prefix: '{"images":["', suffix: '"],"parameters":{},"info":"{}"}' };
      return streamLargeBody(response, body, (sent) => (hugeBytesSent = sent));
    }
    // The API model's sampler_index defaults to "Euler" (modules/api/models.py:104), read when sampler_name is empty.
    const asked = stringOr(values['sampler_name'], '') || stringOr(values['sampler_index'], '') || 'Euler';
    let sampling: { sampler: string; scheduler: string | null };
    if (release === 'v1.8.0') {
      // validate_sampler_name on the name as sent, before the queue: HTTPException(404), which api_middleware's
      // handle_exception answers as {error, detail, body, errors: str(e)} with its status.
      if (!samplers.some((sampler) => sampler.name === asked)) {
        return sendJson(response, 404, { error: 'HTTPException', detail: 'Sampler not found', body: '', errors: '404: Sampler not found' });
      }
      sampling = { sampler: asked, scheduler: null };
    } else {
      // text2imgapi / img2imgapi (api.py:441-452, 509-521): get_sampler_and_scheduler always names a sampler A1111
      // has, so validate_sampler_name (43-48, HTTP 400 since v1.10.0) never refuses one here; a scheduler split off
      // the sampler's name fills an empty `scheduler`.
      const [sampler, scheduler] = getSamplerAndScheduler(asked, values['scheduler'], true);
      const own = stringOr(values['scheduler'], '');
      sampling = { sampler, scheduler: own !== '' ? own : scheduler !== 'Automatic' ? scheduler : null };
    }
    const result = queue.then(() => runJob(values, sampling, mode));
    queue = result.then(
      () => undefined,
      () => undefined,
    );
    const body = await result;
    // Like uvicorn, a client that went away does not stop the job; only the answer is lost.
    if (!response.destroyed) sendJson(response, 200, body);
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const address = new URL(request.url ?? '/', 'http://127.0.0.1');
    const text = await readBody(request);
    const method = request.method ?? 'GET';
    requests.push({ method, path: address.pathname, query: Object.fromEntries(address.searchParams), body: parseBody(text), at: performance.now() });
    if (options.redirect !== undefined) return sendRedirect(response, options.redirect);
    const route = `${method} ${address.pathname}`;
    switch (route) {
      case 'POST /sdapi/v1/txt2img':
      case 'POST /sdapi/v1/img2img': {
        inFlight++;
        maxConcurrentTxt2Img = Math.max(maxConcurrentTxt2Img, inFlight);
        // An answer sent, or a client that hung up (A1111 itself would still finish the job), ends the request.
        response.once('close', () => inFlight--);
        return handleGeneration(route === 'POST /sdapi/v1/txt2img' ? 'txt2img' : 'img2img', text, request.headers['content-type'], response);
      }
      // ProgressResponse: progress, eta_relative, state, current_image, textinfo (modules/api/models.py:189-194).
      case 'GET /sdapi/v1/progress': {
        const progress = readProgress();
        progressAnswers.push(progress);
        return sendJson(response, 200, { ...progress, state: { ...state }, current_image: null, textinfo: null });
      }
      // modules/api/api.py:243 routes it to Api.interruptapi: shared.state.interrupt(), then `return {}`.
      // The job stops at its next step and txt2img still answers 200 with the image so far.
      case 'POST /sdapi/v1/interrupt':
        interrupts++;
        state.interrupted = true;
        if (options.interruptDelayMs !== undefined) await sleep(options.interruptDelayMs);
        return sendJson(response, 200, {});
      // get_config (api.py:667-676): opts.data, in part.
      case 'GET /sdapi/v1/options':
        if (options.busyWhileMaking === true && inFlight > 0) return;
        return sendJson(response, 200, {
          sd_model_checkpoint: optionsCheckpoint,
          samples_format: 'png',
          enable_pnginfo: options.enablePnginfo ?? true,
          CLIP_stop_at_last_layers: 1,
        });
      // set_config (api.py:678-687): a checkpoint checkpoint_aliases does not hold is a RuntimeError, answered 500;
      // a known one is only written into the option (the model loads with the next image).
      case 'POST /sdapi/v1/options': {
        const body = parseBody(text);
        const asked = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)['sd_model_checkpoint'] : undefined;
        if (asked !== undefined && asked !== null && findCheckpoint(checkpoints, asked) === undefined) {
          const message = `model ${typeof asked === 'string' ? `'${asked}'` : JSON.stringify(asked)} not found`;
          return sendJson(response, 500, { error: 'RuntimeError', detail: '', body: '', errors: message });
        }
        if (typeof asked === 'string') optionsCheckpoint = asked;
        return sendJson(response, 200, null);
      }
      // get_sd_models (api.py:726-728): checkpoints_list's values; `hash` is the shorthash, null until hashed.
      case 'GET /sdapi/v1/sd-models':
        return sendJson(
          response,
          200,
          checkpoints.map((checkpoint) => ({
            title: titleOf(checkpoint),
            model_name: checkpoint.modelName,
            hash: checkpoint.shorthash,
            sha256: checkpoint.sha256,
            filename: `/stable-diffusion-webui/models/Stable-diffusion/${checkpoint.name}`,
            config: null,
          })),
        );
      // get_samplers (api.py:692-693): every sampler, hidden ones included.
      case 'GET /sdapi/v1/samplers':
        return sendJson(response, 200, samplers);
      // get_schedulers (api.py:695-704), added with sd_schedulers in v1.9.0: FastAPI's 404 before.
      case 'GET /sdapi/v1/schedulers':
        if (release === 'v1.8.0') return sendJson(response, 404, { detail: 'Not Found' });
        return sendJson(response, 200, SCHEDULERS);
      default: {
        const known = ['/sdapi/v1/txt2img', '/sdapi/v1/img2img', '/sdapi/v1/progress', '/sdapi/v1/interrupt', '/sdapi/v1/options', '/sdapi/v1/sd-models', '/sdapi/v1/samplers', ...(release === 'v1.8.0' ? [] : ['/sdapi/v1/schedulers'])];
        if (known.includes(address.pathname)) return sendJson(response, 405, { detail: 'Method Not Allowed' });
        return sendJson(response, 404, { detail: 'Not Found' });
      }
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, { error: 'FakeError', detail: String(error), body: '', errors: '' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    progressAnswers,
    get interrupts() {
      return interrupts;
    },
    get maxConcurrentTxt2Img() {
      return maxConcurrentTxt2Img;
    },
    get hugeBytesSent() {
      return hugeBytesSent;
    },
    get loadedCheckpoint() {
      return loaded.modelName;
    },
    get optionsCheckpoint() {
      return optionsCheckpoint;
    },
    setCheckpoints,
    async close() {
      closed = true;
      closing.abort();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
