// What the ComfyUI adapter sends: the workflow with every placeholder filled in (the caller's left as it was),
// its own prompt_id and client id, every POST as JSON, and the WebSocket at ws:// or wss://.
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createComfyUiBackend } from '../../../server/comfyui/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { REQUEST, cancelAtFirstProgress, expectBackendError, findClosedUrl, run, startFakeComfyUi } from './helpers.ts';
import { latestPromptId, loadShippedWorkflow, readNode, serveComfy } from './comfyui-helpers.ts';

const workflow = await loadShippedWorkflow();

describe('what the ComfyUI adapter sends', () => {
  it('opens the WebSocket before queueing and replaces every placeholder in the submitted workflow', async () => {
    const fake = await startFakeComfyUi();
    const backend = createComfyUiBackend({ url: fake.url, workflow, clientId: 'easel-test-client' });

    await backend.generate(REQUEST, run());

    const paths = fake.requests.map((request) => request.path);
    expect(paths.indexOf('/ws')).toBeGreaterThanOrEqual(0);
    expect(paths.indexOf('/ws')).toBeLessThan(paths.indexOf('/prompt'));
    expect(fake.connectedClients).toEqual(['easel-test-client']);
    const submitted = fake.requests.find((request) => request.path === '/prompt')?.body as { client_id: string };
    expect(submitted.client_id).toBe('easel-test-client');
    const sent = fake.workflows[0];
    expect(readNode(sent, '3').inputs).toMatchObject({ seed: REQUEST.seed, steps: 6, cfg: 7.5, sampler_name: 'euler', scheduler: 'normal' });
    expect(readNode(sent, '5').inputs).toMatchObject({ width: 64, height: 96, batch_size: 1 });
    expect(readNode(sent, '6').inputs['text']).toBe(REQUEST.prompt);
    expect(readNode(sent, '7').inputs['text']).toBe(REQUEST.negativePrompt);
    expect(JSON.stringify(sent)).not.toMatch(/%\w+%/);
    // The caller's workflow is a template: it must stay untouched.
    expect(readNode(workflow, '6').inputs['text']).toBe('%prompt%');
  });

  it('replaces placeholders inside longer strings and URL-encodes the image location', async () => {
    const fake = await startFakeComfyUi();
    const edited = structuredClone(workflow);
    readNode(edited, '6').inputs['text'] = 'photo of %prompt%, 4k';
    readNode(edited, '9').inputs['filename_prefix'] = 'my pics/easel & co %seed%';
    const backend = createComfyUiBackend({ url: fake.url, workflow: edited });

    const result = await backend.generate({ ...REQUEST, prompt: 'a cat named %seed%' }, run());

    expect(readPngSize(result.png).ok).toBe(true);
    expect(readNode(fake.workflows[0], '6').inputs['text']).toBe('photo of a cat named %seed%, 4k');
    expect(readNode(fake.workflows[0], '9').inputs['filename_prefix']).toBe(`my pics/easel & co ${REQUEST.seed}`);
    const view = fake.requests.find((request) => request.path === '/view');
    expect(view?.query).toEqual({ filename: `easel & co ${REQUEST.seed}_00001_.png`, subfolder: 'my pics', type: 'output' });
  });

  it('sends its own prompt_id, a canonical UUID, with /prompt', async () => {
    const fake = await startFakeComfyUi({ clientPromptIds: 'uuid' });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    await backend.generate(REQUEST, run());

    const sent = (fake.requests.find((request) => request.path === '/prompt')?.body as { prompt_id?: unknown }).prompt_id;
    expect(sent).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(fake.promptIds).toEqual([sent]);
  });

  it('sends every POST as JSON and every GET without a body, the cancel calls included', async () => {
    // A 0.3.64 server (no /api/jobs): /queue lists our prompt as running, so the cancel is an /interrupt.
    const server = await serveComfy({
      queued: 'running',
      frames: (id) => [{ type: 'progress', data: { value: 1, max: 6, prompt_id: id, node: '3' } }],
    });
    const backend = createComfyUiBackend({ url: server.url, workflow });
    await cancelAtFirstProgress(backend);
    const promptId = latestPromptId(server);

    const calls = server.requests.filter((request) => request.path !== '/ws').map((request) => [request.method, request.path, request.headers['content-type']]);
    expect(calls).toEqual([
      ['POST', '/prompt', 'application/json'],
      ['POST', `/api/jobs/${promptId}/cancel`, 'application/json'],
      ['GET', '/queue', undefined],
      ['POST', '/interrupt', 'application/json'],
    ]);
    expect(server.requests.find((request) => request.path === '/interrupt')?.body).toEqual({ prompt_id: promptId });
  });

  it('opens the WebSocket at ws:// for an http:// address (trailing slashes dropped) and at wss:// for https://', async () => {
    // The address ws is given, recorded by a subclass that connects as usual.
    const opened: string[] = [];
    class RecordingWebSocket extends WebSocket {
      constructor(...args: unknown[]) {
        opened.push(String(args[0]));
        super(...(args as ConstructorParameters<typeof WebSocket>));
      }
    }
    const closed = await findClosedUrl();
    const port = new URL(closed).port;
    for (const url of [`${closed}//`, `https://127.0.0.1:${port}`]) {
      const backend = createComfyUiBackend({ url, workflow, clientId: 'easel-client', WebSocket: RecordingWebSocket });
      await expectBackendError(backend.generate(REQUEST, run()), 'unreachable');
    }
    expect(opened).toEqual([`ws://127.0.0.1:${port}/ws?clientId=easel-client`, `wss://127.0.0.1:${port}/ws?clientId=easel-client`]);
  });
});
