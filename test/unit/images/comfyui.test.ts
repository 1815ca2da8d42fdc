import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createComfyUiBackend, fillWorkflow, loadDefaultWorkflow, loadWorkflow } from '../../../server/comfyui/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { decodeSolidPng } from '../../fakes/png-bytes.ts';
import { REQUEST, expectBackendError, findClosedUrl, recordProgress, startStatusServer, waitForFirstProgress, startFakeComfyUi, cancelAtFirstProgress } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];
let defaultWorkflow: Record<string, unknown>;
let tempDir: string;

beforeAll(async () => {
  const loaded = await loadDefaultWorkflow();
  if (!loaded.ok) throw new Error(loaded.error.message);
  defaultWorkflow = loaded.value;
  tempDir = await mkdtemp(join(tmpdir(), 'easel-comfyui-'));
});

afterAll(async () => {
  await rm(tempDir, { recursive: true, force: true });
});

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

const noProgress = () => {};

function readNode(workflow: unknown, id: string): { class_type: string; inputs: Record<string, unknown> } {
  return (workflow as Record<string, { class_type: string; inputs: Record<string, unknown> }>)[id] ?? { class_type: '', inputs: {} };
}

describe('createComfyUiBackend', () => {
  it('generates a real PNG of the requested size with the requested seed', async () => {
    const fake = await startFakeComfyUi();
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });

    const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });

    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
    expect(decodeSolidPng(result.png).height).toBe(96);
    expect(result.seed).toBe(REQUEST.seed);
    expect(result.model).toBe('v1-5-pruned-emaonly');
  });

  it('opens the WebSocket before queueing and replaces every placeholder in the submitted workflow', async () => {
    const fake = await startFakeComfyUi();
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow, clientId: 'easel-test-client' });

    await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });

    const paths = fake.requests.map((request) => request.path);
    expect(paths.indexOf('/ws')).toBeGreaterThanOrEqual(0);
    expect(paths.indexOf('/ws')).toBeLessThan(paths.indexOf('/prompt'));
    expect(fake.connectedClients).toEqual(['easel-test-client']);
    const submitted = fake.requests.find((request) => request.path === '/prompt')?.body as { client_id: string };
    expect(submitted.client_id).toBe('easel-test-client');
    const workflow = fake.workflows[0];
    expect(readNode(workflow, '3').inputs).toMatchObject({ seed: REQUEST.seed, steps: 6, cfg: 7.5, sampler_name: 'euler', scheduler: 'normal' });
    expect(readNode(workflow, '5').inputs).toMatchObject({ width: 64, height: 96, batch_size: 1 });
    expect(readNode(workflow, '6').inputs['text']).toBe(REQUEST.prompt);
    expect(readNode(workflow, '7').inputs['text']).toBe(REQUEST.negativePrompt);
    expect(JSON.stringify(workflow)).not.toMatch(/%\w+%/);
    // The caller's workflow is a template: it must stay untouched.
    expect(readNode(defaultWorkflow, '6').inputs['text']).toBe('%prompt%');
  });

  it('replaces placeholders inside longer strings and URL-encodes the image location', async () => {
    const fake = await startFakeComfyUi();
    const workflow = structuredClone(defaultWorkflow);
    readNode(workflow, '6').inputs['text'] = 'photo of %prompt%, 4k';
    readNode(workflow, '9').inputs['filename_prefix'] = 'my pics/easel & co %seed%';
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const result = await backend.generate({ ...REQUEST, prompt: 'a cat named %seed%' }, { signal: new AbortController().signal, onProgress: noProgress });

    expect(readPngSize(result.png).ok).toBe(true);
    expect(readNode(fake.workflows[0], '6').inputs['text']).toBe('photo of a cat named %seed%, 4k');
    expect(readNode(fake.workflows[0], '9').inputs['filename_prefix']).toBe(`my pics/easel & co ${REQUEST.seed}`);
    const view = fake.requests.find((request) => request.path === '/view');
    expect(view?.query).toEqual({ filename: `easel & co ${REQUEST.seed}_00001_.png`, subfolder: 'my pics', type: 'output' });
  });

  it('reports every sampling step from the WebSocket, ignoring the JPEG previews of a server started with --preview-method', async () => {
    const fake = await startFakeComfyUi({ previewMethod: 'auto' });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });
    const { events, onProgress } = recordProgress();

    await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress });

    expect(events).toEqual([1, 2, 3, 4, 5, 6].map((step) => ({ fraction: step / 6, step, steps: 6 })));
    expect(fake.binaryFrames).toBe(6);
  });

  it('sends its own prompt_id, a canonical UUID, with /prompt', async () => {
    const fake = await startFakeComfyUi({ clientPromptIds: 'uuid' });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });

    await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });

    const sent = (fake.requests.find((request) => request.path === '/prompt')?.body as { prompt_id?: unknown }).prompt_id;
    expect(sent).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(fake.promptIds).toEqual([sent]);
  });

  it('follows a server that ignores the prompt_id it was sent (before 0.3.45) by the id it answers', async () => {
    const fake = await startFakeComfyUi({ clientPromptIds: 'ignored' });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });
    const { events, onProgress } = recordProgress();

    const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress });

    expect(readPngSize(result.png).ok).toBe(true);
    expect(events).toHaveLength(6);
    expect(fake.requests.find((request) => request.path.startsWith('/history/'))?.path).toBe(`/history/${fake.promptIds[0]}`);
  });

  it('cancels only our running prompt: /interrupt with its prompt_id, sent once /queue shows it running', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 30 });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });
    await cancelAtFirstProgress(backend, { ...REQUEST, steps: 100 });
    const promptId = fake.promptIds[0];
    expect(fake.interrupts).toBe(1);
    expect(fake.requests.find((request) => request.path === '/interrupt')?.body).toEqual({ prompt_id: promptId });
    await expect.poll(() => fake.outcomes[promptId!]).toBe('interrupted');
    // 0.3.64 has no /api/jobs/{id}/cancel: asked once, then /queue.
    expect(fake.requests.filter((request) => request.method !== 'GET' || request.path === '/queue').map((request) => request.path)).toEqual([
      '/prompt',
      `/api/jobs/${promptId}/cancel`,
      '/queue',
      '/interrupt',
    ]);
  });

  it('cancels through /api/jobs/{id}/cancel where the server has it, and sends no /interrupt', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 30, jobsApi: true });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });
    await cancelAtFirstProgress(backend, { ...REQUEST, steps: 100 });
    const promptId = fake.promptIds[0]!;
    await expect.poll(() => fake.outcomes[promptId]).toBe('interrupted');
    expect(fake.requests.filter((request) => request.method === 'POST').map((request) => request.path)).toEqual(['/prompt', `/api/jobs/${promptId}/cancel`]);
  });

  it('rejects with cancelled when the job is interrupted from ComfyUI itself', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 30 });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });
    const { onProgress, started } = waitForFirstProgress();

    const generation = backend.generate({ ...REQUEST, steps: 100 }, { signal: new AbortController().signal, onProgress });
    await started;
    await fetch(`${fake.url}/interrupt`, { method: 'POST' });

    const error = await expectBackendError(generation, 'cancelled');
    expect(error.message).toContain('interrupted in ComfyUI');
  });

  it('says how to start ComfyUI when nothing listens at the URL', async () => {
    const url = await findClosedUrl();
    const backend = createComfyUiBackend({ url, workflow: defaultWorkflow });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'unreachable');
    expect(error.message).toContain(url);
    expect(error.message).toContain('--image-url');
  });

  it('reports node validation errors in ComfyUI’s words', async () => {
    const fake = await startFakeComfyUi({ checkpoints: ['sd_xl_base_1.0.safetensors'] });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('HTTP 400');
    expect(error.message).toContain('Prompt outputs failed validation');
    expect(error.message).toContain("CheckpointLoaderSimple (node 4): Value not in list: ckpt_name: 'v1-5-pruned-emaonly.safetensors' not in");
  });

  it('reports a workflow without an output node', async () => {
    const fake = await startFakeComfyUi();
    const workflow = structuredClone(defaultWorkflow);
    delete workflow['9'];
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('Prompt has no outputs');
  });

  it('reports an execution_error with its exception message', async () => {
    const fake = await startFakeComfyUi({ executionError: 'CUDA out of memory. Tried to allocate 3.00 GiB' });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('KSampler');
    expect(error.message).toContain('CUDA out of memory. Tried to allocate 3.00 GiB');
  });

  it('times out, interrupts the backend and rejects with timeout', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 50 });
    const backend = createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow, timeoutMs: 150 });

    const error = await expectBackendError(backend.generate({ ...REQUEST, steps: 100 }, { signal: new AbortController().signal, onProgress: noProgress }), 'timeout');
    expect(error.message).toContain('150 ms');
    expect(fake.interrupts).toBe(1);
  });

  it('rejects with backend_error when the server at the URL is not ComfyUI (no /ws)', async () => {
    const other = await startStatusServer(404);
    cleanups.push(() => other.close());
    const backend = createComfyUiBackend({ url: other.url, workflow: defaultWorkflow });

    const error = await expectBackendError(backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress }), 'backend_error');
    expect(error.message).toContain('/ws');
  });

  it('checkHealth: reachable with the version when ComfyUI answers', async () => {
    const fake = await startFakeComfyUi();
    const health = await createComfyUiBackend({ url: fake.url, workflow: defaultWorkflow }).checkHealth();
    expect(health.reachable).toBe(true);
    expect(health.detail).toContain('0.3.64');
    expect(fake.requests.map((request) => request.path)).toEqual(['/system_stats']);
  });

  it('checkHealth: unreachable when nothing listens, without throwing', async () => {
    const url = await findClosedUrl();
    const health = await createComfyUiBackend({ url, workflow: defaultWorkflow }).checkHealth();
    expect(health.reachable).toBe(false);
    expect(health.detail).toContain(url);
  });
});

describe('workflows', () => {
  it('ships a standard SD 1.5 text-to-image graph with every placeholder', () => {
    const classes = Object.values(defaultWorkflow).map((node) => (node as { class_type: string }).class_type).sort();
    expect(classes).toEqual(['CLIPTextEncode', 'CLIPTextEncode', 'CheckpointLoaderSimple', 'EmptyLatentImage', 'KSampler', 'SaveImage', 'VAEDecode']);
    const text = JSON.stringify(defaultWorkflow);
    for (const name of ['prompt', 'negative_prompt', 'steps', 'cfg', 'seed', 'width', 'height']) expect(text).toContain(`"%${name}%"`);
    expect(readNode(defaultWorkflow, '9').inputs['filename_prefix']).toBe('easel');
  });

  it('fills numbers as numbers and leaves other values alone', () => {
    const filled = fillWorkflow({ a: { inputs: { n: '%steps%', s: 'x %cfg% y', keep: ['%', 5, null, true] } } }, REQUEST);
    expect(filled).toEqual({ a: { inputs: { n: 6, s: 'x 7.5 y', keep: ['%', 5, null, true] } } });
  });

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
    const workflow = structuredClone(defaultWorkflow);
    readNode(workflow, '6').inputs['text'] = 'a fixed prompt';
    await writeFile(path, JSON.stringify(workflow));
    const result = await loadWorkflow(path);
    expect(result).toEqual({ ok: false, error: { code: 'no_prompt_placeholder', message: expect.stringContaining('%prompt%') } });
  });

  it('accepts %prompt% inside a longer string', async () => {
    const path = join(tempDir, 'embedded.json');
    const workflow = structuredClone(defaultWorkflow);
    readNode(workflow, '6').inputs['text'] = 'masterpiece, %prompt%';
    await writeFile(path, JSON.stringify(workflow));
    expect((await loadWorkflow(path)).ok).toBe(true);
  });
});

describe('fake ComfyUI fidelity', () => {
  it('refuses a node without class_type like ComfyUI', async () => {
    const fake = await startFakeComfyUi();
    const response = await fetch(`${fake.url}/prompt`, { method: 'POST', body: JSON.stringify({ prompt: { '1': { inputs: {} } } }) });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { type: 'invalid_prompt', details: "Node ID '#1'" } });
  });

  it('refuses an unfilled placeholder in a number input', async () => {
    const fake = await startFakeComfyUi();
    const response = await fetch(`${fake.url}/prompt`, { method: 'POST', body: JSON.stringify({ prompt: defaultWorkflow }) });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { node_errors: Record<string, { errors: { type: string }[] }> };
    expect(body.node_errors['3']?.errors[0]?.type).toBe('invalid_input_type');
  });
});
