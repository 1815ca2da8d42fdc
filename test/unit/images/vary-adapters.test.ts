// What each adapter sends for a Vary (ImageRequest.init), checked against the fakes, and what it says when its
// server cannot vary: A1111 and sd-server's /sdapi/v1/img2img, sd-server's /v1/images/edits, ComfyUI's upload and
// image-to-image graph, and LocalAI and OpenAI's API, which take no strength.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { createComfyUiBackend, DEFAULT_IMG2IMG_WORKFLOW_PATH, loadWorkflow } from '../../../server/comfyui/index.ts';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { decodeSolidPng, makePng } from '../../fakes/png-bytes.ts';
import { loadShippedWorkflow, readNode, serveComfy } from './comfyui-helpers.ts';
import { REQUEST, expectBackendError, run, serveRoutes, startFakeA1111, startFakeComfyUi, startFakeLocalAi, startFakeOpenAiImages, startFakeSdServer } from './helpers.ts';

const START = makePng(64, 96, [200, 100, 0]);
const VARY = { ...REQUEST, init: { png: START, strength: 0.35 } };

describe('A1111 and sd-server (/sdapi/v1)', () => {
  it('A1111: img2img with the PNG as base64 in init_images, denoising_strength and crop-and-resize', async () => {
    const fake = await startFakeA1111();
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    expect(backend.canVary).toBe(true);
    const result = await backend.generate(VARY, run());
    const call = fake.requests.find((request) => request.path === '/sdapi/v1/img2img');
    expect(call?.body).toEqual({
      prompt: REQUEST.prompt,
      negative_prompt: REQUEST.negativePrompt,
      steps: 6,
      cfg_scale: 7.5,
      seed: REQUEST.seed,
      width: 64,
      height: 96,
      batch_size: 1,
      n_iter: 1,
      init_images: [Buffer.from(START).toString('base64')],
      denoising_strength: 0.35,
      resize_mode: 1,
    });
    expect(fake.requests.some((request) => request.path === '/sdapi/v1/txt2img')).toBe(false);
    // 65 % of the starting colour is kept (the fake's img2img), and A1111's text says the strength.
    expect(decodeSolidPng(result.png).rgb[0]).toBe(Math.round(200 * 0.65 + (REQUEST.seed & 0xff) * 0.35));
  });

  it("A1111's refusal of the request is said in its words, naming img2img when the route is missing", async () => {
    const server = await serveRoutes({});
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    const error = await expectBackendError(backend.generate(VARY, run()), 'backend_error');
    expect(error.message).toBe(`The server at ${server.url} has no /sdapi/v1/img2img (HTTP 404: Not Found). Start AUTOMATIC1111 with --api, or point --image-url at it.`);
  });

  it('sd-server: the same route, its strength and init image taken', async () => {
    const sd = await startFakeSdServer({ stepDelayMs: 1 });
    const backend = createA1111Backend({ url: sd.url, pollIntervalMs: 5 });
    await backend.generate(VARY, run());
    expect(sd.runs.at(-1)).toMatchObject({ route: '/sdapi/v1/img2img', strength: 0.35, init: [200, 100, 0], width: 64, height: 96 });
  });
});

describe('the OpenAI-compatible adapter', () => {
  it('sd-server: /v1/images/edits, multipart, the strength in <sd_cpp_extra_args>; can vary once it knows', async () => {
    const sd = await startFakeSdServer({ stepDelayMs: 1 });
    const backend = createOpenAiImagesBackend({ url: sd.url });
    expect(backend.canVary).toBeUndefined();
    await backend.prepare?.(new AbortController().signal);
    expect(backend.canVary).toBe(true);
    const result = await backend.generate(VARY, run());
    expect(sd.runs.at(-1)).toMatchObject({ route: '/v1/images/edits', strength: 0.35, init: [200, 100, 0], seed: REQUEST.seed, steps: 6, width: 64, height: 96 });
    expect(result).toMatchObject({ seed: REQUEST.seed, steps: 6, cfg: 7.5 });
  });

  it("OpenAI's API: cannot, and says why; a request with an image is refused before it is sent", async () => {
    const openai = await startFakeOpenAiImages();
    const backend = createOpenAiImagesBackend({ url: openai.url });
    await backend.prepare?.(new AbortController().signal);
    expect(backend.canVary).toBe("This server speaks OpenAI's Images API, whose edits take no strength, so Easel cannot vary an image with it (AUTOMATIC1111, ComfyUI or stable-diffusion.cpp's sd-server can).");
    const error = await expectBackendError(backend.generate(VARY, run()), 'backend_error');
    expect(error.message).toBe(backend.canVary);
    expect(openai.requests.filter((request) => request.method === 'POST')).toEqual([]);
  });

  it('LocalAI: cannot from the start (no strength in its API), nothing sent', async () => {
    const localai = await startFakeLocalAi();
    const backend = createOpenAiImagesBackend({ url: localai.url, dialect: 'localai' });
    expect(backend.canVary).toMatch(/^LocalAI cannot vary an image by a chosen strength/);
    expect(backend.prepare).toBeUndefined();
    await expectBackendError(backend.generate({ ...VARY, seed: 5 }, run()), 'backend_error');
    expect(localai.runs).toEqual([]);
  });
});

describe('ComfyUI', () => {
  it('uploads the PNG to /upload/image and fills the image-to-image graph: LoadImage, ImageScale, denoise', async () => {
    const comfy = await startFakeComfyUi();
    const img2img = await loadWorkflow(DEFAULT_IMG2IMG_WORKFLOW_PATH, 'img2img');
    if (!img2img.ok) throw new Error(img2img.error.message);
    const backend = createComfyUiBackend({ url: comfy.url, workflow: await loadShippedWorkflow(), img2imgWorkflow: img2img.value });
    expect(backend.canVary).toBe(true);
    const result = await backend.generate(VARY, run());
    const [name] = [...comfy.inputFiles.keys()];
    const graph = comfy.workflows[0] as Record<string, { class_type: string; inputs: Record<string, unknown> }>;
    expect(graph['11']).toEqual({ class_type: 'LoadImage', inputs: { image: name }, _meta: { title: 'Load Image' } });
    expect(graph['12']?.inputs).toMatchObject({ width: 64, height: 96 });
    expect(graph['3']?.inputs).toMatchObject({ denoise: 0.35, seed: REQUEST.seed, latent_image: ['13', 0] });
    expect(graph['13']?.inputs).toEqual({ samples: ['10', 0], amount: 1 });
    expect(decodeSolidPng(result.png)).toMatchObject({ width: 64, height: 96 });
    // The same bytes again replace themselves: one file in the input folder.
    await backend.generate(VARY, run());
    expect(comfy.inputFiles.size).toBe(1);
  });

  it('without an image-to-image workflow it cannot, and says how to give one', async () => {
    const backend = createComfyUiBackend({ url: 'http://127.0.0.1:9', workflow: await loadShippedWorkflow() });
    expect(backend.canVary).toBe('Easel has no image-to-image workflow for ComfyUI, so it cannot start an image from another one: give one with --comfy-img2img-workflow.');
    await expectBackendError(backend.generate(VARY, run()), 'backend_error');
  });

  it('a refused upload is said with its status, and nothing is queued', async () => {
    const server = await serveRoutes({ '/upload/image': { status: 400, text: '' } });
    const img2img = JSON.parse(readFileSync(DEFAULT_IMG2IMG_WORKFLOW_PATH, 'utf8')) as unknown;
    const backend = createComfyUiBackend({ url: server.url, workflow: await loadShippedWorkflow(), img2imgWorkflow: img2img, healthTimeoutMs: 200 });
    // The WebSocket is opened after the upload: the refusal comes first.
    const error = await expectBackendError(backend.generate(VARY, run()), 'backend_error');
    expect(error.message).toBe(`ComfyUI at ${server.url} refused the image to vary (POST /upload/image, HTTP 400).`);
    expect(server.requests.map((request) => request.path)).toEqual(['/upload/image']);
  });

  it("a refused upload quotes ComfyUI's words when it gives some; white space alone is no words", async () => {
    const img2img = JSON.parse(readFileSync(DEFAULT_IMG2IMG_WORKFLOW_PATH, 'utf8')) as unknown;
    for (const [text, said] of [['Invalid image file', ': Invalid image file'], [' \n', '']] as const) {
      const server = await serveRoutes({ '/upload/image': { status: 500, text } });
      const backend = createComfyUiBackend({ url: server.url, workflow: await loadShippedWorkflow(), img2imgWorkflow: img2img, healthTimeoutMs: 200 });
      const error = await expectBackendError(backend.generate(VARY, run()), 'backend_error');
      expect(error.message).toBe(`ComfyUI at ${server.url} refused the image to vary (POST /upload/image, HTTP 500${said}).`);
    }
  });

  it("an upload answered without the file's name (none, an empty one, no JSON) is a bad_response quoting the answer, and nothing is queued", async () => {
    const img2img = JSON.parse(readFileSync(DEFAULT_IMG2IMG_WORKFLOW_PATH, 'utf8')) as unknown;
    for (const [answer, quoted] of [[{ json: { subfolder: 'easel', type: 'input' } }, '{"subfolder":"easel","type":"input"}'], [{ json: { name: '', subfolder: 'easel' } }, '{"name":"","subfolder":"easel"}'], [{ text: '' }, 'empty answer']] as const) {
      const server = await serveRoutes({ '/upload/image': answer });
      const backend = createComfyUiBackend({ url: server.url, workflow: await loadShippedWorkflow(), img2imgWorkflow: img2img, healthTimeoutMs: 200 });
      const error = await expectBackendError(backend.generate(VARY, run()), 'bad_response');
      expect(error.message).toBe(`ComfyUI at ${server.url} answered /upload/image without the file's name (${quoted}). Check that --image-url points to ComfyUI.`);
      expect(server.requests.map((request) => request.path)).toEqual(['/upload/image']);
    }
  });

  it('LoadImage takes the uploaded name below the subfolder ComfyUI answered, and the bare name without one', async () => {
    const img2img = JSON.parse(readFileSync(DEFAULT_IMG2IMG_WORKFLOW_PATH, 'utf8')) as unknown;
    const answers: [Record<string, unknown>, string][] = [
      [{ name: 'a.png', subfolder: 'easel', type: 'input' }, 'easel/a.png'],
      [{ name: 'a.png', subfolder: '', type: 'input' }, 'a.png'],
      // Not what ComfyUI answers, but nothing to put before the name.
      [{ name: 'a.png', type: 'input' }, 'a.png'],
      [{ name: 'a.png', subfolder: null, type: 'input' }, 'a.png'],
    ];
    for (const [answer, image] of answers) {
      const server = await serveComfy({ routes: { '/upload/image': { json: answer } } });
      const backend = createComfyUiBackend({ url: server.url, workflow: await loadShippedWorkflow(), img2imgWorkflow: img2img });
      await backend.generate(VARY, run());
      expect(readNode(server.prompts[0]?.prompt, '11').inputs).toEqual({ image });
    }
  });

  it('an image-to-image workflow file without %init_image% or %denoise% is refused at start, saying what it needs', async () => {
    const text2image = await loadWorkflow(DEFAULT_IMG2IMG_WORKFLOW_PATH.replace('default-img2img-workflow.json', 'default-workflow.json'), 'img2img');
    expect(text2image).toMatchObject({ ok: false, error: { code: 'no_init_image_placeholder' } });
    // Either placeholder alone is not enough.
    const shipped = readFileSync(DEFAULT_IMG2IMG_WORKFLOW_PATH, 'utf8');
    const folder = mkdtempSync(join(tmpdir(), 'easel-img2img-'));
    onTestFinished(() => rmSync(folder, { recursive: true, force: true }));
    const edits: [string, string][] = [['no-denoise.json', shipped.replace('"%denoise%"', '0.5')], ['no-init.json', shipped.replace('"%init_image%"', '"photo.png"')]];
    for (const [name, text] of edits) {
      const path = join(folder, name);
      writeFileSync(path, text);
      expect(await loadWorkflow(path, 'img2img')).toEqual({
        ok: false,
        error: {
          code: 'no_init_image_placeholder',
          message: `The ComfyUI image-to-image workflow file ${path} needs "%init_image%" (a LoadImage node's image) and "%denoise%" (the KSampler's denoise), so Easel can hand it the image to vary and how much to change it.`,
        },
      });
    }
    expect((await loadWorkflow(DEFAULT_IMG2IMG_WORKFLOW_PATH, 'img2img')).ok).toBe(true);
  });
});
