// ComfyUI edge cases that only show with other clients on the same server (their messages on our socket,
// a cancel while /prompt is still being answered, an older server whose /interrupt stops whatever runs), and
// with the server's own timing and caching (the history written after execution_success, a fully cached re-run).
import { beforeAll, describe, expect, it } from 'vitest';
import { createComfyUiBackend, loadDefaultWorkflow } from '../../../server/comfyui/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { REQUEST, expectBackendError, recordProgress, startFakeComfyUi } from './helpers.ts';

const noProgress = () => {};

let workflow: Record<string, unknown>;

beforeAll(async () => {
  const loaded = await loadDefaultWorkflow();
  if (!loaded.ok) throw new Error(loaded.error.message);
  workflow = loaded.value;
});

describe('another client on the same ComfyUI', () => {
  // REQUEST asks for 6 steps; the foreign prompt runs 3, first.
  const cases: Array<[string, string | undefined]> = [
    ['a script without a client id (its progress is broadcast)', undefined],
    ['a prompt under our own client id (all its messages reach us, its end included)', 'easel-fixed-client'],
  ];
  for (const [name, clientId] of cases) {
    it(`ignores the messages of ${name}`, async () => {
      const fake = await startFakeComfyUi({ foreignPrompt: { steps: 3, ...(clientId ? { clientId } : {}) } });
      const backend = createComfyUiBackend({ url: fake.url, workflow, clientId: 'easel-fixed-client' });
      const { events, onProgress } = recordProgress();

      const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress });

      const [foreignId] = fake.foreignPromptIds;
      const [ourId] = fake.promptIds;
      expect(fake.outcomes).toEqual({ [foreignId!]: 'success', [ourId!]: 'success' });
      // Only our own steps, in order: none of the foreign prompt's 3.
      expect(events).toEqual([1, 2, 3, 4, 5, 6].map((step) => ({ fraction: step / 6, step, steps: 6 })));
      expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: REQUEST.width, height: REQUEST.height } });
      // Our image, the second file the fake saved, not the foreign one.
      const views = fake.requests.filter((request) => request.path === '/view');
      expect(views.map((request) => request.query['filename'])).toEqual(['easel_00002_.png']);
    });
  }
});

describe('a cancel while /prompt is being answered', () => {
  it('takes our prompt out of the queue once its id is known, and leaves the running foreign job alone', async () => {
    // The foreign job starts when our /prompt arrives and runs ~200 ms; /prompt answers after 150 ms.
    const fake = await startFakeComfyUi({ stepDelayMs: 20, promptDelayMs: 150, foreignPrompt: { steps: 10 } });
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    const controller = new AbortController();

    const generation = backend.generate(REQUEST, { signal: controller.signal, onProgress: () => {} });
    await expect.poll(() => fake.foreignPromptIds.length).toBe(1);
    controller.abort();

    await expectBackendError(generation, 'cancelled');
    await expect.poll(() => fake.promptIds.length).toBe(1);
    const [ourId] = fake.promptIds;
    const [foreignId] = fake.foreignPromptIds;
    await expect.poll(() => fake.queueDeletes).toContain(ourId);
    await expect.poll(() => fake.outcomes[foreignId!]).toBe('success');
    // Ours never ran: it was deleted while it waited behind the foreign job.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fake.outcomes[ourId!]).toBeUndefined();
    // A bare /interrupt would have stopped whatever ran: the foreign job.
    for (const request of fake.requests.filter((r) => r.path === '/interrupt')) expect(request.body).toEqual({ prompt_id: ourId });
  });
});

describe('an older ComfyUI, whose /interrupt stops whatever runs (before 0.3.57)', () => {
  it('a cancel while a foreign prompt runs and ours waits takes ours out of the queue and never interrupts', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 20, foreignPrompt: { steps: 10 }, targetedInterrupt: false, clientPromptIds: 'ignored' });
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    const controller = new AbortController();

    const generation = backend.generate(REQUEST, { signal: controller.signal, onProgress: noProgress });
    await expect.poll(() => fake.promptIds.length).toBe(1);
    controller.abort();

    await expectBackendError(generation, 'cancelled');
    const [ourId] = fake.promptIds;
    const [foreignId] = fake.foreignPromptIds;
    await expect.poll(() => fake.queueDeletes).toEqual([ourId]);
    await expect.poll(() => fake.outcomes[foreignId!]).toBe('success');
    expect(fake.requests.filter((request) => request.path === '/interrupt')).toEqual([]);
    expect(fake.outcomes[ourId!]).toBeUndefined();
  });
});

describe("ComfyUI's own timing and caching", () => {
  it('ends at execution_success and reads the history as soon as ComfyUI writes it, before `executing null`', async () => {
    const fake = await startFakeComfyUi({ historyDelayMs: 150 });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });

    expect(readPngSize(result.png).ok).toBe(true);
    const end = fake.sent.find((message) => message.type === 'executing' && message.data['node'] === null);
    const firstHistory = fake.requests.findIndex((request) => request.path.startsWith('/history/'));
    expect(end).toBeDefined();
    expect(fake.requestTimes[firstHistory]).toBeLessThan(end!.at);
  });

  it('a fully cached re-run (the same workflow again) sends only execution_cached and the cached output: same file, no progress', async () => {
    const fake = await startFakeComfyUi({});
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    const first = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });
    const { events, onProgress } = recordProgress();

    const again = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress });

    const [, secondId] = fake.promptIds;
    const ofSecond = fake.sent.filter((message) => message.data['prompt_id'] === secondId).map((message) => message.type);
    expect(ofSecond).toEqual(['execution_start', 'execution_cached', 'executed', 'execution_success', 'executing']);
    expect(fake.sent.find((message) => message.type === 'execution_cached' && message.data['prompt_id'] === secondId)?.data['nodes']).toEqual(['3', '4', '5', '6', '7', '8', '9']);
    expect(events).toEqual([]);
    expect(Buffer.from(again.png).equals(Buffer.from(first.png))).toBe(true);
    expect(again).toMatchObject({ seed: REQUEST.seed, steps: REQUEST.steps });
    expect(fake.requests.filter((request) => request.path === '/view').map((request) => request.query['filename'])).toEqual(['easel_00001_.png', 'easel_00001_.png']);
  });

  it('a new seed re-runs only what depends on it: the sampler, the decoder, SaveImage', async () => {
    const fake = await startFakeComfyUi({});
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });
    await backend.generate({ ...REQUEST, seed: 7 }, { signal: new AbortController().signal, onProgress: noProgress });
    const [, secondId] = fake.promptIds;
    expect(fake.sent.find((message) => message.type === 'execution_cached' && message.data['prompt_id'] === secondId)?.data['nodes']).toEqual(['4', '5', '6', '7']);
  });

  it("records the sampler's values in the workflow that ran, which a custom workflow may fix", async () => {
    const fake = await startFakeComfyUi({});
    const custom = structuredClone(workflow) as Record<string, { inputs: Record<string, unknown> }>;
    custom['3']!.inputs['steps'] = 30;
    custom['3']!.inputs['sampler_name'] = 'dpmpp_2m';
    const backend = createComfyUiBackend({ url: fake.url, workflow: custom });

    const result = await backend.generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });

    expect(result).toMatchObject({ seed: REQUEST.seed, steps: 30, cfg: REQUEST.cfg, sampler: 'dpmpp_2m', model: 'v1-5-pruned-emaonly' });
  });
});

describe('fake ComfyUI fidelity', () => {
  it('sends no binary preview frame unless started with a preview method', async () => {
    const fake = await startFakeComfyUi({});
    await createComfyUiBackend({ url: fake.url, workflow }).generate(REQUEST, { signal: new AbortController().signal, onProgress: noProgress });
    expect(fake.binaryFrames).toBe(0);
  });

  it('answers /interrupt and /queue with an empty 200, and refuses a prompt_id that is no canonical UUID when newer', async () => {
    const fake = await startFakeComfyUi({ clientPromptIds: 'uuid' });
    for (const path of ['/interrupt', '/queue']) {
      const response = await fetch(`${fake.url}${path}`, { method: 'POST', body: '{}' });
      expect([response.status, await response.text()]).toEqual([200, '']);
    }
    const refused = await fetch(`${fake.url}/prompt`, { method: 'POST', body: JSON.stringify({ prompt: {}, prompt_id: 'ABC' }) });
    expect(refused.status).toBe(400);
  });
});
