// The ComfyUI tests' shared pieces: the shipped workflow, a node of a workflow, and `serveComfy`, a real HTTP +
// WebSocket server that answers as a test scripts it, for the answers and timings the fake never gives.
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { onTestFinished } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { loadDefaultWorkflow } from '../../../server/comfyui/index.ts';
import { readBody } from '../../fakes/http-body.ts';
import { makePng } from '../../fakes/png-bytes.ts';

/** The workflow Easel ships; a test file that cannot load it fails at once. */
export async function loadShippedWorkflow(): Promise<Record<string, unknown>> {
  const loaded = await loadDefaultWorkflow();
  if (!loaded.ok) throw new Error(loaded.error.message);
  return loaded.value;
}

/** Node `id` of a workflow in API format, or an empty node when it has none. */
export function readNode(workflow: unknown, id: string): { class_type: string; inputs: Record<string, unknown> } {
  return (workflow as Record<string, { class_type: string; inputs: Record<string, unknown> }>)[id] ?? { class_type: '', inputs: {} };
}

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
export interface ComfyScript {
  // Answers by path; an asterisk stands for one path segment, as in "/history/" + "*".
  routes?: Record<string, Answer | ((request: Recorded, count: number) => Answer)>;
  /** The frames sent once /prompt has answered, for the prompt id it answered. */
  frames?: (promptId: string) => Frame[];
  /** The /ws upgrade: accepted (default), never answered, refused with a status, or a broken handshake. */
  ws?: 'accept' | 'hang' | 'bad-accept' | { status: number };
  /** Where GET /queue lists the latest prompt: running, waiting, or nowhere (default). */
  queued?: 'running' | 'pending';
}
export interface ScriptedComfy {
  url: string;
  requests: Recorded[];
  /** The POST /prompt bodies. */
  prompts: { prompt: unknown; client_id: unknown; prompt_id: unknown }[];
  /** The close code of each WebSocket the client closed: 1005 for a close frame without a code, 1006 for a dropped connection. */
  closeCodes: number[];
}

export const PNG = makePng(8, 8);
export const SAVED = { filename: 'easel_00001_.png', subfolder: '', type: 'output' };

/** A history entry as ComfyUI writes it (execution.py:1128-1133), with the given outputs. */
export function historyEntry(promptId: string, ran: unknown, outputs: unknown = { '9': { images: [SAVED] } }): Record<string, unknown> {
  return { [promptId]: { prompt: [0, promptId, ran, { client_id: 'c' }, ['9']], outputs, status: { status_str: 'success', completed: true, messages: [] }, meta: {} } };
}

/** ComfyUI's end of a prompt: its SaveImage's `executed`, then `execution_success`. */
export const finished = (promptId: string): Frame[] => [
  { type: 'executed', data: { node: '9', display_node: '9', output: { images: [SAVED] }, prompt_id: promptId } },
  { type: 'execution_success', data: { prompt_id: promptId } },
];

/** The prompt id of the latest POST /prompt (the adapter makes its own). */
export function latestPromptId(server: ScriptedComfy): string {
  return String(server.prompts.at(-1)?.prompt_id);
}

export async function serveComfy(script: ComfyScript = {}): Promise<ScriptedComfy> {
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
