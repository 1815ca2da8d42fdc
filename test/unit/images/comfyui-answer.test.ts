// How the ComfyUI adapter reads what ComfyUI sends: the /prompt answer, progress and the end of our job on the
// WebSocket (amid other clients' messages and cached re-runs), /history and /view, and answers it cannot use.
import { describe, expect, it, onTestFinished } from 'vitest';
import { createComfyUiBackend } from '../../../server/comfyui/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { decodeSolidPng } from '../../fakes/png-bytes.ts';
import { REQUEST, expectBackendError, recordProgress, run, startFakeComfyUi } from './helpers.ts';
import { PNG, SAVED, finished, historyEntry, loadShippedWorkflow, serveComfy } from './comfyui-helpers.ts';

const workflow = await loadShippedWorkflow();

describe('the image and the /prompt answer', () => {
  it('generates a real PNG of the requested size with the requested seed', async () => {
    const fake = await startFakeComfyUi();
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const result = await backend.generate(REQUEST, run());

    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
    expect(decodeSolidPng(result.png).height).toBe(96);
    expect(result.seed).toBe(REQUEST.seed);
    expect(result.model).toBe('v1-5-pruned-emaonly');
  });

  it('follows a server that ignores the prompt_id it was sent (before 0.3.45) by the id it answers', async () => {
    const fake = await startFakeComfyUi({ clientPromptIds: 'ignored' });
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    const { events, onProgress } = recordProgress();

    const result = await backend.generate(REQUEST, run(undefined, onProgress));

    expect(readPngSize(result.png).ok).toBe(true);
    expect(events).toHaveLength(6);
    expect(fake.requests.find((request) => request.path.startsWith('/history/'))?.path).toBe(`/history/${fake.promptIds[0]}`);
  });

  it('/prompt accepted without a prompt_id: bad_response quoting the first 120 characters of the answer', async () => {
    const long = { detail: 'x'.repeat(200) };
    const answers = [{ prompt_id: '', number: 0, node_errors: {} }, long];
    let next = 0;
    const server = await serveComfy({ routes: { '/prompt': () => ({ json: answers[next++] }) } });
    const backend = createComfyUiBackend({ url: server.url, workflow });

    const empty = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    const other = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');

    expect(empty.message).toBe(`ComfyUI at ${server.url} accepted the workflow but sent no prompt_id ({"prompt_id":"","number":0,"node_errors":{}}). Check that --image-url points to ComfyUI.`);
    expect(other.message).toBe(`ComfyUI at ${server.url} accepted the workflow but sent no prompt_id (${JSON.stringify(long).slice(0, 120)}). Check that --image-url points to ComfyUI.`);
  });

  it('a 5 MB answer to /prompt or /history: too_large, naming the path; a 5 MB refusal is quoted from its start', async () => {
    const huge = 'E'.repeat(5 * 1024 * 1024);
    const tooLarge = await serveComfy({ routes: { '/prompt': { text: huge } } });
    const prompt = await expectBackendError(createComfyUiBackend({ url: tooLarge.url, workflow }).generate(REQUEST, run()), 'too_large');
    expect(prompt.message).toBe(`ComfyUI at ${tooLarge.url} answered /prompt with an answer of 5 MB, far more than a real answer; Easel stopped reading it. Check that --image-url points to ComfyUI.`);

    const hugeHistory = await serveComfy({ routes: { '/history/*': { text: huge } } });
    const history = await expectBackendError(createComfyUiBackend({ url: hugeHistory.url, workflow }).generate(REQUEST, run()), 'too_large');
    expect(history.message).toBe(`ComfyUI at ${hugeHistory.url} answered /history with an answer of 5 MB, far more than a real answer; Easel stopped reading it. Check that --image-url points to ComfyUI.`);

    // An error answer is read only as far as it is quoted: no too_large for it.
    const refusing = await serveComfy({ routes: { '/prompt': { status: 400, text: huge } } });
    const refusal = await expectBackendError(createComfyUiBackend({ url: refusing.url, workflow }).generate(REQUEST, run()), 'backend_error');
    expect(refusal.message).toBe(`ComfyUI at ${refusing.url} refused the workflow (HTTP 400): ${'E'.repeat(400)}…. Fix the workflow or install the missing models/nodes.`);
  });

  it('an image that is no PNG: what is wrong with it, and a SaveImage hint unless it is a broken PNG', async () => {
    const jpeg = Uint8Array.of(0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0xff, 0xd9);
    const sendsJpeg = await serveComfy({ routes: { '/view': { bytes: jpeg } } });
    const notPng = await expectBackendError(createComfyUiBackend({ url: sendsJpeg.url, workflow }).generate(REQUEST, run()), 'bad_response');
    expect(notPng.message).toBe(
      `ComfyUI at ${sendsJpeg.url} sent easel_00001_.png, which Easel cannot use: These bytes are not a PNG (they look like JPEG); the image backend must return PNG images. End the workflow in a SaveImage node, which writes PNG.`,
    );

    const sendsBroken = await serveComfy({ routes: { '/view': { bytes: PNG.subarray(0, 40) } } });
    const broken = await expectBackendError(createComfyUiBackend({ url: sendsBroken.url, workflow }).generate(REQUEST, run()), 'bad_response');
    // A cut-off PNG is PNG all the same: no SaveImage hint.
    expect(broken.message).toBe(
      `ComfyUI at ${sendsBroken.url} sent easel_00001_.png, which Easel cannot use: The PNG is cut off at byte 33 of 40; the file is incomplete, generate or download it again.`,
    );
  });
});

describe('what the ComfyUI adapter reads from the WebSocket', () => {
  it('reports every sampling step from the WebSocket, ignoring the JPEG previews of a server started with --preview-method', async () => {
    const fake = await startFakeComfyUi({ previewMethod: 'auto' });
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    const { events, onProgress } = recordProgress();

    await backend.generate(REQUEST, run(undefined, onProgress));

    expect(events).toEqual([1, 2, 3, 4, 5, 6].map((step) => ({ fraction: step / 6, step, steps: 6 })));
    expect(fake.binaryFrames).toBe(6);
  });

  it("reports progress without a prompt_id (ComfyUI before 66831eb6, 2024) and skips one with max 0", async () => {
    const server = await serveComfy({
      frames: (id) => [
        { type: 'progress', data: { value: 1, max: 0 } },
        { type: 'progress', data: { value: 2, max: 4 } },
        { type: 'progress', data: { value: 4, max: 4, prompt_id: id, node: '3' } },
        ...finished(id),
      ],
    });
    const { events, onProgress } = recordProgress();

    await createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run(undefined, onProgress));

    expect(events).toEqual([
      { fraction: 0.5, step: 2, steps: 4 },
      { fraction: 1, step: 4, steps: 4 },
    ]);
  });

  it('ends at `executing {node: null}` from a server that sends no execution_success, and not at a node that starts', async () => {
    // A hung job would end in the 1 s timeout instead.
    const server = await serveComfy({
      frames: (id) => [
        { type: 'executing', data: { node: '3', display_node: '3', prompt_id: id } },
        { type: 'executed', data: { node: '9', display_node: '9', output: { images: [SAVED] }, prompt_id: id } },
        { type: 'executing', data: { node: null, prompt_id: id } },
      ],
    });
    const result = await createComfyUiBackend({ url: server.url, workflow, timeoutMs: 1_000 }).generate(REQUEST, run());
    expect(Buffer.from(result.png).equals(Buffer.from(PNG))).toBe(true);
  });

  it('waits for each of many messages without piling up abort listeners (Node would print MaxListenersExceededWarning)', async () => {
    // Node warns once more than 10 listeners are on one AbortSignal: a listener left behind per wait would do it.
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    onTestFinished(() => void process.off('warning', onWarning));
    const fake = await startFakeComfyUi();
    const { events, onProgress } = recordProgress();

    await createComfyUiBackend({ url: fake.url, workflow }).generate({ ...REQUEST, steps: 15 }, run(undefined, onProgress));
    await new Promise((resolve) => setImmediate(resolve));

    expect(events).toHaveLength(15);
    expect(warnings).toEqual([]);
  });
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

      const result = await backend.generate(REQUEST, run(undefined, onProgress));

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

describe("ComfyUI's own timing and caching", () => {
  it('ends at execution_success and reads the history as soon as ComfyUI writes it, before `executing null`', async () => {
    const fake = await startFakeComfyUi({ historyDelayMs: 150 });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const result = await backend.generate(REQUEST, run());

    expect(readPngSize(result.png).ok).toBe(true);
    const end = fake.sent.find((message) => message.type === 'executing' && message.data['node'] === null);
    const firstHistory = fake.requests.findIndex((request) => request.path.startsWith('/history/'));
    expect(end).toBeDefined();
    expect(fake.requestTimes[firstHistory]).toBeLessThan(end!.at);
  });

  it('a fully cached re-run (the same workflow again) sends only execution_cached and the cached output: same file, no progress', async () => {
    const fake = await startFakeComfyUi({});
    const backend = createComfyUiBackend({ url: fake.url, workflow });
    const first = await backend.generate(REQUEST, run());
    const { events, onProgress } = recordProgress();

    const again = await backend.generate(REQUEST, run(undefined, onProgress));

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
    await backend.generate(REQUEST, run());
    await backend.generate({ ...REQUEST, seed: 7 }, run());
    const [, secondId] = fake.promptIds;
    expect(fake.sent.find((message) => message.type === 'execution_cached' && message.data['prompt_id'] === secondId)?.data['nodes']).toEqual(['4', '5', '6', '7']);
  });

  it("records the sampler's values in the workflow that ran, which a custom workflow may fix", async () => {
    const fake = await startFakeComfyUi({});
    const custom = structuredClone(workflow) as Record<string, { inputs: Record<string, unknown> }>;
    custom['3']!.inputs['steps'] = 30;
    custom['3']!.inputs['sampler_name'] = 'dpmpp_2m';
    const backend = createComfyUiBackend({ url: fake.url, workflow: custom });

    const result = await backend.generate(REQUEST, run());

    expect(result).toMatchObject({ seed: REQUEST.seed, steps: 30, cfg: REQUEST.cfg, sampler: 'dpmpp_2m', model: 'v1-5-pruned-emaonly' });
  });
});

describe('what the ComfyUI adapter reads from /history', () => {
  it('a /history answer larger than an error quote (a big workflow) is read whole', async () => {
    // 100 kB of history: more than the 64 kB an error answer is read for.
    const server = await serveComfy({
      routes: {
        '/history/*': (request) => {
          const id = request.path.slice('/history/'.length);
          return { json: { ...historyEntry(id, server.prompts[0]?.prompt), padding: 'p'.repeat(100 * 1024) } };
        },
      },
    });
    const result = await createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run());
    expect(Buffer.from(result.png).equals(Buffer.from(PNG))).toBe(true);
  });

  it('a history that never lists the prompt: asked five times, then no image', async () => {
    // The executed message is left out too, so there is no image anywhere.
    const server = await serveComfy({ routes: { '/history/*': { json: {} } }, frames: (id) => [{ type: 'execution_success', data: { prompt_id: id } }] });
    const error = await expectBackendError(createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(`ComfyUI at ${server.url} finished the workflow but it saved no image. End the workflow in a SaveImage node.`);
    expect(server.requests.filter((request) => request.path.startsWith('/history/'))).toHaveLength(5);
  }, 3_000);

  it('downloads the SaveImage file, not an earlier PreviewImage one, after a single /history request', async () => {
    // PreviewImage (node 9, type temp) runs before SaveImage (node 10): the executed messages announce the preview first.
    const fake = await startFakeComfyUi();
    const graph = structuredClone(workflow) as Record<string, { class_type: string; inputs: Record<string, unknown> }>;
    graph['10'] = { class_type: 'SaveImage', inputs: { filename_prefix: 'easel', images: ['8', 0] } };
    graph['9'] = { class_type: 'PreviewImage', inputs: { images: ['8', 0] } };

    await createComfyUiBackend({ url: fake.url, workflow: graph }).generate(REQUEST, run());

    expect(fake.requests.filter((request) => request.path.startsWith('/history/'))).toHaveLength(1);
    expect(fake.requests.filter((request) => request.path === '/view').map((request) => request.query)).toEqual([{ filename: 'easel_00002_.png', subfolder: '', type: 'output' }]);
  });

  /** The /view queries of one job per history outputs given, each answered with its own outputs. */
  async function viewQueriesFor(outputs: unknown[]): Promise<Record<string, string>[]> {
    let next = 0;
    const server = await serveComfy({
      routes: { '/history/*': (request) => ({ json: historyEntry(request.path.slice('/history/'.length), {}, outputs[next++]) }) },
      frames: (id) => [{ type: 'execution_success', data: { prompt_id: id } }],
    });
    const backend = createComfyUiBackend({ url: server.url, workflow });
    for (let job = 0; job < outputs.length; job++) await backend.generate(REQUEST, run());
    return server.requests.filter((request) => request.path === '/view').map((request) => request.query);
  }

  it('reads the file ComfyUI names, with "" and "output" for a missing subfolder and type, and keeps a temp type', async () => {
    const queries = await viewQueriesFor([
      { '9': { images: [{ subfolder: 'no-name' }, 'junk', null, { filename: 'ComfyUI_00007_.png' }] } },
      { '9': { images: [{ filename: 'ComfyUI_temp_abcde_00001_.png', subfolder: '', type: 'temp' }] } },
    ]);
    expect(queries).toEqual([
      { filename: 'ComfyUI_00007_.png', subfolder: '', type: 'output' },
      { filename: 'ComfyUI_temp_abcde_00001_.png', subfolder: '', type: 'temp' },
    ]);
  });

  it('of a batch, downloads the first image: the first SaveImage file, or the first preview when there are only previews', async () => {
    // A batch of 2 (EmptyLatentImage batch_size) gives one output node two images, in order.
    const saved = (n: number, type: string) => ({ filename: `easel_0000${n}_.png`, subfolder: '', type });
    const queries = await viewQueriesFor([{ '9': { images: [saved(1, 'output'), saved(2, 'output')] } }, { '9': { images: [saved(3, 'temp'), saved(4, 'temp')] } }]);
    expect(queries.map((query) => query['filename'])).toEqual(['easel_00001_.png', 'easel_00003_.png']);
  });

  it('uses the image the executed message announced when the history lists none', async () => {
    const announced = { filename: 'announced_00001_.png', subfolder: 'day', type: 'output' };
    const server = await serveComfy({
      routes: { '/history/*': (request) => ({ json: historyEntry(request.path.slice('/history/'.length), {}, {}) }) },
      frames: (id) => [{ type: 'executed', data: { node: '9', output: { images: [announced] }, prompt_id: id } }, { type: 'execution_success', data: { prompt_id: id } }],
    });
    await createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run());
    expect(server.requests.find((request) => request.path === '/view')?.query).toEqual(announced);
  });

  it('gives the settings of the workflow the history says ran, which an on_prompt handler may have changed', async () => {
    // server.py:678: `json_data = self.trigger_on_prompt(json_data)` lets extensions rewrite the prompt before it is queued.
    const server = await serveComfy({
      routes: {
        '/history/*': (request) => {
          const ran = structuredClone(server.prompts[0]?.prompt) as Record<string, { inputs: Record<string, unknown> }>;
          ran['3']!.inputs['steps'] = 30;
          ran['3']!.inputs['sampler_name'] = 'dpmpp_2m';
          ran['4']!.inputs['ckpt_name'] = 'SDXL/juggernautXL_v9.safetensors';
          return { json: historyEntry(request.path.slice('/history/'.length), ran) };
        },
      },
    });
    const result = await createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run());
    expect(result).toMatchObject({ seed: REQUEST.seed, steps: 30, cfg: REQUEST.cfg, sampler: 'dpmpp_2m', model: 'juggernautXL_v9' });
  });
});
