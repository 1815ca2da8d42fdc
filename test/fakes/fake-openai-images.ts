// A real HTTP server that follows OpenAI's Images API and nothing more: OpenAI's error shape, WIDTHxHEIGHT
// sizes, b64_json or url answers, /v1/models, and /v1/images/edits (multipart: image and prompt required, no
// strength: an edit by instruction). It reads only the fields that API defines (prompt, model, n, size,
// response_format…): a seed, steps, a negative prompt or a strength change nothing. LocalAI and sd-server have
// fakes of their own (fake-localai.ts, fake-sd-server.ts).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { makePng } from './png-bytes.ts';
import { parseBody, readBodyBytes, readMultipart, sendJson, sendRedirect, streamLargeBody, type LargeBody, type RedirectEverything } from './http-body.ts';

export interface FakeOpenAiImagesOptions {
  /** /v1/images/generations answers with this status and body (objects are sent as JSON). */
  failWith?: { status: number; body: unknown };
  /** Every /v1 request must carry `Authorization: Bearer <this>`. */
  requireApiKey?: string;
  /** /v1/images/generations never answers. */
  hang?: boolean;
  /** What GET /v1/models lists, OpenAI's shape: {object: "list", data: [{id, object: "model", created, owned_by}]}. */
  models?: string[];
  /**
   * A request naming a model the list does not hold is refused as OpenAI refuses one: HTTP 404, "The model `X` does
   * not exist or you do not have access to it.", code model_not_found (as users report it from
   * /v1/images/generations, e.g. jdmnk/codex-imagegen-cli#18; OpenAI's server is not public). Off by default: any
   * model is taken, as by servers that ignore it.
   */
  knownModelsOnly?: boolean;
  /**
   * Answers with these bytes in place of the rendered PNG: broken images, or a decompression bomb
   * (png-bytes.ts, makePngBomb) as a compromised server would send.
   */
  image?: Uint8Array;
  /** Every route answers with this redirect (http-body.ts: a misconfigured reverse proxy, a compromised server). */
  redirect?: RedirectEverything;
  /**
   * Answer `url` even when b64_json is asked for, as servers that ignore response_format do. LocalAI builds the
   * link from the request's own base URL (core/http/endpoints/openai/image.go:195 and :222).
   */
  forceUrl?: boolean;
  /** The base of every `url` answered (default: this server's own address), e.g. another server's. */
  urlBase?: string;
  /** /generated-images/… answers 302 with a Location on this other base instead of the file. */
  redirectImagesTo?: string;
  /** The answer (as JSON with b64_json, or the linked file with `forceUrl`) is this large, streamed and never held whole. */
  hugeAnswer?: Omit<LargeBody, 'prefix' | 'suffix' | 'contentType'>;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  /** Parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: unknown;
  authorization: string | undefined;
}

export interface FakeOpenAiImages {
  url: string;
  /** What /v1/models lists, live: a test adds or removes a model. */
  models: string[];
  requests: RecordedRequest[];
  /** Bytes of a hugeAnswer handed to the socket so far: what Easel could have read at most. */
  readonly hugeBytesSent: number;
  close(): Promise<void>;
}

function openAiError(message: string, param: string | null, code: string | null, type = 'invalid_request_error') {
  return { error: { message, type, param, code } };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

type Validation = { ok: true; width: number; height: number; n: number; format: string; prompt: string; model: string | undefined } | { ok: false; error: unknown };

function validateGeneration(text: string): Validation {
  const body = parseBody(text);
  if (!isRecord(body)) {
    return { ok: false, error: openAiError('We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.', null, null) };
  }
  if (typeof body['prompt'] !== 'string' || body['prompt'] === '') {
    return { ok: false, error: openAiError("Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter') };
  }
  const size = typeof body['size'] === 'string' ? /^(\d+)x(\d+)$/.exec(body['size']) : body['size'] === undefined ? /^(\d+)x(\d+)$/.exec('512x512') : null;
  if (size === null) {
    return { ok: false, error: openAiError(`Invalid value: '${String(body['size'])}'. Size must be WIDTHxHEIGHT, e.g. '512x512'.`, 'size', 'invalid_value') };
  }
  const format = body['response_format'] ?? 'url';
  if (format !== 'url' && format !== 'b64_json') {
    return { ok: false, error: openAiError(`Invalid value: '${String(format)}'. Supported values are: 'url' and 'b64_json'.`, 'response_format', 'invalid_value') };
  }
  const n = body['n'] ?? 1;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 10) {
    return { ok: false, error: openAiError(`Invalid value: ${String(n)}. 'n' must be an integer between 1 and 10.`, 'n', 'invalid_value') };
  }
  return { ok: true, width: Number(size[1]), height: Number(size[2]), n, format, prompt: body['prompt'], model: typeof body['model'] === 'string' ? body['model'] : undefined };
}

export async function createFakeOpenAiImages(options: FakeOpenAiImagesOptions = {}): Promise<FakeOpenAiImages> {
  const models = [...(options.models ?? ['stablediffusion'])];
  const requests: RecordedRequest[] = [];
  const files = new Map<string, Uint8Array>();
  let baseUrl = '';
  let hugeBytesSent = 0;

  function isAuthorized(request: IncomingMessage, response: ServerResponse): boolean {
    if (options.requireApiKey === undefined) return true;
    const header = request.headers.authorization;
    if (header === `Bearer ${options.requireApiKey}`) return true;
    const message =
      header === undefined
        ? "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        : `Incorrect API key provided: ${header.replace(/^Bearer /, '').slice(0, 8)}****.`;
    sendJson(response, 401, openAiError(message, null, header === undefined ? null : 'invalid_api_key'));
    return false;
  }

  async function handleGeneration(text: string, response: ServerResponse): Promise<void> {
    if (options.failWith !== undefined) return sendJson(response, options.failWith.status, options.failWith.body);
    const validation = validateGeneration(text);
    if (!validation.ok) return sendJson(response, 400, validation.error);
    if (options.knownModelsOnly === true && validation.model !== undefined && !models.includes(validation.model)) {
      return sendJson(response, 404, openAiError(`The model \`${validation.model}\` does not exist or you do not have access to it.`, null, 'model_not_found'));
    }
    if (options.hang === true) return;
    const asUrl = validation.format === 'url' || options.forceUrl === true;
    if (options.hugeAnswer !== undefined && !asUrl) {
      const body = { ...options.hugeAnswer, contentType: 'application/json', prefix: '{"created":1,"data":[{"b64_json":"', suffix: '"}]}' };
      return streamLargeBody(response, body, (sent) => (hugeBytesSent = sent));
    }
    // Painted from the prompt alone: the API has no seed.
    const shade = [...validation.prompt].reduce((sum, char) => (sum + (char.codePointAt(0) ?? 0)) & 0xff, 0);
    const png = options.image ?? makePng(validation.width, validation.height, [shade, 40, 255 - shade]);
    const data = Array.from({ length: validation.n }, () => {
      if (!asUrl) return { b64_json: Buffer.from(png).toString('base64') };
      const name = `${randomUUID()}.png`;
      files.set(name, png);
      return { url: `${options.urlBase ?? baseUrl}/generated-images/${name}` };
    });
    sendJson(response, 200, { created: Math.floor(Date.now() / 1000), data });
  }

  /**
   * OpenAI's POST /v1/images/edits: multipart/form-data with `image` (or `image[]`) and `prompt` required, `mask`, `n`,
   * `size`, `response_format` optional; no strength of any kind. Answered as a generation is.
   */
  async function handleEdit(form: FormData | undefined, response: ServerResponse): Promise<void> {
    if (form === undefined) return sendJson(response, 400, openAiError("Invalid Content-Type header (expected multipart/form-data).", null, null));
    const images = [...form.getAll('image'), ...form.getAll('image[]')].filter((value) => typeof value !== 'string');
    if (images.length === 0) return sendJson(response, 400, openAiError("Missing required parameter: 'image'.", 'image', 'missing_required_parameter'));
    const fields = Object.fromEntries([...form.entries()].filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
    const n = fields['n'] === undefined ? undefined : Number(fields['n']);
    return handleGeneration(JSON.stringify({ ...fields, ...(n === undefined ? {} : { n }) }), response);
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const address = new URL(request.url ?? '/', 'http://127.0.0.1');
    const bytes = await readBodyBytes(request);
    const text = bytes.toString('utf8');
    const method = request.method ?? 'GET';
    const form = await readMultipart(bytes, request.headers['content-type']);
    requests.push({
      method,
      path: address.pathname,
      query: Object.fromEntries(address.searchParams),
      body: form === undefined ? parseBody(text) : Object.fromEntries([...form.keys()].map((key) => [key, form.getAll(key)])),
      authorization: request.headers.authorization,
    });
    if (options.redirect !== undefined) return sendRedirect(response, options.redirect);
    if (method === 'GET' && address.pathname.startsWith('/generated-images/')) {
      if (options.redirectImagesTo !== undefined) {
        return void response.writeHead(302, { location: `${options.redirectImagesTo}${address.pathname}` }).end();
      }
      const file = files.get(address.pathname.slice('/generated-images/'.length));
      if (file === undefined) return sendJson(response, 404, openAiError('File not found', null, null));
      if (options.hugeAnswer !== undefined) {
        return streamLargeBody(response, { ...options.hugeAnswer, contentType: 'image/png' }, (sent) => (hugeBytesSent = sent));
      }
      return void response.writeHead(200, { 'content-type': 'image/png' }).end(file);
    }
    if (!address.pathname.startsWith('/v1/') || !isAuthorized(request, response)) {
      if (!response.headersSent) sendJson(response, 404, openAiError(`Invalid URL (${method} ${address.pathname})`, null, null));
      return;
    }
    if (method === 'POST' && address.pathname === '/v1/images/generations') return handleGeneration(text, response);
    if (method === 'POST' && address.pathname === '/v1/images/edits') return handleEdit(form, response);
    if (method === 'GET' && address.pathname === '/v1/models') {
      return sendJson(response, 200, { object: 'list', data: models.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'local' })) });
    }
    sendJson(response, 404, openAiError(`Invalid URL (${method} ${address.pathname})`, null, null));
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, openAiError(String(error), null, null, 'server_error'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  baseUrl = `http://127.0.0.1:${port}`;

  return {
    url: baseUrl,
    models,
    requests,
    get hugeBytesSent() {
      return hugeBytesSent;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
