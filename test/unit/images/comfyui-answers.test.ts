// What the ComfyUI adapter sends, reads and says, word for word: /prompt refusals in ComfyUI's shapes, the
// WebSocket messages of older and odd servers, /history and /view answers the fake never gives, the cancel
// paths (which cancel API the server has, learnt once), health answers, and its timeouts. The gaps a mutation
// run of server/comfyui showed. Odd answers come from `serveComfy` below, a real HTTP + WebSocket server that
// answers as scripted; the rest from the fake.
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { createComfyUiBackend, describeComfyUiError, loadDefaultWorkflow } from '../../../server/comfyui/index.ts';
import type { ImageProgress } from '../../../server/core/ports.ts';
import { readErrorCode } from '../../../server/util/index.ts';
import { readBody } from '../../fakes/http-body.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { REQUEST, abortedSignal, expectBackendError, findClosedUrl, recordProgress, waitForFirstProgress, startFakeComfyUi, cancelAtFirstProgress } from './helpers.ts';

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

const noProgress = () => {};
const run = (signal = new AbortController().signal, onProgress: (progress: ImageProgress) => void = noProgress) => ({ signal, onProgress });

// ---------------------------------------------------------------------------------------------------------
// serveComfy: a scripted ComfyUI for one test.

type Answer = { status?: number; json?: unknown; text?: string; bytes?: Uint8Array; delayMs?: number } | 'hang' | 'cut';
interface Recorded {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: unknown;
}
/** A WebSocket frame the server sends: a text message, a binary frame, or closing the socket. */
type Frame = { type: string; data: Record<string, unknown> } | Buffer | 'close';
interface ComfyScript {
  // Answers by path; an asterisk stands for one path segment, as in "/history/" + "*".
  routes?: Record<string, Answer | ((request: Recorded, count: number) => Answer)>;
  /** The frames sent once /prompt has answered, for the prompt id it answered. */
  frames?: (promptId: string) => Frame[];
  /** The /ws upgrade: accepted (default), never answered, refused with a status, or a broken handshake. */
  ws?: 'accept' | 'hang' | 'bad-accept' | { status: number };
  /** Where GET /queue lists the latest prompt: running, waiting, or nowhere (default). */
  queued?: 'running' | 'pending';
}
interface ScriptedComfy {
  url: string;
  requests: Recorded[];
  /** The POST /prompt bodies. */
  prompts: { prompt: unknown; client_id: unknown; prompt_id: unknown }[];
  /** The close code of each WebSocket the client closed: 1005 for a close frame without a code, 1006 for a dropped connection. */
  closeCodes: number[];
}

const PNG = makePng(8, 8);
const SAVED = { filename: 'easel_00001_.png', subfolder: '', type: 'output' };

/** A history entry as ComfyUI writes it (execution.py:1128-1133), with the given outputs. */
function historyEntry(promptId: string, ran: unknown, outputs: unknown = { '9': { images: [SAVED] } }): Record<string, unknown> {
  return { [promptId]: { prompt: [0, promptId, ran, { client_id: 'c' }, ['9']], outputs, status: { status_str: 'success', completed: true, messages: [] }, meta: {} } };
}

/** ComfyUI's end of a prompt: its SaveImage's `executed`, then `execution_success`. */
const finished = (promptId: string): Frame[] => [
  { type: 'executed', data: { node: '9', display_node: '9', output: { images: [SAVED] }, prompt_id: promptId } },
  { type: 'execution_success', data: { prompt_id: promptId } },
];

/** The prompt id of the latest POST /prompt (the adapter makes its own). */
function latestPromptId(server: ScriptedComfy): string {
  return String(server.prompts.at(-1)?.prompt_id);
}

async function serveComfy(script: ComfyScript = {}): Promise<ScriptedComfy> {
  const requests: Recorded[] = [];
  const prompts: ScriptedComfy['prompts'] = [];
  const closeCodes: number[] = [];
  const counts = new Map<string, number>();
  const sockets = new Set<WebSocket>();
  const patterns = Object.entries(script.routes ?? {}).map(([key, route]) => ({
    key,
    pattern: new RegExp(`^${key.replaceAll('*', '[^/]+')}$`),
    route,
  }));

  function defaultAnswer(recorded: Recorded): Answer {
    if (recorded.path === '/prompt') {
      const body = recorded.body as { prompt_id?: string };
      return { json: { prompt_id: body.prompt_id, number: 0, node_errors: {} } };
    }
    if (recorded.path.startsWith('/history/')) {
      const id = decodeURIComponent(recorded.path.slice('/history/'.length));
      const sent = prompts.find((prompt) => prompt.prompt_id === id);
      return { json: sent === undefined ? {} : historyEntry(id, sent.prompt) };
    }
    if (recorded.path === '/view') return { bytes: PNG };
    if (recorded.path === '/queue' && recorded.method === 'GET') {
      // ComfyUI's queue items: [number, prompt_id, prompt, extra_data, outputs_to_execute] (server.py:667-671, execution.py:1137-1142).
      const latest = prompts.at(-1)?.prompt_id;
      const item = (number: number) => (latest === undefined ? [] : [[number, latest, {}, {}, ['9']]]);
      return { json: { queue_running: script.queued === 'running' ? item(0) : [], queue_pending: script.queued === 'pending' ? item(1) : [] } };
    }
    if (recorded.path === '/queue' || recorded.path === '/interrupt') return { text: '' };
    // aiohttp's answer to a path it has no route for.
    return { status: 404, text: '404: Not Found' };
  }

  function send(response: ServerResponse, answer: Exclude<Answer, 'hang' | 'cut'>, after: () => void): void {
    setTimeout(() => {
      const type = answer.bytes !== undefined ? 'image/png' : answer.json !== undefined ? 'application/json' : 'text/plain';
      const body = answer.bytes !== undefined ? Buffer.from(answer.bytes) : answer.json !== undefined ? JSON.stringify(answer.json) : (answer.text ?? '');
      // aiohttp's web.Response and FileResponse send a Content-Length.
      response.writeHead(answer.status ?? 200, { 'content-type': type, 'content-length': String(Buffer.byteLength(body)) }).end(body, after);
    }, answer.delayMs ?? 0);
  }

  const server: Server = createServer((request, response) => {
    void (async () => {
      const address = new URL(request.url ?? '/', 'http://127.0.0.1');
      const text = await readBody(request);
      let body: unknown = text === '' ? undefined : text;
      try {
        body = JSON.parse(text) as unknown;
      } catch {}
      const recorded: Recorded = { method: request.method ?? 'GET', path: address.pathname, query: Object.fromEntries(address.searchParams), headers: request.headers, body };
      requests.push(recorded);
      const match = patterns.find(({ pattern }) => pattern.test(recorded.path));
      const count = (counts.get(match?.key ?? '') ?? 0) + 1;
      if (match !== undefined) counts.set(match.key, count);
      const answer = match === undefined ? defaultAnswer(recorded) : typeof match.route === 'function' ? match.route(recorded, count) : match.route;
      if (answer === 'hang') return;
      if (answer === 'cut') return void request.socket.destroy();
      const isPrompt = recorded.method === 'POST' && recorded.path === '/prompt';
      if (isPrompt) prompts.push(body as ScriptedComfy['prompts'][number]);
      send(response, answer, () => {
        if (!isPrompt || (answer.status ?? 200) !== 200) return;
        const answered = (answer.json as { prompt_id?: unknown } | undefined)?.prompt_id;
        if (typeof answered !== 'string') return;
        for (const frame of script.frames?.(answered) ?? finished(answered)) {
          for (const socket of sockets) {
            if (frame === 'close') socket.close();
            else if (Buffer.isBuffer(frame)) socket.send(frame, { binary: true });
            else socket.send(JSON.stringify(frame));
          }
        }
      });
    })();
  });
  const webSockets = new WebSocketServer({ noServer: true });
  const hungUpgrades = new Set<Duplex>();
  server.on('upgrade', (request, socket, head) => {
    const address = new URL(request.url ?? '/', 'http://127.0.0.1');
    requests.push({ method: 'GET', path: address.pathname, query: Object.fromEntries(address.searchParams), headers: request.headers, body: undefined });
    const mode = script.ws ?? 'accept';
    // An upgrading socket is the server's no more: closeAllConnections() does not end it.
    hungUpgrades.add(socket);
    if (mode === 'hang') return;
    if (mode === 'bad-accept') {
      socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: not-the-right-key\r\n\r\n');
      return;
    }
    if (mode !== 'accept') {
      socket.end(`HTTP/1.1 ${mode.status} Refused\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    webSockets.handleUpgrade(request, socket, head, (webSocket) => {
      sockets.add(webSocket);
      webSocket.on('close', (code) => {
        closeCodes.push(code);
        sockets.delete(webSocket);
      });
      webSocket.on('error', () => {});
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  onTestFinished(async () => {
    for (const socket of sockets) socket.terminate();
    for (const socket of hungUpgrades) socket.destroy();
    await new Promise<void>((resolve) => webSockets.close(() => resolve()));
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${port}`, requests, prompts, closeCodes };
}

/** A rejection's error, for checking an error's cause as well as its words. */
async function failureOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

// ---------------------------------------------------------------------------------------------------------

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

describe('what the ComfyUI adapter sends', () => {
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

describe('what the ComfyUI adapter says when generating fails', () => {
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

  it('/history failing or unreadable: its status and words, or the start of what it sent', async () => {
    const failing = await serveComfy({ routes: { '/history/*': { status: 500, text: 'Internal Server Error' } } });
    const failed = await expectBackendError(createComfyUiBackend({ url: failing.url, workflow }).generate(REQUEST, run()), 'backend_error');
    expect(failed.message).toBe(`ComfyUI at ${failing.url} answered /history with HTTP 500: Internal Server Error.`);

    const page = `<!doctype html><html><head><title>Login</title></head><body>${'x'.repeat(200)}</body></html>`;
    const html = await serveComfy({ routes: { '/history/*': { text: page } } });
    const unreadable = await expectBackendError(createComfyUiBackend({ url: html.url, workflow }).generate(REQUEST, run()), 'bad_response');
    expect(unreadable.message).toBe(`ComfyUI at ${html.url} sent an unreadable /history answer (${page.slice(0, 120)}).`);
  });

  it('a history that never lists the prompt: asked five times, then no image', async () => {
    // The executed message is left out too, so there is no image anywhere.
    const server = await serveComfy({ routes: { '/history/*': { json: {} } }, frames: (id) => [{ type: 'execution_success', data: { prompt_id: id } }] });
    const error = await expectBackendError(createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(`ComfyUI at ${server.url} finished the workflow but it saved no image. End the workflow in a SaveImage node.`);
    expect(server.requests.filter((request) => request.path.startsWith('/history/'))).toHaveLength(5);
  }, 3_000);

  it('/view refusing the file: its status and words, or "no details" for ComfyUI\'s empty 404', async () => {
    // view_image answers a missing file with web.Response(status=404): no body (server.py:518).
    const missing = await serveComfy({ routes: { '/view': { status: 404, text: '' } } });
    const notFound = await expectBackendError(createComfyUiBackend({ url: missing.url, workflow }).generate(REQUEST, run()), 'backend_error');
    expect(notFound.message).toBe(`ComfyUI at ${missing.url} could not serve easel_00001_.png (HTTP 404: no details).`);

    const failing = await serveComfy({ routes: { '/view': { status: 500, text: 'disk read error' } } });
    const failed = await expectBackendError(createComfyUiBackend({ url: failing.url, workflow }).generate(REQUEST, run()), 'backend_error');
    expect(failed.message).toBe(`ComfyUI at ${failing.url} could not serve easel_00001_.png (HTTP 500: disk read error).`);
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

    await createComfyUiBackend({ url: server.url, workflow }).generate(REQUEST, { signal: new AbortController().signal, onProgress });

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

  it('waits for each of many messages without piling up abort listeners (Node would print MaxListenersExceededWarning)', async () => {
    // Node warns once more than 10 listeners are on one AbortSignal: a listener left behind per wait would do it.
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    onTestFinished(() => void process.off('warning', onWarning));
    const fake = await startFakeComfyUi();
    const { events, onProgress } = recordProgress();

    await createComfyUiBackend({ url: fake.url, workflow }).generate({ ...REQUEST, steps: 15 }, { signal: new AbortController().signal, onProgress });
    await new Promise((resolve) => setImmediate(resolve));

    expect(events).toHaveLength(15);
    expect(warnings).toEqual([]);
  });

  it('a frame over 64 MB ends the job instead of being buffered (ws closes the socket at its header)', async () => {
    const server = await serveComfy({ frames: (id) => [Buffer.alloc(64 * 1024 * 1024 + 1), ...finished(id)] });
    const error = await expectBackendError(createComfyUiBackend({ url: server.url, workflow, timeoutMs: 2_000 }).generate(REQUEST, run()), 'unreachable');
    expect(error.message).toContain('closed the connection before the image was finished');
  });
});

describe('what the ComfyUI adapter reads from /history', () => {
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

describe('cancel and timeout', () => {
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

describe('checkHealth', () => {
  it('names the version and the first device, without a trailing slash of the address', async () => {
    const fake = await startFakeComfyUi();
    const health = await createComfyUiBackend({ url: `${fake.url}//`, workflow }).checkHealth();
    expect(health).toEqual({ reachable: true, detail: `ComfyUI 0.3.64 answers at ${fake.url} on cuda:0 NVIDIA GeForce RTX 3060 : cudaMallocAsync.` });
    expect(fake.requests.map((request) => request.path)).toEqual(['/system_stats']);
  });

  it('leaves out a version or device name the server does not give', async () => {
    // Older ComfyUI has no comfyui_version in /system_stats.
    const answers = [{ system: { os: 'posix' }, devices: [{ type: 'cpu', index: null }] }, { system: { comfyui_version: 7 } }];
    let next = 0;
    const server = await serveComfy({ routes: { '/system_stats': () => ({ json: answers[next++] }) } });
    const backend = createComfyUiBackend({ url: server.url, workflow });
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: `ComfyUI answers at ${server.url}.` });
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: `ComfyUI answers at ${server.url}.` });
  });

  it('another server (404 on /system_stats): reachable, and says to check the address', async () => {
    const server = await serveComfy();
    expect(await createComfyUiBackend({ url: server.url, workflow }).checkHealth()).toEqual({
      reachable: true,
      detail: `The server at ${server.url} answers /system_stats with HTTP 404; check that --image-url points to ComfyUI.`,
    });
  });

  it('nothing listening: not answering, with the code and how to start ComfyUI', async () => {
    const url = await findClosedUrl();
    expect(await createComfyUiBackend({ url, workflow }).checkHealth()).toEqual({
      reachable: false,
      detail: `ComfyUI at ${url} is not answering (ECONNREFUSED). Start ComfyUI (python main.py, port 8188 by default), or set --image-url to where it runs.`,
    });
  });

  it('a server that does not answer: within the health timeout, or at once when the caller cancels', async () => {
    const server = await serveComfy({ routes: { '/system_stats': 'hang' } });
    expect(await createComfyUiBackend({ url: server.url, workflow, healthTimeoutMs: 50 }).checkHealth()).toEqual({
      reachable: false,
      detail: `ComfyUI at ${server.url} did not answer within 50 ms; it may be busy starting up.`,
    });

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 30);
    expect(await createComfyUiBackend({ url: server.url, workflow, healthTimeoutMs: 60_000 }).checkHealth(controller.signal)).toEqual({
      reachable: false,
      detail: 'The health check was cancelled.',
    });
  }, 2_000);
});
