// Choosing what ComfyUI paints with: listModels reads the checkpoint, sampler and scheduler lists of the
// workflow's own nodes from /object_info (either way ComfyUI writes a combo), and generate sets the request's
// choices in the graph, leaves the workflow's own when the request has none, and says so when the workflow has
// nowhere to put one or ComfyUI refuses a name.
import { describe, expect, it } from 'vitest';
import { createComfyUiBackend } from '../../../server/comfyui/index.ts';
import type { ImageBackend, ImageModelOptions } from '../../../server/core/ports.ts';
import { COMFY_SAMPLERS, COMFY_SCHEDULERS } from '../../fakes/fake-comfyui.ts';
import { REQUEST, expectBackendError, findClosedUrl, run, startFakeComfyUi } from './helpers.ts';
import { historyEntry, loadShippedWorkflow, readNode, serveComfy } from './comfyui-helpers.ts';

const workflow = await loadShippedWorkflow();
const SDXL = 'SDXL/sd_xl_base_1.0.safetensors';
const SD15 = 'v1-5-pruned-emaonly.safetensors';

function listModels(backend: ImageBackend, signal?: AbortSignal): Promise<ImageModelOptions> {
  if (backend.listModels === undefined) throw new Error('the ComfyUI backend has no listModels');
  return backend.listModels(signal);
}

/** The shipped graph painting with a diffusion model (UNETLoader) instead of a checkpoint: no ckpt_name anywhere. */
function unetWorkflow(): Record<string, unknown> {
  const edited = structuredClone(workflow);
  edited['4'] = { class_type: 'UNETLoader', inputs: { unet_name: 'flux1-dev.safetensors', weight_dtype: 'default' } };
  return edited;
}

describe('listModels', () => {
  it('lists the checkpoint loader’s and the KSampler’s names as ComfyUI writes them, [[names…], {…}]', async () => {
    const fake = await startFakeComfyUi({ checkpoints: [SDXL, SD15] });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    expect(await listModels(backend)).toEqual({ checkpoints: [SDXL, SD15], current: SD15, samplers: COMFY_SAMPLERS, schedulers: COMFY_SCHEDULERS });
    // One class each: KSampler's one answer gives both its samplers and its schedulers.
    expect(fake.requests.map((request) => `${request.method} ${request.path}`).sort()).toEqual(['GET /object_info/CheckpointLoaderSimple', 'GET /object_info/KSampler']);
  });

  it('reads the newer ["COMBO", {"options": [names…]}] form the same way', async () => {
    const fake = await startFakeComfyUi({ checkpoints: [SD15, SDXL], samplers: ['euler', 'dpmpp_2m'], schedulers: ['karras'], comboInputs: 'options' });
    const raw = (await (await fetch(`${fake.url}/object_info/KSampler`)).json()) as { KSampler: { input: { required: Record<string, unknown> } } };
    expect(raw.KSampler.input.required['sampler_name']).toEqual(['COMBO', expect.objectContaining({ options: ['euler', 'dpmpp_2m'] })]);

    const backend = createComfyUiBackend({ url: fake.url, workflow });

    expect(await listModels(backend)).toEqual({ checkpoints: [SD15, SDXL], current: SD15, samplers: ['euler', 'dpmpp_2m'], schedulers: ['karras'] });
  });

  it('the fake answers /object_info as ComfyUI does: every class, one class, or {} for a class it lacks', async () => {
    const fake = await startFakeComfyUi({ checkpoints: [SD15], missingNodes: ['LoraLoader'] });
    const all = (await (await fetch(`${fake.url}/object_info`)).json()) as Record<string, { input: { required: Record<string, unknown> }; output: string[] }>;
    expect(all['CheckpointLoaderSimple']?.input.required['ckpt_name']).toEqual([[SD15], { tooltip: 'The name of the checkpoint (model) to load.' }]);
    expect(all['CheckpointLoaderSimple']?.output).toEqual(['MODEL', 'CLIP', 'VAE']);
    expect(all['KSamplerAdvanced']?.input.required['scheduler']).toEqual([COMFY_SCHEDULERS]);
    expect(Object.keys(all)).not.toContain('LoraLoader');
    expect(await (await fetch(`${fake.url}/api/object_info/LoraLoader`)).json()).toEqual({});
    expect(Object.keys((await (await fetch(`${fake.url}/api/object_info/KSampler`)).json()) as object)).toEqual(['KSampler']);
  });

  it('current is null when the server lacks the workflow’s own checkpoint', async () => {
    const fake = await startFakeComfyUi({ checkpoints: [SDXL] });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    expect(await listModels(backend)).toMatchObject({ checkpoints: [SDXL], current: null });
  });

  it('asks for the classes of the workflow’s own loader and samplers, found by their inputs; names every sampler class takes', async () => {
    const custom = {
      '1': { class_type: 'CheckpointLoader|pysssss', inputs: { ckpt_name: 'dreamshaper_8.safetensors', prompt: '%prompt%' } },
      '2': { class_type: 'KSamplerSelect', inputs: { sampler_name: 'euler' } },
      '3': { class_type: 'BasicScheduler', inputs: { scheduler: 'simple', steps: '%steps%', denoise: 1, model: ['1', 0] } },
      '4': { class_type: 'SaveImage', inputs: { images: ['9', 0], filename_prefix: 'easel' } },
      // A second sampler class, a hires pass that knows fewer samplers: a request's sampler goes to both.
      '5': { class_type: 'HiresSampler', inputs: { sampler_name: 'euler' } },
    };
    const server = await serveComfy({
      routes: {
        '/object_info/*': (request) => {
          const name = decodeURIComponent(request.path.slice('/object_info/'.length));
          const combo = { 'CheckpointLoader|pysssss': ['ckpt_name', ['dreamshaper_8.safetensors', 'sd15/anything-v5.ckpt']], KSamplerSelect: ['sampler_name', ['euler', 'lcm', 'heun']], HiresSampler: ['sampler_name', ['heun', 'lcm', 'ddim']], BasicScheduler: ['scheduler', ['simple', 'beta']] }[name];
          if (combo === undefined) return { json: {} };
          return { json: { [name]: { input: { required: { [combo[0] as string]: ['COMBO', { options: combo[1] }] } }, name } } };
        },
      },
    });
    const backend = createComfyUiBackend({ url: server.url, workflow: custom });

    expect(await listModels(backend)).toEqual({ checkpoints: ['dreamshaper_8.safetensors', 'sd15/anything-v5.ckpt'], current: 'dreamshaper_8.safetensors', samplers: ['lcm', 'heun'], schedulers: ['simple', 'beta'] });
    expect(server.requests.map((request) => request.path).sort()).toEqual(['/object_info/BasicScheduler', '/object_info/CheckpointLoader%7Cpysssss', '/object_info/HiresSampler', '/object_info/KSamplerSelect']);
  });

  it('a workflow with no checkpoint loader offers no checkpoint, and asks nothing about its UNETLoader', async () => {
    const fake = await startFakeComfyUi();
    const backend = createComfyUiBackend({ url: fake.url, workflow: unetWorkflow() });

    expect(await listModels(backend)).toEqual({ checkpoints: [], current: null, samplers: COMFY_SAMPLERS, schedulers: COMFY_SCHEDULERS });
    expect(fake.requests.map((request) => request.path)).toEqual(['/object_info/KSampler']);
  });

  it('a node class the server lacks: backend_error naming the class and the workflow’s node', async () => {
    const fake = await startFakeComfyUi({ missingNodes: ['KSampler'] });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const error = await expectBackendError(listModels(backend), 'backend_error');
    expect(error.message).toBe(
      `ComfyUI at ${fake.url} has no KSampler node, which the workflow uses (node 3). Install the custom node that provides it, or set --comfy-workflow to a workflow ComfyUI can run.`,
    );
  });

  it('a class the server lacks names only that class’s nodes, every one of them', async () => {
    // A hires pass: a second KSampler (node 10) and a sampler of another class (node 11) the server has.
    const hires = { ...structuredClone(workflow), '10': { class_type: 'KSampler', inputs: { sampler_name: 'euler', scheduler: 'normal' } }, '11': { class_type: 'HiresSampler', inputs: { sampler_name: 'euler' } } };
    const server = await serveComfy({
      routes: {
        '/object_info/*': (request) => {
          const name = decodeURIComponent(request.path.slice('/object_info/'.length));
          if (name === 'KSampler') return { json: {} };
          const input = name === 'HiresSampler' ? 'sampler_name' : 'ckpt_name';
          return { json: { [name]: { input: { required: { [input]: [['x']] } }, name } } };
        },
      },
    });
    const error = await expectBackendError(listModels(createComfyUiBackend({ url: server.url, workflow: hires })), 'backend_error');
    expect(error.message).toBe(
      `ComfyUI at ${server.url} has no KSampler node, which the workflow uses (node 3, 10). Install the custom node that provides it, or set --comfy-workflow to a workflow ComfyUI can run.`,
    );
  });

  it('an /object_info answer that is no JSON object, or an error without words: bad_response saying so', async () => {
    const garbled = await serveComfy({ routes: { '/object_info/*': { text: '<html>proxy</html>' } } });
    const unreadable = await expectBackendError(listModels(createComfyUiBackend({ url: garbled.url, workflow })), 'bad_response');
    expect(unreadable.message).toMatch(new RegExp(`^ComfyUI at ${garbled.url} sent an unreadable answer to GET /object_info/(CheckpointLoaderSimple|KSampler) \\(<html>proxy</html>\\)\\.`));
    const list = await serveComfy({ routes: { '/object_info/*': { json: ['KSampler'] } } });
    await expectBackendError(listModels(createComfyUiBackend({ url: list.url, workflow })), 'bad_response');
    const silent = await serveComfy({ routes: { '/object_info/*': { status: 500, text: '' } } });
    const failed = await expectBackendError(listModels(createComfyUiBackend({ url: silent.url, workflow })), 'bad_response');
    expect(failed.message).toMatch(/ with HTTP 500 \(no details\)\. Check that --image-url points to ComfyUI\.$/);
  });

  it('a server that is no ComfyUI (404), nothing listening, or no answer in time: bad_response, unreachable, timeout', async () => {
    const other = await serveComfy();
    const notComfy = await expectBackendError(listModels(createComfyUiBackend({ url: other.url, workflow })), 'bad_response');
    expect(notComfy.message).toMatch(new RegExp(`^ComfyUI at ${other.url} answered GET /object_info/(CheckpointLoaderSimple|KSampler) with HTTP 404 \\(404: Not Found\\)\\. Check that --image-url points to ComfyUI\\.$`));

    const closed = await findClosedUrl();
    const unreachable = await expectBackendError(listModels(createComfyUiBackend({ url: closed, workflow })), 'unreachable');
    expect(unreachable.message).toContain('--image-url');

    const hanging = await serveComfy({ routes: { '/object_info/*': 'hang' } });
    const slow = await expectBackendError(listModels(createComfyUiBackend({ url: hanging.url, workflow, healthTimeoutMs: 100 })), 'timeout');
    expect(slow.message).toBe(`ComfyUI at ${hanging.url} did not list its models within 100 ms; it may be busy. Try again.`);
  });

  it('a cancel while it waits: cancelled', async () => {
    const hanging = await serveComfy({ routes: { '/object_info/*': 'hang' } });
    const controller = new AbortController();
    const listing = listModels(createComfyUiBackend({ url: hanging.url, workflow }), controller.signal);
    setTimeout(() => controller.abort(), 20);

    await expectBackendError(listing, 'cancelled');
  });
});

describe('generate with a checkpoint, sampler and scheduler', () => {
  it('sets them in the graph it sends, and reports what ran', async () => {
    const fake = await startFakeComfyUi({ checkpoints: [SD15, SDXL] });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const result = await backend.generate({ ...REQUEST, checkpoint: SDXL, sampler: 'dpmpp_2m', scheduler: 'karras' }, run());

    expect(readNode(fake.workflows[0], '4').inputs['ckpt_name']).toBe(SDXL);
    expect(readNode(fake.workflows[0], '3').inputs).toMatchObject({ sampler_name: 'dpmpp_2m', scheduler: 'karras', seed: REQUEST.seed });
    expect(result).toMatchObject({ model: 'sd_xl_base_1.0', sampler: 'dpmpp_2m', scheduler: 'karras' });
    // The workflow is a template: it keeps its own names.
    expect(readNode(workflow, '4').inputs['ckpt_name']).toBe(SD15);
    expect(readNode(workflow, '3').inputs).toMatchObject({ sampler_name: 'euler', scheduler: 'normal' });
  });

  it('leaves the workflow’s own names for the choices a request leaves out', async () => {
    const fake = await startFakeComfyUi();
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const plain = await backend.generate(REQUEST, run());
    await backend.generate({ ...REQUEST, sampler: 'lcm' }, run());

    expect(readNode(fake.workflows[0], '4').inputs['ckpt_name']).toBe(SD15);
    expect(readNode(fake.workflows[0], '3').inputs).toMatchObject({ sampler_name: 'euler', scheduler: 'normal' });
    expect(plain).toMatchObject({ model: 'v1-5-pruned-emaonly', sampler: 'euler', scheduler: 'normal' });
    expect(readNode(fake.workflows[1], '4').inputs['ckpt_name']).toBe(SD15);
    expect(readNode(fake.workflows[1], '3').inputs).toMatchObject({ sampler_name: 'lcm', scheduler: 'normal' });
  });

  it('reports the scheduler and sampler the history says ran, not the ones sent', async () => {
    const server = await serveComfy({
      routes: {
        '/history/*': (request) => {
          const ran = structuredClone(workflow);
          Object.assign(readNode(ran, '3').inputs, { seed: 5, steps: 6, cfg: 7, sampler_name: 'heun', scheduler: 'beta' });
          return { json: historyEntry(decodeURIComponent(request.path.slice('/history/'.length)), ran) };
        },
      },
    });
    const backend = createComfyUiBackend({ url: server.url, workflow });

    const result = await backend.generate({ ...REQUEST, sampler: 'euler', scheduler: 'karras' }, run());

    expect(readNode(server.prompts[0]?.prompt, '3').inputs).toMatchObject({ sampler_name: 'euler', scheduler: 'karras' });
    expect(result).toMatchObject({ sampler: 'heun', scheduler: 'beta' });
  });

  it('a name ComfyUI does not have: its value_not_in_list refusal, in its words', async () => {
    const fake = await startFakeComfyUi({ checkpoints: [SD15, SDXL] });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const names = await expectBackendError(backend.generate({ ...REQUEST, checkpoint: 'sd_xl_base_1.0', sampler: 'euler_a' }, run()), 'backend_error');
    const scheduler = await expectBackendError(backend.generate({ ...REQUEST, scheduler: 'Karras' }, run()), 'backend_error');

    // A list of more than 20 names is not quoted (execution.py:904-908): the 42 samplers are "(list of length 42)".
    expect(names.message).toBe(
      `ComfyUI at ${fake.url} refused the workflow (HTTP 400): Prompt outputs failed validation — ` +
        `KSampler (node 3): Value not in list: sampler_name: 'euler_a' not in (list of length ${COMFY_SAMPLERS.length}) — ` +
        `CheckpointLoaderSimple (node 4): Value not in list: ckpt_name: 'sd_xl_base_1.0' not in ['${SD15}', '${SDXL}']. Fix the workflow or install the missing models/nodes.`,
    );
    expect(scheduler.message).toBe(
      `ComfyUI at ${fake.url} refused the workflow (HTTP 400): Prompt outputs failed validation — ` +
        `KSampler (node 3): Value not in list: scheduler: 'Karras' not in ['simple', 'sgm_uniform', 'karras', 'exponential', 'ddim_uniform', 'beta', 'normal', 'linear_quadratic', 'kl_optimal']. ` +
        'Fix the workflow or install the missing models/nodes.',
    );
    expect(fake.workflows).toEqual([]);
  });

  it('a checkpoint for a workflow with no checkpoint loader: backend_error before anything is sent', async () => {
    const fake = await startFakeComfyUi();
    const backend = createComfyUiBackend({ url: fake.url, workflow: unetWorkflow() });

    const error = await expectBackendError(backend.generate({ ...REQUEST, checkpoint: SDXL }, run()), 'backend_error');

    expect(error.message).toBe(
      `Easel cannot paint with the checkpoint "${SDXL}": the ComfyUI workflow has no checkpoint loader (no node with a ckpt_name input, such as CheckpointLoaderSimple). Leave the checkpoint unset, or set --comfy-workflow to a workflow that has one.`,
    );
    expect(fake.requests).toEqual([]);
  });

  it('a sampler or scheduler for a workflow with no node taking it: backend_error naming the input', async () => {
    const fake = await startFakeComfyUi();
    const noSampler = structuredClone(workflow);
    delete readNode(noSampler, '3').inputs['sampler_name'];
    delete readNode(noSampler, '3').inputs['scheduler'];
    const backend = createComfyUiBackend({ url: fake.url, workflow: noSampler });

    const sampler = await expectBackendError(backend.generate({ ...REQUEST, sampler: 'euler' }, run()), 'backend_error');
    const scheduler = await expectBackendError(backend.generate({ ...REQUEST, scheduler: 'karras' }, run()), 'backend_error');

    expect(sampler.message).toBe(
      'Easel cannot paint with the sampler "euler": the ComfyUI workflow has no sampler node (no node with a sampler_name input, such as KSampler). Leave the sampler unset, or set --comfy-workflow to a workflow that has one.',
    );
    expect(scheduler.message).toBe(
      'Easel cannot paint with the scheduler "karras": the ComfyUI workflow has no scheduler (no node with a scheduler input, such as KSampler). Leave the scheduler unset, or set --comfy-workflow to a workflow that has one.',
    );
    expect(fake.requests).toEqual([]);
  });
});
