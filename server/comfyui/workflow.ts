// ComfyUI workflows in API format ("Save (API Format)"): { [nodeId]: { class_type, inputs } }.
// Easel fills %placeholders% in a deep copy; everything else is the user's graph, untouched.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { ImageRequest } from '../core/ports.ts';

export const DEFAULT_WORKFLOW_PATH: string = fileURLToPath(new URL('./default-workflow.json', import.meta.url));
/**
 * The image-to-image graph bundled beside it (Vary): LoadImage (nodes.py:1630-1704) → ImageScale to the request's
 * size (nodes.py:1778-1793) → VAEEncode (nodes.py:333-344) → KSampler with `denoise` (nodes.py:1499-1525), the
 * strength: "lower values will maintain the structure of the initial image allowing for image to image sampling".
 */
export const DEFAULT_IMG2IMG_WORKFLOW_PATH: string = fileURLToPath(new URL('./default-img2img-workflow.json', import.meta.url));

export type WorkflowErrorCode = 'not_found' | 'unreadable' | 'invalid_json' | 'not_api_format' | 'no_prompt_placeholder' | 'no_init_image_placeholder';

/** A text-to-image workflow, or the image-to-image one (--comfy-img2img-workflow), which must take the starting image. */
export type WorkflowKind = 'txt2img' | 'img2img';

/** What a workflow is filled with besides the request: the name ComfyUI gave the uploaded starting image. */
export interface WorkflowExtras {
  initImage?: string;
  /** How many images the latent batch holds (EmptyLatentImage.batch_size, RepeatLatentBatch.amount); default 1. */
  batchSize?: number;
}

export type WorkflowResult =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; error: { code: WorkflowErrorCode; message: string } };

const PLACEHOLDER = /%(prompt|negative_prompt|steps|cfg|seed|width|height|init_image|denoise|batch_size)%/g;
const EXACT_PLACEHOLDER = /^%(prompt|negative_prompt|steps|cfg|seed|width|height|init_image|denoise|batch_size)%$/;

type PlaceholderName = 'prompt' | 'negative_prompt' | 'steps' | 'cfg' | 'seed' | 'width' | 'height' | 'init_image' | 'denoise' | 'batch_size';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readPlaceholder(request: ImageRequest, name: PlaceholderName, extras: WorkflowExtras): string | number {
  switch (name) {
    // LoadImage's `image`: the uploaded file as /upload/image named it, "subfolder/name" below ComfyUI's input folder.
    case 'init_image':
      // Stryker disable next-line StringLiteral: only a Vary's graph has %init_image%, and a Vary always has its uploaded name
      return extras.initImage ?? '';
    // KSampler's denoise: the strength of a Vary; 1 (all of it, ComfyUI's default) for an image from the prompt.
    case 'denoise':
      return request.init?.strength ?? 1;
    // EmptyLatentImage's batch_size (nodes.py:1164-1186) or RepeatLatentBatch's amount (nodes.py:1221-1236).
    case 'batch_size':
      return extras.batchSize ?? 1;
    case 'prompt':
      return request.prompt;
    case 'negative_prompt':
      return request.negativePrompt;
    case 'steps':
      return request.steps;
    case 'cfg':
      return request.cfg;
    case 'seed':
      return request.seed;
    case 'width':
      return request.width;
    case 'height':
      return request.height;
  }
}

function fillValue(value: unknown, request: ImageRequest, extras: WorkflowExtras): unknown {
  if (typeof value === 'string') {
    const exact = EXACT_PLACEHOLDER.exec(value);
    if (exact !== null) return readPlaceholder(request, exact[1] as PlaceholderName, extras);
    // One pass, so a prompt that itself contains "%seed%" is not substituted again.
    return value.replace(PLACEHOLDER, (_match, name: PlaceholderName) => String(readPlaceholder(request, name, extras)));
  }
  if (Array.isArray(value)) return value.map((item) => fillValue(item, request, extras));
  if (isRecord(value)) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, fillValue(item, request, extras)]));
  return value;
}

/**
 * A deep copy of `workflow` where strings equal to a placeholder become the value (numbers stay
 * numbers) and placeholders inside longer strings are replaced as text.
 */
export function fillWorkflow(workflow: unknown, request: ImageRequest, extras: WorkflowExtras = {}): unknown {
  return fillValue(workflow, request, extras);
}

/** Whether a workflow makes a latent batch of the size Easel asks (a `%batch_size%` placeholder). */
export function takesBatchSize(workflow: unknown): boolean {
  return containsPlaceholder(workflow, '%batch_size%');
}

function containsPlaceholder(value: unknown, placeholder: string): boolean {
  if (typeof value === 'string') return value.includes(placeholder);
  if (Array.isArray(value)) return value.some((item) => containsPlaceholder(item, placeholder));
  if (isRecord(value)) return Object.values(value).some((item) => containsPlaceholder(item, placeholder));
  return false;
}

/** The checkpoint the workflow loads, named as A1111 names models (no folder, no extension). */
export function findCheckpointName(workflow: unknown): string | undefined {
  if (!isRecord(workflow)) return undefined;
  for (const node of Object.values(workflow)) {
    if (!isRecord(node) || !isRecord(node['inputs'])) continue;
    const name = node['inputs']['ckpt_name'] ?? node['inputs']['unet_name'];
    // Stryker disable next-line Regex: .* from index 0 matches the same run up to the last slash (a name holds no newline)
    if (typeof name === 'string' && name !== '') return name.replace(/^.*[\\/]/, '').replace(/\.(safetensors|ckpt|pt|pth|gguf|sft)$/i, '');
  }
  return undefined;
}

const SAMPLER_NODES: Record<string, { seed: string }> = {
  // nodes.py: KSampler's seed input is `seed`, KSamplerAdvanced's `noise_seed`.
  KSampler: { seed: 'seed' },
  KSamplerAdvanced: { seed: 'noise_seed' },
};

/**
 * The seed, steps, CFG, sampler and scheduler the workflow's sampler nodes really had: a custom workflow may fix
 * them instead of taking %placeholders%. Seed, steps and CFG come from its KSampler / KSamplerAdvanced nodes; the
 * sampler and scheduler from every node that takes them (findChoiceNodes: a SamplerCustom graph names them in
 * KSamplerSelect and BasicScheduler). With several such nodes (a refiner, a hires pass) only the values they all
 * share are given; a value that comes from another node's output (a link) is not known, so not given.
 */
export function findSamplerSettings(workflow: unknown): { seed?: number; steps?: number; cfg?: number; sampler?: string; scheduler?: string } {
  if (!isRecord(workflow)) return {};
  const samplers = Object.values(workflow).filter(
    (node): node is { class_type: string; inputs: Record<string, unknown> } => isRecord(node) && typeof node['class_type'] === 'string' && Object.hasOwn(SAMPLER_NODES, node['class_type']) && isRecord(node['inputs']),
  );
  const shared = (values: unknown[]): unknown => (values.every((value) => value === values[0]) ? values[0] : undefined);
  const sharedInput = (read: (node: { class_type: string; inputs: Record<string, unknown> }) => unknown): unknown => shared(samplers.map(read));
  const settings: { seed?: number; steps?: number; cfg?: number; sampler?: string; scheduler?: string } = {};
  // Stryker disable next-line StringLiteral: every node that passes Object.hasOwn(SAMPLER_NODES, …) names its own seed input
  const seed = sharedInput((node) => node.inputs[SAMPLER_NODES[node.class_type]?.seed ?? 'seed']);
  const steps = sharedInput((node) => node.inputs['steps']);
  const cfg = sharedInput((node) => node.inputs['cfg']);
  // With no node at all every() is true of an empty list and values[0] is undefined: nothing is given.
  const sampler = shared(findChoiceNodes(workflow, 'sampler').map((node) => node.value));
  const scheduler = shared(findChoiceNodes(workflow, 'scheduler').map((node) => node.value));
  if (typeof seed === 'number') settings.seed = seed;
  if (typeof steps === 'number') settings.steps = steps;
  if (typeof cfg === 'number') settings.cfg = cfg;
  if (typeof sampler === 'string' && sampler !== '') settings.sampler = sampler;
  if (typeof scheduler === 'string' && scheduler !== '') settings.scheduler = scheduler;
  return settings;
}

/**
 * What a request may choose in the graph, and the node input each choice sets: CheckpointLoaderSimple's
 * `ckpt_name` (ComfyUI nodes.py:559-566), KSampler's `sampler_name` and `scheduler` (nodes.py:1499-1512; the same
 * in KSamplerAdvanced, nodes.py:1527-1543). Each is a combo input: ComfyUI refuses a value not in its list.
 */
export const MODEL_CHOICE_INPUTS = { checkpoint: 'ckpt_name', sampler: 'sampler_name', scheduler: 'scheduler' } as const;

export type ModelChoice = keyof typeof MODEL_CHOICE_INPUTS;

/** A node that takes a choice: its id, its class, and the input's value in the workflow (a name, or a link). */
export interface ChoiceNode {
  id: string;
  classType: string;
  value: unknown;
}

/**
 * Every node with the choice's input (MODEL_CHOICE_INPUTS), in the workflow's order, whether the value is
 * written in or linked from another node. Found by the input's name, not by class: a user workflow's own
 * loader (CheckpointLoader, unCLIPCheckpointLoader, a custom node with a `ckpt_name`) or sampler (KSamplerAdvanced,
 * KSamplerSelect with BasicScheduler) counts too. UNETLoader's `unet_name` is a diffusion model, not a
 * checkpoint: a workflow that loads only that has no checkpoint to choose.
 */
export function findChoiceNodes(workflow: unknown, choice: ModelChoice): ChoiceNode[] {
  if (!isRecord(workflow)) return [];
  const input = MODEL_CHOICE_INPUTS[choice];
  const nodes: ChoiceNode[] = [];
  for (const [id, node] of Object.entries(workflow)) {
    if (!isRecord(node) || typeof node['class_type'] !== 'string' || !isRecord(node['inputs']) || !Object.hasOwn(node['inputs'], input)) continue;
    nodes.push({ id, classType: node['class_type'], value: node['inputs'][input] });
  }
  return nodes;
}

const CHOICE_NODES: Record<ModelChoice, string> = {
  checkpoint: 'checkpoint loader (no node with a ckpt_name input, such as CheckpointLoaderSimple)',
  sampler: 'sampler node (no node with a sampler_name input, such as KSampler)',
  scheduler: 'scheduler (no node with a scheduler input, such as KSampler)',
};

/**
 * Where a choice goes: the nodes it sets, or why the workflow has none (the end of a sentence, remedy included).
 * Every sampler and scheduler node takes the request's sampler and scheduler (a refiner or hires pass samples like
 * the first pass, as A1111's does). Several checkpoint loaders are one choice only when they all load the same
 * checkpoint; loaders of different ones (SDXL's base and refiner) leave no way to tell which one a request means.
 */
export function findChoiceTarget(workflow: unknown, choice: ModelChoice): { ok: true; value: ChoiceNode[] } | { ok: false; error: string } {
  const nodes = findChoiceNodes(workflow, choice);
  if (nodes.length === 0) return { ok: false, error: `the ComfyUI workflow has no ${CHOICE_NODES[choice]}. Leave the ${choice} unset, or set --comfy-workflow to a workflow that has one.` };
  const first = JSON.stringify(nodes[0]?.value);
  if (choice === 'checkpoint' && nodes.some((loader) => JSON.stringify(loader.value) !== first)) {
    const ids = nodes.map((loader) => loader.id).join(', ');
    return { ok: false, error: `the ComfyUI workflow loads different checkpoints (nodes ${ids}), so Easel cannot tell which one to replace. Leave the checkpoint unset, or use a workflow with one checkpoint loader.` };
  }
  return { ok: true, value: nodes };
}

/** The workflow's own value of a choice: the name its nodes share, written in; undefined when none or a link. */
export function findOwnChoice(workflow: unknown, choice: ModelChoice): string | undefined {
  const target = findChoiceTarget(workflow, choice);
  if (!target.ok) return undefined;
  const value = target.value[0]?.value;
  return typeof value === 'string' && target.value.every((node) => node.value === value) ? value : undefined;
}

export type ModelChoiceResult = { ok: true; value: unknown } | { ok: false; error: { choice: ModelChoice; message: string } };

/**
 * A copy of `workflow` whose choice inputs hold the request's checkpoint, sampler and scheduler, each exactly as
 * listModels names it (ComfyUI's own names: a checkpoint with its folder and extension). A choice the request
 * leaves out keeps the workflow's own value. A choice the workflow has no node for (findChoiceTarget) cannot be
 * honoured: an error saying so, rather than an image made otherwise than asked.
 */
export function applyModelChoices(workflow: unknown, request: Pick<ImageRequest, ModelChoice>): ModelChoiceResult {
  const copy: unknown = structuredClone(workflow);
  for (const choice of Object.keys(MODEL_CHOICE_INPUTS) as ModelChoice[]) {
    const name = request[choice];
    if (name === undefined) continue;
    const target = findChoiceTarget(copy, choice);
    if (!target.ok) return { ok: false, error: { choice, message: `Easel cannot paint with the ${choice} "${name}": ${target.error}` } };
    for (const node of target.value) {
      const inputs = (copy as Record<string, Record<string, unknown>>)[node.id]?.['inputs'];
      // Stryker disable next-line ConditionalExpression: findChoiceNodes gives only nodes whose inputs are a record
      if (isRecord(inputs)) inputs[MODEL_CHOICE_INPUTS[choice]] = name;
    }
  }
  return { ok: true, value: copy };
}

/**
 * Reads an API-format workflow file and checks that Easel can drive it: every workflow takes %prompt%, and an
 * image-to-image one (`kind` img2img) also %init_image% (LoadImage's image) and %denoise% (KSampler's denoise).
 */
export async function loadWorkflow(path: string, kind: WorkflowKind = 'txt2img'): Promise<WorkflowResult> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOENT') {
      return {
        ok: false,
        error: {
          code: 'not_found',
          message: `The ComfyUI workflow file ${path} does not exist. Export one from ComfyUI with "Save (API Format)" or leave the option out to use Easel's default.`,
        },
      };
    }
    return { ok: false, error: { code: 'unreadable', message: `The ComfyUI workflow file ${path} cannot be read (${String(code ?? error)}); check its permissions.` } };
  }
  let workflow: unknown;
  try {
    workflow = JSON.parse(text);
  } catch (error) {
    return {
      ok: false,
      error: {
        code: 'invalid_json',
        message: `The ComfyUI workflow file ${path} is not valid JSON (${(error as Error).message}); export it again with "Save (API Format)".`,
      },
    };
  }
  if (!isRecord(workflow) || Array.isArray(workflow['nodes'])) {
    return {
      ok: false,
      error: {
        code: 'not_api_format',
        message: `The ComfyUI workflow file ${path} is not in API format (it looks like a UI workflow). In ComfyUI use "Save (API Format)" (enable Dev mode in the settings if the menu lacks it).`,
      },
    };
  }
  if (!containsPlaceholder(workflow, '%prompt%')) {
    return {
      ok: false,
      error: {
        code: 'no_prompt_placeholder',
        message: `The ComfyUI workflow file ${path} has no "%prompt%" placeholder, so Easel's prompt would be ignored. Set the positive CLIPTextEncode text to %prompt% (and optionally %negative_prompt%, %seed%, %steps%, %cfg%, %width%, %height%).`,
      },
    };
  }
  if (kind === 'img2img' && (!containsPlaceholder(workflow, '%init_image%') || !containsPlaceholder(workflow, '%denoise%'))) {
    return {
      ok: false,
      error: {
        code: 'no_init_image_placeholder',
        message: `The ComfyUI image-to-image workflow file ${path} needs "%init_image%" (a LoadImage node's image) and "%denoise%" (the KSampler's denoise), so Easel can hand it the image to vary and how much to change it.`,
      },
    };
  }
  return { ok: true, value: workflow };
}

export function loadDefaultWorkflow(): Promise<WorkflowResult> {
  return loadWorkflow(DEFAULT_WORKFLOW_PATH);
}
