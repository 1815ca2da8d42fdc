// What Easel reads from a ComfyUI workflow (the model and sampler settings a result reports) and what it says
// about a workflow file it cannot use, word for word. The gaps a mutation run of server/comfyui/workflow.ts showed.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findCheckpointName, findSamplerSettings, loadWorkflow } from '../../../server/comfyui/index.ts';

let tempDir: string;

beforeAll(async () => {
  tempDir = await mkdtemp(join(tmpdir(), 'easel-comfyui-workflow-'));
});

afterAll(async () => {
  await rm(tempDir, { recursive: true, force: true });
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
});

describe('loadWorkflow', () => {
  async function writeWorkflow(name: string, content: string): Promise<string> {
    const path = join(tempDir, name);
    await writeFile(path, content);
    return path;
  }

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
