// A real HTTP server that behaves like AUTOMATIC1111's /sdapi/v1 API (FastAPI + pydantic v1), as of
// v1.10.1 (82a973c0): 422 detail lists, the global progress state with its real formula, an interrupt
// that still answers 200 with an image, and a PNG that already holds A1111's own `parameters` text.
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { insertTextChunk, makePng } from './png-bytes.ts';
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
  /** txt2img answers with this status and body (objects are sent as JSON). */
  failWith?: { status: number; body: unknown };
  /** txt2img never answers. */
  hang?: boolean;
  /**
   * /sdapi/v1/options gets no answer while a txt2img request is in flight: a server too busy making an image to
   * answer anything else in time (a GPU machine under load; the real one answers it from a thread pool).
   */
  busyWhileMaking?: boolean;
  modelName?: string;
  /** /sdapi/v1/interrupt answers after this delay (the real one answers at once; this plays a busy server). */
  interruptDelayMs?: number;
  /**
   * txt2img answers with these bytes (base64) in place of the rendered PNG: broken or odd images, or a
   * decompression bomb (png-bytes.ts, makePngBomb) as a compromised server would send.
   */
  image?: Uint8Array;
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
  close(): Promise<void>;
}

type FieldType = 'str' | 'int' | 'float' | 'bool';

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
};

const FIELD_ERRORS: Record<FieldType, { msg: string; type: string }> = {
  str: { msg: 'str type expected', type: 'type_error.str' },
  int: { msg: 'value is not a valid integer', type: 'type_error.integer' },
  float: { msg: 'value is not a valid float', type: 'type_error.float' },
  bool: { msg: 'value could not be parsed to a boolean', type: 'type_error.bool' },
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
    case 'int':
    case 'float': {
      const number = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
      if (!Number.isFinite(number)) return { ok: false };
      return { ok: true, value: type === 'int' ? Math.trunc(number) : number };
    }
  }
}

function validateTxt2Img(text: string): { ok: true; value: Record<string, unknown> } | { ok: false; detail: Detail[] } {
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
    const type = TXT2IMG_FIELDS[key];
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

/**
 * create_infotext (modules/processing.py:705-816): the prompt, "Negative prompt: …" only when there is one
 * (814), then the generation parameters in their dict order (770-800) with None values left out (812).
 */
function createInfotext(values: { prompt: string; negativePrompt: string; steps: number; sampler: string; cfg: number; seed: number; width: number; height: number; modelName: string }): string {
  const parameters: [string, string][] = [
    ['Steps', String(values.steps)],
    ['Sampler', values.sampler],
    // fix_p_invalid_sampler_and_scheduler picks schedulers[0], "Automatic" (sd_schedulers.py:130-131).
    ['Schedule type', 'Automatic'],
    ['CFG scale', pythonFloat(values.cfg)],
    ['Seed', String(values.seed)],
    ['Size', `${values.width}x${values.height}`],
    // add_model_hash_to_info, add_model_name_to_info, add_version_to_infotext: on by default (shared_options.py:355-360).
    ['Model hash', MODEL_HASH],
    ['Model', values.modelName],
    ['Version', VERSION],
  ];
  const line = parameters.map(([key, value]) => `${key}: ${quote(value)}`).join(', ');
  const negative = values.negativePrompt === '' ? '' : `\nNegative prompt: ${values.negativePrompt}`;
  return `${values.prompt}${negative}\n${line}`.trim();
}

const MODEL_HASH = '6ce0161689';
const VERSION = 'v1.10.1';

export async function createFakeA1111(options: FakeA1111Options = {}): Promise<FakeA1111> {
  const stepDelayMs = options.stepDelayMs ?? 20;
  const modelName = options.modelName ?? 'v1-5-pruned-emaonly';
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

  async function runJob(values: Record<string, unknown>): Promise<Record<string, unknown>> {
    const steps = numberOr(values['steps'], 50);
    const width = numberOr(values['width'], 512);
    const height = numberOr(values['height'], 512);
    const requestedSeed = numberOr(values['seed'], -1);
    // get_fixed_seed: -1 → int(random.randrange(4294967294)) (processing.py:675-687).
    const seed = requestedSeed === -1 ? Math.floor(Math.random() * 4_294_967_294) : requestedSeed;
    // The API model's sampler_index defaults to "Euler" (modules/api/models.py:104; api.py:441).
    const sampler = stringOr(values['sampler_name'], '') || stringOr(values['sampler_index'], '') || 'Euler';
    await wait(options.startDelayMs ?? 0);
    // State.begin(job="scripts_txt2img") (api.py:475; shared_state.py:110-127): sampling_steps is not reset.
    Object.assign(state, {
      sampling_step: 0,
      job_count: -1,
      job_no: 0,
      job_timestamp: '20250101000000',
      skipped: false,
      interrupted: false,
      stopping_generation: false,
      job: 'scripts_txt2img',
    });
    timeStart = performance.now();
    await wait(options.setupDelayMs ?? 0);
    // processing.py:929-930: `if state.job_count == -1: state.job_count = p.n_iter`.
    state.job_count = 1;
    // processing.py:938-939: an interrupt before the iteration leaves no image at all.
    const sampled = !(state.interrupted || closed);
    if (sampled) {
      // launch_sampling (sd_samplers_common.py:265-269).
      Object.assign(state, { sampling_steps: steps, sampling_step: 0 });
      // k-diffusion calls back after step i with the 0-based i (k_diffusion/sampling.py:122,131); the sampler
      // returns the latent so far when interrupted (sd_samplers_common.py:280-281).
      for (let step = 0; step < steps; step++) {
        if (!(await wait(stepDelayMs)) || state.interrupted) break;
        state.sampling_step = step;
      }
      // State.nextjob() (processing.py:1014; shared_state.py:87-93): /progress now says 1.0.
      state.job_no += 1;
      state.sampling_step = 0;
      await wait(options.finishDelayMs ?? 0);
    }
    // State.end() resets only job and job_count (shared_state.py:129-133).
    Object.assign(state, { job: '', job_count: 0 });
    const prompt = stringOr(values['prompt'], '');
    const negativePrompt = stringOr(values['negative_prompt'], '');
    const cfgScale = numberOr(values['cfg_scale'], 7);
    const infotext = createInfotext({ prompt, negativePrompt, steps, sampler, cfg: cfgScale, seed, width, height, modelName });
    // Processed.js() (processing.py:571-607), in its key order.
    const info = {
      prompt,
      all_prompts: [prompt],
      negative_prompt: negativePrompt,
      all_negative_prompts: [negativePrompt],
      seed,
      all_seeds: [seed],
      subseed: 1234,
      all_subseeds: [1234],
      subseed_strength: 0,
      width,
      height,
      sampler_name: sampler,
      cfg_scale: cfgScale,
      steps,
      batch_size: 1,
      restore_faces: false,
      face_restoration_model: null,
      sd_model_name: modelName,
      sd_model_hash: MODEL_HASH,
      sd_vae_name: null,
      sd_vae_hash: null,
      seed_resize_from_w: -1,
      seed_resize_from_h: -1,
      denoising_strength: null,
      extra_generation_params: {},
      index_of_first_image: 0,
      infotexts: sampled ? [infotext] : [],
      styles: [],
      job_timestamp: state.job_timestamp,
      clip_skip: 1,
      is_using_inpainting_conditioning: false,
      version: VERSION,
    };
    const rgb: [number, number, number] = [seed & 0xff, (seed >>> 8) & 0xff, (seed >>> 16) & 0xff];
    const rendered = makePng(width, height, rgb);
    // processing.py:1087-1090 puts the infotext in image.info["parameters"]; encode_pil_to_base64 writes it
    // into the PNG (api.py:102-113) when samples_format is png, the default (shared_options.py:36).
    const png = options.image ?? ((options.enablePnginfo ?? true) ? insertTextChunk(rendered, 'parameters', infotext, 'pillow') : rendered);
    return {
      images: sampled ? [Buffer.from(png).toString('base64')] : [],
      parameters: { ...values, seed: requestedSeed, steps, width, height, cfg_scale: cfgScale },
      info: JSON.stringify(info),
    };
  }

  async function handleTxt2Img(text: string, contentType: string | undefined, response: ServerResponse): Promise<void> {
    // FastAPI reads the body as JSON only with no content type or application/json (or +json); any other
    // type leaves it bytes, which the model refuses (fastapi/routing.py:203-214 in 0.94.0, the version
    // A1111 pins in requirements_versions.txt).
    const subtype = contentType?.split(';')[0]?.trim().toLowerCase();
    const readsJson = contentType === undefined || contentType === '' || subtype === 'application/json' || (subtype?.startsWith('application/') === true && subtype.endsWith('+json'));
    if (!readsJson && text !== '') {
      return sendJson(response, 422, { detail: [{ loc: ['body'], msg: 'value is not a valid dict', type: 'type_error.dict' }] });
    }
    const validated = validateTxt2Img(text);
    if (!validated.ok) return sendJson(response, 422, { detail: validated.detail });
    if (options.failWith !== undefined) return sendJson(response, options.failWith.status, options.failWith.body);
    if (options.hang === true) return;
    if (options.hugeAnswer !== undefined) {
      const body = { ...options.hugeAnswer, contentType: 'application/json', prefix: '{"images":["', suffix: '"],"parameters":{},"info":"{}"}' };
      return streamLargeBody(response, body, (sent) => (hugeBytesSent = sent));
    }
    const result = queue.then(() => runJob(validated.value));
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
      case 'POST /sdapi/v1/txt2img': {
        inFlight++;
        maxConcurrentTxt2Img = Math.max(maxConcurrentTxt2Img, inFlight);
        // An answer sent, or a client that hung up (A1111 itself would still finish the job), ends the request.
        response.once('close', () => inFlight--);
        return handleTxt2Img(text, request.headers['content-type'], response);
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
      case 'GET /sdapi/v1/options':
        if (options.busyWhileMaking === true && inFlight > 0) return;
        return sendJson(response, 200, {
          sd_model_checkpoint: `${modelName}.safetensors [${MODEL_HASH}]`,
          samples_format: 'png',
          enable_pnginfo: options.enablePnginfo ?? true,
          CLIP_stop_at_last_layers: 1,
        });
      case 'GET /sdapi/v1/sd-models':
        return sendJson(response, 200, [
          {
            title: `${modelName}.safetensors [${MODEL_HASH}]`,
            model_name: modelName,
            hash: MODEL_HASH,
            sha256: null,
            filename: `/models/Stable-diffusion/${modelName}.safetensors`,
            config: null,
          },
        ]);
      default: {
        const known = ['/sdapi/v1/txt2img', '/sdapi/v1/progress', '/sdapi/v1/interrupt', '/sdapi/v1/options', '/sdapi/v1/sd-models'];
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
    async close() {
      closed = true;
      closing.abort();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
