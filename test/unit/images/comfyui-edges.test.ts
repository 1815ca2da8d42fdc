// ComfyUI edge cases that only show with other clients on the same server: their messages on our
// socket, and a cancel that comes while /prompt is still being answered.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createComfyUiBackend, loadDefaultWorkflow } from '../../../server/comfyui/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { createFakeComfyUi } from '../../fakes/fake-comfyui.ts';
import type { FakeComfyUi, FakeComfyUiOptions } from '../../fakes/fake-comfyui.ts';
import { REQUEST, expectBackendError, recordProgress } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];
let workflow: Record<string, unknown>;

beforeAll(async () => {
  const loaded = await loadDefaultWorkflow();
  if (!loaded.ok) throw new Error(loaded.error.message);
  workflow = loaded.value;
});

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function startFake(options: FakeComfyUiOptions): Promise<FakeComfyUi> {
  const fake = await createFakeComfyUi({ stepDelayMs: 5, ...options });
  cleanups.push(() => fake.close());
  return fake;
}

describe('another client on the same ComfyUI', () => {
  // REQUEST asks for 6 steps; the foreign prompt runs 3, first.
  const cases: Array<[string, string | undefined]> = [
    ['a script without a client id (its progress is broadcast)', undefined],
    ['a prompt under our own client id (all its messages reach us, its end included)', 'easel-fixed-client'],
  ];
  for (const [name, clientId] of cases) {
    it(`ignores the messages of ${name}`, async () => {
      const fake = await startFake({ foreignPrompt: { steps: 3, ...(clientId ? { clientId } : {}) } });
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
    const fake = await startFake({ stepDelayMs: 20, promptDelayMs: 150, foreignPrompt: { steps: 10 } });
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
