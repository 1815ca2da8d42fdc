// Each adapter's batch (generateBatch), against the fakes and scripted servers: A1111's batch_size and the grid it
// never keeps, ComfyUI's latent batch (and one prompt per seed for a workflow without %batch_size%), `n` where the
// server honours it, and none for LocalAI, whose `n` repeats one seed.
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { createComfyUiBackend, DEFAULT_IMG2IMG_WORKFLOW_PATH, loadWorkflow } from '../../../server/comfyui/index.ts';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { decodeSolidPng, insertTextChunk, makePng } from '../../fakes/png-bytes.ts';
import { loadShippedWorkflow, serveComfy } from './comfyui-helpers.ts';
import { REQUEST, expectBackendError, recordProgress, run, serveRoutes, startFakeA1111, startFakeComfyUi, startFakeLocalAi } from './helpers.ts';

const BATCH = { ...REQUEST, count: 3 };
const b64 = (png: Uint8Array) => Buffer.from(png).toString('base64');

describe('A1111', () => {
  it('one request with batch_size; each result its seed from all_seeds and its own text', async () => {
    const fake = await startFakeA1111();
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const progress = recordProgress();
    const results = await backend.generateBatch!(BATCH, run(undefined, progress.onProgress));
    expect(results.map((result) => result.seed)).toEqual([REQUEST.seed, REQUEST.seed + 1, REQUEST.seed + 2]);
    expect(results.map((result) => decodeSolidPng(result.png).rgb[0])).toEqual([0, 1, 2].map((index) => (REQUEST.seed + index) & 0xff));
    expect(fake.requests.filter((request) => request.path === '/sdapi/v1/txt2img').map((request) => request.body)).toEqual([expect.objectContaining({ batch_size: 3, n_iter: 1 })]);
  });

  it('never keeps a grid: index_of_first_image skips it, and a server that does not say keeps the last images', async () => {
    const grid = makePng(16, 8, [255, 255, 255]);
    const [a, b] = [makePng(8, 8, [1, 1, 1]), makePng(8, 8, [2, 2, 2])];
    const info = (extra: Record<string, unknown>) => JSON.stringify({ seed: 5, all_seeds: [5, 6], infotexts: ['grid', 'a', 'b'], ...extra });
    const said = await serveRoutes({ '/sdapi/v1/txt2img': { json: { images: [b64(grid), b64(a), b64(b)], parameters: {}, info: info({ index_of_first_image: 1 }) } } });
    const withGrid = await createA1111Backend({ url: said.url, pollIntervalMs: 3_600_000 }).generateBatch!({ ...REQUEST, count: 2 }, run());
    expect(withGrid.map((result) => [decodeSolidPng(result.png).rgb[0], result.seed])).toEqual([
      [1, 5],
      [2, 6],
    ]);
    const silent = await serveRoutes({ '/sdapi/v1/txt2img': { json: { images: [b64(grid), b64(a), b64(b)], parameters: {}, info: JSON.stringify({ all_seeds: [5, 6] }) } } });
    const guessed = await createA1111Backend({ url: silent.url, pollIntervalMs: 3_600_000 }).generateBatch!({ ...REQUEST, count: 2 }, run());
    expect(guessed.map((result) => decodeSolidPng(result.png).rgb[0])).toEqual([1, 2]);
  });

  it('the fake returns the grid first only to a request that saves its images, as A1111 does', async () => {
    const fake = await startFakeA1111({ stepDelayMs: 1 });
    const ask = async (extra: Record<string, unknown>) => {
      const response = await fetch(`${fake.url}/sdapi/v1/txt2img`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'x', steps: 2, width: 8, height: 8, seed: 1, batch_size: 2, ...extra }) });
      const body = (await response.json()) as { images: string[]; info: string };
      return { count: body.images.length, first: (JSON.parse(body.info) as { index_of_first_image: number }).index_of_first_image };
    };
    expect(await ask({})).toEqual({ count: 2, first: 0 });
    expect(await ask({ save_images: true })).toEqual({ count: 3, first: 1 });
  });

  it("reads each image's own infotext past a grid: its scheduler", async () => {
    const png = insertTextChunk(makePng(8, 8), 'parameters', 'p\nSteps: 4, Sampler: Euler, Schedule type: Karras, CFG scale: 7.0, Seed: 6, Size: 8x8', 'pillow');
    const server = await serveRoutes({
      '/sdapi/v1/txt2img': { json: { images: [b64(makePng(8, 8)), b64(png), b64(png)], parameters: {}, info: JSON.stringify({ index_of_first_image: 1, all_seeds: [5, 6], infotexts: ['grid', 'x', 'p\nSteps: 4, Sampler: Euler, Schedule type: Karras, CFG scale: 7.0, Seed: 6, Size: 8x8'] }) } },
    });
    const results = await createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 }).generateBatch!({ ...REQUEST, count: 2 }, run());
    expect(results[1]).toMatchObject({ seed: 6, scheduler: 'Karras' });
  });
});

describe('ComfyUI', () => {
  it('a latent batch: EmptyLatentImage.batch_size, every file of SaveImage, the seed claimed by the first only', async () => {
    const comfy = await startFakeComfyUi({ stepDelayMs: 1 });
    const backend = createComfyUiBackend({ url: comfy.url, workflow: await loadShippedWorkflow() });
    const results = await backend.generateBatch!(BATCH, run());
    expect(comfy.workflows).toHaveLength(1);
    expect((comfy.workflows[0] as Record<string, { inputs: Record<string, unknown> }>)['5']?.inputs['batch_size']).toBe(3);
    expect(results.map((result) => result.seed)).toEqual([REQUEST.seed, undefined, undefined]);
    expect(results.every((result) => result.steps === REQUEST.steps)).toBe(true);
  });

  it('workflows without %batch_size%: no batch of its own, so the core makes (and saves) one image per seed', async () => {
    const workflow = await loadShippedWorkflow();
    (workflow['5'] as { inputs: Record<string, unknown> }).inputs['batch_size'] = 1;
    expect(createComfyUiBackend({ url: 'http://127.0.0.1:1', workflow }).generateBatch).toBeUndefined();
    expect(createComfyUiBackend({ url: 'http://127.0.0.1:1', workflow, img2imgWorkflow: workflow }).generateBatch).toBeUndefined();
  });

  it('a cancel in a batch of a graph without %batch_size% (the other has it) keeps the images made before it', async () => {
    const comfy = await startFakeComfyUi({ stepDelayMs: 5 });
    const workflow = await loadShippedWorkflow();
    (workflow['5'] as { inputs: Record<string, unknown> }).inputs['batch_size'] = 1;
    const backend = createComfyUiBackend({ url: comfy.url, workflow, img2imgWorkflow: await loadShippedWorkflow() });
    const controller = new AbortController();
    // Cancelled once the second image is under way.
    const results = await backend.generateBatch!(BATCH, run(controller.signal, (progress) => {
      if ((progress.fraction ?? 0) > 0.4) controller.abort();
    }));
    expect(results.map((result) => result.seed)).toEqual([REQUEST.seed]);
  });

  it('a failure after the first image of a batch made prompt by prompt fails the batch; a cancel before any image is a cancel', async () => {
    const workflow = await loadShippedWorkflow();
    (workflow['5'] as { inputs: Record<string, unknown> }).inputs['batch_size'] = 1;
    // ComfyUI's refusal of a prompt: HTTP 400 with error and node_errors (server.py, post_prompt).
    const refusal = { status: 400, json: { error: { type: 'prompt_outputs_failed_validation', message: 'Prompt outputs failed validation', details: '', extra_info: {} }, node_errors: {} } };
    const server = await serveComfy({
      routes: { '/prompt': (request, count) => (count === 2 ? refusal : { json: { prompt_id: (request.body as { prompt_id: string }).prompt_id, number: count, node_errors: {} } }) },
    });
    const failing = createComfyUiBackend({ url: server.url, workflow, img2imgWorkflow: await loadShippedWorkflow() });
    await expectBackendError(failing.generateBatch!(BATCH, run()), 'backend_error');
    expect(server.prompts).toHaveLength(2);

    const comfy = await startFakeComfyUi({ stepDelayMs: 5 });
    const backend = createComfyUiBackend({ url: comfy.url, workflow, img2imgWorkflow: await loadShippedWorkflow() });
    const controller = new AbortController();
    await expectBackendError(backend.generateBatch!(BATCH, run(controller.signal, () => controller.abort())), 'cancelled');
  });

  it('a Vary batch follows the image-to-image graph: without %batch_size% there, one prompt per seed even though text to image has it', async () => {
    const comfy = await startFakeComfyUi({ stepDelayMs: 1 });
    const img2img = await loadWorkflow(DEFAULT_IMG2IMG_WORKFLOW_PATH, 'img2img');
    if (!img2img.ok) throw new Error(img2img.error.message);
    (img2img.value as Record<string, { inputs: Record<string, unknown> }>)['13']!.inputs['amount'] = 1;
    const backend = createComfyUiBackend({ url: comfy.url, workflow: await loadShippedWorkflow(), img2imgWorkflow: img2img.value });
    const results = await backend.generateBatch!({ ...REQUEST, count: 2, init: { png: makePng(64, 96), strength: 0.5 } }, run());
    expect(comfy.workflows).toHaveLength(2);
    expect(results.map((result) => result.seed)).toEqual([REQUEST.seed, REQUEST.seed + 1]);
  });

  it('a workflow without %batch_size% for text to image only: one prompt per seed, each image its own seed, progress across the batch', async () => {
    const comfy = await startFakeComfyUi({ stepDelayMs: 1 });
    const workflow = await loadShippedWorkflow();
    (workflow['5'] as { inputs: Record<string, unknown> }).inputs['batch_size'] = 1;
    const backend = createComfyUiBackend({ url: comfy.url, workflow, img2imgWorkflow: await loadShippedWorkflow() });
    const progress = recordProgress();
    const results = await backend.generateBatch!(BATCH, run(undefined, progress.onProgress));
    expect(comfy.workflows).toHaveLength(3);
    expect(results.map((result) => result.seed)).toEqual([REQUEST.seed, REQUEST.seed + 1, REQUEST.seed + 2]);
    const fractions = progress.events.map((event) => event.fraction ?? 0);
    expect(fractions.at(-1)).toBe(1);
    expect(fractions.every((fraction, index) => index === 0 || fraction >= fractions[index - 1]!)).toBe(true);
    expect(progress.events.every((event) => event.step === undefined)).toBe(true);
  });
});

describe('the OpenAI-compatible adapter', () => {
  it('offers a batch only where `n` makes different images: not LocalAI', async () => {
    const localai = await startFakeLocalAi();
    expect(createOpenAiImagesBackend({ url: localai.url, dialect: 'localai' }).generateBatch).toBeUndefined();
    expect(createOpenAiImagesBackend({ url: localai.url }).generateBatch).toBeTypeOf('function');
  });
});
