// A real HTTP + WebSocket server that behaves like ComfyUI (0.3.64, a125cd84; line numbers are of that
// commit): /prompt validation with its error shapes and a client prompt_id, one prompt at a time, node
// outputs cached between prompts, the WebSocket message sequence (JPEG previews only with a preview method),
// /history, /view, /interrupt and /queue, /object_info with the checkpoint, sampler and scheduler lists a prompt
// is checked against, /upload/image into the input folder that LoadImage reads (image to image: LoadImage →
// ImageScale → VAEEncode → KSampler with denoise), a latent batch (EmptyLatentImage.batch_size: one image per item,
// all listed in the history), and on demand the newer /api/jobs/{id}/cancel. Every route also answers under /api
// (server.py:802-814).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { decodeSolidPng, makePng } from './png-bytes.ts';
import { parseBody, readBodyBytes, readMultipart, redirectUpgrade, sendJson, sendRedirect, streamLargeBody, type RedirectEverything } from './http-body.ts';

export interface FakeComfyUiOptions {
  /** Simulated time per sampling step. */
  stepDelayMs?: number;
  /** /prompt answers with this status and body (objects are sent as JSON). */
  failWith?: { status: number; body: unknown };
  /** The KSampler fails after its first step with this exception_message. */
  executionError?: string;
  /**
   * Checkpoint files CheckpointLoaderSimple may load: its ckpt_name list in /object_info
   * (folder_paths.get_filename_list("checkpoints"), nodes.py:564), a prompt naming another refused.
   */
  checkpoints?: string[];
  /** KSampler's and KSamplerAdvanced's sampler_name list; default the real one, COMFY_SAMPLERS. */
  samplers?: string[];
  /** Their scheduler list; default the real one, COMFY_SCHEDULERS. */
  schedulers?: string[];
  /**
   * How /object_info writes a combo input. `list` (default): the names as the type, `[[names…], {…}]`, as
   * nodes.py's classic nodes declare them (nodes.py:564, 1508-1509). `options`: `["COMBO", {"options": [names…],
   * "multiselect": false, …}]`, as nodes written with comfy_api are served (comfy_api/latest/_io.py:367-374,
   * 1180-1185) and node_typing.py:168-173 asks nodes to prefer. A prompt is checked against the list either way,
   * as newer ComfyUI does (PR #11345; 0.3.64 checks only the first shape, execution.py:896).
   */
  comboInputs?: 'list' | 'options';
  /** Node classes this server lacks (a custom node not installed): left out of /object_info, refused in a prompt. */
  missingNodes?: string[];
  /** /interrupt answers after this delay (the real one answers at once; this plays a busy server). */
  interruptDelayMs?: number;
  /**
   * SaveImage "writes" these bytes in place of the rendered PNG, and /view serves them: broken images, or a
   * decompression bomb (png-bytes.ts, makePngBomb) as a compromised server would send.
   */
  image?: Uint8Array;
  /**
   * Every route, the WebSocket upgrade of /ws included, answers with this redirect (http-body.ts: a
   * misconfigured reverse proxy, a compromised server).
   */
  redirect?: RedirectEverything;
  /**
   * /view alone answers with this redirect, the WebSocket and the other routes working: a proxy that sends
   * file downloads to another host (an object store), or a compromised server steering the image fetch.
   */
  redirectView?: RedirectEverything;
  /**
   * /view serves a file of this many bytes, streamed and never held whole. ComfyUI answers /view with
   * aiohttp's web.FileResponse (server.py, view_image), which sends a Content-Length.
   */
  hugeViewBytes?: number;
  /**
   * /prompt takes this long before it queues the prompt and answers: ComfyUI awaits
   * execution.validate_prompt first (server.py:700) and queues in the same handler (server.py:707).
   * Like aiohttp, the handler runs to the end when the client hangs up meanwhile: the prompt is
   * queued all the same and only the answer is lost.
   */
  promptDelayMs?: number;
  /**
   * Another client's prompt (the same graph with these steps), queued the moment each of our /prompt
   * requests arrives, so it runs while ours waits. Without `clientId` (a script that sends none) its
   * progress and interruption are broadcast to every socket (main.py:262, execution.py:617) but not its
   * executing/executed messages (execution.py:450, main.py:203); with our client id every message of it
   * reaches our socket, its final `executing {node: null}` included.
   */
  foreignPrompt?: { steps: number; clientId?: string };
  /**
   * --preview-method (comfy/cli_args.py:94-100, default none): with a method, a JPEG preview frame follows each
   * progress message (latent_preview.py:26-28, 62-89); without one there are no binary frames at all.
   */
  previewMethod?: 'auto' | 'latent2rgb' | 'taesd';
  /**
   * What a client's `prompt_id` in /prompt does: `any` (0.3.45 to 0.3.64: `str(json_data.get("prompt_id",
   * uuid.uuid4()))`, server.py:692), `uuid` (newer: a canonical lowercase UUID or 400 invalid_prompt_id, a
   * duplicate 409), `ignored` (before 0.3.45: the server mints its own). Default `any`.
   */
  clientPromptIds?: 'any' | 'uuid' | 'ignored';
  /**
   * false: /interrupt ignores a body and stops whatever runs, as before 0.3.57 (464ba1d6). Default true:
   * with a prompt_id it interrupts only that prompt, and only while it runs (server.py:736-766).
   */
  targetedInterrupt?: boolean;
  /** Newer ComfyUI's POST /api/jobs/{id}/cancel (server.py @5e14d797): absent (404) in 0.3.64. */
  jobsApi?: boolean;
  /**
   * Time between `execution_success` (sent inside e.execute, execution.py:704-706) and the history entry
   * (q.task_done, main.py:197), after which `executing {node: null}` is sent (main.py:203-204). Default 0.
   */
  historyDelayMs?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  /** Parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: unknown;
}

export interface FakeComfyUi {
  url: string;
  /** Every HTTP request in arrival order, WebSocket upgrades included (as GET /ws). */
  requests: RecordedRequest[];
  /** Every workflow accepted by /prompt, exactly as submitted. */
  workflows: unknown[];
  /** The prompt_id given to each accepted workflow, in the same order. */
  promptIds: string[];
  /** Prompt ids removed through POST /queue {delete}. */
  queueDeletes: string[];
  /** The input folder's files by their path below it ("easel/easel-….png"): what /upload/image stored. */
  inputFiles: Map<string, Uint8Array>;
  /** The prompt_id of each foreign prompt (see `foreignPrompt`), in the order they were queued. */
  foreignPromptIds: string[];
  /** How each prompt that ran ended, by prompt_id: what its history entry says. */
  outcomes: Record<string, 'success' | 'error' | 'interrupted'>;
  /** Every WebSocket text message sent, with performance.now(): what a client could have seen, and when. */
  sent: { type: string; data: Record<string, unknown>; at: number }[];
  /** Every HTTP request's performance.now(), in the order of `requests`. */
  requestTimes: number[];
  /** Binary frames sent (previews). */
  readonly binaryFrames: number;
  /** How many times /interrupt was called. */
  readonly interrupts: number;
  /** How many /interrupt calls have been answered. */
  readonly interruptsAnswered: number;
  /** Client ids that opened /ws. */
  readonly connectedClients: string[];
  /** Bytes of a hugeViewBytes file handed to the socket so far: what Easel could have read at most. */
  readonly hugeBytesSent: number;
  close(): Promise<void>;
}

interface QueuedPrompt {
  id: string;
  number: number;
  clientId: string | undefined;
  workflow: Record<string, Node>;
  outputNodes: string[];
}

interface Node {
  class_type: string;
  inputs: Record<string, unknown>;
}

interface PromptError {
  type: string;
  message: string;
  details: string;
  extra_info: Record<string, unknown>;
}

const OUTPUT_NODES = new Set(['SaveImage', 'PreviewImage']);
/** A JPEG's start and end markers around nothing: previews are only counted, never decoded. */
const TINY_JPEG = Buffer.of(0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0xff, 0xd9);
const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** comfy.samplers.KSampler.SAMPLERS: SAMPLER_NAMES = KSAMPLER_NAMES + ddim, uni_pc, uni_pc_bh2 (comfy/samplers.py:730-734, 1054, 1099). */
export const COMFY_SAMPLERS: readonly string[] = [
  ...['euler', 'euler_cfg_pp', 'euler_ancestral', 'euler_ancestral_cfg_pp', 'heun', 'heunpp2', 'dpm_2', 'dpm_2_ancestral'],
  ...['lms', 'dpm_fast', 'dpm_adaptive', 'dpmpp_2s_ancestral', 'dpmpp_2s_ancestral_cfg_pp', 'dpmpp_sde', 'dpmpp_sde_gpu'],
  ...['dpmpp_2m', 'dpmpp_2m_cfg_pp', 'dpmpp_2m_sde', 'dpmpp_2m_sde_gpu', 'dpmpp_2m_sde_heun', 'dpmpp_2m_sde_heun_gpu', 'dpmpp_3m_sde', 'dpmpp_3m_sde_gpu', 'ddpm', 'lcm'],
  ...['ipndm', 'ipndm_v', 'deis', 'res_multistep', 'res_multistep_cfg_pp', 'res_multistep_ancestral', 'res_multistep_ancestral_cfg_pp'],
  ...['gradient_estimation', 'gradient_estimation_cfg_pp', 'er_sde', 'seeds_2', 'seeds_3', 'sa_solver', 'sa_solver_pece'],
  ...['ddim', 'uni_pc', 'uni_pc_bh2'],
];

/** comfy.samplers.KSampler.SCHEDULERS: the keys of SCHEDULER_HANDLERS, in order (comfy/samplers.py:1063-1074, 1098). */
export const COMFY_SCHEDULERS: readonly string[] = ['simple', 'sgm_uniform', 'karras', 'exponential', 'ddim_uniform', 'beta', 'normal', 'linear_quadratic', 'kl_optimal'];

/** One input as INPUT_TYPES declares it: a type, or a combo's names; with its options dict when it has one. */
type InputSpec = { type: string; extra?: Record<string, unknown> } | { combo: readonly string[]; extra?: Record<string, unknown>; unchecked?: true };

interface NodeClass {
  inputs: Record<string, InputSpec>;
  output: string[];
  category: string;
  display: string;
}

interface ComboLists {
  checkpoints: readonly string[];
  samplers: readonly string[];
  schedulers: readonly string[];
  /** The input folder's top-level image files: LoadImage's combo (nodes.py:1633-1637). */
  inputs: () => readonly string[];
}

const INT = (extra: Record<string, unknown>): InputSpec => ({ type: 'INT', extra });
const FLOAT = (extra: Record<string, unknown>): InputSpec => ({ type: 'FLOAT', extra });

/** The classes the fake has, their inputs as nodes.py declares them (tooltips left out). */
function describeClasses(lists: ComboLists): Record<string, NodeClass> {
  const seed = { default: 0, min: 0, max: 0xffffffffffffffff, control_after_generate: true };
  const steps = INT({ default: 20, min: 1, max: 10000 });
  const cfg = FLOAT({ default: 8.0, min: 0.0, max: 100.0, step: 0.1, round: 0.01 });
  return {
    // nodes.py:559-566.
    CheckpointLoaderSimple: { inputs: { ckpt_name: { combo: lists.checkpoints, extra: { tooltip: 'The name of the checkpoint (model) to load.' } } }, output: ['MODEL', 'CLIP', 'VAE'], category: 'loaders', display: 'Load Checkpoint' },
    // nodes.py:1499-1512.
    KSampler: {
      inputs: {
        model: { type: 'MODEL' },
        seed: INT(seed),
        steps,
        cfg,
        sampler_name: { combo: lists.samplers, extra: { tooltip: 'The algorithm used when sampling, this can affect the quality, speed, and style of the generated output.' } },
        scheduler: { combo: lists.schedulers, extra: { tooltip: 'The scheduler controls how noise is gradually removed to form the image.' } },
        positive: { type: 'CONDITIONING' },
        negative: { type: 'CONDITIONING' },
        latent_image: { type: 'LATENT' },
        denoise: FLOAT({ default: 1.0, min: 0.0, max: 1.0, step: 0.01 }),
      },
      output: ['LATENT'],
      category: 'sampling',
      display: 'KSampler',
    },
    // nodes.py:1527-1543: its combos without an options dict, `(comfy.samplers.KSampler.SAMPLERS, )`.
    KSamplerAdvanced: {
      inputs: {
        model: { type: 'MODEL' },
        add_noise: { combo: ['enable', 'disable'] },
        noise_seed: INT(seed),
        steps,
        cfg,
        sampler_name: { combo: lists.samplers },
        scheduler: { combo: lists.schedulers },
        positive: { type: 'CONDITIONING' },
        negative: { type: 'CONDITIONING' },
        latent_image: { type: 'LATENT' },
        start_at_step: INT({ default: 0, min: 0, max: 10000 }),
        end_at_step: INT({ default: 10000, min: 0, max: 10000 }),
        return_with_leftover_noise: { combo: ['disable', 'enable'] },
      },
      output: ['LATENT'],
      category: 'sampling',
      display: 'KSampler (Advanced)',
    },
    EmptyLatentImage: {
      inputs: { width: INT({ default: 512, min: 16, max: 16384, step: 8 }), height: INT({ default: 512, min: 16, max: 16384, step: 8 }), batch_size: INT({ default: 1, min: 1, max: 4096 }) },
      output: ['LATENT'],
      category: 'latent',
      display: 'Empty Latent Image',
    },
    // nodes.py:1630-1704: its combo lists the input folder's top level, but VALIDATE_INPUTS takes `image`, so the
    // list is not checked (execution.py:868, 896); the file must exist (folder_paths.exists_annotated_filepath).
    LoadImage: { inputs: { image: { combo: lists.inputs(), extra: { image_upload: true }, unchecked: true } }, output: ['IMAGE', 'MASK'], category: 'image', display: 'Load Image' },
    // nodes.py:1778-1793.
    ImageScale: {
      inputs: {
        image: { type: 'IMAGE' },
        upscale_method: { combo: ['nearest-exact', 'bilinear', 'area', 'bicubic', 'lanczos'] },
        width: INT({ default: 512, min: 0, max: 16384, step: 1 }),
        height: INT({ default: 512, min: 0, max: 16384, step: 1 }),
        crop: { combo: ['disabled', 'center'] },
      },
      output: ['IMAGE'],
      category: 'image/upscaling',
      display: 'Upscale Image',
    },
    // nodes.py:333-344.
    VAEEncode: { inputs: { pixels: { type: 'IMAGE' }, vae: { type: 'VAE' } }, output: ['LATENT'], category: 'latent', display: 'VAE Encode' },
    // nodes.py:1221-1236: the latent repeated `amount` times, a batch.
    RepeatLatentBatch: { inputs: { samples: { type: 'LATENT' }, amount: INT({ default: 1, min: 1, max: 64 }) }, output: ['LATENT'], category: 'latent/batch', display: 'Repeat Latent Batch' },
    CLIPTextEncode: { inputs: { text: { type: 'STRING', extra: { multiline: true, dynamicPrompts: true } }, clip: { type: 'CLIP' } }, output: ['CONDITIONING'], category: 'conditioning', display: 'CLIP Text Encode (Prompt)' },
    VAEDecode: { inputs: { samples: { type: 'LATENT' }, vae: { type: 'VAE' } }, output: ['IMAGE'], category: 'latent', display: 'VAE Decode' },
    SaveImage: { inputs: { images: { type: 'IMAGE' }, filename_prefix: { type: 'STRING', extra: { default: 'ComfyUI' } } }, output: [], category: 'image', display: 'Save Image' },
    PreviewImage: { inputs: { images: { type: 'IMAGE' } }, output: [], category: 'image', display: 'Preview Image' },
    // The fake has no VAE or LoRA files: it lists none and takes any name, as it always has.
    VAELoader: { inputs: { vae_name: { combo: [], unchecked: true } }, output: ['VAE'], category: 'loaders', display: 'Load VAE' },
    LoraLoader: {
      inputs: {
        model: { type: 'MODEL' },
        clip: { type: 'CLIP' },
        lora_name: { combo: [], unchecked: true },
        strength_model: FLOAT({ default: 1.0, min: -100.0, max: 100.0, step: 0.01 }),
        strength_clip: FLOAT({ default: 1.0, min: -100.0, max: 100.0, step: 0.01 }),
      },
      output: ['MODEL', 'CLIP'],
      category: 'loaders',
      display: 'Load LoRA',
    },
  };
}

/** An input's spec as /object_info writes it: a tuple, so a JSON array (server.py:597, node_info). */
function renderSpec(spec: InputSpec, shape: 'list' | 'options'): unknown[] {
  if ('type' in spec) return spec.extra === undefined ? [spec.type] : [spec.type, spec.extra];
  if (shape === 'options') return ['COMBO', { ...spec.extra, multiselect: false, options: spec.combo }];
  return spec.extra === undefined ? [spec.combo] : [spec.combo, spec.extra];
}

/** A class as GET /object_info describes it (server.py:592-625, node_info). */
function renderClass(name: string, node: NodeClass, shape: 'list' | 'options'): Record<string, unknown> {
  const required = Object.fromEntries(Object.entries(node.inputs).map(([input, spec]) => [input, renderSpec(spec, shape)]));
  return {
    input: { required },
    input_order: { required: Object.keys(required) },
    output: node.output,
    output_is_list: node.output.map(() => false),
    output_name: node.output,
    name,
    display_name: node.display,
    description: '',
    python_module: 'nodes',
    category: node.category,
    output_node: OUTPUT_NODES.has(name),
  };
}

/** Python's str() of a list of strings, as the value_not_in_list details quote it: ['a', 'b']. */
function pythonList(names: readonly string[]): string {
  const repr = (name: string) => (name.includes("'") && !name.includes('"') ? `"${name.replaceAll('\\', '\\\\')}"` : `'${name.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`);
  return `[${names.map(repr).join(', ')}]`;
}

// Inputs ComfyUI converts with int()/float() during validation.
const NUMERIC_INPUTS: Record<string, Record<string, 'INT' | 'FLOAT'>> = {
  KSampler: { seed: 'INT', steps: 'INT', cfg: 'FLOAT', denoise: 'FLOAT' },
  EmptyLatentImage: { width: 'INT', height: 'INT', batch_size: 'INT' },
  ImageScale: { width: 'INT', height: 'INT' },
  RepeatLatentBatch: { amount: 'INT' },
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function promptError(type: string, message: string, details = ''): PromptError {
  return { type, message, details, extra_info: {} };
}

type Validation =
  | { ok: true; workflow: Record<string, Node>; outputNodes: string[] }
  | { ok: false; error: PromptError; nodeErrors: Record<string, unknown> };

/** A small part of ComfyUI's validate_prompt, with its error types and messages. */
function validatePrompt(prompt: unknown, classes: Record<string, NodeClass>, shape: 'list' | 'options', inputFiles: ReadonlyMap<string, Uint8Array>): Validation {
  if (!isRecord(prompt)) return { ok: false, error: promptError('invalid_prompt', 'Prompt is not a dictionary.'), nodeErrors: {} };
  for (const [id, node] of Object.entries(prompt)) {
    if (!isRecord(node) || typeof node['class_type'] !== 'string') {
      return {
        ok: false,
        error: promptError('invalid_prompt', 'Cannot execute because a node is missing the class_type property.', `Node ID '#${id}'`),
        nodeErrors: {},
      };
    }
    if (!Object.hasOwn(classes, node['class_type'])) {
      return {
        ok: false,
        // execution.py:980-987 (0.3.64): an unknown class_type is an `invalid_prompt` with these words.
        error: promptError('invalid_prompt', `Cannot execute because node ${node['class_type']} does not exist.`, `Node ID '#${id}'`),
        nodeErrors: {},
      };
    }
    if (!isRecord(node['inputs'])) {
      return {
        ok: false,
        error: promptError('invalid_prompt', 'Cannot execute because a node is missing the inputs property.', `Node ID '#${id}'`),
        nodeErrors: {},
      };
    }
  }
  const workflow = prompt as unknown as Record<string, Node>;
  const outputNodes = Object.keys(workflow).filter((id) => OUTPUT_NODES.has(workflow[id]?.class_type ?? ''));
  if (outputNodes.length === 0) {
    return { ok: false, error: promptError('prompt_no_outputs', 'Prompt has no outputs'), nodeErrors: {} };
  }
  const nodeErrors: Record<string, unknown> = {};
  for (const [id, node] of Object.entries(workflow)) {
    const errors: PromptError[] = [];
    for (const [input, kind] of Object.entries(NUMERIC_INPUTS[node.class_type] ?? {})) {
      const value = node.inputs[input];
      if (value === undefined || Array.isArray(value)) continue;
      const number = typeof value === 'number' ? value : Number(value);
      if (typeof value === 'boolean' || !Number.isFinite(number) || (kind === 'INT' && !Number.isInteger(number))) {
        errors.push(
          promptError('invalid_input_type', `Failed to convert an input value to a ${kind} value`, `${input}, ${String(value)}, invalid literal for ${kind === 'INT' ? 'int()' : 'float()'}: '${String(value)}'`),
        );
      }
    }
    // execution.py:896-920: a value (not a link) of a combo input must be one of its names. A list of more than 20
    // is not quoted: "(list of length N)", and no input_config.
    for (const [input, spec] of Object.entries(classes[node.class_type]?.inputs ?? {})) {
      const value = node.inputs[input];
      if (!('combo' in spec) || spec.unchecked === true || value === undefined || Array.isArray(value) || spec.combo.includes(value as string)) continue;
      const long = spec.combo.length > 20;
      const listInfo = long ? `(list of length ${spec.combo.length})` : pythonList(spec.combo);
      errors.push({
        ...promptError('value_not_in_list', 'Value not in list', `${input}: '${String(value)}' not in ${listInfo}`),
        extra_info: { input_name: input, input_config: long ? null : renderSpec(spec, shape), received_value: value },
      });
    }
    // LoadImage.VALIDATE_INPUTS (nodes.py:1699-1704): "Invalid image file: …" unless the file is in the input folder,
    // answered as custom_validation_failed (execution.py:923-950).
    if (node.class_type === 'LoadImage' && typeof node.inputs['image'] === 'string' && !inputFiles.has(node.inputs['image'].replace(/ \[input\]$/, ''))) {
      errors.push({ ...promptError('custom_validation_failed', 'Custom validation failed for node', `image - Invalid image file: ${node.inputs['image']}`), extra_info: { input_name: 'image' } });
    }
    if (errors.length > 0) nodeErrors[id] = { errors, dependent_outputs: outputNodes, class_type: node.class_type };
  }
  if (Object.keys(nodeErrors).length > 0) {
    return { ok: false, error: promptError('prompt_outputs_failed_validation', 'Prompt outputs failed validation'), nodeErrors };
  }
  return { ok: true, workflow, outputNodes };
}

function readNumberInput(workflow: Record<string, Node>, classType: string, input: string, fallback: number): number {
  const node = Object.values(workflow).find((candidate) => candidate.class_type === classType);
  const value = node?.inputs[input];
  return typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : fallback;
}

export async function createFakeComfyUi(options: FakeComfyUiOptions = {}): Promise<FakeComfyUi> {
  const stepDelayMs = options.stepDelayMs ?? 20;
  const checkpoints = options.checkpoints ?? ['v1-5-pruned-emaonly.safetensors'];
  const comboShape = options.comboInputs ?? 'list';
  // The input folder (folder_paths.get_input_directory()): what /upload/image wrote, by its path below it.
  const inputFiles = new Map<string, Uint8Array>();
  const inputs = () => [...inputFiles.keys()].filter((name) => !name.includes('/')).sort();
  const classes = Object.fromEntries(
    Object.entries(describeClasses({ checkpoints, samplers: options.samplers ?? COMFY_SAMPLERS, schedulers: options.schedulers ?? COMFY_SCHEDULERS, inputs })).filter(
      ([name]) => !(options.missingNodes ?? []).includes(name),
    ),
  );
  const requests: RecordedRequest[] = [];
  const workflows: unknown[] = [];
  const promptIds: string[] = [];
  const queueDeletes: string[] = [];
  const foreignPromptIds: string[] = [];
  const outcomes: Record<string, 'success' | 'error' | 'interrupted'> = {};
  const connectedClients: string[] = [];
  const sockets = new Map<string, Set<WebSocket>>();
  const pending: QueuedPrompt[] = [];
  const history: Record<string, unknown> = {};
  const files = new Map<string, Uint8Array>();
  let running: { prompt: QueuedPrompt; interrupted: boolean } | undefined;
  const sent: { type: string; data: Record<string, unknown>; at: number }[] = [];
  const requestTimes: number[] = [];
  let binaryFrames = 0;
  /**
   * The output cache: a node's outputs keyed by its class and inputs, linked inputs by their node's key, as
   * CacheKeySetInputSignature does (comfy_execution/caching.py). Nodes not in the current prompt are dropped
   * when the next one starts (cache.clean_unused(), execution.py:667).
   */
  const cache = new Map<string, { output?: Record<string, unknown> }>();
  let interrupts = 0;
  let interruptsAnswered = 0;
  let hugeBytesSent = 0;
  let promptNumber = 0;
  let fileCounter = 0;
  let closed = false;
  const closing = new AbortController();

  /** Waits one step; false once the fake is closing, so no timer outlives close(). */
  async function waitStep(): Promise<boolean> {
    try {
      await sleep(stepDelayMs, undefined, { signal: closing.signal });
      return true;
    } catch {
      return false;
    }
  }

  function socketsOf(clientId: string | undefined): WebSocket[] {
    // send_json with sid None goes to every socket (server.py:939).
    return clientId === undefined ? [...sockets.values()].flatMap((set) => [...set]) : [...(sockets.get(clientId) ?? [])];
  }

  /** A message sent to the prompt's client, or to every socket when the prompt has none (progress, interruption, status). */
  function send(clientId: string | undefined, type: string, data: Record<string, unknown>): void {
    const targets = socketsOf(clientId);
    if (targets.length > 0) sent.push({ type, data, at: performance.now() });
    for (const socket of targets) socket.send(JSON.stringify({ type, data }));
  }

  /**
   * A message ComfyUI sends only when the prompt has a client id: executing, executed (execution.py:450,
   * 517; main.py:203) and the add_message(broadcast=False) ones (execution.py:617).
   */
  function sendToClient(clientId: string | undefined, type: string, data: Record<string, unknown>): void {
    if (clientId !== undefined) send(clientId, type, data);
  }

  function sendPreview(clientId: string | undefined): void {
    if (options.previewMethod === undefined) return;
    // The legacy binary frame: uint32 event (1 = PREVIEW_IMAGE), uint32 format (1 = JPEG: previews are always
    // JPEG, latent_preview.py:26-28), then the image (server.py:865-887, protocol.py:2-6). Sent like progress,
    // to the prompt's client or to everyone (main.py:263-274).
    const header = Buffer.alloc(8);
    header.writeUInt32BE(1, 0);
    header.writeUInt32BE(1, 4);
    const frame = Buffer.concat([header, TINY_JPEG]);
    for (const socket of socketsOf(clientId)) {
      binaryFrames++;
      socket.send(frame, { binary: true });
    }
  }

  /** Each node's cache key: its class and inputs, a link replaced by the linked node's key. */
  function signNodes(workflow: Record<string, Node>): Map<string, string> {
    const keys = new Map<string, string>();
    const sign = (nodeId: string, seen: Set<string>): string => {
      const known = keys.get(nodeId);
      if (known !== undefined) return known;
      const node = workflow[nodeId];
      if (node === undefined || seen.has(nodeId)) return `missing:${nodeId}`;
      const inputs = Object.fromEntries(
        Object.entries(node.inputs).map(([name, value]) => [
          name,
          Array.isArray(value) && typeof value[0] === 'string' ? { link: sign(value[0], new Set([...seen, nodeId])), slot: value[1] } : value,
        ]),
      );
      const key = JSON.stringify({ class_type: node.class_type, inputs });
      keys.set(nodeId, key);
      return key;
    };
    for (const nodeId of Object.keys(workflow)) sign(nodeId, new Set());
    return keys;
  }

  function sendStatus(): void {
    send(undefined, 'status', { status: { exec_info: { queue_remaining: pending.length + (running === undefined ? 0 : 1) } } });
  }

  async function execute(prompt: QueuedPrompt): Promise<void> {
    const { id, clientId, workflow } = prompt;
    const state = { prompt, interrupted: false };
    running = state;
    const timestamp = () => Date.now();
    const keys = signNodes(workflow);
    // execution.py:662-681: clean_unused() keeps only this prompt's nodes; those found are announced as cached.
    const current = new Set(keys.values());
    for (const key of [...cache.keys()]) if (!current.has(key)) cache.delete(key);
    // `for node_id in prompt` (execution.py:671-675): in the prompt's own order.
    const cachedNodes = Object.keys(workflow).filter((nodeId) => cache.has(keys.get(nodeId) ?? ''));
    const messages: unknown[] = [];
    // add_message: to the prompt's client, kept in the history's status messages (execution.py:611-618).
    const addMessage = (type: string, data: Record<string, unknown>, broadcast = false) => {
      const stamped = { ...data, timestamp: timestamp() };
      messages.push([type, stamped]);
      if (broadcast) send(clientId, type, stamped);
      else sendToClient(clientId, type, stamped);
    };
    addMessage('execution_start', { prompt_id: id });
    addMessage('execution_cached', { nodes: cachedNodes, prompt_id: id });
    const executed: string[] = [];
    const outputs: Record<string, unknown> = {};
    let failure: 'interrupted' | 'error' | undefined;
    for (const [nodeId, node] of Object.entries(workflow)) {
      const key = keys.get(nodeId) ?? '';
      const hit = cache.get(key);
      if (hit !== undefined) {
        // execution.py:403-408: a cached node does not run; an output node sends its cached UI output.
        if (hit.output !== undefined) {
          outputs[nodeId] = hit.output;
          sendToClient(clientId, 'executed', { node: nodeId, display_node: nodeId, output: hit.output, prompt_id: id });
        }
        continue;
      }
      sendToClient(clientId, 'executing', { node: nodeId, display_node: nodeId, prompt_id: id });
      if (node.class_type === 'KSampler' || node.class_type === 'KSamplerAdvanced') {
        const steps = readNumberInput(workflow, node.class_type, 'steps', 20);
        for (let step = 1; step <= steps; step++) {
          if (!(await waitStep()) || state.interrupted) break;
          send(clientId, 'progress', { value: step, max: steps, prompt_id: id, node: nodeId });
          sendPreview(clientId);
          if (options.executionError !== undefined) break;
        }
        if (state.interrupted || closed) {
          // execution.py:626-633, broadcast=True.
          addMessage('execution_interrupted', { prompt_id: id, node_id: nodeId, node_type: node.class_type, executed }, true);
          failure = 'interrupted';
          break;
        }
        if (options.executionError !== undefined) {
          addMessage('execution_error', {
            prompt_id: id,
            node_id: nodeId,
            node_type: node.class_type,
            executed,
            exception_message: options.executionError,
            exception_type: 'RuntimeError',
            traceback: ['Traceback (most recent call last):\n', `RuntimeError: ${options.executionError}\n`],
            current_inputs: {},
            current_outputs: [],
          });
          failure = 'error';
          break;
        }
      }
      let output: Record<string, unknown> | undefined;
      if (OUTPUT_NODES.has(node.class_type)) {
        const type = node.class_type === 'SaveImage' ? 'output' : 'temp';
        const prefix = typeof node.inputs['filename_prefix'] === 'string' ? node.inputs['filename_prefix'] : 'ComfyUI';
        // Like folder_paths.get_save_image_path: a "/" in the prefix makes a subfolder.
        const slash = prefix.lastIndexOf('/');
        const subfolder = slash < 0 ? '' : prefix.slice(0, slash);
        const { width, height, count, start } = describeLatent(workflow);
        const seed = readNumberInput(workflow, 'KSampler', 'seed', 0);
        const denoise = readNumberInput(workflow, 'KSampler', 'denoise', 1);
        // One file per item of the batch, each its own counter (SaveImage.save_images, nodes.py: `for (batch_number,
        // image) in enumerate(images)`), all in this node's output. The items' noise comes from one generator seeded
        // once (comfy/sample.py:8-25), so the fake paints item i from seed and i alike.
        const images = Array.from({ length: count }, (_, index) => {
          const filename = `${slash < 0 ? prefix : prefix.slice(slash + 1)}_${String(++fileCounter).padStart(5, '0')}_.png`;
          const own: [number, number, number] = [(seed + index) & 0xff, ((seed + index) >>> 8) & 0xff, 99];
          // An image to image keeps (1 − denoise) of its starting colour: a test can tell it started from that image.
          const rgb = start === undefined ? own : (start.map((value, channel) => Math.round(value * (1 - denoise) + own[channel]! * denoise)) as [number, number, number]);
          files.set(`${type}\n${subfolder}\n${filename}`, options.image ?? makePng(width, height, rgb));
          return { filename, subfolder, type };
        });
        output = { images };
        outputs[nodeId] = output;
        sendToClient(clientId, 'executed', { node: nodeId, display_node: nodeId, output, prompt_id: id });
      }
      cache.set(key, output === undefined ? {} : { output });
      executed.push(nodeId);
    }
    outcomes[id] = failure === undefined ? 'success' : failure;
    if (failure === undefined) addMessage('execution_success', { prompt_id: id });
    running = undefined;
    // main.py:195-204: the history entry is written by q.task_done, after e.execute returned; then `executing null`.
    if (options.historyDelayMs !== undefined) await sleep(options.historyDelayMs);
    history[id] = {
      prompt: [prompt.number, id, workflow, { client_id: clientId }, prompt.outputNodes],
      outputs,
      status: { status_str: failure === undefined ? 'success' : 'error', completed: failure === undefined, messages },
      meta: {},
    };
    sendToClient(clientId, 'executing', { node: null, prompt_id: id });
    sendStatus();
  }

  /**
   * What the graph's latent is: EmptyLatentImage's size and batch (nodes.py:1164-1186), or an encoded image's
   * (LoadImage, scaled by ImageScale when there is one), repeated by RepeatLatentBatch; and the colour it started from.
   */
  function describeLatent(workflow: Record<string, Node>): { width: number; height: number; count: number; start?: [number, number, number] } {
    const repeat = readNumberInput(workflow, 'RepeatLatentBatch', 'amount', 1);
    const load = Object.values(workflow).find((node) => node.class_type === 'LoadImage');
    const file = typeof load?.inputs['image'] === 'string' ? inputFiles.get(load.inputs['image'].replace(/ \[input\]$/, '')) : undefined;
    if (file !== undefined) {
      const decoded = decodeSolidPng(file);
      const scaled = Object.values(workflow).some((node) => node.class_type === 'ImageScale');
      return {
        width: scaled ? readNumberInput(workflow, 'ImageScale', 'width', decoded.width) : decoded.width,
        height: scaled ? readNumberInput(workflow, 'ImageScale', 'height', decoded.height) : decoded.height,
        count: repeat,
        start: decoded.rgb,
      };
    }
    return {
      width: readNumberInput(workflow, 'EmptyLatentImage', 'width', 512),
      height: readNumberInput(workflow, 'EmptyLatentImage', 'height', 512),
      count: readNumberInput(workflow, 'EmptyLatentImage', 'batch_size', 1) * repeat,
    };
  }

  /**
   * POST /upload/image (server.py:316-367): multipart; no `image` file or no filename is a bare 400; `type` picks the
   * folder (input by default, server.py:289-300), `subfolder` a folder below it (one escaping it: 400). Without
   * `overwrite` "true" or "1" a taken name becomes "name (1).png", unless the file there has the same bytes
   * (compare_image_hash, :302-314). Answers {name, subfolder, type}.
   */
  async function handleUpload(bytes: Buffer, contentType: string | undefined, response: ServerResponse): Promise<void> {
    const form = await readMultipart(bytes, contentType);
    const image = form?.get('image');
    if (form === undefined || image === null || image === undefined || typeof image === 'string') return void response.writeHead(400).end();
    if (image.name === '') return void response.writeHead(400).end();
    const field = (name: string, fallback: string) => {
      const value = form.get(name);
      return typeof value === 'string' ? value : fallback;
    };
    const type = field('type', 'input');
    const subfolder = field('subfolder', '');
    if (subfolder.split('/').includes('..') || subfolder.startsWith('/')) return void response.writeHead(400).end();
    const data = new Uint8Array(await image.arrayBuffer());
    const overwrite = field('overwrite', '');
    const pathOf = (name: string) => (subfolder === '' ? name : `${subfolder}/${name}`);
    let filename = image.name;
    if (overwrite !== 'true' && overwrite !== '1') {
      const dot = image.name.lastIndexOf('.');
      const [stem, extension] = dot < 0 ? [image.name, ''] : [image.name.slice(0, dot), image.name.slice(dot)];
      for (let i = 1; inputFiles.has(pathOf(filename)) && !Buffer.from(inputFiles.get(pathOf(filename))!).equals(Buffer.from(data)); i++) filename = `${stem} (${i})${extension}`;
    }
    if (type === 'input') inputFiles.set(pathOf(filename), data);
    sendJson(response, 200, { name: filename, subfolder, type });
  }

  async function pump(): Promise<void> {
    if (running !== undefined) return;
    for (let next = pending.shift(); next !== undefined && !closed; next = pending.shift()) await execute(next);
  }

  function queue(prompt: Omit<QueuedPrompt, 'number'>): QueuedPrompt {
    const queued = { ...prompt, number: promptNumber++ };
    pending.push(queued);
    sendStatus();
    void pump();
    return queued;
  }

  /** The foreign prompt of `options.foreignPrompt`: our graph with its own steps, from another client. */
  function queueForeign(workflow: Record<string, Node>, outputNodes: string[]): void {
    const foreign = options.foreignPrompt;
    if (foreign === undefined) return;
    const graph = structuredClone(workflow);
    for (const node of Object.values(graph)) if (node.class_type === 'KSampler') node.inputs['steps'] = foreign.steps;
    const queued = queue({ id: randomUUID(), clientId: foreign.clientId, workflow: graph, outputNodes });
    foreignPromptIds.push(queued.id);
  }

  async function handlePrompt(text: string, response: ServerResponse): Promise<void> {
    if (options.failWith !== undefined) return sendJson(response, options.failWith.status, options.failWith.body);
    const body = parseBody(text);
    if (!isRecord(body) || !('prompt' in body)) return sendJson(response, 400, { error: 'no prompt', node_errors: [] });
    const validation = validatePrompt(body['prompt'], classes, comboShape, inputFiles);
    if (!validation.ok) return sendJson(response, 400, { error: validation.error, node_errors: validation.nodeErrors });
    queueForeign(validation.workflow, validation.outputNodes);
    if (options.promptDelayMs !== undefined) {
      try {
        await sleep(options.promptDelayMs, undefined, { signal: closing.signal });
      } catch {
        return;
      }
    }
    const rule = options.clientPromptIds ?? 'any';
    const asked = body['prompt_id'];
    // Newer ComfyUI (server.py @5e14d797, comfy_execution/jobs.py validate_job_id): canonical UUIDs only, no repeats.
    if (rule === 'uuid' && asked !== undefined && !(typeof asked === 'string' && CANONICAL_UUID.test(asked))) {
      return sendJson(response, 400, {
        error: { type: 'invalid_prompt_id', message: 'prompt_id must be a valid UUID', details: 'prompt_id must be a UUID string in canonical lowercase hyphenated form' },
        node_errors: {},
      });
    }
    if (rule === 'uuid' && typeof asked === 'string' && (asked in history || promptIds.includes(asked))) return sendJson(response, 409, { error: 'prompt_id already exists' });
    workflows.push(body['prompt']);
    const clientId = typeof body['client_id'] === 'string' ? body['client_id'] : undefined;
    // server.py:692, `prompt_id = str(json_data.get("prompt_id", uuid.uuid4()))`, since 0.3.45 (260a5ca5).
    const id = rule !== 'ignored' && asked !== undefined && asked !== null ? String(asked) : randomUUID();
    const prompt = queue({ id, clientId, workflow: validation.workflow, outputNodes: validation.outputNodes });
    promptIds.push(prompt.id);
    // A client that hung up meanwhile loses only the answer (server.py:707-709).
    if (!response.destroyed) sendJson(response, 200, { prompt_id: prompt.id, number: prompt.number, node_errors: {} });
  }

  /** Newer ComfyUI's cancel: idempotent, `{"cancelled": bool}`; pending → dequeued, running → interrupt_if_running. */
  function handleJobCancel(id: string, response: ServerResponse): void {
    const index = pending.findIndex((prompt) => prompt.id === id);
    if (index >= 0) {
      pending.splice(index, 1);
      queueDeletes.push(id);
      return sendJson(response, 200, { cancelled: true });
    }
    if (running?.prompt.id === id) {
      running.interrupted = true;
      interrupts++;
      interruptsAnswered++;
      return sendJson(response, 200, { cancelled: true });
    }
    sendJson(response, 200, { cancelled: false });
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const address = new URL(request.url ?? '/', 'http://127.0.0.1');
    const bytes = await readBodyBytes(request);
    const text = bytes.toString('utf8');
    const method = request.method ?? 'GET';
    const form = await readMultipart(bytes, request.headers['content-type']);
    const body = form === undefined ? parseBody(text) : Object.fromEntries([...form.keys()].map((key) => [key, form.getAll(key)]));
    requests.push({ method, path: address.pathname, query: Object.fromEntries(address.searchParams), body });
    requestTimes.push(performance.now());
    if (options.redirect !== undefined) return sendRedirect(response, options.redirect);
    // server.py:802-814: every route is also served under /api.
    const path = address.pathname.startsWith('/api/') ? address.pathname.slice(4) : address.pathname;
    const jobCancel = /^\/jobs\/([^/]+)\/cancel$/.exec(path);
    if (options.jobsApi === true && method === 'POST' && jobCancel !== null) return handleJobCancel(decodeURIComponent(jobCancel[1] ?? ''), response);
    if (method === 'POST' && path === '/prompt') return handlePrompt(text, response);
    if (method === 'POST' && path === '/upload/image') return handleUpload(bytes, request.headers['content-type'], response);
    // server.py:736 post_interrupt: with a prompt_id, interrupt only when that prompt is the running one
    // (lines 743-760); without one, a global interrupt. Always 200. A prompt keeps running after its client's
    // WebSocket or HTTP connection closes: only this endpoint stops it.
    if (method === 'POST' && path === '/interrupt') {
      interrupts++;
      const target = isRecord(body) && typeof body['prompt_id'] === 'string' ? body['prompt_id'] : undefined;
      const targeted = (options.targetedInterrupt ?? true) && target !== undefined;
      if (running !== undefined && (!targeted || target === running.prompt.id)) running.interrupted = true;
      if (options.interruptDelayMs !== undefined) await sleep(options.interruptDelayMs);
      interruptsAnswered++;
      // `return web.Response(status=200)`: no body.
      return void response.writeHead(200).end();
    }
    // server.py:666-672: the running and the pending queue items, (number, prompt_id, prompt, extra_data, outputs).
    if (method === 'GET' && path === '/queue') {
      const item = (prompt: QueuedPrompt) => [prompt.number, prompt.id, prompt.workflow, { client_id: prompt.clientId }, prompt.outputNodes];
      return sendJson(response, 200, { queue_running: running === undefined ? [] : [item(running.prompt)], queue_pending: pending.map(item) });
    }
    if (method === 'POST' && path === '/queue') {
      if (isRecord(body) && Array.isArray(body['delete'])) {
        for (const id of body['delete']) {
          if (typeof id !== 'string') continue;
          queueDeletes.push(id);
          const index = pending.findIndex((prompt) => prompt.id === id);
          if (index >= 0) pending.splice(index, 1);
        }
      }
      if (isRecord(body) && body['clear'] === true) pending.splice(0);
      return void response.writeHead(200).end();
    }
    if (method === 'GET' && path.startsWith('/history/')) {
      const id = decodeURIComponent(path.slice('/history/'.length));
      return sendJson(response, 200, id in history ? { [id]: history[id] } : {});
    }
    if (method === 'GET' && path === '/history') return sendJson(response, 200, history);
    if (method === 'GET' && path === '/view') {
      if (options.redirectView !== undefined) return sendRedirect(response, options.redirectView);
      const key = ['type', 'subfolder', 'filename'].map((name) => address.searchParams.get(name) ?? '').join('\n');
      const file = files.get(key.startsWith('\n') ? `output${key}` : key);
      if (file === undefined) return void response.writeHead(404).end();
      if (options.hugeViewBytes !== undefined) {
        return streamLargeBody(response, { bytes: options.hugeViewBytes, contentLength: true, contentType: 'image/png' }, (sent) => (hugeBytesSent = sent));
      }
      return void response.writeHead(200, { 'content-type': 'image/png' }).end(file);
    }
    // server.py:627-645: every class, or the one named (`{}` for a class the server lacks), always 200.
    if (method === 'GET' && path === '/object_info') {
      return sendJson(response, 200, Object.fromEntries(Object.entries(classes).map(([name, node]) => [name, renderClass(name, node, comboShape)])));
    }
    if (method === 'GET' && path.startsWith('/object_info/')) {
      const name = decodeURIComponent(path.slice('/object_info/'.length));
      const node = Object.hasOwn(classes, name) ? classes[name] : undefined;
      return sendJson(response, 200, node === undefined ? {} : { [name]: renderClass(name, node, comboShape) });
    }
    if (method === 'GET' && path === '/system_stats') {
      return sendJson(response, 200, {
        system: {
          os: 'posix',
          ram_total: 34_359_738_368,
          ram_free: 17_179_869_184,
          comfyui_version: '0.3.64',
          python_version: '3.12.3',
          pytorch_version: '2.7.0+cu126',
          embedded_python: false,
          argv: ['main.py'],
        },
        devices: [
          {
            name: 'cuda:0 NVIDIA GeForce RTX 3060 : cudaMallocAsync',
            type: 'cuda',
            index: 0,
            vram_total: 12_884_901_888,
            vram_free: 11_811_160_064,
            torch_vram_total: 0,
            torch_vram_free: 0,
          },
        ],
      });
    }
    return void response.writeHead(404, { 'content-type': 'text/plain' }).end('404: Not Found');
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, { error: String(error) });
    });
  });
  const webSockets = new WebSocketServer({ noServer: true });
  server.on('upgrade', (request, socket, head) => {
    const address = new URL(request.url ?? '/', 'http://127.0.0.1');
    requests.push({ method: 'GET', path: address.pathname, query: Object.fromEntries(address.searchParams), body: undefined });
    if (options.redirect !== undefined) return redirectUpgrade(socket, options.redirect);
    if (address.pathname !== '/ws') {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    webSockets.handleUpgrade(request, socket, head, (webSocket) => {
      const clientId = address.searchParams.get('clientId') ?? randomUUID().replaceAll('-', '');
      connectedClients.push(clientId);
      const set = sockets.get(clientId) ?? new Set<WebSocket>();
      set.add(webSocket);
      sockets.set(clientId, set);
      webSocket.on('close', () => set.delete(webSocket));
      webSocket.send(JSON.stringify({ type: 'status', data: { status: { exec_info: { queue_remaining: pending.length } }, sid: clientId } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    workflows,
    promptIds,
    queueDeletes,
    inputFiles,
    foreignPromptIds,
    outcomes,
    sent,
    requestTimes,
    get binaryFrames() {
      return binaryFrames;
    },
    get interrupts() {
      return interrupts;
    },
    get interruptsAnswered() {
      return interruptsAnswered;
    },
    get connectedClients() {
      return [...connectedClients];
    },
    get hugeBytesSent() {
      return hugeBytesSent;
    },
    async close() {
      closed = true;
      closing.abort();
      for (const client of webSockets.clients) client.terminate();
      await new Promise<void>((resolve) => webSockets.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
