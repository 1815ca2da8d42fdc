// How a ComfyUI image is stopped: only our prompt, interrupted or taken out of the queue, through the cancel API
// the server has (learnt once); a cancel or the timeout at any step; nothing sent once the image is there.
import { describe, expect, it } from 'vitest';
import { createComfyUiBackend } from '../../../server/comfyui/index.ts';
import { REQUEST, abortedSignal, cancelAtFirstProgress, expectBackendError, failureOf, run, startFakeComfyUi, waitForFirstProgress } from './helpers.ts';
import { latestPromptId, loadShippedWorkflow, serveComfy } from './comfyui-helpers.ts';
import type { ComfyScript } from './comfyui-helpers.ts';

const workflow = await loadShippedWorkflow();

describe('cancel and timeout', () => {
  it('cancels only our running prompt: /interrupt with its prompt_id, sent once /queue shows it running', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 30 });
    const backend = createComfyUiBackend({ url: fake.url, workflow });
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
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    await cancelAtFirstProgress(backend, { ...REQUEST, steps: 100 });
    const promptId = fake.promptIds[0]!;
    await expect.poll(() => fake.outcomes[promptId]).toBe('interrupted');
    expect(fake.requests.filter((request) => request.method === 'POST').map((request) => request.path)).toEqual(['/prompt', `/api/jobs/${promptId}/cancel`]);
  });

  it('rejects with cancelled when the job is interrupted from ComfyUI itself', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 30 });
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    const { onProgress, started } = waitForFirstProgress();

    const generation = backend.generate({ ...REQUEST, steps: 100 }, run(undefined, onProgress));
    await started;
    await fetch(`${fake.url}/interrupt`, { method: 'POST' });

    const error = await expectBackendError(generation, 'cancelled');
    expect(error.message).toContain('interrupted in ComfyUI');
  });

  it('times out, interrupts the backend and rejects with timeout', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 50 });
    const backend = createComfyUiBackend({ url: fake.url, workflow, timeoutMs: 150 });

    const error = await expectBackendError(backend.generate({ ...REQUEST, steps: 100 }, run()), 'timeout');
    expect(error.message).toContain('150 ms');
    expect(fake.interrupts).toBe(1);
  });

  it('a signal already aborted: cancelled at once, nothing sent, the abort reason as the cause', async () => {
    const fake = await startFakeComfyUi();
    const reason = new Error('user pressed Cancel');
    const error = await expectBackendError(createComfyUiBackend({ url: fake.url, workflow }).generate(REQUEST, run(abortedSignal(reason))), 'cancelled');
    expect(error.message).toBe(`The image was cancelled; ComfyUI at ${fake.url} was asked to stop.`);
    expect(error.cause).toBe(reason);
    expect(fake.requests).toEqual([]);
  });

  it('a cancel while ComfyUI sends nothing more ends the job at once, the abort as the cause', async () => {
    const server = await serveComfy({ frames: (id) => [{ type: 'progress', data: { value: 1, max: 6, prompt_id: id } }] });
    const controller = new AbortController();
    const { onProgress, started } = waitForFirstProgress();
    const generation = createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, { signal: controller.signal, onProgress });
    await started;
    controller.abort();

    const error = await failureOf(generation);
    expect(error).toMatchObject({ code: 'cancelled', message: `The image was cancelled; ComfyUI at ${server.url} was asked to stop.` });
    // The log shows the abort, not a made-up "connection closed".
    expect((error.cause as Error).name).toBe('AbortError');
    // A closing handshake, not a dropped connection (which aiohttp may report as an error in ComfyUI's console).
    await expect.poll(() => server.closeCodes).toEqual([1005]);
  }, 3_000);

  const hanging: Array<[string, ComfyScript]> = [
    ['the WebSocket handshake', { ws: 'hang' }],
    ['/prompt', { routes: { '/prompt': 'hang' } }],
    ['/history', { routes: { '/history/*': 'hang' } }],
    ['/view', { routes: { '/view': 'hang' } }],
  ];

  for (const [step, script] of hanging) {
    it(`a cancel while ${step} hangs ends the job at once, and so does the timeout`, async () => {
      const server = await serveComfy(script);
      const backend = createComfyUiBackend({ url: server.url, workflow, healthTimeoutMs: 100 });
      const controller = new AbortController();
      const generation = backend.generate(REQUEST, run(controller.signal));
      setTimeout(() => controller.abort(), 50);
      await expectBackendError(generation, 'cancelled');

      const timed = await expectBackendError(createComfyUiBackend({ url: server.url, workflow, timeoutMs: 100, healthTimeoutMs: 100 }).generate(REQUEST, run()), 'timeout');
      expect(timed.message).toBe(`ComfyUI at ${server.url} did not finish the image within 100 ms, so Easel asked it to stop. Lower the steps or size, or raise the image timeout.`);
      expect(timed.cause).toBeInstanceOf(Error);
    }, 2_000);
  }

  it('asks /api/jobs only until a server shows it has none (0.3.64): the second cancel goes straight to /queue', async () => {
    const fake = await startFakeComfyUi({ stepDelayMs: 30 });
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    for (let i = 0; i < 2; i++) {
      await cancelAtFirstProgress(backend, { ...REQUEST, steps: 100, seed: i });
    }
    const [first, second] = fake.promptIds;
    expect(fake.requests.filter((request) => request.method === 'POST' && request.path !== '/prompt').map((request) => request.path)).toEqual([
      `/api/jobs/${first}/cancel`,
      '/interrupt',
      '/interrupt',
    ]);
    expect(fake.requests.filter((request) => request.path === '/interrupt').map((request) => request.body)).toEqual([{ prompt_id: first }, { prompt_id: second }]);
  });

  it('keeps using /api/jobs once it answered, and asks it again after a cancel it did not answer', async () => {
    // The first cancel's /api/jobs call times out (no answer: nothing learnt), the next two are answered.
    const server = await serveComfy({
      queued: 'running',
      routes: { '/api/jobs/*/cancel': (_request, count) => (count === 1 ? 'hang' : { json: { cancelled: true } }) },
      frames: (id) => [{ type: 'progress', data: { value: 1, max: 6, prompt_id: id } }],
    });
    const backend = createComfyUiBackend({ url: server.url, workflow, healthTimeoutMs: 100 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      await cancelAtFirstProgress(backend);
      ids.push(latestPromptId(server));
    }
    const calls = server.requests.filter((request) => request.path !== '/ws' && request.path !== '/prompt').map((request) => `${request.method} ${request.path}`);
    expect(calls).toEqual([
      `POST /api/jobs/${ids[0]}/cancel`,
      'GET /queue',
      'POST /interrupt',
      `POST /api/jobs/${ids[1]}/cancel`,
      `POST /api/jobs/${ids[2]}/cancel`,
    ]);
  });

  it.each([
    ['a 200 without {cancelled}', { text: 'OK' }],
    // A proxy's or a failing server's error page that happens to be JSON: only a 200 is the jobs API's answer.
    ['a 500 with {cancelled}', { status: 500, json: { cancelled: true } }],
  ] as const)('%s from /api/jobs is not the jobs API: the cancel goes on through /queue', async (_name, jobsAnswer) => {
    const server = await serveComfy({
      queued: 'pending',
      routes: { '/api/jobs/*/cancel': jobsAnswer },
      frames: (id) => [{ type: 'progress', data: { value: 1, max: 6, prompt_id: id } }],
    });
    await cancelAtFirstProgress(createComfyUiBackend({ url: server.url, workflow }));
    expect(server.requests.find((request) => request.method === 'POST' && request.path === '/queue')?.body).toEqual({ delete: [latestPromptId(server)] });
  });

  it('a timeout after a cancel, while the cancel is still being sent, leaves it a cancel, sent once', async () => {
    // /interrupt takes 300 ms to answer; the 150 ms timeout falls inside it.
    const fake = await startFakeComfyUi({ stepDelayMs: 30, interruptDelayMs: 300 });
    await cancelAtFirstProgress(createComfyUiBackend({ url: fake.url, workflow, timeoutMs: 150 }), { ...REQUEST, steps: 100 });
    expect(fake.interrupts).toBe(1);
  });

  it('sends nothing more once the image is done: a later abort of its signal or its timeout asks no cancel', async () => {
    const fake = await startFakeComfyUi();
    const controller = new AbortController();
    await createComfyUiBackend({ url: fake.url, workflow, timeoutMs: 400 }).generate(REQUEST, run(controller.signal));
    const sent = fake.requests.length;

    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 450));

    expect(fake.requests.slice(sent)).toEqual([]);
  });
});

describe('a cancel while /prompt is being answered', () => {
  it('takes our prompt out of the queue once its id is known, and leaves the running foreign job alone', async () => {
    // The foreign job starts when our /prompt arrives and runs ~200 ms; /prompt answers after 150 ms.
    const fake = await startFakeComfyUi({ stepDelayMs: 20, promptDelayMs: 150, foreignPrompt: { steps: 10 } });
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    const controller = new AbortController();

    const generation = backend.generate(REQUEST, run(controller.signal));
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

    const generation = backend.generate(REQUEST, run(controller.signal));
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
