// What the ComfyUI adapter says when ComfyUI refuses, fails or cannot be reached: refusals and execution errors
// in ComfyUI's words, another server at the address, nothing listening, a connection or socket that breaks.
import { describe, expect, it } from 'vitest';
import { createComfyUiBackend, describeComfyUiError } from '../../../server/comfyui/index.ts';
import { readErrorCode } from '../../../server/util/index.ts';
import { REQUEST, closeAfterTest, expectBackendError, findClosedUrl, run, startFakeComfyUi, startStatusServer } from './helpers.ts';
import { finished, loadShippedWorkflow, serveComfy } from './comfyui-helpers.ts';

const workflow = await loadShippedWorkflow();

describe('describeComfyUiError', () => {
  it('quotes a body that is not JSON, and says when the answer was empty', () => {
    expect(describeComfyUiError('500 Internal Server Error')).toBe('500 Internal Server Error');
    expect(describeComfyUiError('')).toBe('(empty answer)');
    expect(describeComfyUiError('  \n')).toBe('(empty answer)');
  });

  it('reads the error object: its message, then its details when they say something', () => {
    // ComfyUI's no_prompt error repeats itself (server.py:714-719): both halves are quoted.
    expect(describeComfyUiError(JSON.stringify({ error: { type: 'no_prompt', message: 'No prompt provided', details: 'No prompt provided', extra_info: {} }, node_errors: {} }))).toBe(
      'No prompt provided: No prompt provided',
    );
    expect(describeComfyUiError(JSON.stringify({ error: { type: 'prompt_no_outputs', message: 'Prompt has no outputs', details: '' } }))).toBe('Prompt has no outputs');
    expect(describeComfyUiError(JSON.stringify({ error: { message: 'Prompt has no outputs', details: '  ' } }))).toBe('Prompt has no outputs');
    expect(describeComfyUiError(JSON.stringify({ error: { message: 'Prompt has no outputs' } }))).toBe('Prompt has no outputs');
    expect(describeComfyUiError(JSON.stringify({ error: 'prompt_id already exists' }))).toBe('prompt_id already exists');
  });

  it("lists each node's errors after the error, skipping what is no error object, and names an unnamed node 'node'", () => {
    const body = {
      error: { type: 'prompt_outputs_failed_validation', message: 'Prompt outputs failed validation', details: '' },
      node_errors: {
        '4': {
          errors: [{ message: 'Value not in list', details: "ckpt_name: 'x.safetensors' not in []" }, 'junk', null, { message: 'Required input is missing', details: 'clip' }],
          class_type: 'CheckpointLoaderSimple',
        },
        '5': { errors: [{ message: 'Failed to convert an input value to a INT value', details: 'width, abc' }] },
        '6': { class_type: 'CLIPTextEncode' },
      },
    };
    expect(describeComfyUiError(JSON.stringify(body))).toBe(
      "Prompt outputs failed validation — CheckpointLoaderSimple (node 4): Value not in list: ckpt_name: 'x.safetensors' not in []; Required input is missing: clip — " +
        'node (node 5): Failed to convert an input value to a INT value: width, abc',
    );
  });

  it('leaves out an empty error before the node errors, and quotes the body when nothing in it reads as an error', () => {
    const body = { error: { message: '', details: '' }, node_errors: { '3': { errors: [{ message: 'Value -1 smaller than min of 0', details: 'seed' }], class_type: 'KSampler' } } };
    expect(describeComfyUiError(JSON.stringify(body))).toBe('KSampler (node 3): Value -1 smaller than min of 0: seed');
    expect(describeComfyUiError('{"status": "busy"}')).toBe('{"status": "busy"}');
  });
});

describe('what the ComfyUI adapter says when generating fails', () => {
  it('says how to start ComfyUI when nothing listens at the URL', async () => {
    const url = await findClosedUrl();
    const backend = createComfyUiBackend({ url, workflow });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'unreachable');
    expect(error.message).toContain(url);
    expect(error.message).toContain('--image-url');
  });

  it('reports node validation errors in ComfyUI’s words', async () => {
    const fake = await startFakeComfyUi({ checkpoints: ['sd_xl_base_1.0.safetensors'] });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('HTTP 400');
    expect(error.message).toContain('Prompt outputs failed validation');
    expect(error.message).toContain("CheckpointLoaderSimple (node 4): Value not in list: ckpt_name: 'v1-5-pruned-emaonly.safetensors' not in");
  });

  it('reports a workflow without an output node', async () => {
    const fake = await startFakeComfyUi();
    const edited = structuredClone(workflow);
    delete edited['9'];
    const backend = createComfyUiBackend({ url: fake.url, workflow: edited });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('Prompt has no outputs');
  });

  it('reports an execution_error with its exception message', async () => {
    const fake = await startFakeComfyUi({ executionError: 'CUDA out of memory. Tried to allocate 3.00 GiB' });
    const backend = createComfyUiBackend({ url: fake.url, workflow });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('KSampler');
    expect(error.message).toContain('CUDA out of memory. Tried to allocate 3.00 GiB');
  });

  it('rejects with backend_error when the server at the URL is not ComfyUI (no /ws)', async () => {
    const other = await closeAfterTest(startStatusServer(404));
    const backend = createComfyUiBackend({ url: other.url, workflow });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('/ws');
  });

  it('nothing listening: ComfyUI is not answering, with the code, the connection error kept as the cause', async () => {
    const url = await findClosedUrl();
    const error = await expectBackendError(createComfyUiBackend({ url, workflow }).generate(REQUEST, run()), 'unreachable');
    expect(error.message).toBe(`ComfyUI at ${url} is not answering (ECONNREFUSED). Start ComfyUI (python main.py, port 8188 by default), or set --image-url to where it runs.`);
    // The log shows the cause.
    expect(readErrorCode(error.cause)).toBe('ECONNREFUSED');
  });

  it('a WebSocket handshake that fails without an error code: not answering, no code in brackets', async () => {
    const server = await serveComfy({ ws: 'bad-accept' });
    const error = await expectBackendError(createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run()), 'unreachable');
    expect(error.message).toBe(`ComfyUI at ${server.url} is not answering. Start ComfyUI (python main.py, port 8188 by default), or set --image-url to where it runs.`);
  });

  it('a server that refuses /ws: its HTTP status', async () => {
    const server = await serveComfy({ ws: { status: 404 } });
    const error = await expectBackendError(createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run()), 'backend_error');
    expect(error.message).toBe(`The server at ${server.url} refused ComfyUI's WebSocket /ws (HTTP 404). Check that --image-url points to ComfyUI.`);
  });

  it('a connection that breaks while /prompt is answered: it broke before the image arrived, with the code', async () => {
    const server = await serveComfy({ routes: { '/prompt': 'cut' } });
    const error = await expectBackendError(createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run()), 'unreachable');
    const code = readErrorCode(error.cause);
    expect(code).toMatch(/^(UND_ERR_SOCKET|ECONNRESET)$/);
    expect(error.message).toBe(`The connection to ComfyUI at ${server.url} broke before the image arrived (${code}). Check its console for a crash, then try again.`);
  });

  it('/history failing or unreadable: its status and words, or the start of what it sent', async () => {
    const failing = await serveComfy({ routes: { '/history/*': { status: 500, text: 'Internal Server Error' } } });
    const failed = await expectBackendError(createComfyUiBackend({ url: failing.url, workflow }).generate(REQUEST, run()), 'backend_error');
    expect(failed.message).toBe(`ComfyUI at ${failing.url} answered /history with HTTP 500: Internal Server Error.`);

    const page = `<!doctype html><html><head><title>Login</title></head><body>${'x'.repeat(200)}</body></html>`;
    const html = await serveComfy({ routes: { '/history/*': { text: page } } });
    const unreadable = await expectBackendError(createComfyUiBackend({ url: html.url, workflow }).generate(REQUEST, run()), 'bad_response');
    expect(unreadable.message).toBe(`ComfyUI at ${html.url} sent an unreadable /history answer (${page.slice(0, 120)}).`);
  });

  it('/view refusing the file: its status and words, or "no details" for ComfyUI\'s empty 404', async () => {
    // view_image answers a missing file with web.Response(status=404): no body (server.py:518).
    const missing = await serveComfy({ routes: { '/view': { status: 404, text: '' } } });
    const notFound = await expectBackendError(createComfyUiBackend({ url: missing.url, workflow }).generate(REQUEST, run()), 'backend_error');
    expect(notFound.message).toBe(`ComfyUI at ${missing.url} could not serve easel_00001_.png (HTTP 404: no details).`);

    const failing = await serveComfy({ routes: { '/view': { status: 500, text: 'disk read error' } } });
    const failed = await expectBackendError(createComfyUiBackend({ url: failing.url, workflow }).generate(REQUEST, run()), 'backend_error');
    expect(failed.message).toBe(`ComfyUI at ${failing.url} could not serve easel_00001_.png (HTTP 500: disk read error).`);
  });

  it('an execution_error in ComfyUI’s words: the node, the exception type and message, or "unknown error"', async () => {
    const errors: Record<string, unknown>[] = [
      { node_id: '3', node_type: 'KSampler', exception_type: 'torch.OutOfMemoryError', exception_message: 'CUDA out of memory. Tried to allocate 3.00 GiB', executed: [] },
      { exception_message: 'Allocation on device' },
      {},
    ];
    let next = 0;
    const server = await serveComfy({ frames: (id) => [{ type: 'execution_error', data: { prompt_id: id, ...errors[next++] } }] });
    const backend = createComfyUiBackend({ url: server.url, workflow });

    const messages: string[] = [];
    for (let i = 0; i < errors.length; i++) messages.push((await expectBackendError(backend.generate(REQUEST, run()), 'backend_error')).message);

    expect(messages).toEqual([
      'ComfyUI failed in KSampler (node 3): torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. Check the ComfyUI console.',
      'ComfyUI failed: Allocation on device. Check the ComfyUI console.',
      'ComfyUI failed: unknown error. Check the ComfyUI console.',
    ]);
  });

  it('a socket that ComfyUI closes mid-job: the connection closed before the image was finished, "socket closed" as the cause', async () => {
    const server = await serveComfy({ frames: (id) => [{ type: 'progress', data: { value: 1, max: 6, prompt_id: id } }, 'close'] });
    const error = await expectBackendError(createComfyUiBackend({ url: server.url, workflow, timeoutMs: 1_000 }).generate(REQUEST, run()), 'unreachable');
    expect(error.message).toBe(`ComfyUI at ${server.url} closed the connection before the image was finished. Check its console for a crash or restart, then try again.`);
    expect((error.cause as Error).message).toBe('socket closed');
  });

  it('a frame over 64 MB ends the job instead of being buffered (ws closes the socket at its header)', async () => {
    const server = await serveComfy({ frames: (id) => [Buffer.alloc(64 * 1024 * 1024 + 1), ...finished(id)] });
    const error = await expectBackendError(createComfyUiBackend({ url: server.url, workflow, timeoutMs: 2_000 }).generate(REQUEST, run()), 'unreachable');
    expect(error.message).toContain('closed the connection before the image was finished');
  });
});
