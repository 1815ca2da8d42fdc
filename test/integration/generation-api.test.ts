import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseA1111Parameters, readPngText, readPngSize } from '../../server/png/index.ts';
import { createFakeA1111, type FakeA1111 } from '../fakes/fake-a1111.ts';
import { createFakeOllama, scriptReply } from '../fakes/fake-ollama.ts';
import { createFakeComfyUi } from '../fakes/fake-comfyui.ts';
import { createFakeOpenAiImages } from '../fakes/fake-openai-images.ts';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { iterateSse, readSse, type SseEvent } from '../helpers/sse.ts';

const READY = { prompt: 'a tabby cat in a wizard hat', generate_image: true, steps: 12, cfg: 6.5, seed: -1 };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(options: { a1111?: Parameters<typeof createFakeA1111>[0]; flags?: string[]; imageUrl?: string } = {}) {
  const ollama = await createFakeOllama();
  cleanups.push(() => ollama.close());
  const a1111 = await createFakeA1111({ stepDelayMs: 5, ...options.a1111 });
  cleanups.push(() => a1111.close());
  const easel = await startTestEasel({
    ollamaUrl: ollama.url,
    flags: ['--image-backend', 'a1111', '--image-url', options.imageUrl ?? a1111.url, ...(options.flags ?? [])],
  });
  cleanups.push(() => easel.close());
  return { ollama, a1111, easel };
}

function of(events: SseEvent[], type: string) {
  return events.filter((event) => event.type === type).map((event) => event.data);
}

function txt2img(a1111: FakeA1111) {
  return a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img');
}

async function chat(easel: TestEasel, id: string, text: string) {
  return readSse(await easel.post(`/api/conversations/${id}/messages`, { text }));
}

describe('automatic generation after a ready reply', () => {
  it('makes the image after the reply\'s done, on the same stream; resolves seed −1 and saves the settings in the PNG', async () => {
    const { ollama, a1111, easel } = await setUp({ a1111: { stepDelayMs: 60 } });
    ollama.enqueue(scriptReply('Perfect! Generating your image now.', READY));
    const id = await easel.newConversation();
    const events = await chat(easel, id, 'a cat in a wizard hat');

    expect(events.map((e) => e.type).filter((t) => t !== 'progress' && t !== 'delta')).toEqual(['started', 'metadata', 'pane', 'done', 'generation', 'image']);
    const progress = of(events, 'progress');
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress.at(-1)).toMatchObject({ steps: 12 });

    const image = of(events, 'image')[0]!;
    expect(image.seed).toEqual(expect.any(Number));
    expect(image.seed).not.toBe(-1);
    expect(image).toMatchObject({ width: 512, height: 512, prompt: READY.prompt, url: expect.stringMatching(/^\/images\/[a-f0-9]{32}\.png$/) });
    const sent = txt2img(a1111)[0]!.body as Record<string, unknown>;
    expect(sent).toMatchObject({ prompt: READY.prompt, steps: 12, cfg_scale: 6.5, seed: image.seed, width: 512, height: 512 });

    const response = await easel.get(String(image.url));
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toContain('immutable');
    const png = new Uint8Array(await response.arrayBuffer());
    expect(readPngSize(png)).toEqual({ ok: true, value: { width: 512, height: 512 } });
    const parameters = parseA1111Parameters(readPngText(png).parameters ?? '');
    expect(parameters).toMatchObject({ prompt: READY.prompt, steps: 12, cfg: 6.5, seed: image.seed, width: 512, height: 512 });

    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as any;
    expect(conversation.turns[1].images).toEqual([expect.objectContaining({ id: image.id, seed: image.seed, url: image.url })]);
  });

  it('does nothing when "Generate automatically" is off, or the model is not ready', async () => {
    const { ollama, a1111, easel } = await setUp();
    const id = await easel.newConversation();
    ollama.enqueue(scriptReply('Which cat?', { ...READY, generate_image: false }));
    expect(of(await chat(easel, id, 'a cat'), 'generation')).toEqual([]);
    ollama.enqueue(scriptReply('Ready but empty.', { ...READY, prompt: '' }));
    expect(of(await chat(easel, id, 'go'), 'generation')).toEqual([]);
    await easel.put(`/api/conversations/${id}/settings`, { autoGenerate: false });
    ollama.enqueue(scriptReply('Here it is.', READY));
    expect(of(await chat(easel, id, 'go'), 'generation')).toEqual([]);
    expect(txt2img(a1111)).toHaveLength(0);
  });

  it('--unload-llm asks Ollama to free the GPU before the image: every chat model it holds, another conversation\'s too', async () => {
    const { ollama, a1111, easel } = await setUp({ flags: ['--unload-llm'] });
    ollama.enqueue(scriptReply('Go!', READY));
    const id = await easel.newConversation();
    await chat(easel, id, 'a cat');
    expect(ollama.unloads).toEqual(['mistral:7b']);
    expect(txt2img(a1111)).toHaveLength(1);
    // Another conversation chats with its own model and paints nothing: its model stays in memory.
    ollama.setModels(['mistral:7b', 'qwen2.5:7b']);
    const other = await easel.newConversation();
    expect((await easel.put(`/api/conversations/${other}/settings`, { chatModel: 'qwen2.5:7b' })).status).toBe(200);
    ollama.enqueue(scriptReply('Which cat?', { ...READY, generate_image: false }));
    await chat(easel, other, 'a cat');
    expect(ollama.unloads).toEqual(['mistral:7b']);
    // The first conversation's next image frees its own model (its chat loaded it again) and the other's.
    ollama.enqueue(scriptReply('Again!', READY));
    await chat(easel, id, 'another');
    expect(txt2img(a1111)).toHaveLength(2);
    expect(ollama.unloads.slice(1).sort()).toEqual(['mistral:7b', 'qwen2.5:7b']);
    expect((await (await fetch(`${ollama.url}/api/ps`)).json()) as unknown).toEqual({ models: [] });
  });
});

describe('POST /api/conversations/:id/generations', () => {
  it('generates from the prompt pane with overrides, and honours a fixed seed', async () => {
    const { a1111, easel } = await setUp();
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a lighthouse in a storm' });
    const response = await easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 5, seed: 1234, width: 768, height: 512 } });
    expect(response.status).toBe(200);
    const events = await readSse(response);
    expect(of(events, 'image')[0]).toMatchObject({ seed: 1234, width: 768, height: 512, prompt: 'a lighthouse in a storm' });
    expect(of(events, 'done')).toHaveLength(1);
    expect(txt2img(a1111)[0]!.body).toMatchObject({ steps: 5, seed: 1234, width: 768 });
    // images made by the button are listed too, and the stored settings are untouched by overrides
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as any;
    expect(conversation.settings.steps).toBe(20);
    expect(conversation.images).toEqual([expect.objectContaining({ seed: 1234, prompt: 'a lighthouse in a storm', steps: 5, width: 768 })]);
  });

  it('refuses what cannot work, saying why', async () => {
    const { easel } = await setUp();
    const id = await easel.newConversation();
    const empty = await easel.post(`/api/conversations/${id}/generations`, {});
    expect(empty.status).toBe(422);
    expect(((await empty.json()) as any).error).toMatch(/prompt is empty/);
    const bad = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'x', settings: { steps: 500 } });
    expect(bad.status).toBe(422);
    expect((await easel.post('/api/conversations/nope/generations', { prompt: 'x' })).status).toBe(404);
  });

  it('two generations queue one at a time, and the second says so', async () => {
    const { a1111, easel } = await setUp({ a1111: { stepDelayMs: 40 } });
    const id = await easel.newConversation();
    const first = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'one', settings: { steps: 8 } });
    const second = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'two', settings: { steps: 8 } });
    const [a, b] = await Promise.all([readSse(first), readSse(second)]);
    expect(of(a, 'generation')[0]!.queued).toBeUndefined();
    expect(of(b, 'generation')[0]).toMatchObject({ queued: true });
    expect(of(a, 'image')).toHaveLength(1);
    expect(of(b, 'image')).toHaveLength(1);
    const [one, two] = txt2img(a1111);
    const firstDone = a1111.requests.filter((r) => r.at > one!.at && r.at < two!.at);
    expect(firstDone.length).toBeGreaterThan(0); // the second call waited for the first (progress polls between)
    expect((two!.body as any).prompt).toBe('two');
  });
});

describe('cancel, failures, timeouts', () => {
  it('POST /stop cancels a running generation on the backend and keeps the prompt', async () => {
    const { a1111, easel } = await setUp({ a1111: { stepDelayMs: 50 } });
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'slow painting' });
    const response = await easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 100 } });
    const events: SseEvent[] = [];
    for await (const event of iterateSse(response.body!)) {
      events.push(event);
      if (event.type === 'progress') await easel.post(`/api/conversations/${id}/stop`, {});
    }
    expect(of(events, 'error')[0]).toMatchObject({ code: 'image_cancelled', message: expect.stringMatching(/cancelled.*prompt is kept/) });
    expect(a1111.interrupts).toBeGreaterThanOrEqual(1);
    expect(((await (await easel.get(`/api/conversations/${id}`)).json()) as any).prompt).toBe('slow painting');
  });

  it('a client that hangs up cancels the generation on the backend', async () => {
    const { a1111, easel } = await setUp({ a1111: { stepDelayMs: 50 } });
    const id = await easel.newConversation();
    const controller = new AbortController();
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'x', settings: { steps: 100 } }, { signal: controller.signal });
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    await expect.poll(() => a1111.interrupts, { timeout: 5000 }).toBeGreaterThanOrEqual(1);
  });

  it('a backend that is down never stops the chat; health and the error say what to do', async () => {
    const down = await createFakeOpenAiImages();
    const url = down.url;
    await down.close();
    const { ollama, easel } = await setUp({ imageUrl: url });
    const health = (await (await easel.get('/api/health')).json()) as any;
    expect(health.images).toMatchObject({ backend: 'a1111', configured: true, reachable: false });
    ollama.enqueue(scriptReply('Go!', READY));
    const id = await easel.newConversation();
    const events = await chat(easel, id, 'a cat');
    expect(of(events, 'metadata')).toHaveLength(1);
    expect(of(events, 'error')[0]).toMatchObject({ code: 'image_unreachable', message: expect.stringContaining(url) });
    expect(((await (await easel.get(`/api/conversations/${id}`)).json()) as any).prompt).toBe(READY.prompt);
  });

  it('a backend error is reported in its own words', async () => {
    const { easel } = await setUp({ a1111: { failWith: { status: 500, body: { error: 'OutOfMemoryError', detail: 'CUDA out of memory. Tried to allocate 2.00 GiB', body: '', errors: '' } } } });
    const id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'x' }));
    expect(of(events, 'error')[0]).toMatchObject({ code: 'image_backend_error', message: expect.stringContaining('CUDA out of memory') });
  });

  it('gives up after --image-timeout and interrupts the backend', async () => {
    const { a1111, easel } = await setUp({ a1111: { hang: true }, flags: ['--image-timeout', '1'] });
    const id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'x' }));
    expect(of(events, 'error')[0]).toMatchObject({ code: 'image_timeout' });
    expect(a1111.interrupts).toBeGreaterThanOrEqual(1);
  });
});

describe('images on disk and without a backend', () => {
  it('never serves anything but generated images', async () => {
    const { easel } = await setUp();
    const id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'x' }));
    const files = readdirSync(join(easel.dataDir, 'images'));
    expect(files).toEqual([`${of(events, 'image')[0]!.id}.png`]);
    expect(readFileSync(join(easel.dataDir, 'images', files[0]!)).subarray(1, 4).toString()).toBe('PNG');
    for (const path of ['/images/../easel.db', '/images/%2e%2e%2feasel.db', '/images/easel.db', `/images/${'0'.repeat(32)}.png`]) {
      expect((await easel.get(path)).status).toBe(404);
    }
  });

  it('with no backend, chat works and Generate explains how to configure one', async () => {
    const ollama = await createFakeOllama();
    cleanups.push(() => ollama.close());
    const easel = await startTestEasel({ ollamaUrl: ollama.url });
    cleanups.push(() => easel.close());
    const health = (await (await easel.get('/api/health')).json()) as any;
    expect(health.images).toMatchObject({ backend: 'none', configured: false });
    ollama.enqueue(scriptReply('Go!', READY));
    const id = await easel.newConversation();
    const events = await chat(easel, id, 'a cat');
    expect(of(events, 'generation')).toEqual([]);
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'x' });
    expect(response.status).toBe(503);
    expect(((await response.json()) as any).error).toMatch(/--image-backend/);
  });
});

describe('the other backends, wired by main.ts', () => {
  async function easelWith(flags: string[]) {
    const ollama = await createFakeOllama();
    cleanups.push(() => ollama.close());
    const easel = await startTestEasel({ ollamaUrl: ollama.url, flags });
    cleanups.push(() => easel.close());
    return easel;
  }

  it('comfyui: the bundled workflow gets the prompt and settings; progress comes over the WebSocket', async () => {
    const comfy = await createFakeComfyUi({ stepDelayMs: 5 });
    cleanups.push(() => comfy.close());
    const easel = await easelWith(['--image-backend', 'comfyui', '--image-url', comfy.url]);
    const id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox', settings: { steps: 6, seed: 77 } }));
    expect(of(events, 'progress').map((p) => p.step)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(of(events, 'image')[0]).toMatchObject({ seed: 77, prompt: 'a red fox' });
    const workflow = JSON.stringify(comfy.workflows[0]);
    expect(workflow).toContain('"a red fox"');
    expect(workflow).not.toContain('%prompt%');
  });

  it('openai: an OpenAI-compatible server makes the image', async () => {
    const openai = await createFakeOpenAiImages();
    cleanups.push(() => openai.close());
    const easel = await easelWith(['--image-backend', 'openai', '--image-url', openai.url, '--image-model', 'sd-turbo']);
    const id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox', settings: { seed: 5, width: 256, height: 256 } }));
    // OpenAI's API takes no seed: none is claimed (image-servers.test.ts has the rest).
    expect(of(events, 'image')[0]).toMatchObject({ width: 256, height: 256, model: 'sd-turbo' });
    expect(of(events, 'image')[0]!['seed']).toBeUndefined();
    expect(openai.requests.find((r) => r.path === '/v1/images/generations')?.body).toMatchObject({ prompt: 'a red fox', size: '256x256', model: 'sd-turbo', response_format: 'b64_json' });
  });
});
