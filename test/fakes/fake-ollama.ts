// A fake Ollama speaking the real wire protocol on 127.0.0.1, scripted by the test.
// Status codes, error bodies and NDJSON shapes copy Ollama's HTTP API (docs/api.md), so the
// real `ollama` client and our adapter cannot tell the difference.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeOllamaReply {
  /** Content pieces, each sent as one NDJSON line (`message.content`). */
  chunks: string[];
  /** Waited before each line (time to first token, then between tokens). */
  delayMs?: number;
  /** `done_reason` of the final line. Default 'stop'. */
  doneReason?: string;
  /** `eval_count` of the final line. Default: the number of chunks. */
  evalCount?: number;
  /** `prompt_eval_count` of the final line. Default: a rough token count of the messages. */
  promptEvalCount?: number;
  /**
   * Send this many chunks, then fail as Ollama ≥ 0.12.6 does (v0.12.6 server/routes.go:1645-1674,
   * streamResponse): with no line sent yet, an HTTP `status` (default 500) and a JSON `{"error": message}`;
   * after content, one NDJSON `{"error": message}` line and the end of the body, with no `done` line.
   */
  errorAfter?: { chunks: number; message: string; status?: number };
  /** Send this many chunks, then destroy the socket: Ollama crashing mid-reply. */
  dropAfter?: number;
  /** Awaited after the first line and before the rest: lets a test act mid-stream. */
  gate?: Promise<void>;
  /**
   * Silence before anything is sent, headers included: a model loading. Real Ollama writes nothing until
   * the runner is loaded and the first line is ready (v0.12.6 server/routes.go:1948 ChatHandler blocks
   * in scheduleRunner; streamResponse at :1645 writes headers with the first line via gin's c.Stream).
   */
  loadMs?: number;
  /** Send this many chunks, then nothing more until the client hangs up: a runner that hung mid-reply. */
  stallAfter?: number;
  /**
   * Send this many chunks, then one line that never ends: a content line's opening, then `a`s with no
   * newline, written with backpressure until the client hangs up or `maxBytes` of it went out (default
   * 64 MB; then the fake ends the body). Stands for something at --ollama-url that is not Ollama, a broken
   * proxy, or a hostile server feeding one endless line (issue 21). `onEnd` tells the bytes of the line
   * handed to the socket, and whether the client hung up first.
   */
  endlessLineAfter?: { chunks: number; maxBytes?: number; onEnd?: (sent: { bytes: number; hungUp: boolean }) => void };
  /**
   * Send this many chunks, then `line` as one raw line (a newline is added), then the other chunks and the
   * done line. Stands for a line that is not an Ollama chat chunk: garbage from a proxy or from something
   * that is not Ollama, or a hostile server (issue 21: `{"message": 42, "done": "maybe"}`).
   */
  rawLineAfter?: { chunks: number; line: string };
  /**
   * A benchmark's token flood: the same body as a plain reply (every chunk a line, then the done line), sent
   * as fast as the socket takes it, many lines per write (about 64 kB) with backpressure. Pacing and failure
   * options do not combine with it (a script error).
   */
  flood?: boolean;
  /** Called as content line `line` (0-based) is handed to the socket: a benchmark's send time. */
  onLineWritten?: (line: number) => void;
}

export interface FakeChatMessage {
  role: string;
  content: string;
  /**
   * Images as sent: base64 strings (api.Message.Images []ImageData, api/types.go:203 @ fb30760; ImageData is
   * []byte, :57, so encoding/json reads each as base64). A script sees them here; the decoded bytes are in
   * FakeOllamaRequest.images and chatImages().
   */
  images?: string[];
  [key: string]: unknown;
}

export interface FakeChatRequestBody {
  model: string;
  messages?: FakeChatMessage[];
  stream?: boolean;
  format?: unknown;
  options?: Record<string, unknown>;
  keep_alive?: string | number;
  [key: string]: unknown;
}

export type FakeOllamaScript =
  | FakeOllamaReply
  | string
  | ((request: FakeChatRequestBody) => FakeOllamaReply | string | Promise<FakeOllamaReply | string>);

export interface FakeOllamaRequest {
  method: string;
  path: string;
  /** The parsed JSON body; undefined when there was none or it was not JSON (see rawBody). */
  body: unknown;
  rawBody: string;
  /** Date.now() when the request arrived. */
  receivedAt: number;
  /** True when the client hung up before the reply ended. */
  aborted: boolean;
  /**
   * /api/chat only, once the body decoded as Ollama decodes it: the bytes of each message's `images`
   * (one list per message, empty when it has none), base64-decoded as Go does.
   */
  images?: Uint8Array[][];
}

export interface FakeOllama {
  /** Base URL, e.g. http://127.0.0.1:43121 (no trailing slash). */
  readonly url: string;
  readonly port: number;
  readonly requests: readonly FakeOllamaRequest[];
  /** /api/chat responses whose client hung up before the reply ended. */
  readonly hangups: number;
  /** Model names (as requested) that were unloaded with keep_alive: 0. */
  readonly unloads: readonly string[];
  /** Test bugs the fake answered with a 500 (no reply left, impossible reply…), for diagnosis. */
  readonly scriptErrors: readonly string[];
  /** Scripted replies not used yet. */
  readonly pendingReplies: number;
  /** Adds replies for the next /api/chat requests, in order. */
  enqueue(...replies: FakeOllamaScript[]): void;
  /** Parsed bodies of every /api/chat request, in arrival order. */
  chatRequests(): FakeChatRequestBody[];
  /**
   * The decoded image bytes of every /api/chat request whose body Ollama would have decoded, in arrival
   * order: per request, per message, its images (see FakeOllamaRequest.images).
   */
  chatImages(): Uint8Array[][][];
  /**
   * What the model would actually read for each /api/chat request: the messages rendered through
   * Ollama's template for mistral:7b. Shows what a template silently drops.
   */
  renderedPrompts(): string[];
  /** The installed models, by name (a mistral:7b-like model) or described one by one. */
  setModels(models: Array<string | FakeModelSpec>): void;
  /**
   * The names POST /api/pull can fetch, and how each pull goes. Any other name fails as the registry's
   * 404 does: "pulling manifest", then `{"error": "pull model manifest: file does not exist"}`.
   */
  setPullable(pullable: Record<string, FakePullable>): void;
  /** Names (with their tag) of pulls the client hung up on before `success`; none of them was installed. */
  readonly pullsCancelled: readonly string[];
  /** Resolves once `count` pulls (default 1) have been cancelled by a client hang-up. */
  waitForPullCancelled(count?: number): Promise<void>;
  /** Models in memory, as GET /api/ps lists them. A chat or load adds its model; keep_alive 0 removes it. */
  setLoaded(names: string[]): void;
  /** While down, every connection is destroyed at once, as if Ollama were not running. */
  setDown(down: boolean): void;
  /** Resolves once `count` /api/chat hang-ups have been seen in total (default 1). */
  waitForHangup(count?: number): Promise<void>;
  /**
   * Resolves once `count` replies (default 1) reached their `stallAfter` point with every line before it
   * handed to the socket: the client has read (nearly) all of them.
   */
  waitForStall(count?: number): Promise<void>;
  /** Resolves once `count` requests (to `path` when given) have arrived in total. */
  waitForRequests(count: number, path?: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * One installed model and what Ollama says of it. Every field but `name` defaults to mistral:7b's, so
 * `'mistral:7b'` and `{ name: 'mistral:7b' }` are the same model.
 */
export interface FakeModelSpec {
  /** A name without a tag is listed as `:latest`. */
  name: string;
  /**
   * /api/show `capabilities` (types/model/capability.go: completion, tools, insert, vision, embedding,
   * thinking, image, audio). Default ['completion']; [] leaves the field out (api/types.go:752 omitempty).
   * Without 'vision', a chat whose messages carry images is refused as Ollama refuses it (see handleChat).
   */
  capabilities?: string[];
  /** /api/show `model_info["<family>.context_length"]`. Default 32768; null leaves the key out. */
  contextLength?: number | null;
  /** /api/tags `size` in bytes. Default 4 372 824 384. */
  sizeBytes?: number;
  /** details.parameter_size. Default '7.2B'. */
  parameterSize?: string;
  /** details.family, and model_info's general.architecture. Default 'llama'. */
  family?: string;
  /** details.quantization_level. Default 'Q4_0'. */
  quantization?: string;
  /**
   * /api/show of this model fails: `{"error": message}` with `status` (default 500, as ShowHandler's
   * default branch answers an error GetModelInfo returned: server/routes.go:1362-1373 @ fb30760).
   */
  showError?: { status?: number; message: string };
}

/** How POST /api/pull of one name goes; once it succeeds the model is installed with these details. */
export interface FakePullable extends Omit<FakeModelSpec, 'name' | 'showError'> {
  /** Bytes of the weights layer: `total` of its progress lines. Default `sizeBytes`, else 4 372 824 384. */
  totalBytes?: number;
  /**
   * How long the weights layer takes, spread evenly over its `steps` progress lines. Default 0; a browser
   * test that wants to see the bar move sets about 1000.
   */
  durationMs?: number;
  /** Progress lines of the weights layer after its first one (completed 0). Default 10. */
  steps?: number;
  /** Awaited after the weights layer's first progress line: lets a test act mid-pull. */
  gate?: Promise<void>;
  /** After this many of the weights layer's progress lines, fail with `{"error": message}` (a broken download). */
  errorAfter?: { steps: number; message: string };
}

export interface FakeOllamaOptions {
  /** Installed models. Default ['mistral:7b']. */
  models?: Array<string | FakeModelSpec>;
  /** Names POST /api/pull can fetch (see setPullable). Default none. */
  pullable?: Record<string, FakePullable>;
  version?: string;
  /** How long waitFor* helpers wait before rejecting with a clear message. Default 10 s. */
  waitTimeoutMs?: number;
}

/** A reply in the project's format: prose, a `---` line, then the metadata JSON. */
export function scriptReply(
  text: string,
  metadata: object,
  options: Omit<FakeOllamaReply, 'chunks'> = {},
): FakeOllamaReply {
  return { ...options, chunks: splitIntoChunks(`${text}\n---\n${JSON.stringify(metadata)}`) };
}

const CHUNK_SIZES = [3, 5, 4, 6];

/** Splits text into token-sized pieces (3–6 characters), never inside a surrogate pair. */
export function splitIntoChunks(text: string): string[] {
  const characters = Array.from(text);
  const chunks: string[] = [];
  for (let start = 0, i = 0; start < characters.length; i++) {
    const size = CHUNK_SIZES[i % CHUNK_SIZES.length] ?? 4;
    chunks.push(characters.slice(start, start + size).join(''));
    start += size;
  }
  return chunks;
}

const NO_REPLY_LEFT = 'fake-ollama: no scripted reply left';
const FORMAT_VIOLATION = 'fake-ollama: scripted reply does not satisfy the requested format';
const UNCONVERTIBLE_SCHEMA = 'fake-ollama: the format schema has a bound llama.cpp would misread';
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
/** llama-server's refusal of images without a projector, as its error JSON (see handleChat). */
const LLAMA_SERVER_NO_MULTIMODAL = JSON.stringify({
  error: {
    code: 400,
    message: 'Multimodal data provided, but model does not support multimodal requests.',
    type: 'invalid_request_error',
  },
});
/** The paths this fake serves, each registered in v0.12.6 server/routes.go:1455-1485 for its methods. */
const KNOWN_PATHS = new Set(['/', '/api/version', '/api/ps', '/api/tags', '/api/show', '/api/generate', '/api/chat', '/api/pull']);

interface Waiter {
  isSatisfied: () => boolean;
  resolve: () => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/** An answer the fake gives on purpose, as Ollama would: `{"error": message}` with `status`. */
class HttpError extends Error {
  override readonly name = 'HttpError';
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export async function createFakeOllama(options: FakeOllamaOptions = {}): Promise<FakeOllama> {
  const version = options.version ?? '0.12.6';
  const waitTimeoutMs = options.waitTimeoutMs ?? 10_000;
  const startedAt = new Date();
  let models = (options.models ?? ['mistral:7b']).map(toModelSpec);
  let pullable = normalizePullable(options.pullable ?? {});
  const pullsCancelled: string[] = [];
  // A fresh Ollama has nothing in memory.
  let loaded: string[] = [];
  const markLoaded = (name: string) => {
    if (!loaded.includes(withTag(name))) loaded.push(withTag(name));
  };
  const markUnloaded = (name: string) => {
    loaded = loaded.filter((entry) => entry !== withTag(name));
  };
  const queue: FakeOllamaScript[] = [];
  const requests: FakeOllamaRequest[] = [];
  const unloads: string[] = [];
  const scriptErrors: string[] = [];
  const waiters = new Set<Waiter>();
  let hangups = 0;
  let stalls = 0;
  let down = false;
  let closed = false;

  function notify(): void {
    for (const waiter of waiters) {
      if (!waiter.isSatisfied()) continue;
      clearTimeout(waiter.timer);
      waiters.delete(waiter);
      waiter.resolve();
    }
  }

  function waitUntil(isSatisfied: () => boolean, description: string): Promise<void> {
    if (isSatisfied()) return Promise.resolve();
    if (closed) return Promise.reject(new Error(`fake-ollama is closed; it will never see ${description}.`));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        isSatisfied,
        resolve,
        reject,
        timer: setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`fake-ollama did not see ${description} within ${waitTimeoutMs} ms.`));
        }, waitTimeoutMs),
      };
      waiters.add(waiter);
    });
  }

  function findModel(name: string): FakeModelSpec | undefined {
    const wanted = withTag(name).toLowerCase();
    return models.find((model) => model.name.toLowerCase() === wanted);
  }

  function recordScriptError(message: string): HttpError {
    scriptErrors.push(message);
    return new HttpError(500, message);
  }

  const server = createServer((req, res) => {
    if (down) {
      req.socket.destroy();
      return;
    }
    void handleRequest(req, res);
  });
  server.on('connection', (socket) => {
    if (down) socket.destroy();
  });

  async function handleRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake-ollama').pathname;
    const method = req.method ?? 'GET';
    const exchange: Exchange = {
      res,
      hungUp: false,
      droppedByFake: false,
      onHangUp: [],
      onStalled: () => {
        stalls++;
        notify();
      },
    };
    let record: FakeOllamaRequest | undefined;
    res.on('close', () => {
      if (res.writableEnded) return;
      exchange.hungUp = true;
      for (const listener of exchange.onHangUp) listener();
      // Connections the fake cut itself (dropAfter, setDown, close) are not client hang-ups.
      if (exchange.droppedByFake || down || closed) return;
      if (record) record.aborted = true;
      if (path === '/api/chat') hangups++;
      notify();
    });
    try {
      const rawBody = await readBody(req);
      const parsed = parseBody(rawBody);
      record = { method, path, body: parsed.value, rawBody, receivedAt: Date.now(), aborted: exchange.hungUp };
      requests.push(record);
      exchange.record = record;
      notify();
      await route(method, path, parsed, exchange);
    } catch (error) {
      if (res.headersSent) {
        if (!res.writableEnded) res.destroy();
        return;
      }
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof Error ? error.message : String(error);
      sendJson(res, status, { error: error instanceof HttpError ? message : `fake-ollama: ${message}` });
    }
  }

  async function route(method: string, path: string, parsed: ParsedBody, exchange: Exchange): Promise<void> {
    const { res } = exchange;
    if (path === '/' && (method === 'GET' || method === 'HEAD')) {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(method === 'HEAD' ? undefined : 'Ollama is running');
      return;
    }
    if (path === '/api/version' && (method === 'GET' || method === 'HEAD')) {
      sendJson(res, 200, { version });
      return;
    }
    if (path === '/api/ps' && (method === 'GET' || method === 'HEAD')) {
      // v0.12.6 server/routes.go:1758 PsHandler: every runner in s.sched.loaded, a loading one included
      // (sched.go:481 adds it before WaitUntilRunning at :487), shaped as api.ProcessResponse (api/types.go:627).
      sendJson(res, 200, { models: loaded.map((name) => describeRunningModel(name, findModel(name))) });
      return;
    }
    if (path === '/api/tags' && (method === 'GET' || method === 'HEAD')) {
      sendJson(res, 200, { models: models.map((model) => describeListedModel(model, startedAt)) });
      return;
    }
    if (method === 'POST' && path === '/api/show') {
      const body = requireObjectBody(parsed, 'ShowRequest');
      const name = typeof body.model === 'string' && body.model ? body.model : body.name;
      if (typeof name !== 'string' || name === '') throw new HttpError(400, 'model is required');
      const shown = findModel(name);
      if (!shown) throw new HttpError(404, `model '${name}' not found`);
      if (shown.showError) throw new HttpError(shown.showError.status ?? 500, shown.showError.message);
      sendJson(res, 200, describeShownModel(shown, startedAt));
      return;
    }
    if (method === 'POST' && path === '/api/pull') {
      await handlePull(requireObjectBody(parsed, 'PullRequest'), exchange);
      return;
    }
    if (method === 'POST' && path === '/api/generate') {
      handleGenerate(requireObjectBody(parsed, 'GenerateRequest'), res);
      return;
    }
    if (method === 'POST' && path === '/api/chat') {
      await handleChat(requireObjectBody(parsed, 'ChatRequest'), exchange);
      return;
    }
    // Ollama's router is gin with `r.HandleMethodNotAllowed = true` (v0.12.6 server/routes.go:1448, since
    // v0.7.0): a known path with another method is a plain-text 405, anything else a plain-text 404
    // (gin's gin.go: default405Body = "405 method not allowed", default404Body = "404 page not found").
    if (KNOWN_PATHS.has(path)) {
      res.writeHead(405, { 'Content-Type': 'text/plain' });
      res.end('405 method not allowed');
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('404 page not found');
  }

  function handleGenerate(body: Record<string, unknown>, res: ServerResponse): void {
    expectFieldType(body, 'model', 'string', 'GenerateRequest');
    expectFieldType(body, 'prompt', 'string', 'GenerateRequest');
    const model = body.model;
    if (typeof model !== 'string' || model === '') throw new HttpError(400, 'model is required');
    if (!findModel(model)) throw new HttpError(404, `model '${model}' not found`);
    if (typeof body.prompt === 'string' && body.prompt !== '') {
      throw recordScriptError('fake-ollama: /api/generate with a prompt is not scripted; use /api/chat');
    }
    const unloading = isZeroKeepAlive(body.keep_alive);
    if (unloading) {
      unloads.push(model);
      markUnloaded(model);
    } else markLoaded(model);
    sendJson(res, 200, {
      model,
      created_at: new Date().toISOString(),
      response: '',
      done: true,
      done_reason: unloading ? 'unload' : 'load',
    });
  }

  async function handleChat(body: Record<string, unknown>, exchange: Exchange): Promise<void> {
    const { request, images } = validateChatRequest(body);
    if (exchange.record) exchange.record.images = images;
    if (request.model === '') throw new HttpError(400, 'model is required');
    const chatted = findModel(request.model);
    if (!chatted) throw new HttpError(404, `model '${request.model}' not found`);
    const messages = request.messages ?? [];
    if (messages.length === 0) {
      // No messages only loads (or, with keep_alive 0, unloads) the model.
      const unloading = isZeroKeepAlive(request.keep_alive);
      if (unloading) {
        unloads.push(request.model);
        markUnloaded(request.model);
      } else markLoaded(request.model);
      sendJson(exchange.res, 200, {
        model: request.model,
        created_at: new Date().toISOString(),
        message: { role: 'assistant', content: '' },
        done_reason: unloading ? 'unload' : 'load',
        done: true,
      });
      return;
    }
    // Any role is accepted: Ollama only lower-cases it (v0.12.6 api/types.go:198) and the template renders
    // nothing for a role it has no branch for (see renderMistralPrompt).

    if (images.some((list) => list.length > 0) && !(chatted.capabilities ?? ['completion']).includes('vision')) {
      // Ollama checks no `vision` capability for a chat (server/routes.go:2610-2638 @ fb30760 asks for
      // completion, tools, thinking): it loads the model (:2634 scheduleRunner), renders the prompt with an
      // [img-N] tag per image (server/prompt.go:80, :106-121) and hands the images to llama-server as
      // multimodal_data (llm/llama_server.go:1603-1618). Without a projector llama-server refuses: llama.cpp
      // tools/server/server-common.cpp tokenize_input_subprompt throws "Multimodal data provided, but model
      // does not support multimodal requests.", answered 400 invalid_request_error. Ollama keeps that status
      // and the whole trimmed body as the message (llama_server.go:1648-1654, statusErrorMessage :1782-1794),
      // ChatHandler passes it on (routes.go:2902-2903) and streamResponse, with nothing written yet, answers
      // c.JSON(status, {"error": message}) (:2116-2118). So the error text is llama-server's JSON.
      // (v0.12.6 refused only some architectures without vision weights, 500 "Failed to create new sequence:
      // failed to process inputs: this model is missing data required for image input", and let the other
      // models ignore the images: model/model.go:29, runner/ollamarunner/runner.go:119-121, :862.)
      markLoaded(request.model);
      throw new HttpError(400, LLAMA_SERVER_NO_MULTIMODAL);
    }

    // A vision model with nothing scripted looks at the picture as a real one would answer: by the schema when
    // `format` is given (the grammar allows nothing else), else a sentence about it.
    const seesImages = images.some((list) => list.length > 0);
    const script = queue.shift() ?? (seesImages ? answerByFormat(request.format) : undefined);
    if (script === undefined) throw recordScriptError(NO_REPLY_LEFT);
    const reply = await resolveScript(script, request);
    const badBound = isRecord(request.format) ? findUnconvertibleBound(request.format, '$') : undefined;
    if (badBound) {
      scriptErrors.push(`${UNCONVERTIBLE_SCHEMA}: ${badBound}`);
      sendJson(exchange.res, 500, { error: UNCONVERTIBLE_SCHEMA, detail: badBound });
      return;
    }
    if (request.format !== undefined && request.format !== null && request.format !== '' && isMeantToComplete(reply)) {
      const violation = findFormatViolation(reply.chunks.join(''), request.format);
      if (violation) {
        scriptErrors.push(`${FORMAT_VIOLATION}: ${violation}`);
        sendJson(exchange.res, 500, { error: FORMAT_VIOLATION, detail: violation });
        return;
      }
    }
    const stats = createStats(reply, messages);
    // The runner is listed from the start of its load (see /api/ps), then nothing is sent while it loads.
    markLoaded(request.model);
    if (reply.loadMs && !(await waitUnlessHungUp(sleep(reply.loadMs), exchange))) return;
    if (request.stream === false) {
      if (reply.endlessLineAfter || reply.rawLineAfter) {
        throw recordScriptError('fake-ollama: endlessLineAfter and rawLineAfter are for streamed replies only');
      }
      await sendWholeReply(request.model, reply, stats, exchange);
    } else if (reply.flood) {
      if (reply.delayMs || reply.gate || reply.errorAfter || reply.dropAfter !== undefined || reply.stallAfter !== undefined || reply.loadMs || reply.endlessLineAfter || reply.rawLineAfter) {
        throw recordScriptError('fake-ollama: a flood reply takes no pacing or failure options');
      }
      await floodReply(request.model, reply, stats, exchange);
    } else {
      await streamReply(request.model, reply, stats, exchange);
    }
  }

  async function resolveScript(script: FakeOllamaScript, request: FakeChatRequestBody): Promise<FakeOllamaReply> {
    let resolved: FakeOllamaReply | string;
    try {
      resolved = typeof script === 'function' ? await script(request) : script;
    } catch (error) {
      throw recordScriptError(`fake-ollama: the scripted reply function threw: ${String(error)}`);
    }
    return typeof resolved === 'string' ? { chunks: splitIntoChunks(resolved) } : resolved;
  }

  /**
   * POST /api/pull as Ollama answers it (server/routes.go:1102-1161 PullHandler @ fb30760): the progress
   * PullModel reports (server/images.go:998-1125), one NDJSON line each (streamResponse, routes.go:1160 and
   * :2097-2140), or with `stream: false` only the last one (waitForStream, routes.go:1155-1157 and :2070-2095).
   */
  async function handlePull(body: Record<string, unknown>, exchange: Exchange): Promise<void> {
    expectFieldType(body, 'model', 'string', 'PullRequest');
    expectFieldType(body, 'name', 'string', 'PullRequest');
    expectFieldType(body, 'stream', 'bool', 'PullRequest');
    // routes.go:1119 `parseNormalizePullModelRef(cmp.Or(req.Model, req.Name))` (ollama-js sends `name`,
    // src/browser.ts:208-212); an empty name is modelref.ErrModelRequired, which writeModelRefParseError
    // (routes.go:66-75) answers with its fallback, 400 "invalid model name" (types/errtypes/errtypes.go:11).
    const requested = typeof body.model === 'string' && body.model !== '' ? body.model : body.name;
    if (typeof requested !== 'string' || requested === '') throw new HttpError(400, 'invalid model name');
    const name = withTag(requested);
    const pull = pullable.get(name.toLowerCase());
    const streaming = body.stream !== false;
    const { res } = exchange;
    let finished = false;
    exchange.onHangUp.push(() => {
      // The request's context ends when the client hangs up, and with it the pull (routes.go:1144
      // `context.WithCancel(c.Request.Context())`; blobDownload.Wait returns ctx.Err() and release() cancels
      // the download once nobody waits on it, server/download.go:440-466).
      if (finished || closed || down || exchange.droppedByFake) return;
      pullsCancelled.push(name);
      notify();
    });
    const send = async (line: object): Promise<boolean> => {
      if (exchange.hungUp) return false;
      if (!streaming) return true;
      if (!res.headersSent) {
        res.statusCode = 200;
        res.setHeader('Content-Type', 'application/x-ndjson');
      }
      await writeLine(res, line);
      return !exchange.hungUp;
    };
    const fail = (message: string): void => {
      finished = true;
      // PullHandler sends `gin.H{"error": err.Error()}` (routes.go:1147-1149). A line was always written first
      // ("pulling manifest"), so streamResponse encodes it as one more NDJSON line, with HTTP 200 already sent,
      // and ends the body (routes.go:2116-2125); waitForStream answers 500 `{"error"}` (:2077-2086).
      if (streaming) {
        res.end(`${JSON.stringify({ error: message })}\n`);
      } else sendJson(res, 500, { error: message });
    };
    const wait = (promise: Promise<unknown>): Promise<boolean> => waitUnlessHungUp(promise, exchange);

    // images.go:1021: the first thing PullModel reports, before it asks the registry.
    if (!(await send({ status: 'pulling manifest' }))) return;
    if (pull === undefined) {
      // The registry's 404 is os.ErrNotExist (images.go:1337-1339 makeRequestWithRetry), which pullModelManifest
      // passes on and images.go:1023-1026 wraps as `fmt.Errorf("pull model manifest: %s", err)`.
      fail('pull model manifest: file does not exist');
      return;
    }
    // The weights layer: blobDownload.Wait reports every 60 ms (download.go:446-466):
    // {status: "pulling <digest[7:19]>", digest, total, completed}, with `completed` left out while 0
    // (api.ProgressResponse, api/types.go:777-782: digest, total and completed are omitempty).
    const totalBytes = pull.totalBytes ?? pull.sizeBytes ?? DEFAULT_SIZE_BYTES;
    const steps = Math.max(1, pull.steps ?? 10);
    const weights = layerDigest(name, 'model');
    const progress = (digest: string, total: number, completed: number): object => ({
      status: `pulling ${digest.slice(7, 19)}`,
      digest,
      ...(total > 0 && { total }),
      ...(completed > 0 && { completed }),
    });
    if (!(await send(progress(weights, totalBytes, 0)))) return;
    if (pull.gate && !(await wait(pull.gate))) return;
    for (let step = 1; step <= steps; step++) {
      if (pull.errorAfter && step > pull.errorAfter.steps) {
        fail(pull.errorAfter.message);
        return;
      }
      if (pull.durationMs && !(await wait(sleep(pull.durationMs / steps)))) return;
      if (!(await send(progress(weights, totalBytes, Math.round((totalBytes * step) / steps))))) return;
    }
    // The other layers are small and come at once; a blob already there is reported whole (download.go:492-497).
    for (const [layer, size] of SMALL_LAYERS) {
      const digest = layerDigest(name, layer);
      if (!(await send(progress(digest, size, size)))) return;
    }
    // images.go:1073, :1097, then :1122 (after images.go:1107 wrote the manifest, so the model is installed;
    // "removing unused layers" at :1116 comes only when re-pulling a model whose layers changed).
    if (!(await send({ status: 'verifying sha256 digest' }))) return;
    if (!(await send({ status: 'writing manifest' }))) return;
    const installed: FakeModelSpec = { ...pull, name, sizeBytes: pull.sizeBytes ?? totalBytes };
    for (const key of ['totalBytes', 'durationMs', 'steps', 'gate', 'errorAfter'] as const) delete (installed as FakePullable)[key];
    models = [...models.filter((model) => model.name.toLowerCase() !== name.toLowerCase()), installed];
    finished = true;
    if (streaming) {
      await send({ status: 'success' });
      res.end();
    } else sendJson(res, 200, { status: 'success' });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  const fake: FakeOllama = {
    // Fixed at listen time so a closed fake still names its port (a "not running" Ollama).
    get url() {
      return `http://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    requests,
    get hangups() {
      return hangups;
    },
    unloads,
    scriptErrors,
    get pendingReplies() {
      return queue.length;
    },
    enqueue(...replies) {
      queue.push(...replies);
    },
    chatRequests() {
      return requests
        .filter((request) => request.path === '/api/chat' && isRecord(request.body))
        .map((request) => request.body as FakeChatRequestBody);
    },
    chatImages() {
      return requests.flatMap((request) => (request.path === '/api/chat' && request.images ? [request.images] : []));
    },
    renderedPrompts() {
      return this.chatRequests().map((body) => renderMistralPrompt(body.messages ?? []));
    },
    setModels(entries) {
      models = entries.map(toModelSpec);
    },
    setPullable(entries) {
      pullable = normalizePullable(entries);
    },
    pullsCancelled,
    waitForPullCancelled(count = 1) {
      return waitUntil(() => pullsCancelled.length >= count, `${count} cancelled pull(s) (saw ${pullsCancelled.length})`);
    },
    setLoaded(names) {
      loaded = names.map(withTag);
    },
    setDown(isDown) {
      down = isDown;
      if (isDown) server.closeAllConnections();
    },
    waitForStall(count = 1) {
      return waitUntil(() => stalls >= count, `${count} stalled repl(ies) with every line flushed (saw ${stalls})`);
    },
    waitForHangup(count = 1) {
      return waitUntil(() => hangups >= count, `${count} hang-up(s) on /api/chat (saw ${hangups})`);
    },
    waitForRequests(count, path) {
      const matching = (): number => requests.filter((request) => path === undefined || request.path === path).length;
      return waitUntil(() => matching() >= count, `${count} request(s)${path ? ` to ${path}` : ''}`);
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const waiter of waiters) {
        clearTimeout(waiter.timer);
        waiter.reject(new Error('fake-ollama was closed while a test was still waiting on it.'));
      }
      waiters.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };

  return fake;
}

interface Exchange {
  res: ServerResponse;
  hungUp: boolean;
  /** Set when the fake itself cut the connection, so it is not counted as a client hang-up. */
  droppedByFake: boolean;
  onHangUp: Array<() => void>;
  /** Called when a reply stalls (stallAfter) once its earlier lines left for the socket. */
  onStalled: () => void;
  /** What the fake keeps of this request (set once its body was read). */
  record?: FakeOllamaRequest;
}

interface ReplyStats {
  doneReason: string;
  evalCount: number;
  promptEvalCount: number;
}

function createStats(reply: FakeOllamaReply, messages: FakeChatMessage[]): ReplyStats {
  const promptChars = messages.reduce((sum, message) => sum + message.content.length, 0);
  return {
    doneReason: reply.doneReason ?? 'stop',
    evalCount: reply.evalCount ?? reply.chunks.length,
    promptEvalCount: reply.promptEvalCount ?? Math.max(1, Math.ceil(promptChars / 4)),
  };
}

/** Deterministic durations in nanoseconds, shaped like a warm 7B model on a GPU. */
function describeStats(stats: ReplyStats): Record<string, number | string> {
  const loadDuration = 1_500_000;
  const promptEvalDuration = stats.promptEvalCount * 400_000;
  const evalDuration = stats.evalCount * 20_000_000;
  return {
    done_reason: stats.doneReason,
    total_duration: loadDuration + promptEvalDuration + evalDuration,
    load_duration: loadDuration,
    prompt_eval_count: stats.promptEvalCount,
    prompt_eval_duration: promptEvalDuration,
    eval_count: stats.evalCount,
    eval_duration: evalDuration,
  };
}

async function streamReply(model: string, reply: FakeOllamaReply, stats: ReplyStats, exchange: Exchange): Promise<void> {
  const { res } = exchange;
  // Headers go out with the first line, as gin's c.Stream writes them (v0.12.6 server/routes.go:1645).
  res.statusCode = 200;
  res.setHeader('Content-Type', 'application/x-ndjson');
  const errorAt = reply.errorAfter?.chunks ?? Infinity;
  const dropAt = reply.dropAfter ?? Infinity;
  const endlessAt = reply.endlessLineAfter?.chunks ?? Infinity;
  const sendCount = Math.min(reply.chunks.length, errorAt, dropAt, endlessAt);
  const terminal =
    reply.endlessLineAfter && endlessAt <= Math.min(errorAt, dropAt)
      ? 'endless'
      : reply.errorAfter && errorAt <= dropAt
        ? 'error'
        : reply.dropAfter !== undefined
          ? 'drop'
          : 'done';
  let flushed: Promise<void> = Promise.resolve();
  // Lines: the content chunks, then one terminal line (error, drop or done).
  for (let line = 0; line <= sendCount; line++) {
    if (line === 1 && reply.gate && !(await waitUnlessHungUp(reply.gate, exchange))) return;
    if (reply.delayMs && !(await waitUnlessHungUp(sleep(reply.delayMs), exchange))) return;
    if (exchange.hungUp) return;
    if (line === reply.stallAfter) {
      if (await waitUnlessHungUp(flushed, exchange)) exchange.onStalled();
      await waitUnlessHungUp(new Promise<never>(() => undefined), exchange);
      return;
    }
    if (line === reply.rawLineAfter?.chunks) res.write(`${reply.rawLineAfter.line}\n`);
    if (line < sendCount) {
      flushed = writeLine(res, {
        model,
        created_at: new Date().toISOString(),
        message: { role: 'assistant', content: reply.chunks[line] ?? '' },
        done: false,
      });
      reply.onLineWritten?.(line);
    } else if (terminal === 'error') {
      const error = { error: reply.errorAfter?.message ?? 'fake-ollama: scripted error' };
      // v0.12.6 server/routes.go:1664-1666: `if !c.Writer.Written() { c.JSON(status, gin.H{"error": e}) }`,
      // the status from the StatusError (routes.go:2175) or 500 (routes.go:1659-1662).
      if (line === 0) sendJson(res, reply.errorAfter?.status ?? 500, error);
      else {
        // routes.go:1667-1673: `json.NewEncoder(c.Writer).Encode(gin.H{"error": e})`, then `return false`
        // ends the stream: the client sees the error line and no `done`.
        writeLine(res, error);
        res.end();
      }
    } else if (terminal === 'endless') {
      await sendEndlessLine(model, reply.endlessLineAfter ?? { chunks: line }, exchange);
    } else if (terminal === 'drop') {
      exchange.droppedByFake = true;
      // Node corks a response's writes until the next tick: let the lines already written leave first,
      // as they would have left a crashing Ollama.
      await new Promise((resolve) => setImmediate(resolve));
      res.socket?.destroy();
    } else {
      writeLine(res, {
        model,
        created_at: new Date().toISOString(),
        message: { role: 'assistant', content: '' },
        done: true,
        ...describeStats(stats),
      });
      res.end();
    }
  }
}

/** Bytes of `a` per write of an endless line, and where the fake stops one by default. */
const ENDLESS_WRITE_BYTES = 16 * 1024;
const ENDLESS_DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/** endlessLineAfter: an opening, then `a`s with no newline, as fast as the client reads them. */
async function sendEndlessLine(
  model: string,
  options: NonNullable<FakeOllamaReply['endlessLineAfter']>,
  exchange: Exchange,
): Promise<void> {
  const { res } = exchange;
  const maxBytes = options.maxBytes ?? ENDLESS_DEFAULT_MAX_BYTES;
  const filler = 'a'.repeat(ENDLESS_WRITE_BYTES);
  let bytes = 0;
  const write = (text: string): boolean => {
    bytes += Buffer.byteLength(text);
    return res.write(text);
  };
  let more = write(`{"model":${JSON.stringify(model)},"created_at":${JSON.stringify(new Date().toISOString())},"message":{"role":"assistant","content":"`);
  while (bytes < maxBytes && !exchange.hungUp) {
    if (!more && !(await waitUnlessHungUp(new Promise((resolve) => res.once('drain', resolve)), exchange))) break;
    more = write(filler.slice(0, Math.min(filler.length, maxBytes - bytes)));
  }
  if (!exchange.hungUp) res.end();
  options.onEnd?.({ bytes, hungUp: exchange.hungUp });
}

/** Bytes gathered before one write of a flood. */
const FLOOD_WRITE_BYTES = 64 * 1024;

/**
 * The body streamReply would send, byte for byte, in fewer writes. Real Ollama writes and flushes one line
 * per step (v0.12.6 server/routes.go:1683-1686 inside gin's c.Stream, which flushes after each step), so
 * only the HTTP chunk boundaries differ, and no NDJSON reader may depend on them. Lines are built as they
 * are written, so the fake's own cost stays small and spread over the reply.
 */
async function floodReply(model: string, reply: FakeOllamaReply, stats: ReplyStats, exchange: Exchange): Promise<void> {
  const { res } = exchange;
  res.statusCode = 200;
  res.setHeader('Content-Type', 'application/x-ndjson');
  const createdAt = new Date().toISOString();
  const head = `{"model":${JSON.stringify(model)},"created_at":${JSON.stringify(createdAt)},"message":{"role":"assistant","content":`;
  let batch = '';
  let batchStart = 0;
  const written = (end: number) => {
    for (let line = batchStart; line < end; line++) reply.onLineWritten?.(line);
    batchStart = end;
  };
  for (let line = 0; line < reply.chunks.length; line++) {
    batch += `${head}${JSON.stringify(reply.chunks[line] ?? '')}},"done":false}\n`;
    if (batch.length < FLOOD_WRITE_BYTES) continue;
    const more = res.write(batch);
    batch = '';
    written(line + 1);
    if (!more && !(await waitUnlessHungUp(new Promise((resolve) => res.once('drain', resolve)), exchange))) return;
    if (exchange.hungUp) return;
  }
  const done = { model, created_at: createdAt, message: { role: 'assistant', content: '' }, done: true, ...describeStats(stats) };
  res.end(`${batch}${JSON.stringify(done)}\n`);
  written(reply.chunks.length);
}

async function sendWholeReply(
  model: string,
  reply: FakeOllamaReply,
  stats: ReplyStats,
  exchange: Exchange,
): Promise<void> {
  if (reply.gate && !(await waitUnlessHungUp(reply.gate, exchange))) return;
  const totalDelay = (reply.delayMs ?? 0) * (reply.chunks.length + 1);
  if (totalDelay > 0 && !(await waitUnlessHungUp(sleep(totalDelay), exchange))) return;
  if (reply.errorAfter) {
    // stream:false collects the lines first; an error line becomes `c.JSON(status, gin.H{"error": msg})`
    // (v0.12.6 server/routes.go:2225-2238), whether or not content came before it.
    sendJson(exchange.res, reply.errorAfter.status ?? 500, { error: reply.errorAfter.message });
    return;
  }
  if (reply.dropAfter !== undefined) {
    exchange.droppedByFake = true;
    exchange.res.socket?.destroy();
    return;
  }
  sendJson(exchange.res, 200, {
    model,
    created_at: new Date().toISOString(),
    message: { role: 'assistant', content: reply.chunks.join('') },
    done: true,
    ...describeStats(stats),
  });
}

/** Resolves true when `promise` settles first, false when the client hangs up first. */
function waitUnlessHungUp(promise: Promise<unknown>, exchange: Exchange): Promise<boolean> {
  if (exchange.hungUp) return Promise.resolve(false);
  return new Promise((resolve) => {
    exchange.onHangUp.push(() => resolve(false));
    promise.then(
      () => resolve(!exchange.hungUp),
      () => resolve(!exchange.hungUp),
    );
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves once the line was handed to the socket. */
function writeLine(res: ServerResponse, value: object): Promise<void> {
  return new Promise((resolve) => res.write(`${JSON.stringify(value)}\n`, () => resolve()));
}

function sendJson(res: ServerResponse, status: number, value: object): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': JSON_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

type ParsedBody = { ok: true; value: unknown } | { ok: false; value: undefined; error: string };

function parseBody(rawBody: string): ParsedBody {
  if (rawBody.trim() === '') return { ok: false, value: undefined, error: 'missing request body' };
  try {
    return { ok: true, value: JSON.parse(rawBody) };
  } catch (error) {
    return { ok: false, value: undefined, error: describeJsonSyntaxError(rawBody, error) };
  }
}

/** Go's encoding/json wording, which is what Ollama puts in its 400s. */
function describeJsonSyntaxError(rawBody: string, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (/end of JSON input|Unterminated/i.test(message)) return 'unexpected EOF';
  const position = /position (\d+)/.exec(message)?.[1];
  const character = position !== undefined ? rawBody[Number(position)] : /token '(.)'/.exec(message)?.[1];
  if (/after JSON/i.test(message) && character) return `invalid character '${character}' after top-level value`;
  if (character) return `invalid character '${character}' looking for beginning of value`;
  return `invalid character in request body (${message})`;
}

function requireObjectBody(parsed: ParsedBody, goType: string): Record<string, unknown> {
  if (!parsed.ok) throw new HttpError(400, parsed.error);
  if (!isRecord(parsed.value)) {
    throw new HttpError(400, `json: cannot unmarshal ${describeJsonType(parsed.value)} into Go value of type api.${goType}`);
  }
  return parsed.value;
}

/** A chat body as api.ChatRequest decodes it, with the bytes of each message's images. */
function validateChatRequest(body: Record<string, unknown>): { request: FakeChatRequestBody; images: Uint8Array[][] } {
  const images: Uint8Array[][] = [];
  expectFieldType(body, 'model', 'string', 'ChatRequest');
  expectFieldType(body, 'stream', 'bool', 'ChatRequest');
  expectFieldType(body, 'options', 'object', 'ChatRequest', 'map[string]interface {}');
  if (body.messages !== undefined && body.messages !== null) {
    if (!Array.isArray(body.messages)) {
      throw new HttpError(
        400,
        `json: cannot unmarshal ${describeJsonType(body.messages)} into Go struct field ChatRequest.messages of type []api.Message`,
      );
    }
    for (const message of body.messages) {
      if (!isRecord(message)) {
        throw new HttpError(
          400,
          `json: cannot unmarshal ${describeJsonType(message)} into Go struct field ChatRequest.messages of type api.Message`,
        );
      }
      expectFieldType(message, 'role', 'string', 'ChatRequest.messages');
      expectFieldType(message, 'content', 'string', 'ChatRequest.messages');
      images.push(decodeMessageImages(message.images));
    }
  }
  const format = body.format;
  const isValidFormat =
    format === undefined || format === null || format === '' || format === 'json' || isRecord(format);
  if (!isValidFormat) throw new HttpError(400, 'invalid format: expected "json" or a valid JSON schema');
  const messages = (body.messages ?? []) as Array<Record<string, unknown>>;
  const request = {
    ...body,
    model: typeof body.model === 'string' ? body.model : '',
    messages: messages.map((message) => ({
      ...message,
      role: typeof message.role === 'string' ? message.role : '',
      content: typeof message.content === 'string' ? message.content : '',
    })),
  } as FakeChatRequestBody;
  return { request, images };
}

/**
 * One message's `images` as encoding/json reads a []api.ImageData (api/types.go:203, ImageData []byte :57,
 * @ fb30760): null or absent is none, each string is base64 (a null one an empty image), anything else is
 * a type error. Message.UnmarshalJSON (api/types.go:209-219) decodes through its own `Alias` type, so Go names
 * the field `Alias.images`. gin's ShouldBindJSON returns the error and ChatHandler answers it 400
 * `{"error": err.Error()}` (server/routes.go:2444-2450), before the model is even looked up.
 */
function decodeMessageImages(value: unknown): Uint8Array[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) {
    throw new HttpError(400, `json: cannot unmarshal ${describeJsonType(value)} into Go struct field Alias.images of type []api.ImageData`);
  }
  return value.map((item) => {
    if (item === null) return new Uint8Array(0);
    if (typeof item !== 'string') {
      throw new HttpError(400, `json: cannot unmarshal ${describeJsonType(item)} into Go struct field Alias.images of type api.ImageData`);
    }
    const decoded = decodeGoBase64(item);
    if (typeof decoded === 'number') throw new HttpError(400, `illegal base64 data at input byte ${decoded}`);
    return decoded;
  });
}

const BASE64_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const BASE64_VALUES = new Map(Array.from(BASE64_ALPHABET, (character, value) => [character.charCodeAt(0), value]));
const CR = 0x0d;
const LF = 0x0a;
const PAD = 0x3d;

/**
 * Go's base64.StdEncoding.Decode, which encoding/json runs on a JSON string bound for a []byte (decode.go
 * literalStore; its error is returned as is): the bytes, or the offset Go's CorruptInputError names,
 * "illegal base64 data at input byte N". Per decodeQuantum (encoding/base64/base64.go): '\r' and '\n' are
 * skipped anywhere, padding is required ("YQ" fails at the quantum's start, "YQ=" at the end), '=' in the
 * first two places of a quantum, any byte outside the alphabet, and anything after the padding fail at
 * that byte. Offsets count the string's UTF-8 bytes, as Go sees them.
 */
function decodeGoBase64(text: string): Uint8Array | number {
  const src = Buffer.from(text, 'utf8');
  const out: number[] = [];
  let si = 0;
  const skipNewlines = () => {
    while (si < src.length && (src[si] === LF || src[si] === CR)) si++;
  };
  while (si < src.length) {
    const quantum = [0, 0, 0, 0];
    let length = 4;
    let trailingAt: number | undefined;
    for (let j = 0; j < 4; j++) {
      if (si === src.length) {
        if (j === 0) return Uint8Array.from(out); // only newlines were left
        return si - j; // a quantum cut short: padding is required
      }
      const byte = src[si++] ?? 0;
      const value = BASE64_VALUES.get(byte);
      if (value !== undefined) {
        quantum[j] = value;
        continue;
      }
      if (byte === LF || byte === CR) {
        j--;
        continue;
      }
      if (byte !== PAD || j < 2) return si - 1;
      if (j === 2) {
        // "==" is expected; the first '=' is read.
        skipNewlines();
        if (si === src.length) return src.length;
        if (src[si] !== PAD) return si - 1;
        si++;
      }
      skipNewlines();
      if (si < src.length) trailingAt = si;
      length = j;
      break;
    }
    const bits = ((quantum[0] ?? 0) << 18) | ((quantum[1] ?? 0) << 12) | ((quantum[2] ?? 0) << 6) | (quantum[3] ?? 0);
    out.push((bits >> 16) & 0xff);
    if (length >= 3) out.push((bits >> 8) & 0xff);
    if (length === 4) out.push(bits & 0xff);
    if (trailingAt !== undefined) return trailingAt;
  }
  return Uint8Array.from(out);
}

function expectFieldType(
  body: Record<string, unknown>,
  field: string,
  type: 'string' | 'bool' | 'object',
  goStruct: string,
  goType: string = type,
): void {
  const value = body[field];
  if (value === undefined || value === null) return;
  const matches =
    (type === 'string' && typeof value === 'string') ||
    (type === 'bool' && typeof value === 'boolean') ||
    (type === 'object' && isRecord(value));
  if (!matches) {
    throw new HttpError(
      400,
      `json: cannot unmarshal ${describeJsonType(value)} into Go struct field ${goStruct}.${field} of type ${goType}`,
    );
  }
}

function describeJsonType(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  if (typeof value === 'boolean') return 'bool';
  return typeof value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isZeroKeepAlive(value: unknown): boolean {
  if (typeof value === 'number') return value === 0;
  return typeof value === 'string' && /^0+(\.0+)?(ns|us|µs|ms|s|m|h)?$/.test(value.trim());
}

/** A truncated or failing reply is cut short of valid JSON on real Ollama too. */
/**
 * What a vision model writes when no reply was scripted: the least JSON the schema allows, each string a plain
 * description, or, without a schema, one sentence. (A schema the grammar could not follow is refused before.)
 */
function answerByFormat(format: unknown): string {
  if (!isRecord(format)) return 'The picture shows a plain scene with one subject in the middle.';
  return JSON.stringify(fillSchema(format, format));
}

function fillSchema(schema: Record<string, unknown>, root: Record<string, unknown>): unknown {
  if (typeof schema['$ref'] === 'string') {
    const target = schema['$ref'].replace(/^#\//, '').split('/').reduce<unknown>((node, key) => (isRecord(node) ? node[key] : undefined), root);
    return isRecord(target) ? fillSchema(target, root) : null;
  }
  if (Array.isArray(schema['enum'])) return schema['enum'][0];
  const type = Array.isArray(schema['type']) ? schema['type'][0] : schema['type'];
  if (type === 'object' || isRecord(schema['properties'])) {
    const properties = isRecord(schema['properties']) ? schema['properties'] : {};
    const required = Array.isArray(schema['required']) ? schema['required'].filter((name): name is string => typeof name === 'string') : Object.keys(properties);
    return Object.fromEntries(required.map((name) => [name, isRecord(properties[name]) ? fillSchema(properties[name], root) : null]));
  }
  if (type === 'array') return [];
  if (type === 'string') return 'a plain scene with one subject in the middle';
  if (type === 'integer' || type === 'number') return 0;
  if (type === 'boolean') return false;
  return null;
}

function isMeantToComplete(reply: FakeOllamaReply): boolean {
  return (
    reply.errorAfter === undefined &&
    reply.dropAfter === undefined &&
    reply.endlessLineAfter === undefined &&
    (reply.doneReason ?? 'stop') !== 'length'
  );
}

function withTag(name: string): string {
  const lastSlash = name.lastIndexOf('/');
  return name.indexOf(':', lastSlash + 1) === -1 ? `${name}:latest` : name;
}

/** One entry of GET /api/tags (api.ListModelResponse, api/types.go:822-832 @ fb30760). */
function describeListedModel(model: FakeModelSpec, modifiedAt: Date): object {
  return {
    name: model.name,
    model: model.name,
    modified_at: modifiedAt.toISOString(),
    size: model.sizeBytes ?? DEFAULT_SIZE_BYTES,
    digest: createHash('sha256').update(model.name).digest('hex'),
    details: describeModelDetails(model),
  };
}

/** One entry of GET /api/ps (api.ProcessModelResponse, v0.12.6 api/types.go:627). */
function describeRunningModel(name: string, model: FakeModelSpec | undefined): object {
  return {
    name,
    model: name,
    size: 5_137_025_024,
    digest: createHash('sha256').update(name).digest('hex'),
    details: describeModelDetails(model),
    expires_at: new Date(Date.now() + 5 * 60_000).toISOString(),
    size_vram: 5_137_025_024,
    context_length: 8192,
  };
}

/** api.ModelDetails (api/types.go:933-942 @ fb30760). */
function describeModelDetails(model: FakeModelSpec | undefined): object {
  const family = model?.family ?? DEFAULT_FAMILY;
  return {
    parent_model: '',
    format: 'gguf',
    family,
    families: [family],
    parameter_size: model?.parameterSize ?? '7.2B',
    quantization_level: model?.quantization ?? 'Q4_0',
  };
}

const DEFAULT_SIZE_BYTES = 4_372_824_384;
/** The small layers of a model after its weights, with mistral:7b's sizes, then the config blob (images.go:1034-1038). */
const SMALL_LAYERS: ReadonlyArray<readonly [string, number]> = [
  ['template', 801],
  ['license', 11_357],
  ['params', 30],
  ['config', 485],
];

/** A made-up but stable `sha256:<64 hex>` digest for one layer of a pulled model. */
function layerDigest(name: string, layer: string): string {
  return `sha256:${createHash('sha256').update(`${name}/${layer}`).digest('hex')}`;
}
const DEFAULT_FAMILY = 'llama';
const DEFAULT_CONTEXT_LENGTH = 32_768;

function toModelSpec(entry: string | FakeModelSpec): FakeModelSpec {
  return typeof entry === 'string' ? { name: withTag(entry) } : { ...entry, name: withTag(entry.name) };
}

/** Pullable names with their tag, lower-cased as Ollama's names compare. */
function normalizePullable(entries: Record<string, FakePullable>): Map<string, FakePullable> {
  return new Map(Object.entries(entries).map(([name, pull]) => [withTag(name).toLowerCase(), pull]));
}

/**
 * The chat template of `mistral:7b` (Mistral 7B v0.3) exactly as the registry serves it: the 801-byte
 * template layer sha256:491dfa501e59ed17239711477601bdc7f559de5407fbd4a2a79078b271045621 that
 * `ollama pull mistral:7b` fetches (test/unit/ollama/mistral-template.test.ts checks the digest).
 * ollama/ollama holds no copy of it; docs/template.mdx "Example Tools / Mistral" shows the same branches.
 */
export const MISTRAL_TEMPLATE =
  '{{- if .Messages }}\n' +
  '{{- range $index, $_ := .Messages }}\n' +
  '{{- if eq .Role "user" }}\n' +
  '{{- if and (eq (len (slice $.Messages $index)) 1) $.Tools }}[AVAILABLE_TOOLS] {{ $.Tools }}[/AVAILABLE_TOOLS]\n' +
  '{{- end }}[INST] {{ if and $.System (eq (len (slice $.Messages $index)) 1) }}{{ $.System }}\n' +
  '\n' +
  '{{ end }}{{ .Content }}[/INST]\n' +
  '{{- else if eq .Role "assistant" }}\n' +
  '{{- if .Content }} {{ .Content }}\n' +
  '{{- else if .ToolCalls }}[TOOL_CALLS] [\n' +
  '{{- range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}\n' +
  '{{- end }}]\n' +
  '{{- end }}</s>\n' +
  '{{- else if eq .Role "tool" }}[TOOL_RESULTS] {"content": {{ .Content }}} [/TOOL_RESULTS]\n' +
  '{{- end }}\n' +
  '{{- end }}\n' +
  '{{- else }}[INST] {{ if .System }}{{ .System }}\n' +
  '\n' +
  '{{ end }}{{ .Prompt }}[/INST]\n' +
  '{{- end }} {{ .Response }}\n' +
  '{{- if .Response }}</s>\n' +
  '{{- end }}';

/** POST /api/show's answer (api.ShowResponse, api/types.go:737-755 @ fb30760; built by GetModelInfo, server/routes.go:1396-1480). */
function describeShownModel(model: FakeModelSpec, modifiedAt: Date): object {
  const name = model.name;
  const family = model.family ?? DEFAULT_FAMILY;
  const contextLength = model.contextLength === undefined ? DEFAULT_CONTEXT_LENGTH : model.contextLength;
  const capabilities = model.capabilities ?? ['completion'];
  const parameters = 'stop                           "[INST]"\nstop                           "[/INST]"';
  return {
    license: 'Apache License\nVersion 2.0, January 2004',
    modelfile:
      `# Modelfile generated by "ollama show"\n# To build a new Modelfile based on this, replace FROM with:\n# FROM ${name}\n\n` +
      `FROM /usr/share/ollama/.ollama/models/blobs/sha256-${createHash('sha256').update(name).digest('hex')}\n` +
      `TEMPLATE """${MISTRAL_TEMPLATE}"""\nPARAMETER stop [INST]\nPARAMETER stop [/INST]\n`,
    parameters,
    template: MISTRAL_TEMPLATE,
    details: describeModelDetails(model),
    // The GGUF's key-values: architecture-specific keys are prefixed with general.architecture.
    model_info: {
      'general.architecture': family,
      'general.file_type': 2,
      'general.parameter_count': 7_248_023_552,
      'general.quantization_version': 2,
      [`${family}.attention.head_count`]: 32,
      [`${family}.attention.head_count_kv`]: 8,
      [`${family}.block_count`]: 32,
      ...(contextLength !== null && { [`${family}.context_length`]: contextLength }),
      [`${family}.embedding_length`]: 4096,
      [`${family}.feed_forward_length`]: 14_336,
      'tokenizer.ggml.model': 'llama',
    },
    // `capabilities,omitempty` (api/types.go:752): an empty list is left out.
    ...(capabilities.length > 0 && { capabilities }),
    modified_at: modifiedAt.toISOString(),
  };
}

// What Ollama's grammar guarantees for `format`. Ollama turns a schema into a llama.cpp grammar
// (v0.12.6 llm/server.go:1439 `llama.SchemaToGrammar(req.Format)`; llama/sampling_ext.cpp:49-68 parses it
// as an nlohmann::ordered_json, so key order is kept, then calls json_schema_to_grammar). The converter,
// llama/llama.cpp/common/json-schema-to-grammar.cpp at v0.12.6, gives:
// - objects (:826-847, _build_object_rule :614-705): the required properties first, in the order of
//   `properties`, then the optional ones in that order, each omissible; other keys only when
//   `additionalProperties` is true or a schema (:640), and then only after the named ones;
// - integers with minimum/maximum/exclusive* (:927-944): the range is enforced, with the bounds read by
//   `get<int>()`, a plain static_cast to a 32-bit int (so 4294967295 becomes -1: findUnconvertibleBound);
// - strings with minLength/maxLength (:922-926) and arrays with minItems/maxItems (:909-913): enforced;
// - numbers: no range (:952 `// TODO: support minimum, maximum, exclusiveMinimum, exclusiveMaximum`), so a
//   test can still script an out-of-range cfg for the app to repair.
function findFormatViolation(text: string, format: unknown): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return `the reply is not valid JSON: ${JSON.stringify(text.slice(0, 80))}`;
  }
  if (format === 'json') return isRecord(value) ? undefined : 'format "json" produces a JSON object';
  if (!isRecord(format)) return undefined;
  return findSchemaViolation(value, format, format, '$');
}

const INT32_MIN = -2_147_483_648;
const INT32_MAX = 2_147_483_647;

/** nlohmann's get<int>() on a JSON number: static_cast<int>, two's-complement wrap for integers. */
function castToInt(value: number): number {
  return Number.isInteger(value) ? value | 0 : Math.trunc(value);
}

/**
 * A bound the converter would misread: an integer's minimum/maximum outside the 32-bit range comes out
 * wrapped (json-schema-to-grammar.cpp:931-940), so the grammar would allow other numbers than the schema.
 * Real Ollama gives no error for it; the fake refuses loudly so Easel never sends one.
 */
function findUnconvertibleBound(schema: unknown, path: string): string | undefined {
  if (Array.isArray(schema)) {
    for (const [index, item] of schema.entries()) {
      const found = findUnconvertibleBound(item, `${path}[${index}]`);
      if (found) return found;
    }
    return undefined;
  }
  if (!isRecord(schema)) return undefined;
  if (schema.type === 'integer') {
    for (const keyword of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']) {
      const bound = schema[keyword];
      if (typeof bound !== 'number') continue;
      const read = castToInt(bound);
      if (read !== bound || bound < INT32_MIN || bound > INT32_MAX) {
        return `${path}.${keyword} is ${bound}, which llama.cpp's get<int>() reads as ${read} (32-bit int): keep integer bounds within ${INT32_MIN}..${INT32_MAX}`;
      }
    }
  }
  for (const [key, child] of Object.entries(schema)) {
    if (typeof child !== 'object' || child === null) continue;
    const found = findUnconvertibleBound(child, `${path}.${key}`);
    if (found) return found;
  }
  return undefined;
}

function findSchemaViolation(
  value: unknown,
  schema: unknown,
  root: Record<string, unknown>,
  path: string,
): string | undefined {
  if (!isRecord(schema)) return undefined;
  if (typeof schema.$ref === 'string') return findSchemaViolation(value, resolveRef(root, schema.$ref), root, path);
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key];
    if (Array.isArray(options) && options.every((option) => findSchemaViolation(value, option, root, path))) {
      return `${path} matches none of its ${key} schemas`;
    }
  }
  if (Array.isArray(schema.allOf)) {
    for (const part of schema.allOf) {
      const violation = findSchemaViolation(value, part, root, path);
      if (violation) return violation;
    }
  }
  if ('const' in schema && !isDeepEqual(value, schema.const)) return `${path} is not ${JSON.stringify(schema.const)}`;
  if (Array.isArray(schema.enum) && !schema.enum.some((option) => isDeepEqual(option, value))) {
    return `${path} is ${JSON.stringify(value)}, not one of ${JSON.stringify(schema.enum)}`;
  }
  const types = typeof schema.type === 'string' ? [schema.type] : Array.isArray(schema.type) ? schema.type : undefined;
  if (types && !types.some((type) => hasJsonType(value, type))) {
    return `${path} is ${describeJsonType(value)}, expected ${types.join(' or ')}`;
  }
  if (isRecord(value) && (isRecord(schema.properties) || ('additionalProperties' in schema && schema.additionalProperties !== true))) {
    const violation = findObjectViolation(value, schema, root, path);
    if (violation) return violation;
  }
  if (schema.type === 'integer' && typeof value === 'number') {
    const min = typeof schema.minimum === 'number' ? castToInt(schema.minimum) : typeof schema.exclusiveMinimum === 'number' ? castToInt(schema.exclusiveMinimum) + 1 : undefined;
    const max = typeof schema.maximum === 'number' ? castToInt(schema.maximum) : typeof schema.exclusiveMaximum === 'number' ? castToInt(schema.exclusiveMaximum) - 1 : undefined;
    if ((min !== undefined && value < min) || (max !== undefined && value > max)) {
      return `${path} is ${value}, outside the grammar's range ${min ?? '…'}..${max ?? '…'}`;
    }
  }
  if (schema.type === 'string' && typeof value === 'string') {
    const length = Array.from(value).length;
    if ((typeof schema.minLength === 'number' && length < schema.minLength) || (typeof schema.maxLength === 'number' && length > schema.maxLength)) {
      return `${path} has ${length} characters, outside the grammar's ${schema.minLength ?? 0}..${schema.maxLength ?? '…'}`;
    }
  }
  if (Array.isArray(value)) {
    if ((typeof schema.minItems === 'number' && value.length < schema.minItems) || (typeof schema.maxItems === 'number' && value.length > schema.maxItems)) {
      return `${path} has ${value.length} items, outside the grammar's ${schema.minItems ?? 0}..${schema.maxItems ?? '…'}`;
    }
    if (isRecord(schema.items)) {
      for (const [index, item] of value.entries()) {
        const violation = findSchemaViolation(item, schema.items, root, `${path}[${index}]`);
        if (violation) return violation;
      }
    }
  }
  return undefined;
}

/** _build_object_rule: required keys in `properties` order, then optional ones in order, then extras if allowed. */
function findObjectViolation(
  value: Record<string, unknown>,
  schema: Record<string, unknown>,
  root: Record<string, unknown>,
  path: string,
): string | undefined {
  const properties = isRecord(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((key) => typeof key === 'string') : []);
  const names = Object.keys(properties);
  const order = [...names.filter((name) => required.has(name)), ...names.filter((name) => !required.has(name))];
  const extra = schema.additionalProperties;
  const extrasAllowed = extra === true || isRecord(extra);
  const missing = order.find((name) => required.has(name) && !(name in value));
  if (missing !== undefined) return `${path} is missing required property "${missing}"`;
  let position = -1;
  let sawExtra = false;
  for (const [key, child] of Object.entries(value)) {
    const index = order.indexOf(key);
    if (index === -1) {
      if (!extrasAllowed) return `${path} has property "${key}", which the grammar does not allow (no additionalProperties)`;
      sawExtra = true;
      if (isRecord(extra)) {
        const violation = findSchemaViolation(child, extra, root, `${path}.${key}`);
        if (violation) return violation;
      }
      continue;
    }
    if (index < position || sawExtra) {
      return `${path} has "${key}" out of order: the grammar writes ${order.map((name) => `"${name}"`).join(', ')} in that order (required first)`;
    }
    position = index;
    const violation = findSchemaViolation(child, properties[key], root, `${path}.${key}`);
    if (violation) return violation;
  }
  return undefined;
}

function resolveRef(root: Record<string, unknown>, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let node: unknown = root;
  for (const segment of ref.slice(1).split('/').filter(Boolean)) {
    node = isRecord(node) ? node[segment.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  }
  return node;
}

function hasJsonType(value: unknown, type: unknown): boolean {
  switch (type) {
    case 'object':
      return isRecord(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number';
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    default:
      return true;
  }
}

function isDeepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * What mistral:7b reads: MISTRAL_TEMPLATE executed the way Ollama executes a chat template.
 * - Roles arrive lower-cased (v0.12.6 api/types.go:198 `m.Role = strings.ToLower(m.Role)`).
 * - `collate` (template/template.go:354-371) joins consecutive messages of one role with "\n\n" (tool
 *   messages excepted) and gathers every system message into $.System; Execute
 *   (template.go:269-278) runs the template with those messages and `"Response": ""`.
 * Then, branch by branch of the template:
 * - user: `[INST] {{ if and $.System (eq (len (slice $.Messages $index)) 1) }}{{ $.System }}\n\n{{ end }}{{ .Content }}[/INST]`:
 *   the system text only inside the LAST message, and only when that one is a user turn;
 * - assistant: `{{- if .Content }} {{ .Content }}` … `{{- end }}</s>`: a space before the text, `</s>` always;
 * - tool: `[TOOL_RESULTS] {"content": {{ .Content }}} [/TOOL_RESULTS]`;
 * - system and any other role: no branch, so nothing;
 * - after the range, `{{- end }} {{ .Response }}`: one space and the empty response. So every chat prompt
 *   ends with a space after its last `[/INST]` (or `</s>`), and no turn starts with one.
 */
export function renderMistralPrompt(messages: readonly FakeChatMessage[]): string {
  const lowered = messages.map((m) => ({ role: m.role.toLowerCase(), content: m.content }));
  const system = lowered.filter((m) => m.role === 'system').map((m) => m.content).join('\n\n');
  const collated: Array<{ role: string; content: string }> = [];
  for (const message of lowered) {
    const previous = collated.at(-1);
    if (previous && previous.role === message.role && message.role !== 'tool') previous.content += `\n\n${message.content}`;
    else collated.push({ ...message });
  }
  let prompt = '';
  collated.forEach((message, index) => {
    const last = index === collated.length - 1;
    if (message.role === 'user') prompt += `[INST] ${system && last ? `${system}\n\n` : ''}${message.content}[/INST]`;
    else if (message.role === 'assistant') prompt += `${message.content ? ` ${message.content}` : ''}</s>`;
    else if (message.role === 'tool') prompt += `[TOOL_RESULTS] {"content": ${message.content}} [/TOOL_RESULTS]`;
  });
  return `${prompt} `;
}
