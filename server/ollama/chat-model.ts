import { Ollama } from 'ollama';
import type { Agent } from 'undici';
import type { Options } from 'ollama';
import { ChatModelError } from '../core/errors.ts';
import type { ChatChunk, ChatModel, ChatOptions, ChatRequest, InstalledChatModel, ModelHealth, PullProgress } from '../core/ports.ts';
import {
  describeModelMissing,
  describeUnreachable,
  isConnectionFailure,
  isOllamaResponseError,
  overlongLineError,
  STREAM_ENDED_EARLY,
  toChatModelError,
  unreadableLineError,
} from './errors.ts';
import { isSameModel } from './model-name.ts';
import { listInstalledModels, pullModel } from './models.ts';
import { readLineBatches } from './ndjson.ts';
import type { ModelsContext } from './models.ts';

export interface OllamaChatModelOptions {
  /** Ollama's base URL, e.g. `http://127.0.0.1:11434`. */
  host: string;
  model: string;
  /** Default `options.seed` for every chat unless the request sets one. */
  seed?: number;
  /** Default `options.num_ctx` for every chat unless the request sets one. */
  numCtx?: number;
  keepAlive?: string | number;
  fetch?: typeof fetch;
  /** How long checkHealth and isLoaded wait for Ollama before giving up. Default 3000 ms. */
  healthTimeoutMs?: number;
}

const DEFAULT_HEALTH_TIMEOUT_MS = 3000;

/**
 * The longest reply line Easel reads from Ollama, in characters. A real line is one token (about 150
 * characters) or the `done` line with its metrics; Ollama's own Go client stops at 8 MB (api/client.go:168
 * maxBufferSize, :217-220). Well below MAX_REPLY_CHARS (200 000), which one line without an end never reaches.
 */
export const MAX_OLLAMA_LINE_CHARS = 64 * 1024;

export function createOllamaChatModel(options: OllamaChatModelOptions): ChatModel {
  const host = options.host.replace(/\/+$/, '');
  const model = options.model;
  const defaultModel = model;
  const baseFetch = options.fetch ?? globalThis.fetch;
  const healthTimeoutMs = options.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  assertValidHost(host);
  // Ollama sends no HTTP headers until the model is loaded and has read the prompt (server/routes.go:
  // ChatHandler blocks in scheduleRunner at :2634, then streamResponse at :2097 writes the headers with
  // the first line through gin's c.Stream; v0.12.6: :1948 and :1645), so undici's
  // default 300 s headersTimeout would fire on a slow load and look like "not reachable". Both undici
  // timeouts are off here: the core's watchdog (--first-token-timeout, --stall-timeout) aborts the
  // request instead and says truthfully what happened. Connecting still fails fast when nothing listens.
  // Only chats need it (the other calls give up after healthTimeoutMs), so undici is loaded at the first
  // chat, not at start (issue 12: ~0.1 s and several MB less before the first page).
  let chatDispatcher: Promise<Agent> | undefined;
  const loadChatDispatcher = () =>
    (chatDispatcher ??= import('undici').then(({ Agent }) => new Agent({ headersTimeout: 0, bodyTimeout: 0 })));

  // One client per call: the client's abort() and its list of ongoing streams are per
  // instance, so a shared client would let one cancelled chat cancel the others.
  function createClient(signal: AbortSignal): Ollama {
    return new Ollama({ host, fetch: createScopedFetch(baseFetch, signal) });
  }

  function mergeOptions(requested: ChatOptions | undefined): Partial<Options> | undefined {
    const merged: Record<string, number> = {};
    if (options.seed !== undefined) merged.seed = options.seed;
    if (options.numCtx !== undefined) merged.num_ctx = options.numCtx;
    for (const [key, value] of Object.entries(requested ?? {})) {
      if (value !== undefined) merged[key] = value;
    }
    return Object.keys(merged).length > 0 ? merged : undefined;
  }

  async function* chat(request: ChatRequest): AsyncGenerator<ChatChunk> {
    // The conversation's model, else the default (--model); errors name the one asked for.
    const chatModel = request.model ?? model;
    const errorContext = { host, model: chatModel, action: 'chat', signal: request.signal };
    if (request.signal?.aborted) {
      throw toChatModelError(request.signal.reason, { ...errorContext, phase: 'request' });
    }
    // Our own controller also hangs up when the caller stops iterating early or on failure:
    // the client never cancels the response body by itself.
    const hangUp = new AbortController();
    const signal = request.signal ? AbortSignal.any([request.signal, hangUp.signal]) : hangUp.signal;
    // The client builds the request and maps HTTP errors; the body is read here, a network read at a time.
    let body: ReadableStream<Uint8Array> | null = null;
    const chatOptions = mergeOptions(request.options);
    let phase: 'request' | 'stream' = 'request';
    let completed = false;
    try {
      const client = new Ollama({
        host,
        fetch: createScopedFetch(baseFetch, signal, await loadChatDispatcher(), (taken) => {
          body = taken;
        }),
      });
      await client.chat({
        model: chatModel,
        // Images go as bytes: the client base64-encodes a Uint8Array (ollama-js @ f23d7ee src/index.ts:10-14
        // encodeImage, `Buffer.from(image).toString('base64')`; dist/index.mjs:7-10 in the 0.6.4 installed) and
        // Ollama's api.ImageData ([]byte, api/types.go:57) decodes it. A string would first be tried as a file
        // path (src/index.ts:15-20), so bytes are never passed as one.
        messages: request.messages.map(({ role, content, images }) =>
          images !== undefined && images.length > 0 ? { role, content, images } : { role, content },
        ),
        stream: true,
        ...(request.format !== undefined && { format: request.format }),
        ...(chatOptions !== undefined && { options: chatOptions }),
        ...(options.keepAlive !== undefined && { keep_alive: options.keepAlive }),
      });
      phase = 'stream';
      if (body === null) throw new Error('Ollama answered the chat request without a body.');
      for await (const chunk of readChatStream(body, host)) {
        if (chunk.type === 'end') completed = true;
        yield chunk;
      }
      if (!completed) throw new Error(STREAM_ENDED_EARLY);
    } catch (error) {
      throw toChatModelError(error, { ...errorContext, phase });
    } finally {
      if (!completed) hangUp.abort();
    }
  }

  async function checkHealth(signal?: AbortSignal, requested?: string): Promise<ModelHealth> {
    const model = requested ?? defaultModel;
    const timeout = AbortSignal.timeout(healthTimeoutMs);
    const client = createClient(signal ? AbortSignal.any([signal, timeout]) : timeout);
    const unhealthy = (fields: Omit<ModelHealth, 'model'>): ModelHealth => ({ model, ...fields });

    let version: string;
    try {
      version = (await client.version()).version;
      if (typeof version !== 'string') throw new TypeError('/api/version has no "version" field');
    } catch (error) {
      return unhealthy({
        reachable: false,
        version: null,
        modelAvailable: false,
        remedy: 'ollama serve',
        problem: describeVersionFailure(error, host, healthTimeoutMs, timeout.aborted, signal?.aborted === true),
      });
    }

    try {
      const { models } = await client.list();
      const available = (Array.isArray(models) ? models : []).some(
        (entry) => isSameModel(entry.name ?? '', model) || isSameModel(entry.model ?? '', model),
      );
      if (available) return { reachable: true, version, model, modelAvailable: true };
      // The models it does have: another can be chosen rather than pulling this one.
      const installed = (Array.isArray(models) ? models : []).map((entry) => entry.name ?? entry.model ?? '').filter((name) => name !== '');
      return unhealthy({
        reachable: true,
        version,
        modelAvailable: false,
        remedy: `ollama pull ${model}`,
        problem: describeModelMissing(model, installed),
        installed,
      });
    } catch (error) {
      return unhealthy({
        reachable: true,
        version,
        modelAvailable: false,
        remedy: 'ollama serve',
        problem: `Ollama ${version} at ${host} answered but could not list its models (${errorText(error)}); restart it with \`ollama serve\`.`,
      });
    }
  }

  async function isLoaded(signal?: AbortSignal, requested?: string): Promise<boolean | undefined> {
    const model = requested ?? defaultModel;
    const timeout = AbortSignal.timeout(healthTimeoutMs);
    const client = createClient(signal ? AbortSignal.any([signal, timeout]) : timeout);
    try {
      // GET /api/ps: {"models": [{"name", "model", "size_vram", "expires_at", …}]} (api/types.go ProcessResponse).
      const { models } = await client.ps();
      if (!Array.isArray(models)) return undefined;
      return models.some((entry) => isSameModel(entry.name ?? '', model) || isSameModel(entry.model ?? '', model));
    } catch {
      return undefined;
    }
  }

  async function unload(signal?: AbortSignal, requested?: string): Promise<void> {
    const model = requested ?? defaultModel;
    const errorContext = { host, model, action: 'unload', signal, phase: 'request' as const };
    if (signal?.aborted) throw toChatModelError(signal.reason, errorContext);
    const client = createClient(signal ?? new AbortController().signal);
    try {
      await client.generate({ model, prompt: '', keep_alive: 0, stream: false });
    } catch (error) {
      throw toChatModelError(error, errorContext);
    }
  }

  /**
   * Every model in memory, unloaded one after the other. GET /api/ps lists each runner Ollama has loaded, a loading
   * one included, by its short name in both `name` and `model` (server/routes.go PsHandler: s.sched.loaded, v0.12.6
   * :1758; api.ProcessResponse, api/types.go:627). A model that fails to unload does not keep the others in memory.
   */
  async function unloadAll(signal?: AbortSignal): Promise<string[]> {
    const listContext = { host, model: defaultModel, action: 'unload', signal, phase: 'request' as const };
    if (signal?.aborted) throw toChatModelError(signal.reason, listContext);
    const timeout = AbortSignal.timeout(healthTimeoutMs);
    let names: string[];
    try {
      const { models } = await createClient(signal ? AbortSignal.any([signal, timeout]) : timeout).ps();
      const listed = (Array.isArray(models) ? models : []).map((entry) => entry.model || entry.name || '').filter((name) => name !== '');
      names = [...new Set(listed)];
    } catch (error) {
      throw toChatModelError(error, listContext);
    }
    const unloaded: string[] = [];
    let failure: unknown;
    for (const name of names) {
      try {
        await unload(signal, name);
        unloaded.push(name);
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
    return unloaded;
  }

  const modelsContext: ModelsContext = { host, fetch: baseFetch, healthTimeoutMs, createClient, loadDispatcher: loadChatDispatcher };
  const listModels = (signal?: AbortSignal): Promise<InstalledChatModel[]> => listInstalledModels(modelsContext, signal);
  const pull = (name: string, signal: AbortSignal): AsyncIterable<PullProgress> => pullModel(modelsContext, name, signal);

  return { model, chat, checkHealth, isLoaded, unload, unloadAll, listModels, pull, isSameModel };
}

/**
 * Adds our signal (and dispatcher) to every fetch the client makes, including the GETs it never signals.
 * With `takeBody`, a successful answer's body is handed over and the client gets an empty one: it still
 * builds the request and turns an HTTP error into its ResponseError, but never reads the stream.
 */
function createScopedFetch(
  baseFetch: typeof fetch,
  signal: AbortSignal,
  dispatcher?: Agent,
  takeBody?: (body: ReadableStream<Uint8Array> | null) => void,
): typeof fetch {
  return async (input, init) => {
    const combined = init?.signal ? AbortSignal.any([init.signal, signal]) : signal;
    // `dispatcher` is undici's extension of RequestInit; Node's fetch is undici 6, the version installed.
    const scoped = dispatcher === undefined ? { ...init, signal: combined } : { ...init, signal: combined, dispatcher };
    const response = await baseFetch(input, scoped as RequestInit);
    if (!response.ok) return asJsonError(response);
    if (takeBody === undefined) return response;
    takeBody(response.body);
    const empty = new ReadableStream<Uint8Array>({ start: (controller) => controller.close() });
    return new Response(empty, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/**
 * Ollama's NDJSON chat stream, one chunk per network read rather than per line: the text of every complete
 * line a read brought, joined. Lines follow the rules of Ollama's own Go client (see readChunkLine): a line
 * that is not a chat chunk, or an `{"error"}` line, fails the chat after the text before it, and the stream
 * ends at the `done` line; the caller treats an end without one as an error. A line longer than
 * MAX_OLLAMA_LINE_CHARS fails it too, whether or not it has ended.
 */
async function* readChatStream(body: ReadableStream<Uint8Array>, host: string): AsyncGenerator<ChatChunk> {
  // A line not ended yet is checked at every read (readLineBatches); an ended one in readLines.
  for await (const lines of readLineBatches(body, { maxLineChars: MAX_OLLAMA_LINE_CHARS, overlong: () => overlongLineError(host, MAX_OLLAMA_LINE_CHARS, false) })) {
    const batch = readLines(lines, host);
    if (batch.text !== '') yield { type: 'text', text: batch.text };
    else if (batch.alive) yield { type: 'alive' };
    if (batch.error !== undefined) throw batch.error;
    if (batch.end !== undefined) {
      yield batch.end;
      return;
    }
  }
}

interface LineBatch {
  text: string;
  /** A line without text arrived: the model is working (a thinking model's thoughts). */
  alive: boolean;
  /** What ends the chat: Ollama's `{"error"}` line, or a line Easel cannot read; the lines after it are not read. */
  error?: Error;
  end?: Extract<ChatChunk, { type: 'end' }>;
}

function readLines(lines: readonly string[], host: string): LineBatch {
  const batch: LineBatch = { text: '', alive: false };
  for (const line of lines) {
    if (line.length > MAX_OLLAMA_LINE_CHARS) {
      batch.error = overlongLineError(host, MAX_OLLAMA_LINE_CHARS, true);
      return batch;
    }
    // A blank line carries nothing, so skipping it loses nothing (ollama-js skips it too).
    if (line.trim() === '') continue;
    const content = readContentLine(line);
    if (content !== undefined) {
      if (content !== '') batch.text += content;
      else batch.alive = true;
      continue;
    }
    const read = readChunkLine(line);
    if (read.kind === 'error') {
      batch.error = new Error(read.message);
      return batch;
    }
    if (read.kind === 'unreadable') {
      batch.error = unreadableLineError(host, line, read.why);
      return batch;
    }
    const response = read.chunk;
    const text = response.message?.content;
    if (typeof text === 'string' && text !== '') batch.text += text;
    else if (response.done !== true) batch.alive = true;
    if (response.done === true) {
      batch.end = {
        type: 'end',
        doneReason: response.done_reason || 'stop',
        evalCount: response.eval_count ?? 0,
        evalDurationNs: response.eval_duration ?? 0,
        promptEvalCount: response.prompt_eval_count ?? 0,
      };
      return batch;
    }
  }
  return batch;
}

/** The fields of a chat line Easel reads, typed as api/types.go ChatResponse has them (null: left out). */
interface ChatLine {
  message?: { content?: string | null } | null;
  done?: boolean | null;
  done_reason?: string | null;
  eval_count?: number | null;
  eval_duration?: number | null;
  prompt_eval_count?: number | null;
}

type ReadLine =
  | { kind: 'chunk'; chunk: ChatLine }
  | { kind: 'error'; message: string }
  | { kind: 'unreadable'; why: string };

// A valid chat line, after Ollama's own Go client (api/client.go @ fb30760): stream() fails the chat on a line
// that is not JSON (:228-236) and on a non-empty {"error"} (:253-255); Chat() fails on a line that does not
// json.Unmarshal into api.ChatResponse (:297-305; api/types.go:520-549, Message :197-207, Metrics :557-564).
// ollama-js skips a non-JSON line instead (src/utils.ts:320-325), which can drop words without a trace.
// Unknown fields are fine and null counts as absent, as in Go's Unmarshal.
const LINE_STRINGS = ['model', 'created_at', 'done_reason'] as const;
const LINE_NUMBERS = [
  'total_duration',
  'load_duration',
  'prompt_eval_count',
  'prompt_eval_duration',
  'eval_count',
  'eval_duration',
] as const;
const MESSAGE_STRINGS = ['role', 'content', 'thinking'] as const;

/** Any line but the ordinary one readContentLine takes: a chunk, Ollama's error, or why it is neither. */
function readChunkLine(line: string): ReadLine {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { kind: 'unreadable', why: 'it is not JSON' };
  }
  if (!isRecord(value)) return { kind: 'unreadable', why: `it is ${describeJsonType(value)}, not a JSON object` };
  // stream() reads the error first, on its own (:222-237), so the other fields do not matter on an error line.
  const wrongError = findWrongType(value, ['error'], 'string');
  if (wrongError !== undefined) return { kind: 'unreadable', why: wrongError };
  if (typeof value.error === 'string' && value.error !== '') return { kind: 'error', message: value.error };
  const wrong =
    findWrongType(value, LINE_STRINGS, 'string') ??
    findWrongType(value, ['done'], 'boolean') ??
    findWrongType(value, LINE_NUMBERS, 'number');
  if (wrong !== undefined) return { kind: 'unreadable', why: wrong };
  const message = value.message;
  if (message !== undefined && message !== null) {
    if (!isRecord(message)) return { kind: 'unreadable', why: `"message" is ${describeJsonType(message)}, not an object` };
    const wrongInMessage = findWrongType(message, MESSAGE_STRINGS, 'string');
    if (wrongInMessage !== undefined) return { kind: 'unreadable', why: `in "message", ${wrongInMessage}` };
  }
  return { kind: 'chunk', chunk: value as ChatLine };
}

function findWrongType(
  record: Record<string, unknown>,
  fields: readonly string[],
  type: 'string' | 'boolean' | 'number',
): string | undefined {
  for (const field of fields) {
    const value = record[field];
    if (value === undefined || value === null || typeof value === type) continue;
    return `"${field}" is ${describeJsonType(value)}, not a ${type}`;
  }
  return undefined;
}

function describeJsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// Every line but the last of a reply has one shape (api/types.go ChatResponse: model, created_at, message
// {role, content}, done; Go's encoder writes fields in struct order and leaves out the empty `omitempty` ones).
const CONTENT_MARK = ',"message":{"role":"assistant","content":"';
const CONTENT_END = '"},"done":false}';
const LINE_HEAD = /^\{"model":"[^"\\]*","created_at":"[^"\\]*"$/;

/**
 * The text of an ordinary reply line, read without building its object (half of the server's CPU per
 * token went to JSON.parse): only the content's string literal is parsed. Undefined for any other line
 * (thinking, tool calls, a cloud model's extra fields, `done`, an error), which is parsed whole.
 */
function readContentLine(line: string): string | undefined {
  if (!line.endsWith(CONTENT_END)) return undefined;
  const at = line.indexOf(CONTENT_MARK);
  if (at === -1 || !LINE_HEAD.test(line.slice(0, at))) return undefined;
  try {
    const content: unknown = JSON.parse(line.slice(at + CONTENT_MARK.length - 1, line.length - CONTENT_END.length + 1));
    return typeof content === 'string' ? content : undefined;
  } catch {
    // A quote inside the literal that is not its end: not this shape after all.
    return undefined;
  }
}

/** The client console.logs while reading a non-JSON error body; hand it JSON so logs stay clean. */
async function asJsonError(response: Response): Promise<Response> {
  if (response.status < 400 || response.headers.get('content-type')?.includes('application/json')) return response;
  const text = (await response.text()).trim().slice(0, 500);
  return new Response(JSON.stringify({ error: text || `${response.status} ${response.statusText}` }), {
    status: response.status,
    statusText: response.statusText,
    headers: { 'content-type': 'application/json' },
  });
}

function assertValidHost(host: string): void {
  try {
    new Ollama({ host });
  } catch (error) {
    throw new ChatModelError(
      'unreachable',
      `The Ollama URL "${host}" is not a valid URL. Pass one like http://127.0.0.1:11434 with --ollama-url.`,
      { cause: error },
    );
  }
}

function errorText(error: unknown): string {
  if (isOllamaResponseError(error)) return `HTTP ${error.status_code}: ${error.error}`;
  return error instanceof Error ? error.message : String(error);
}

function describeVersionFailure(
  error: unknown,
  host: string,
  timeoutMs: number,
  timedOut: boolean,
  cancelled: boolean,
): string {
  if (cancelled) return `The health check of Ollama at ${host} was cancelled before it finished; run it again.`;
  if (timedOut) {
    return `Ollama at ${host} did not answer within ${timeoutMs / 1000} s; restart it with \`ollama serve\`.`;
  }
  if (isOllamaResponseError(error)) {
    return `Something answered at ${host} but it is not Ollama (${errorText(error)} on /api/version); start Ollama with \`ollama serve\` or fix --ollama-url.`;
  }
  if (isConnectionFailure(error)) return describeUnreachable(host);
  return `Ollama at ${host} sent an unreadable answer to /api/version (${errorText(error)}); start Ollama with \`ollama serve\` or fix --ollama-url.`;
}
