// ComfyUI: queue an API-format workflow over HTTP, follow it over the WebSocket, fetch the
// saved image from /history and /view. Line numbers cite ComfyUI 0.3.64 (a125cd84).
import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type WebSocket from 'ws';
import { ImageBackendError } from '../core/errors.ts';
import { MAX_BACKEND_ANSWER_BYTES, MAX_ERROR_TEXT_BYTES, MAX_IMAGE_BYTES } from '../core/image-limits.ts';
import type { ImageBackend, ImageBackendHealth, ImageModelOptions, ImageProgress, ImageRequest, ImageResult } from '../core/ports.ts';
import {
  checkWithin,
  createImageServerFetch,
  createRedirectError,
  DEFAULT_HEALTH_TIMEOUT_MS,
  DEFAULT_IMAGE_TIMEOUT_MS,
  describeConnectionFailure,
  describeImageTooLarge,
  isRedirectStatus,
  listWithin,
  runImageJob,
  type ConnectionWords,
} from '../image-backend/index.ts';
import { describeImageBytes, readPngChunks } from '../png/index.ts';
import { readComboOptions } from './object-info.ts';
import { applyModelChoices, fillWorkflow, findCheckpointName, findChoiceTarget, findOwnChoice, findSamplerSettings, MODEL_CHOICE_INPUTS, takesBatchSize, type ModelChoice } from './workflow.ts';
import { describeTooLarge, isRecord, parseJson, readCappedBytes, readCappedText, readTextPrefix, truncate } from '../util/index.ts';

export interface ComfyUiBackendOptions {
  /** Base URL, e.g. http://127.0.0.1:8188 */
  url: string;
  /** API-format workflow with %placeholders%; see loadWorkflow. */
  workflow: unknown;
  /**
   * The image-to-image workflow (Vary): the bundled default-img2img-workflow.json or --comfy-img2img-workflow, with
   * %init_image% and %denoise%. Absent: this backend cannot vary an image.
   */
  img2imgWorkflow?: unknown;
  /** WebSocket client id; a fresh one per generation by default. */
  clientId?: string;
  /** After this long the job is interrupted and generate rejects with 'timeout'. Default 10 minutes. */
  timeoutMs?: number;
  /** Limit for checkHealth, for the interrupt call and for listModels. Default 3 s. */
  healthTimeoutMs?: number;
  fetch?: typeof fetch;
  WebSocket?: typeof WebSocket;
}

interface ComfyMessage {
  type: string;
  data: Record<string, unknown>;
}

interface OutputImage {
  filename: string;
  subfolder: string;
  type: string;
}

/** Said when Easel's ComfyUI backend was made without an image-to-image workflow (main.ts always gives one). */
const CANNOT_VARY = 'Easel has no image-to-image workflow for ComfyUI, so it cannot start an image from another one: give one with --comfy-img2img-workflow.';

const HISTORY_ATTEMPTS = 5;
const HISTORY_RETRY_MS = 100;

function joinMessage(message: unknown, details: unknown): string {
  const parts = [message, details].filter((part): part is string => typeof part === 'string' && part.trim() !== '');
  return parts.join(': ');
}

/** ComfyUI's words from a /prompt refusal: the error plus each node's validation errors. */
export function describeComfyUiError(bodyText: string): string {
  const body = parseJson(bodyText);
  if (!isRecord(body)) return truncate(bodyText) || '(empty answer)';
  const parts: string[] = [];
  const error = body['error'];
  if (isRecord(error)) parts.push(joinMessage(error['message'], error['details']));
  else if (typeof error === 'string') parts.push(error);
  const nodeErrors = body['node_errors'];
  if (isRecord(nodeErrors)) {
    for (const [nodeId, nodeError] of Object.entries(nodeErrors)) {
      if (!isRecord(nodeError) || !Array.isArray(nodeError['errors'])) continue;
      const problems = nodeError['errors']
        .filter(isRecord)
        .map((item) => joinMessage(item['message'], item['details']))
        .join('; ');
      const classType = typeof nodeError['class_type'] === 'string' ? nodeError['class_type'] : 'node';
      parts.push(`${classType} (node ${nodeId}): ${problems}`);
    }
  }
  const described = parts.filter((part) => part !== '').join(' — ');
  return truncate(described === '' ? bodyText : described);
}

function readOutputImages(outputs: unknown): OutputImage[] {
  if (!isRecord(outputs)) return [];
  const images: OutputImage[] = [];
  for (const output of Object.values(outputs)) {
    if (!isRecord(output) || !Array.isArray(output['images'])) continue;
    for (const image of output['images']) {
      if (isRecord(image) && typeof image['filename'] === 'string') {
        images.push({
          filename: image['filename'],
          subfolder: typeof image['subfolder'] === 'string' ? image['subfolder'] : '',
          type: typeof image['type'] === 'string' ? image['type'] : 'output',
        });
      }
    }
  }
  // A SaveImage result ('output') beats a PreviewImage one ('temp').
  return images.sort((a, b) => Number(b.type === 'output') - Number(a.type === 'output'));
}

function toWebSocketUrl(url: string, clientId: string): string {
  const address = new URL(`${url}/ws`);
  address.protocol = address.protocol === 'https:' ? 'wss:' : 'ws:';
  address.searchParams.set('clientId', clientId);
  return address.toString();
}

/** Buffers text frames from the moment the socket opens, so none are lost before /prompt answers. */
function watchSocket(socket: WebSocket) {
  const pending: ComfyMessage[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  socket.on('message', (data, isBinary) => {
    // Binary frames are latent previews.
    // Stryker disable next-line ConditionalExpression: a binary frame starts with a uint32 event type (server.py, struct.pack('>I')): JSON.parse refuses its first byte 0
    if (isBinary) return;
    const message = parseJson(String(data));
    if (isRecord(message) && typeof message['type'] === 'string') {
      pending.push({ type: message['type'], data: isRecord(message['data']) ? message['data'] : {} });
      wake?.();
    }
  });
  socket.on('close', () => {
    closed = true;
    wake?.();
  });
  // An 'error' is always followed by 'close'; without a listener ws would throw it.
  // Stryker disable next-line StringLiteral: openSocket's 'error' listener stays attached for the socket's life, so ws never throws an unheard error
  socket.on('error', () => {});

  async function* readMessages(signal: AbortSignal): AsyncGenerator<ComfyMessage> {
    for (;;) {
      const next = pending.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      signal.throwIfAborted();
      if (closed) throw new Error('socket closed');
      const onAbort = () => wake?.();
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: the listener is removed right after the wait
      signal.addEventListener('abort', onAbort, { once: true });
      await new Promise<void>((resolve) => (wake = resolve));
      signal.removeEventListener('abort', onAbort);
      wake = undefined;
    }
  }

  // Stryker disable next-line ArrowFunction: nothing calls isClosed
  return { readMessages, isClosed: () => closed };
}

/** `promise`, or a rejection with the signal's reason as soon as it aborts (the promise itself goes on). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  // Stryker disable next-line ConditionalExpression: unreachable: openSocket rejects on an abort until the socket opens, and only our synchronous code runs from there to here
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: the listener is removed once the promise settles, and a late reject does nothing
    signal.addEventListener('abort', onAbort, { once: true });
    // Stryker disable next-line ArrowFunction,StringLiteral: memory only: one listener per job on the job's own signal, dropped with it
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

export function createComfyUiBackend(options: ComfyUiBackendOptions): ImageBackend {
  const url = options.url.replace(/\/+$/, '');
  // Every request: a redirect is refused, never followed (server/image-backend/); the WebSocket's too, below.
  const fetchImpl = createImageServerFetch(options.fetch ?? globalThis.fetch, { label: 'ComfyUI', url });
  // ws is loaded with the first generation, not at start (issue 12): only ComfyUI needs it.
  let webSocketClass: Promise<typeof WebSocket> | undefined;
  const loadWebSocket = () => (webSocketClass ??= options.WebSocket ? Promise.resolve(options.WebSocket) : import('ws').then((ws) => ws.default));
  const timeoutMs = options.timeoutMs ?? DEFAULT_IMAGE_TIMEOUT_MS;
  const healthTimeoutMs = options.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;

  const connection: ConnectionWords = { product: 'ComfyUI', url, startHint: 'ComfyUI (python main.py, port 8188 by default)' };
  const stopWords = () => ({ product: 'ComfyUI', url });

  /** A successful answer's text within MAX_BACKEND_ANSWER_BYTES; an error answer only as far as it is quoted. */
  async function readAnswer(response: Response, path: string): Promise<string> {
    if (!response.ok) return readTextPrefix(response, MAX_ERROR_TEXT_BYTES);
    const body = await readCappedText(response, MAX_BACKEND_ANSWER_BYTES);
    if (body.ok) return body.value;
    throw new ImageBackendError(
      'too_large',
      `ComfyUI at ${url} answered ${path} with ${describeTooLarge(body.error)}, far more than a real answer; Easel stopped reading it. Check that --image-url points to ComfyUI.`,
    );
  }

  async function post(path: string, body?: unknown): Promise<void> {
    try {
      const response = await fetchImpl(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // Stryker disable next-line ConditionalExpression: post is always given a body (/queue {delete}, /interrupt {prompt_id})
        body: body === undefined ? null : JSON.stringify(body),
        signal: AbortSignal.timeout(healthTimeoutMs),
      });
      await response.body?.cancel();
    } catch {
      // Best effort: the job is abandoned either way.
    }
  }

  /** An answer's status (undefined when the server did not answer), the body read only for /queue. */
  async function request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: unknown } | undefined> {
    try {
      const response = await fetchImpl(`${url}${path}`, {
        method,
        // Stryker disable next-line ConditionalExpression,EqualityOperator: request POSTs only the jobs cancel, without a body: null and undefined both send none
        ...(method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: body === undefined ? null : JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(healthTimeoutMs),
      });
      const text = await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES);
      return { status: response.status, body: parseJson(text) };
      // Stryker disable next-line BlockStatement: a function that ends without a return gives undefined too
    } catch {
      return undefined;
    }
  }

  /** The prompt ids of /queue's items, (number, prompt_id, prompt, extra_data, outputs) (server.py:666-672). */
  function readQueueIds(items: unknown): string[] {
    // Stryker disable next-line MethodExpression,ConditionalExpression,ArrayDeclaration: the ids are only searched for our prompt's id, a UUID, which no other value equals
    return Array.isArray(items) ? items.map((item: unknown) => (Array.isArray(item) ? item[1] : undefined)).filter((id): id is string => typeof id === 'string') : [];
  }

  // Whether the server has newer ComfyUI's POST /api/jobs/{id}/cancel; learnt from its first answer.
  let hasJobsApi: boolean | undefined;

  /**
   * Stops our prompt only, whatever else the server runs. Newer ComfyUI cancels one job by id, queued or
   * running (/api/jobs/{id}/cancel). Older ones: /queue {delete} takes it out while it waits, and /interrupt
   * {prompt_id} stops it while it runs, but before 0.3.57 /interrupt ignores the id and stops whatever runs,
   * so it is sent only when /queue lists our prompt as the running one.
   */
  async function cancelPrompt(promptId: string): Promise<void> {
    if (hasJobsApi !== false) {
      const answer = await request('POST', `/api/jobs/${encodeURIComponent(promptId)}/cancel`);
      if (answer !== undefined && answer.status === 200 && isRecord(answer.body) && typeof answer.body['cancelled'] === 'boolean') {
        hasJobsApi = true;
        return;
      }
      if (answer !== undefined) hasJobsApi = false;
    }
    const queue = await request('GET', '/queue');
    const body = isRecord(queue?.body) ? queue.body : {};
    await Promise.all([
      readQueueIds(body['queue_pending']).includes(promptId) ? post('/queue', { delete: [promptId] }) : undefined,
      readQueueIds(body['queue_running']).includes(promptId) ? post('/interrupt', { prompt_id: promptId }) : undefined,
    ]);
  }

  async function openSocket(clientId: string, signal: AbortSignal): Promise<WebSocket> {
    const WebSocketImpl = await loadWebSocket();
    signal.throwIfAborted();
    return new Promise((resolve, reject) => {
      // Previews are small; the cap keeps one hostile frame from costing ws's default 100 MB. followRedirects is
      // ws's default (false), said here: a 3xx to the handshake becomes 'unexpected-response', refused below.
      const address = toWebSocketUrl(url, clientId);
      const socket = new WebSocketImpl(address, { maxPayload: MAX_IMAGE_BYTES, followRedirects: false });
      const onAbort = () => {
        socket.terminate();
        reject(signal.reason);
      };
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: open, unexpected-response and error each remove it, and the signal aborts once
      signal.addEventListener('abort', onAbort, { once: true });
      socket.once('open', () => {
        signal.removeEventListener('abort', onAbort);
        resolve(socket);
      });
      socket.once('unexpected-response', (_request, response) => {
        // Stryker disable next-line StringLiteral: the job has failed by then, and finally clears the timer and the caller's listener
        signal.removeEventListener('abort', onAbort);
        response.resume();
        socket.terminate();
        const status = response.statusCode ?? 0;
        if (isRedirectStatus(status)) {
          const location = response.headers.location ?? null;
          return reject(createRedirectError({ label: 'ComfyUI', url }, { method: 'GET', requestUrl: address, status, location }));
        }
        reject(
          new ImageBackendError(
            'backend_error',
            // Stryker disable next-line StringLiteral: ?? '?': a response to a client request always has a statusCode
            `The server at ${url} refused ComfyUI's WebSocket /ws (HTTP ${response.statusCode ?? '?'}). Check that --image-url points to ComfyUI.`,
          ),
        );
      });
      // Stays attached: ws throws an 'error' nobody listens to, and terminate() may emit one.
      socket.on('error', (error) => {
        // Stryker disable next-line StringLiteral: the job has failed by then, and finally clears the timer and the caller's listener
        signal.removeEventListener('abort', onAbort);
        reject(describeConnectionFailure(error, connection));
      });
    });
  }

  async function queuePrompt(workflow: unknown, clientId: string, promptId: string, signal: AbortSignal): Promise<string> {
    const response = await fetchImpl(`${url}/prompt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // Our own id (server.py:692, since 0.3.45), so a cancel knows it before /prompt answers. Newer servers
      // want a canonical lowercase UUID, which randomUUID() is.
      body: JSON.stringify({ prompt: workflow, client_id: clientId, prompt_id: promptId }),
      signal,
    });
    const text = await readAnswer(response, '/prompt');
    if (!response.ok) {
      throw new ImageBackendError(
        'backend_error',
        `ComfyUI at ${url} refused the workflow (HTTP ${response.status}): ${describeComfyUiError(text)}. Fix the workflow or install the missing models/nodes.`,
      );
    }
    const body = parseJson(text);
    const answered = isRecord(body) ? body['prompt_id'] : undefined;
    if (typeof answered !== 'string' || answered === '') {
      throw new ImageBackendError('bad_response', `ComfyUI at ${url} accepted the workflow but sent no prompt_id (${truncate(text.slice(0, 120))}). Check that --image-url points to ComfyUI.`);
    }
    // Before 0.3.45 the server ignores ours and names the prompt itself: its answer is what counts.
    return answered;
  }

  async function followPrompt(
    messages: AsyncGenerator<ComfyMessage>,
    promptId: string,
    onProgress: (progress: ImageProgress) => void,
  ): Promise<OutputImage[]> {
    const announced: OutputImage[] = [];
    for await (const { type, data } of messages) {
      // Messages of other prompts on the same client id are not ours; ones without an id are.
      if (data['prompt_id'] !== undefined && data['prompt_id'] !== promptId) continue;
      switch (type) {
        case 'progress': {
          const { value, max } = data;
          if (typeof value !== 'number' || typeof max !== 'number' || max <= 0) break;
          // A failing listener must not break the generation it listens to.
          try {
            onProgress({ fraction: Math.min(1, Math.max(0, value / max)), step: value, steps: max });
          } catch {}
          break;
        }
        case 'executed':
          announced.push(...readOutputImages({ node: data['output'] }));
          break;
        // execution_success (execution.py:704-706) or executing {node: null} (main.py:203-204), whichever comes
        // first: the second follows once the history entry is written, which readHistory waits for.
        case 'execution_success':
          return announced;
        case 'executing':
          if (data['node'] === null) return announced;
          break;
        case 'execution_error': {
          const where = typeof data['node_type'] === 'string' ? ` in ${data['node_type']} (node ${String(data['node_id'])})` : '';
          const what = joinMessage(data['exception_type'], data['exception_message']) || 'unknown error';
          throw new ImageBackendError('backend_error', `ComfyUI failed${where}: ${truncate(what)}. Check the ComfyUI console.`);
        }
        case 'execution_interrupted':
          throw new ImageBackendError('cancelled', `The image was interrupted in ComfyUI at ${url} (someone pressed Cancel there); generate it again if needed.`);
      }
    }
    // Stryker disable next-line StringLiteral: unreachable: readMessages is a for (;;) that only yields or throws
    throw new Error('message stream ended');
  }

  async function readHistory(promptId: string, signal: AbortSignal): Promise<{ images: OutputImage[]; workflow?: unknown }> {
    for (let attempt = 1; ; attempt++) {
      const response = await fetchImpl(`${url}/history/${encodeURIComponent(promptId)}`, { signal });
      const text = await readAnswer(response, '/history');
      if (!response.ok) {
        throw new ImageBackendError('backend_error', `ComfyUI at ${url} answered /history with HTTP ${response.status}: ${truncate(text)}.`);
      }
      const body = parseJson(text);
      if (!isRecord(body)) throw new ImageBackendError('bad_response', `ComfyUI at ${url} sent an unreadable /history answer (${truncate(text.slice(0, 120))}).`);
      const entry = body[promptId];
      // prompt: [number, prompt_id, the workflow that ran, extra_data, outputs_to_execute] (execution.py:1128-1133).
      if (isRecord(entry)) {
        const prompt = entry['prompt'];
        return { images: readOutputImages(entry['outputs']), ...(Array.isArray(prompt) && isRecord(prompt[2]) ? { workflow: prompt[2] } : {}) };
      }
      // The entry is written by q.task_done after execution_success (main.py:195-204); give it a moment.
      if (attempt >= HISTORY_ATTEMPTS) return { images: [] };
      // Stryker disable next-line ObjectLiteral: a cancel ends the job with the same error at most 100 ms later: timing only
      await sleep(HISTORY_RETRY_MS, undefined, { signal });
    }
  }

  async function downloadImage(image: OutputImage, signal: AbortSignal): Promise<Uint8Array> {
    const query = new URLSearchParams({ filename: image.filename, subfolder: image.subfolder, type: image.type });
    const response = await fetchImpl(`${url}/view?${query.toString()}`, { signal });
    if (!response.ok) {
      const text = await readTextPrefix(response, MAX_ERROR_TEXT_BYTES);
      throw new ImageBackendError('backend_error', `ComfyUI at ${url} could not serve ${image.filename} (HTTP ${response.status}: ${truncate(text) || 'no details'}).`);
    }
    // /view is a FileResponse with a Content-Length, so an oversized file is refused before any byte of it is read.
    const body = await readCappedBytes(response, MAX_IMAGE_BYTES);
    if (!body.ok) throw describeImageTooLarge(body.error, { product: 'ComfyUI', url, file: image.filename, hint: 'Lower the image size or upscale less in the workflow.' });
    const png = body.value;
    const chunks = readPngChunks(png);
    if (!chunks.ok) {
      const format = describeImageBytes(png);
      const hint = format === 'PNG' ? '' : ' End the workflow in a SaveImage node, which writes PNG.';
      throw new ImageBackendError('bad_response', `ComfyUI at ${url} sent ${image.filename}, which Easel cannot use: ${chunks.error.message}${hint}`);
    }
    return png;
  }

  /**
   * The starting image of a Vary, uploaded into ComfyUI's input folder as LoadImage reads it: POST /upload/image,
   * multipart with the file in `image`, `type` input and `subfolder` easel, answered {name, subfolder, type}
   * (server.py:316-367; no file or no filename: a bare 400). The name is the PNG's hash, and `overwrite` lets the same
   * bytes replace themselves rather than gather "name (1).png" copies (server.py:341-351). LoadImage then takes
   * "subfolder/name" below the input folder (folder_paths.py:192-201; its VALIDATE_INPUTS checks only that the file
   * exists, nodes.py:1699-1704, so the combo list of the folder's top level does not refuse it).
   */
  async function uploadInitImage(png: Uint8Array, signal: AbortSignal): Promise<string> {
    const name = `easel-${createHash('sha256').update(png).digest('hex').slice(0, 32)}.png`;
    const form = new FormData();
    // Stryker disable next-line ObjectLiteral,StringLiteral: ComfyUI's image_upload reads the part's file and filename, never its type (server.py:316-367)
    const file = new Blob([png as Uint8Array<ArrayBuffer>], { type: 'image/png' });
    form.append('image', file, name);
    form.append('type', 'input');
    form.append('subfolder', 'easel');
    form.append('overwrite', 'true');
    const response = await fetchImpl(`${url}/upload/image`, { method: 'POST', body: form, signal });
    const text = await readAnswer(response, '/upload/image');
    if (!response.ok) {
      throw new ImageBackendError('backend_error', `ComfyUI at ${url} refused the image to vary (POST /upload/image, HTTP ${response.status}${text.trim() === '' ? '' : `: ${truncate(text)}`}).`);
    }
    const body = parseJson(text);
    const uploaded = isRecord(body) ? body['name'] : undefined;
    if (typeof uploaded !== 'string' || uploaded === '') {
      throw new ImageBackendError('bad_response', `ComfyUI at ${url} answered /upload/image without the file's name (${truncate(text.slice(0, 120)) || 'empty answer'}). Check that --image-url points to ComfyUI.`);
    }
    const subfolder = isRecord(body) && typeof body['subfolder'] === 'string' ? body['subfolder'] : '';
    return subfolder === '' ? uploaded : `${subfolder}/${uploaded}`;
  }

  async function generate(request: ImageRequest, options: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void }): Promise<ImageResult> {
    const [result] = await run(request, 1, options);
    return result as ImageResult;
  }

  /**
   * A batch as one prompt with a latent batch of `count` (the graph's %batch_size%: EmptyLatentImage.batch_size,
   * nodes.py:1164-1186, or RepeatLatentBatch.amount after an encoded image, nodes.py:1221-1236): SaveImage writes
   * one file per item (nodes.py, SaveImage.save_images) and the history lists them all in its output. The items'
   * noise comes from one generator seeded once with the KSampler's seed (comfy/sample.py:8-25, prepare_noise): only
   * the first image is the seed's own image; the others have no seed that makes them alone, so none is claimed.
   * A graph without %batch_size% (a workflow of the user's) makes one prompt per image instead, seed after seed;
   * a cancel keeps the images made before it (ports.ts). Where neither graph has it there is no generateBatch at
   * all: the core's own loop, which saves each image as it comes.
   */
  async function generateBatch(request: ImageRequest & { count: number }, jobOptions: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void }): Promise<ImageResult[]> {
    const graph = request.init === undefined ? options.workflow : options.img2imgWorkflow;
    if (takesBatchSize(graph)) return run(request, request.count, jobOptions);
    const results: ImageResult[] = [];
    for (let index = 0; index < request.count; index++) {
      const share = (progress: ImageProgress) => jobOptions.onProgress(progress.fraction === undefined ? {} : { fraction: (index + progress.fraction) / request.count });
      try {
        const [result] = await run({ ...request, seed: request.seed + index }, 1, { signal: jobOptions.signal, onProgress: share });
        results.push(result as ImageResult);
      } catch (error) {
        if (jobOptions.signal.aborted && results.length > 0) return results;
        throw error;
      }
    }
    return results;
  }

  async function run(
    request: ImageRequest,
    count: number,
    { signal, onProgress }: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void },
  ): Promise<ImageResult[]> {
    if (request.init !== undefined && options.img2imgWorkflow === undefined) throw new ImageBackendError('backend_error', CANNOT_VARY);
    // Ours from the start: a cancel before /prompt answers can name it.
    let promptId: string = randomUUID();
    // Only our own prompt is stopped: a bare /interrupt would stop whatever runs, maybe someone else's job.
    const interrupt = () => cancelPrompt(promptId);
    let socket: WebSocket | undefined;
    try {
      return await runImageJob({ signal, timeoutMs, interrupt, stopWords, connection }, async (jobSignal) => {
        const clientId = options.clientId ?? randomUUID();
        // The request's checkpoint, sampler and scheduler go into the graph as sent; ComfyUI checks each against its
        // combo list and refuses a name it lacks with HTTP 400, node_errors of type value_not_in_list
        // (execution.py:896-920, server.py:710-712), which queuePrompt quotes. A choice the workflow has no node for
        // fails here, before anything is sent.
        // A Vary runs the image-to-image graph with the uploaded image in its LoadImage.
        const initImage = request.init === undefined ? undefined : await uploadInitImage(request.init.png, jobSignal);
        const graph = initImage === undefined ? options.workflow : options.img2imgWorkflow;
        const chosen = applyModelChoices(fillWorkflow(graph, request, { batchSize: count, ...(initImage === undefined ? {} : { initImage }) }), request);
        if (!chosen.ok) throw new ImageBackendError('backend_error', chosen.error.message);
        const workflow = chosen.value;
        // The socket opens first so that no progress message can come before we listen.
        socket = await openSocket(clientId, jobSignal);
        const watcher = watchSocket(socket);
        // A cancel does not abort /prompt: ComfyUI queues the prompt even when the client has gone
        // (server.py:700-709), so a cancel meanwhile is sent again once it is queued (and named, by older servers).
        const queued = queuePrompt(workflow, clientId, promptId, AbortSignal.timeout(timeoutMs));
        queued.then(
          (id) => {
            promptId = id;
            // Not awaited: the stop was reported long before /prompt answers, and a cancel never rejects.
            if (jobSignal.aborted) void cancelPrompt(id);
          },
          () => {},
        );
        promptId = await untilAborted(queued, jobSignal);
        let announced: OutputImage[];
        try {
          announced = await followPrompt(watcher.readMessages(jobSignal), promptId, onProgress);
        } catch (error) {
          if (error instanceof ImageBackendError || jobSignal.aborted) throw error;
          throw new ImageBackendError(
            'unreachable',
            `ComfyUI at ${url} closed the connection before the image was finished. Check its console for a crash or restart, then try again.`,
            { cause: error },
          );
        }
        const history = await readHistory(promptId, jobSignal);
        // The history's outputs, SaveImage's first (readOutputImages): a batch's files in the order it saved them.
        const images = (history.images.length > 0 ? history.images : announced).slice(0, count);
        if (images.length === 0) {
          throw new ImageBackendError('bad_response', `ComfyUI at ${url} finished the workflow but it saved no image. End the workflow in a SaveImage node.`);
        }
        // What ran is the workflow in the history (it is the one we sent): its sampler's own inputs, which a
        // custom workflow may fix instead of taking our placeholders.
        const ran = history.workflow ?? workflow;
        const model = findCheckpointName(ran);
        const { seed, ...settings } = findSamplerSettings(ran);
        const results: ImageResult[] = [];
        for (const [index, image] of images.entries()) {
          const png = await downloadImage(image, jobSignal);
          // Stryker disable next-line ConditionalExpression: its only reader (describeMadeWith) keeps a model only when it is defined
          results.push({ png, ...settings, ...(index === 0 && seed !== undefined ? { seed } : {}), ...(model === undefined ? {} : { model }) });
        }
        return results;
      });
    } finally {
      socket?.close();
    }
  }

  async function checkHealth(signal?: AbortSignal): Promise<ImageBackendHealth> {
    return checkWithin({ healthTimeoutMs, signal, connection, slowHint: 'it may be busy starting up' }, async (combined) => {
      const response = await fetchImpl(`${url}/system_stats`, { signal: combined });
      const text = await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES);
      if (!response.ok) {
        return { reachable: true, detail: `The server at ${url} answers /system_stats with HTTP ${response.status}; check that --image-url points to ComfyUI.` };
      }
      const stats = parseJson(text);
      const system = isRecord(stats) && isRecord(stats['system']) ? stats['system'] : {};
      // Stryker disable next-line ArrayDeclaration: a string is not a record, so no device name is given either way
      const devices = isRecord(stats) && Array.isArray(stats['devices']) ? stats['devices'] : [];
      const version = typeof system['comfyui_version'] === 'string' ? ` ${system['comfyui_version']}` : '';
      const device: unknown = devices[0];
      const deviceName = isRecord(device) && typeof device['name'] === 'string' ? ` on ${device['name']}` : '';
      return { reachable: true, detail: `ComfyUI${version} answers at ${url}${deviceName}.` };
    });
  }

  /** GET /object_info/{classType} (server.py:639-645): that class's inputs, or `{}` for a class the server lacks. */
  async function readNodeInfo(classType: string, signal: AbortSignal): Promise<unknown> {
    const path = `/object_info/${encodeURIComponent(classType)}`;
    const response = await fetchImpl(`${url}${path}`, { signal });
    const text = await readAnswer(response, path);
    if (!response.ok) {
      throw new ImageBackendError('bad_response', `ComfyUI at ${url} answered GET ${path} with HTTP ${response.status} (${truncate(text) || 'no details'}). Check that --image-url points to ComfyUI.`);
    }
    const body = parseJson(text);
    if (!isRecord(body)) throw new ImageBackendError('bad_response', `ComfyUI at ${url} sent an unreadable answer to GET ${path} (${truncate(text.slice(0, 120))}).`);
    return body;
  }

  /**
   * The names a choice takes: the combo list of its input in every class of the workflow that takes it (one class
   * in nearly every workflow; with several, the names they all take). [] when the workflow has nowhere to put it
   * (findChoiceTarget): a request naming one would be refused.
   */
  async function listChoice(choice: ModelChoice, nodeInfo: (classType: string) => Promise<unknown>): Promise<string[]> {
    const target = findChoiceTarget(options.workflow, choice);
    if (!target.ok) return [];
    const classes = [...new Set(target.value.map((node) => node.classType))];
    const lists = await Promise.all(
      classes.map(async (classType) => {
        const names = readComboOptions(await nodeInfo(classType), classType, MODEL_CHOICE_INPUTS[choice]);
        if (names !== undefined) return names;
        const ids = target.value.filter((node) => node.classType === classType).map((node) => node.id);
        throw new ImageBackendError(
          'backend_error',
          `ComfyUI at ${url} has no ${classType} node, which the workflow uses (node ${ids.join(', ')}). Install the custom node that provides it, or set --comfy-workflow to a workflow ComfyUI can run.`,
        );
      }),
    );
    // Stryker disable next-line ArrayDeclaration: a choice with a target has at least one node, so at least one list
    const [first = [], ...others] = lists;
    return first.filter((name) => others.every((list) => list.includes(name)));
  }

  async function listModels(signal?: AbortSignal): Promise<ImageModelOptions> {
    return listWithin({ healthTimeoutMs, signal, connection, slowHint: 'it may be busy' }, async (combined) => {
      // One request per class, shared by the choices: KSampler gives both the samplers and the schedulers.
      const asked = new Map<string, Promise<unknown>>();
      const nodeInfo = (classType: string): Promise<unknown> => {
        let answer = asked.get(classType);
        if (answer === undefined) {
          answer = readNodeInfo(classType, combined);
          // Stryker disable next-line ArrowFunction: listChoice awaits each answer; this only keeps a shared one's rejection from counting as unhandled
          answer.catch(() => {});
          asked.set(classType, answer);
        }
        return answer;
      };
      const [checkpoints, samplers, schedulers] = await Promise.all([listChoice('checkpoint', nodeInfo), listChoice('sampler', nodeInfo), listChoice('scheduler', nodeInfo)]);
      // The workflow's own checkpoint, when the server has it: what it paints with when a request names none.
      const own = findOwnChoice(options.workflow, 'checkpoint');
      return { checkpoints, current: own !== undefined && checkpoints.includes(own) ? own : null, samplers, schedulers };
    });
  }

  const batches = takesBatchSize(options.workflow) || (options.img2imgWorkflow !== undefined && takesBatchSize(options.img2imgWorkflow));
  return { name: 'comfyui', url, canVary: options.img2imgWorkflow === undefined ? CANNOT_VARY : true, generate, ...(batches ? { generateBatch } : {}), checkHealth, listModels };
}
