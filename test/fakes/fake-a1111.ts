// A real HTTP server that behaves like AUTOMATIC1111's /sdapi/v1 API (FastAPI + pydantic v1):
// 422 detail lists, a global progress state, and an interrupt that still answers 200 with an image.
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { makePng } from './png-bytes.ts';
import { parseBody, readBody, sendJson, streamLargeBody, type LargeBody } from './http-body.ts';

export interface FakeA1111Options {
  /** Simulated time per sampling step. */
  stepDelayMs?: number;
  /** false: /sdapi/v1/progress answers 404, like stable-diffusion.cpp's sd-server. */
  progressEndpoint?: boolean;
  /** txt2img answers with this status and body (objects are sent as JSON). */
  failWith?: { status: number; body: unknown };
  /** txt2img never answers. */
  hang?: boolean;
  modelName?: string;
  /** /sdapi/v1/interrupt answers after this delay (the real one answers at once; this plays a busy server). */
  interruptDelayMs?: number;
  /** txt2img answers with these bytes (base64) in place of the rendered PNG: broken or odd images. */
  image?: Uint8Array;
  /**
   * txt2img answers with a JSON body of this many bytes, `{"images":["AAAA…"]}`, streamed and never held whole.
   * FastAPI's JSONResponse sends a Content-Length (starlette/responses.py, Response.init_headers).
   */
  hugeAnswer?: Omit<LargeBody, 'prefix' | 'suffix' | 'contentType'>;
  /**
   * The state a job before ours left behind (made in A1111's own UI, say): State.end() resets only
   * `job` and `job_count` (modules/shared_state.py:129-133), so /progress keeps reporting that job's
   * sampling_step and sampling_steps, with job_count 0 and progress 0 (modules/api/api.py, progressapi).
   */
  previousJob?: { steps: number };
  /**
   * Time between a txt2img request's arrival and the start of its job: A1111 waits for its queue_lock
   * before State.begin() (modules/api/api.py, text2imgapi: `with self.queue_lock:`). Meanwhile
   * /progress still describes the previous job.
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

export async function createFakeA1111(options: FakeA1111Options = {}): Promise<FakeA1111> {
  const stepDelayMs = options.stepDelayMs ?? 20;
  const progressEndpoint = options.progressEndpoint ?? true;
  const modelName = options.modelName ?? 'v1-5-pruned-emaonly';
  const requests: RecordedRequest[] = [];
  const state = {
    skipped: false,
    interrupted: false,
    job: '',
    job_count: 0,
    job_timestamp: '0',
    job_no: 0,
    sampling_step: options.previousJob?.steps ?? 0,
    sampling_steps: options.previousJob?.steps ?? 0,
  };
  let interrupts = 0;
  let inFlight = 0;
  let maxConcurrentTxt2Img = 0;
  let hugeBytesSent = 0;
  let closed = false;
  const closing = new AbortController();
  // A1111 runs one job at a time behind a queue lock.
  let queue: Promise<void> = Promise.resolve();

  async function runJob(values: Record<string, unknown>): Promise<Record<string, unknown>> {
    const steps = numberOr(values['steps'], 50);
    const width = numberOr(values['width'], 512);
    const height = numberOr(values['height'], 512);
    const requestedSeed = numberOr(values['seed'], -1);
    const seed = requestedSeed === -1 ? Math.floor(Math.random() * 4_294_967_295) : requestedSeed;
    if (options.startDelayMs !== undefined) {
      try {
        await sleep(options.startDelayMs, undefined, { signal: closing.signal });
      } catch {
        // closing: the job starts and ends at once
      }
    }
    Object.assign(state, {
      interrupted: false,
      job: 'txt2img',
      job_count: 1,
      job_no: 0,
      job_timestamp: '20250101000000',
      sampling_step: 0,
      sampling_steps: steps,
    });
    for (let step = 1; step <= steps; step++) {
      try {
        await sleep(stepDelayMs, undefined, { signal: closing.signal });
      } catch {
        break;
      }
      if (state.interrupted || closed) break;
      state.sampling_step = step;
    }
    Object.assign(state, { job: '', job_count: 0 });
    const prompt = stringOr(values['prompt'], '');
    const negativePrompt = stringOr(values['negative_prompt'], '');
    const cfgScale = numberOr(values['cfg_scale'], 7);
    const infotext = `${prompt}\nNegative prompt: ${negativePrompt}\nSteps: ${steps}, Sampler: Euler a, CFG scale: ${cfgScale}, Seed: ${seed}, Size: ${width}x${height}, Model: ${modelName}`;
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
      sampler_name: 'Euler a',
      cfg_scale: cfgScale,
      steps,
      batch_size: 1,
      restore_faces: false,
      sd_model_name: modelName,
      sd_model_hash: '6ce0161689',
      sd_vae_name: null,
      denoising_strength: 0,
      extra_generation_params: {},
      index_of_first_image: 0,
      infotexts: [infotext],
      styles: [],
      job_timestamp: state.job_timestamp,
      clip_skip: 1,
      version: 'v1.10.1',
    };
    const rgb: [number, number, number] = [seed & 0xff, (seed >>> 8) & 0xff, (seed >>> 16) & 0xff];
    return {
      images: [Buffer.from(options.image ?? makePng(width, height, rgb)).toString('base64')],
      parameters: { ...values, seed: requestedSeed, steps, width, height, cfg_scale: cfgScale },
      info: JSON.stringify(info),
    };
  }

  async function handleTxt2Img(text: string, response: ServerResponse): Promise<void> {
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
    const route = `${method} ${address.pathname}`;
    switch (route) {
      case 'POST /sdapi/v1/txt2img': {
        inFlight++;
        maxConcurrentTxt2Img = Math.max(maxConcurrentTxt2Img, inFlight);
        // An answer sent, or a client that hung up (A1111 itself would still finish the job), ends the request.
        response.once('close', () => inFlight--);
        return handleTxt2Img(text, response);
      }
      case 'GET /sdapi/v1/progress': {
        if (!progressEndpoint) return sendJson(response, 404, { detail: 'Not Found' });
        const progress = state.job_count === 0 || state.sampling_steps === 0 ? 0 : state.sampling_step / state.sampling_steps;
        return sendJson(response, 200, {
          progress,
          eta_relative: progress === 0 ? 0 : ((1 - progress) * state.sampling_steps * stepDelayMs) / 1000,
          state: { ...state },
          current_image: null,
          textinfo: null,
        });
      }
      // modules/api/api.py:243 routes it to Api.interruptapi: shared.state.interrupt(), then `return {}`.
      // The job stops at its next step and txt2img still answers 200 with the image so far.
      case 'POST /sdapi/v1/interrupt':
        interrupts++;
        state.interrupted = true;
        if (options.interruptDelayMs !== undefined) await sleep(options.interruptDelayMs);
        return sendJson(response, 200, {});
      case 'GET /sdapi/v1/options':
        return sendJson(response, 200, {
          sd_model_checkpoint: `${modelName}.safetensors [6ce0161689]`,
          samples_format: 'png',
          CLIP_stop_at_last_layers: 1,
        });
      case 'GET /sdapi/v1/sd-models':
        return sendJson(response, 200, [
          {
            title: `${modelName}.safetensors [6ce0161689]`,
            model_name: modelName,
            hash: '6ce0161689',
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
