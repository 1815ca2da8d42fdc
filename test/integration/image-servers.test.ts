// Each image server as its real source shows it, through the whole app: the `image` event, the stored record
// and the PNG's `parameters` text say the same thing, and it is what the server really used, not what was asked.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_WORKFLOW_PATH } from '../../server/comfyui/index.ts';
import { parseA1111Parameters, readPngText } from '../../server/png/index.ts';
import { createFakeA1111, type FakeA1111Options } from '../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../fakes/fake-comfyui.ts';
import { createFakeLocalAi, type FakeLocalAiOptions } from '../fakes/fake-localai.ts';
import { createFakeOpenAiImages } from '../fakes/fake-openai-images.ts';
import { createFakeSdServer } from '../fakes/fake-sd-server.ts';
import { closeAfterEachTest, type TestEasel } from '../helpers/easel.ts';
import { readSse } from '../helpers/sse.ts';

const { track, atEnd, startEasel: easelWith } = closeAfterEachTest();

interface Made {
  event: Record<string, unknown>;
  record: Record<string, unknown>;
  parameters: string;
}

/** One image through POST …/generations: its event, its stored record and its PNG's parameters text. */
async function makeImage(easel: TestEasel, body: { prompt: string; settings?: Record<string, unknown> }): Promise<Made> {
  const id = await easel.newConversation();
  const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, body));
  const event = events.find((e) => e.type === 'image')?.data;
  if (event === undefined) throw new Error(`no image: ${JSON.stringify(events)}`);
  const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: Record<string, unknown>[] };
  const png = new Uint8Array(await (await easel.get(String(event['url']))).arrayBuffer());
  return { event, record: conversation.images[0]!, parameters: readPngText(png)['parameters'] ?? '' };
}

/** The three agree: every value the event claims is in the record and in the PNG, and nothing else is claimed. */
function expectAgreement({ event, record, parameters }: Made): void {
  // sd.cpp writes "Sampler: NONE" when it picked the model's default itself: no sampler is claimed.
  const parsed = parseA1111Parameters(parameters.replace(/, Sampler: NONE,/, ','));
  for (const key of ['seed', 'steps', 'cfg', 'sampler', 'scheduler', 'model'] as const) {
    expect(record[key], `record ${key}`).toEqual(event[key] ?? null);
    expect(parsed[key], `PNG ${key}`).toEqual(event[key]);
  }
  expect(parsed).toMatchObject({ prompt: event['prompt'], negativePrompt: event['negativePrompt'], width: event['width'], height: event['height'] });
  expect(record).toMatchObject({ prompt: event['prompt'], negativePrompt: event['negativePrompt'] });
}

describe('AUTOMATIC1111', () => {
  it("keeps A1111's own parameters text, and the event and record say what its info says", async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 2 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const made = await makeImage(easel, { prompt: 'a red fox', settings: { steps: 5, cfg: 7, seed: 42, negativePrompt: '' } });
    expect(made.parameters).toBe(
      'a red fox\nSteps: 5, Sampler: Euler, Schedule type: Automatic, CFG scale: 7.0, Seed: 42, Size: 512x512, Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, Version: v1.10.1',
    );
    expect(made.event).toMatchObject({ seed: 42, steps: 5, cfg: 7, sampler: 'Euler', model: 'v1-5-pruned-emaonly', negativePrompt: '' });
    expectAgreement(made);
  });

  it('with PNG info off in A1111, writes its own text in create_infotext form', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 2, enablePnginfo: false } satisfies FakeA1111Options));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const made = await makeImage(easel, { prompt: 'a red fox', settings: { steps: 5, cfg: 6, seed: 42, negativePrompt: 'blur, noise' } });
    // A1111's info still says the scheduler (its infotexts), and Easel's text says it where A1111's would.
    expect(made.parameters).toMatch(/^a red fox\nNegative prompt: blur, noise\nSteps: 5, Sampler: Euler, Schedule type: Automatic, CFG scale: 6\.0, Seed: 42, Size: 512x512, Model: v1-5-pruned-emaonly, Version: Easel \d+\.\d+\.\d+$/);
    expectAgreement(made);
  });
});

describe('ComfyUI', () => {
  it('records the steps and sampler the workflow really had, though the settings asked for others', async () => {
    const comfy = await track(createFakeComfyUi({ stepDelayMs: 1 }));
    const dir = mkdtempSync(join(tmpdir(), 'easel-workflow-'));
    atEnd(() => rmSync(dir, { recursive: true, force: true }));
    const workflow = JSON.parse(readFileSync(DEFAULT_WORKFLOW_PATH, 'utf8')) as Record<string, { inputs: Record<string, unknown> }>;
    workflow['3']!.inputs['steps'] = 4;
    workflow['3']!.inputs['sampler_name'] = 'dpmpp_2m';
    writeFileSync(join(dir, 'fixed-steps.json'), JSON.stringify(workflow));
    const easel = await easelWith(['--image-backend', 'comfyui', '--image-url', comfy.url, '--comfy-workflow', join(dir, 'fixed-steps.json')]);
    const made = await makeImage(easel, { prompt: 'a red fox', settings: { steps: 25, cfg: 6.5, seed: 77, width: 64, height: 64 } });
    expect(made.event).toMatchObject({ steps: 4, sampler: 'dpmpp_2m', cfg: 6.5, seed: 77, model: 'v1-5-pruned-emaonly' });
    expectAgreement(made);
  });
});

describe("stable-diffusion.cpp's sd-server (--image-backend a1111)", () => {
  it('records the 100 steps it made instead of the 120 asked, and keeps its own UTF-8 parameters text', async () => {
    const sd = await track(createFakeSdServer({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', sd.url]);
    const made = await makeImage(easel, { prompt: '猫が雪の中で, café', settings: { steps: 120, seed: 9, width: 256, height: 256 } });
    expect(sd.runs).toEqual([expect.objectContaining({ steps: 100, seed: 9 })]);
    expect(made.event).toMatchObject({ steps: 100, seed: 9, cfg: 7, prompt: '猫が雪の中で, café' });
    expect(made.event['sampler']).toBeUndefined();
    expect(made.parameters).toMatch(/^猫が雪の中で, café\nSteps: 100, CFG scale: 7\.000000, .*Version: stable-diffusion\.cpp, SDCPP: \{/);
    expectAgreement(made);
  });
});

describe("the openai backend against sd-server's /v1 route", () => {
  it("passes the settings in <sd_cpp_extra_args> and records what sd-server's own text says", async () => {
    const sd = await track(createFakeSdServer({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'openai', '--image-url', sd.url]);
    const made = await makeImage(easel, { prompt: 'a red fox', settings: { steps: 110, cfg: 5, seed: 1234, negativePrompt: 'blur' } });
    expect(sd.runs).toEqual([expect.objectContaining({ prompt: 'a red fox', negativePrompt: 'blur', steps: 100, cfg: 5, seed: 1234 })]);
    expect(made.event).toMatchObject({ steps: 100, cfg: 5, seed: 1234, negativePrompt: 'blur' });
    expectAgreement(made);
  });
});

describe('a server with only OpenAI’s API', () => {
  it('claims no seed, steps, CFG or negative prompt it never sent', async () => {
    const openai = await track(createFakeOpenAiImages());
    const easel = await easelWith(['--image-backend', 'openai', '--image-url', openai.url, '--image-model', 'sd-turbo']);
    const made = await makeImage(easel, { prompt: 'a red fox', settings: { seed: 5, steps: 30, negativePrompt: 'blur', width: 256, height: 256 } });
    expect(openai.requests.find((r) => r.path === '/v1/images/generations')?.body).toEqual({ prompt: 'a red fox', n: 1, size: '256x256', response_format: 'b64_json', model: 'sd-turbo' });
    expect(made.event).toEqual({ id: made.event['id'], url: made.event['url'], width: 256, height: 256, prompt: 'a red fox', negativePrompt: '', model: 'sd-turbo' });
    expect(made.record).toMatchObject({ seed: null, steps: null, cfg: null, sampler: null, negativePrompt: '' });
    expect(made.parameters).toMatch(/^a red fox\nSize: 256x256, Model: sd-turbo, Version: Easel \d+\.\d+\.\d+$/);
    expectAgreement(made);
  });
});

describe('LocalAI (--image-backend localai)', () => {
  async function setUp(options: FakeLocalAiOptions = {}) {
    const localai = await track(createFakeLocalAi(options));
    const easel = await easelWith(['--image-backend', 'localai', '--image-url', localai.url]);
    return { localai, easel };
  }

  it('the image is made with the steps, seed and negative prompt it records, and claims no CFG', async () => {
    const { localai, easel } = await setUp({ cfgScale: 4.5 });
    const made = await makeImage(easel, { prompt: 'a red fox', settings: { steps: 9, cfg: 7, seed: 2_000_000_000, negativePrompt: 'blur' } });
    expect(localai.runs).toEqual([expect.objectContaining({ prompt: 'a red fox', negativePrompt: 'blur', steps: 9, seedUsed: 2_000_000_000, random: false })]);
    expect(made.event).toMatchObject({ steps: 9, seed: 2_000_000_000, negativePrompt: 'blur' });
    expect(made.event['cfg']).toBeUndefined();
    expect(made.parameters).not.toContain('CFG scale');
    expectAgreement(made);
  });

  it('a random seed (−1) is drawn where LocalAI keeps it: 1 to 2147483647', async () => {
    const { localai, easel } = await setUp({ backend: 'diffusers' });
    // Ten draws from 0…4294967295 would all land in range by chance once in a thousand runs.
    for (let i = 0; i < 10; i++) {
      const made = await makeImage(easel, { prompt: 'a red fox', settings: { seed: -1, steps: 2 } });
      const run = localai.runs.at(-1)!;
      expect(run.random).toBe(false);
      expect(made.event['seed']).toBe(run.seedUsed);
      expect(run.seedUsed).toBeGreaterThanOrEqual(1);
      expect(run.seedUsed).toBeLessThanOrEqual(2_147_483_647);
    }
  });

  it('a fixed seed LocalAI cannot keep is refused before anything is sent, saying the range', async () => {
    const { localai, easel } = await setUp();
    const id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox', settings: { seed: 3_000_000_000 } }));
    expect(events.find((e) => e.type === 'error')?.data).toEqual({
      code: 'image_seed_out_of_range',
      message: expect.stringMatching(/^LocalAI at .* takes seeds from 1 to 2147483647 only, so seed 3000000000 cannot be used.*The prompt is kept/),
    });
    expect(localai.requests.filter((r) => r.path === '/v1/images/generations')).toEqual([]);
  });

  it('a "|" in the prompt cannot move words into the negative prompt; the record says what was sent', async () => {
    const { localai, easel } = await setUp();
    const made = await makeImage(easel, { prompt: 'a [cat|dog] portrait', settings: { negativePrompt: '', steps: 2 } });
    expect(localai.runs).toEqual([expect.objectContaining({ prompt: 'a [cat/dog] portrait', negativePrompt: '' })]);
    expect(made.event).toMatchObject({ prompt: 'a [cat/dog] portrait', negativePrompt: '' });
    expectAgreement(made);
  });
});

describe('--image-backend auto (the default with --image-url alone)', () => {
  it('finds sd-server, logs it, says so in /api/health, and makes the image with the a1111 backend', async () => {
    const sd = await track(createFakeSdServer({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-url', sd.url]);
    const health = (await (await easel.get('/api/health')).json()) as { images: Record<string, unknown> };
    expect(health.images).toMatchObject({ backend: 'a1111', url: sd.url, configured: true, reachable: true, auto: true, server: 'stable-diffusion.cpp sd-server' });
    expect(health.images['found']).toBe(`Found stable-diffusion.cpp sd-server at ${sd.url} (GET /sdcpp/v1/capabilities), so Easel uses --image-backend a1111.`);
    expect(String(health.images['detail'])).not.toContain('Found');
    await expect.poll(() => easel.logs.join('\n')).toContain(`--image-backend auto: stable-diffusion.cpp sd-server answers at ${sd.url} (GET /sdcpp/v1/capabilities); using the a1111 backend.`);
    const made = await makeImage(easel, { prompt: 'a red fox', settings: { steps: 3 } });
    expect(sd.requests.some((r) => r.path === '/sdapi/v1/txt2img')).toBe(true);
    expectAgreement(made);
  });

  it('finds LocalAI and draws the random seed inside its range on the very first image', async () => {
    const localai = await track(createFakeLocalAi());
    const easel = await easelWith(['--image-backend', 'auto', '--image-url', localai.url]);
    const made = await makeImage(easel, { prompt: 'a red fox', settings: { steps: 2, seed: -1 } });
    expect(localai.runs).toEqual([expect.objectContaining({ random: false, seedUsed: made.event['seed'] })]);
    expect(made.event['seed']).toBeLessThanOrEqual(2_147_483_647);
  });
});

describe('the checkpoint and sampler chosen per conversation reach each server, and the record says what it used', () => {
  async function choose(easel: TestEasel, settings: Record<string, unknown>): Promise<string> {
    const id = await easel.newConversation();
    const response = await easel.put(`/api/conversations/${id}/settings`, settings);
    expect(response.status, await response.clone().text()).toBe(200);
    return id;
  }

  async function listed(easel: TestEasel): Promise<{ checkpoints: Array<{ name: string; family: string | null }>; samplers: string[]; schedulers: string[] }> {
    return ((await (await easel.get('/api/models')).json()) as { image: never }).image;
  }

  it('ComfyUI: the loader and KSampler of the graph take the choice', async () => {
    const comfy = await track(createFakeComfyUi({ stepDelayMs: 1, checkpoints: ['v1-5-pruned-emaonly.safetensors', 'SDXL/sd_xl_base_1.0.safetensors'] }));
    const easel = await easelWith(['--image-backend', 'comfyui', '--image-url', comfy.url]);
    const image = await listed(easel);
    expect(image.checkpoints).toEqual([
      { name: 'v1-5-pruned-emaonly.safetensors', family: 'sd15' },
      { name: 'SDXL/sd_xl_base_1.0.safetensors', family: 'sdxl' },
    ]);
    expect(image.samplers).toContain('dpmpp_2m');
    const id = await choose(easel, { checkpoint: 'SDXL/sd_xl_base_1.0.safetensors', sampler: 'dpmpp_2m', scheduler: 'karras', steps: 3, width: 64, height: 64 });
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox' }));
    const graph = comfy.requests.find((request) => request.path === '/prompt')?.body as { prompt: Record<string, { class_type: string; inputs: Record<string, unknown> }> };
    const nodes = Object.values(graph.prompt);
    expect(nodes.find((node) => node.class_type === 'CheckpointLoaderSimple')?.inputs['ckpt_name']).toBe('SDXL/sd_xl_base_1.0.safetensors');
    expect(nodes.find((node) => node.class_type === 'KSampler')?.inputs).toMatchObject({ sampler_name: 'dpmpp_2m', scheduler: 'karras' });
    expect(events.find((event) => event.type === 'image')?.data).toMatchObject({ model: 'sd_xl_base_1.0', sampler: 'dpmpp_2m', scheduler: 'karras' });
  });

  it('AUTOMATIC1111: the scheduler chosen is sent, and the one it says it used is in the event, the record and the PNG', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 2 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const image = await listed(easel);
    expect(image.schedulers).toContain('Karras');
    expect(image.samplers).toContain('DPM++ 2M');
    const id = await choose(easel, { sampler: 'DPM++ 2M', scheduler: 'Karras', steps: 4, seed: 11 });
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox' }));
    expect(a1111.requests.find((request) => request.path === '/sdapi/v1/txt2img')?.body).toMatchObject({ sampler_name: 'DPM++ 2M', scheduler: 'Karras' });
    const event = events.find((e) => e.type === 'image')?.data;
    expect(event).toMatchObject({ sampler: 'DPM++ 2M', scheduler: 'Karras' });
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: Record<string, unknown>[] };
    expect(conversation.images[0]).toMatchObject({ sampler: 'DPM++ 2M', scheduler: 'Karras' });
    const png = new Uint8Array(await (await easel.get(String(event!['url']))).arrayBuffer());
    const parameters = readPngText(png)['parameters'] ?? '';
    expect(parameters).toContain('Sampler: DPM++ 2M, Schedule type: Karras,');
    expectAgreement({ event: event!, record: conversation.images[0]!, parameters });
  });

  it('LocalAI: the image models it lists, the one chosen sent as `model`', async () => {
    const localai = await track(createFakeLocalAi({ models: ['stablediffusion', 'flux.1-dev'], chatModels: ['llama-3.2-1b'] }));
    const easel = await easelWith(['--image-backend', 'localai', '--image-url', localai.url]);
    const image = await listed(easel);
    expect(image.checkpoints).toEqual([
      { name: 'stablediffusion', family: null },
      { name: 'flux.1-dev', family: 'flux' },
    ]);
    expect(image.samplers).toEqual([]);
    const refused = await easel.put(`/api/conversations/${await easel.newConversation()}/settings`, { sampler: 'euler' });
    expect(refused.status).toBe(422);
    const id = await choose(easel, { checkpoint: 'flux.1-dev', width: 256, height: 256 });
    // The family follows the checkpoint: Flux's CFG and size.
    expect(((await (await easel.get(`/api/conversations/${id}`)).json()) as { family: { id: string } }).family.id).toBe('flux');
    await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox' }));
    expect(localai.requests.find((request) => request.path === '/v1/images/generations')?.body).toMatchObject({ model: 'flux.1-dev' });
  });

  it('sd-server: its one model, current and chosen', async () => {
    const sd = await track(createFakeSdServer({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', sd.url]);
    const models = ((await (await easel.get('/api/models')).json()) as { image: { checkpoints: Array<{ name: string }>; current: string | null } }).image;
    expect(models.checkpoints).toHaveLength(1);
    expect(models.current).toBe(models.checkpoints[0]?.name);
  });
});
