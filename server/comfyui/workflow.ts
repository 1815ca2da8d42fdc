// ComfyUI workflows in API format ("Save (API Format)"): { [nodeId]: { class_type, inputs } }.
// Easel fills %placeholders% in a deep copy; everything else is the user's graph, untouched.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { ImageRequest } from '../core/ports.ts';

export const DEFAULT_WORKFLOW_PATH: string = fileURLToPath(new URL('./default-workflow.json', import.meta.url));

export type WorkflowErrorCode = 'not_found' | 'unreadable' | 'invalid_json' | 'not_api_format' | 'no_prompt_placeholder';

export type WorkflowResult =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; error: { code: WorkflowErrorCode; message: string } };

const PLACEHOLDER = /%(prompt|negative_prompt|steps|cfg|seed|width|height)%/g;
const EXACT_PLACEHOLDER = /^%(prompt|negative_prompt|steps|cfg|seed|width|height)%$/;

type PlaceholderName = 'prompt' | 'negative_prompt' | 'steps' | 'cfg' | 'seed' | 'width' | 'height';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readPlaceholder(request: ImageRequest, name: PlaceholderName): string | number {
  switch (name) {
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

function fillValue(value: unknown, request: ImageRequest): unknown {
  if (typeof value === 'string') {
    const exact = EXACT_PLACEHOLDER.exec(value);
    if (exact !== null) return readPlaceholder(request, exact[1] as PlaceholderName);
    // One pass, so a prompt that itself contains "%seed%" is not substituted again.
    return value.replace(PLACEHOLDER, (_match, name: PlaceholderName) => String(readPlaceholder(request, name)));
  }
  if (Array.isArray(value)) return value.map((item) => fillValue(item, request));
  if (isRecord(value)) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, fillValue(item, request)]));
  return value;
}

/**
 * A deep copy of `workflow` where strings equal to a placeholder become the value (numbers stay
 * numbers) and placeholders inside longer strings are replaced as text.
 */
export function fillWorkflow(workflow: unknown, request: ImageRequest): unknown {
  return fillValue(workflow, request);
}

function containsPromptPlaceholder(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('%prompt%');
  if (Array.isArray(value)) return value.some(containsPromptPlaceholder);
  if (isRecord(value)) return Object.values(value).some(containsPromptPlaceholder);
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
 * The seed, steps, CFG and sampler the workflow's sampler node really had: a custom workflow may fix them
 * instead of taking %placeholders%. With several sampler nodes (a refiner, a hires pass) only the values they
 * all share are given; a value that comes from another node's output (a link) is not known, so not given.
 */
export function findSamplerSettings(workflow: unknown): { seed?: number; steps?: number; cfg?: number; sampler?: string } {
  if (!isRecord(workflow)) return {};
  const samplers = Object.values(workflow).filter(
    (node): node is { class_type: string; inputs: Record<string, unknown> } => isRecord(node) && typeof node['class_type'] === 'string' && Object.hasOwn(SAMPLER_NODES, node['class_type']) && isRecord(node['inputs']),
  );
  // Stryker disable next-line ConditionalExpression: with no sampler every() is true of an empty list and values[0] is undefined: {} all the same
  if (samplers.length === 0) return {};
  const shared = (read: (node: { class_type: string; inputs: Record<string, unknown> }) => unknown): unknown => {
    const values = samplers.map(read);
    return values.every((value) => value === values[0]) ? values[0] : undefined;
  };
  const settings: { seed?: number; steps?: number; cfg?: number; sampler?: string } = {};
  // Stryker disable next-line StringLiteral: every node that passes Object.hasOwn(SAMPLER_NODES, …) names its own seed input
  const seed = shared((node) => node.inputs[SAMPLER_NODES[node.class_type]?.seed ?? 'seed']);
  const steps = shared((node) => node.inputs['steps']);
  const cfg = shared((node) => node.inputs['cfg']);
  const sampler = shared((node) => node.inputs['sampler_name']);
  if (typeof seed === 'number') settings.seed = seed;
  if (typeof steps === 'number') settings.steps = steps;
  if (typeof cfg === 'number') settings.cfg = cfg;
  if (typeof sampler === 'string' && sampler !== '') settings.sampler = sampler;
  return settings;
}

/** Reads an API-format workflow file and checks that Easel can drive it. */
export async function loadWorkflow(path: string): Promise<WorkflowResult> {
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
  if (!containsPromptPlaceholder(workflow)) {
    return {
      ok: false,
      error: {
        code: 'no_prompt_placeholder',
        message: `The ComfyUI workflow file ${path} has no "%prompt%" placeholder, so Easel's prompt would be ignored. Set the positive CLIPTextEncode text to %prompt% (and optionally %negative_prompt%, %seed%, %steps%, %cfg%, %width%, %height%).`,
      },
    };
  }
  return { ok: true, value: workflow };
}

export function loadDefaultWorkflow(): Promise<WorkflowResult> {
  return loadWorkflow(DEFAULT_WORKFLOW_PATH);
}
