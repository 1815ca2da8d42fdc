// The ComfyUI workflow: the one Easel ships and how it is filled in, what Easel reads back from a workflow (the
// model and sampler settings a result reports), and what it says of a workflow file it cannot use.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyModelChoices, fillWorkflow, findCheckpointName, findOwnChoice, findSamplerSettings, loadWorkflow, readComboOptions } from '../../../server/comfyui/index.ts';
import { REQUEST } from './helpers.ts';
import { loadShippedWorkflow, readNode } from './comfyui-helpers.ts';

const workflow = await loadShippedWorkflow();
let tempDir: string;

beforeAll(async () => {
  tempDir = await mkdtemp(join(tmpdir(), 'easel-comfyui-workflow-'));
});

afterAll(async () => {
  await rm(tempDir, { recursive: true, force: true });
});

describe('the shipped workflow and fillWorkflow', () => {
  it('ships a standard SD 1.5 text-to-image graph with every placeholder', () => {
    const classes = Object.values(workflow).map((node) => (node as { class_type: string }).class_type).sort();
    expect(classes).toEqual(['CLIPTextEncode', 'CLIPTextEncode', 'CheckpointLoaderSimple', 'EmptyLatentImage', 'KSampler', 'SaveImage', 'VAEDecode']);
    const text = JSON.stringify(workflow);
    for (const name of ['prompt', 'negative_prompt', 'steps', 'cfg', 'seed', 'width', 'height']) expect(text).toContain(`"%${name}%"`);
    expect(readNode(workflow, '9').inputs['filename_prefix']).toBe('easel');
  });

  it('fills numbers as numbers and leaves other values alone', () => {
    const filled = fillWorkflow({ a: { inputs: { n: '%steps%', s: 'x %cfg% y', keep: ['%', 5, null, true] } } }, REQUEST);
    expect(filled).toEqual({ a: { inputs: { n: 6, s: 'x 7.5 y', keep: ['%', 5, null, true] } } });
  });
});

describe('findCheckpointName', () => {
  it('names the model as A1111 does: no folder, no extension, from a checkpoint or a UNET loader', () => {
    const loader = (inputs: Record<string, unknown>) => ({ '4': { class_type: 'CheckpointLoaderSimple', inputs } });
    expect(findCheckpointName(loader({ ckpt_name: 'SDXL/sd_xl_base_1.0.safetensors' }))).toBe('sd_xl_base_1.0');
    expect(findCheckpointName(loader({ ckpt_name: 'SD15\\anime\\anything-v5.ckpt' }))).toBe('anything-v5');
    // Only the extension at the end goes.
    expect(findCheckpointName(loader({ ckpt_name: 'sd.pt-merge.safetensors' }))).toBe('sd.pt-merge');
    expect(findCheckpointName({ '12': { class_type: 'UNETLoader', inputs: { unet_name: 'flux1-dev.safetensors', weight_dtype: 'default' } } })).toBe('flux1-dev');
  });

  it('skips a loader with an empty name and takes the next one', () => {
    expect(findCheckpointName({ '1': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: '' } }, '2': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'dreamshaper_8.safetensors' } } })).toBe(
      'dreamshaper_8',
    );
  });
});

describe('findSamplerSettings', () => {
  it('with a base and a refiner sampler, gives only the values they share', () => {
    const workflow = {
      '3': { class_type: 'KSampler', inputs: { seed: 42, steps: 20, cfg: 7, sampler_name: 'euler' } },
      '10': { class_type: 'KSamplerAdvanced', inputs: { noise_seed: 42, steps: 30, cfg: 7, sampler_name: 'dpmpp_2m' } },
    };
    expect(findSamplerSettings(workflow)).toEqual({ seed: 42, cfg: 7 });
  });

  it('gives no sampler for an empty sampler_name', () => {
    expect(findSamplerSettings({ '3': { class_type: 'KSampler', inputs: { seed: 1, steps: 4, cfg: 2, sampler_name: '' } } })).toEqual({ seed: 1, steps: 4, cfg: 2 });
  });

  it('gives the scheduler, and reads sampler and scheduler from a SamplerCustom graph’s KSamplerSelect and BasicScheduler', () => {
    expect(findSamplerSettings({ '3': { class_type: 'KSampler', inputs: { seed: 1, steps: 4, cfg: 2, sampler_name: 'euler', scheduler: 'karras' } } })).toEqual({ seed: 1, steps: 4, cfg: 2, sampler: 'euler', scheduler: 'karras' });
    const custom = {
      '16': { class_type: 'KSamplerSelect', inputs: { sampler_name: 'dpmpp_2m' } },
      '17': { class_type: 'BasicScheduler', inputs: { scheduler: 'beta', steps: 20, denoise: 1, model: ['12', 0] } },
    };
    expect(findSamplerSettings(custom)).toEqual({ sampler: 'dpmpp_2m', scheduler: 'beta' });
    // A linked or an empty scheduler is not known.
    expect(findSamplerSettings({ '17': { class_type: 'BasicScheduler', inputs: { scheduler: ['20', 0] } } })).toEqual({});
    expect(findSamplerSettings({ '17': { class_type: 'BasicScheduler', inputs: { scheduler: '' } } })).toEqual({});
  });
});

describe('applyModelChoices', () => {
  const request = { checkpoint: 'SDXL/sd_xl_base_1.0.safetensors', sampler: 'dpmpp_2m', scheduler: 'karras' };

  it('sets the names in a copy; a choice left out keeps the workflow’s own', () => {
    const chosen = applyModelChoices(workflow, request);
    expect(chosen.ok).toBe(true);
    const value = chosen.ok ? chosen.value : {};
    expect(readNode(value, '4').inputs['ckpt_name']).toBe('SDXL/sd_xl_base_1.0.safetensors');
    expect(readNode(value, '3').inputs).toMatchObject({ sampler_name: 'dpmpp_2m', scheduler: 'karras' });
    expect(readNode(workflow, '4').inputs['ckpt_name']).toBe('v1-5-pruned-emaonly.safetensors');
    expect(applyModelChoices(workflow, {})).toEqual({ ok: true, value: workflow });
  });

  it('sets every sampler node, and several loaders of one checkpoint, but not loaders of different ones', () => {
    const twoPasses = {
      '1': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'a.safetensors' } },
      '2': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'a.safetensors' } },
      '3': { class_type: 'KSampler', inputs: { sampler_name: 'euler', scheduler: 'normal' } },
      '10': { class_type: 'KSamplerAdvanced', inputs: { sampler_name: 'heun', scheduler: 'simple' } },
    };
    const chosen = applyModelChoices(twoPasses, request);
    const value = chosen.ok ? chosen.value : {};
    for (const id of ['1', '2']) expect(readNode(value, id).inputs['ckpt_name']).toBe(request.checkpoint);
    for (const id of ['3', '10']) expect(readNode(value, id).inputs).toEqual({ sampler_name: 'dpmpp_2m', scheduler: 'karras' });
    expect(findOwnChoice(twoPasses, 'checkpoint')).toBe('a.safetensors');

    const baseAndRefiner = { ...twoPasses, '2': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'refiner.safetensors' } } };
    expect(applyModelChoices(baseAndRefiner, request)).toEqual({
      ok: false,
      error: {
        choice: 'checkpoint',
        message: `Easel cannot paint with the checkpoint "${request.checkpoint}": the ComfyUI workflow loads different checkpoints (nodes 1, 2), so Easel cannot tell which one to replace. Leave the checkpoint unset, or use a workflow with one checkpoint loader.`,
      },
    });
    expect(findOwnChoice(baseAndRefiner, 'checkpoint')).toBeUndefined();
    expect(applyModelChoices(baseAndRefiner, { sampler: 'lcm' }).ok).toBe(true);
    // Its own sampler only when every sampler node shares it.
    expect(findOwnChoice(twoPasses, 'sampler')).toBeUndefined();
    const shared = { ...twoPasses, '10': { class_type: 'KSamplerAdvanced', inputs: { sampler_name: 'euler', scheduler: 'simple' } } };
    expect(findOwnChoice(shared, 'sampler')).toBe('euler');
  });
});

describe('readComboOptions', () => {
  it('reads a combo in either shape, and [] for an input that is none or that the class lacks', () => {
    const answer = {
      Loader: { input: { required: { ckpt_name: [['a.ckpt', 'b.ckpt']], text: ['STRING', { multiline: true }] }, optional: { vae: ['COMBO', { options: ['v.pt', 3], multiselect: false }] } } },
    };
    expect(readComboOptions(answer, 'Loader', 'ckpt_name')).toEqual(['a.ckpt', 'b.ckpt']);
    expect(readComboOptions(answer, 'Loader', 'vae')).toEqual(['v.pt']);
    expect(readComboOptions(answer, 'Loader', 'text')).toEqual([]);
    expect(readComboOptions(answer, 'Loader', 'lora_name')).toEqual([]);
    // ComfyUI's answer for a class it does not have.
    expect(readComboOptions({}, 'Loader', 'ckpt_name')).toBeUndefined();
  });
});

describe('loadWorkflow', () => {
  async function writeWorkflow(name: string, content: string): Promise<string> {
    const path = join(tempDir, name);
    await writeFile(path, content);
    return path;
  }

  it('explains a missing file', async () => {
    const result = await loadWorkflow(join(tempDir, 'missing.json'));
    expect(result).toEqual({ ok: false, error: { code: 'not_found', message: expect.stringContaining('Save (API Format)') } });
  });

  it('explains a file that is not JSON', async () => {
    const path = join(tempDir, 'broken.json');
    await writeFile(path, '{ "3": { ');
    const result = await loadWorkflow(path);
    expect(result.ok ? 'ok' : result.error.code).toBe('invalid_json');
  });

  it('explains a UI-format workflow', async () => {
    const path = join(tempDir, 'ui.json');
    await writeFile(path, JSON.stringify({ last_node_id: 9, nodes: [{ id: 6, type: 'CLIPTextEncode', widgets_values: ['%prompt%'] }], links: [] }));
    const result = await loadWorkflow(path);
    expect(result.ok ? 'ok' : result.error.code).toBe('not_api_format');
  });

  it('explains a workflow without a %prompt% placeholder', async () => {
    const path = join(tempDir, 'no-prompt.json');
    const edited = structuredClone(workflow);
    readNode(edited, '6').inputs['text'] = 'a fixed prompt';
    await writeFile(path, JSON.stringify(edited));
    const result = await loadWorkflow(path);
    expect(result).toEqual({ ok: false, error: { code: 'no_prompt_placeholder', message: expect.stringContaining('%prompt%') } });
  });

  it('accepts %prompt% inside a longer string', async () => {
    const path = join(tempDir, 'embedded.json');
    const edited = structuredClone(workflow);
    readNode(edited, '6').inputs['text'] = 'masterpiece, %prompt%';
    await writeFile(path, JSON.stringify(edited));
    expect((await loadWorkflow(path)).ok).toBe(true);
  });

  it('accepts %prompt% inside a list input', async () => {
    // A list of strings, as some custom nodes take, beside a link ([node id, slot]).
    const workflow = { '1': { class_type: 'PromptList', inputs: { prompts: ['masterpiece', '%prompt%'], clip: ['4', 1] } } };
    const result = await loadWorkflow(await writeWorkflow('list.json', JSON.stringify(workflow)));
    expect(result).toEqual({ ok: true, value: workflow });
  });

  it('refuses a workflow with no %prompt% even when it has an empty list', async () => {
    const path = await writeWorkflow('empty-list.json', JSON.stringify({ '1': { class_type: 'Note', inputs: { tags: [] } } }));
    expect((await loadWorkflow(path)).ok).toBe(false);
  });

  it('a path it cannot read: the error code, and a hint about permissions', async () => {
    // A directory: readFile fails with EISDIR, not ENOENT.
    expect(await loadWorkflow(tempDir)).toEqual({
      ok: false,
      error: { code: 'unreadable', message: `The ComfyUI workflow file ${tempDir} cannot be read (EISDIR); check its permissions.` },
    });
  });

  it('a file that is not JSON: the parser’s words and how to export it again', async () => {
    const path = await writeWorkflow('broken.json', '{ "3": { ');
    let parserWords = '';
    try {
      JSON.parse('{ "3": { ');
    } catch (error) {
      parserWords = (error as Error).message;
    }
    expect(await loadWorkflow(path)).toEqual({
      ok: false,
      error: { code: 'invalid_json', message: `The ComfyUI workflow file ${path} is not valid JSON (${parserWords}); export it again with "Save (API Format)".` },
    });
  });

  it('a UI-format workflow: how to save the API format', async () => {
    const path = await writeWorkflow('ui.json', JSON.stringify({ last_node_id: 9, nodes: [{ id: 6, type: 'CLIPTextEncode', widgets_values: ['%prompt%'] }], links: [] }));
    expect(await loadWorkflow(path)).toEqual({
      ok: false,
      error: {
        code: 'not_api_format',
        message: `The ComfyUI workflow file ${path} is not in API format (it looks like a UI workflow). In ComfyUI use "Save (API Format)" (enable Dev mode in the settings if the menu lacks it).`,
      },
    });
  });
});
