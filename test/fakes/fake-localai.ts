// A real HTTP server that behaves like LocalAI's image endpoint (mudler/LocalAI 82c191af): the request
// fields it really reads (`step`, a "positive|negative" prompt, a seed kept to 32 bits), what it ignores
// (`steps`, `negative_prompt`, `cfg_scale`), `n` as that many runs of the same request (the same seed each time),
// `file` as a starting image changed by the backend's fixed strength (0.75; no request field sets it), its error shape, /readyz, /v1/models and /v1/models/capabilities, the
// model a request names (refused when unknown, a chat model failing in its backend), and a PNG without text.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeSolidPng, makePng } from './png-bytes.ts';
import { parseBody, readBody, sendJson, sendRedirect, type RedirectEverything } from './http-body.ts';

export interface FakeLocalAiOptions {
  /**
   * Image models configured. A request without `model` takes the first here; the real one takes the first image
   * model of a Go map, any of them (core/http/routes/openai.go:248; core/config/model_config_loader.go:331).
   */
  models?: string[];
  /**
   * Configured models that make no image (llama-cpp chat models): listed by /v1/models, and by
   * /v1/models/capabilities as "chat"; an image asked of one fails in its backend, which has no GenerateImage.
   */
  chatModels?: string[];
  /** A LocalAI from before GET /v1/models/capabilities (b0959d475, #10687): that route is its 404. */
  noCapabilitiesRoute?: boolean;
  /**
   * The model's backend: stablediffusion-ggml (the default, image.go:126-131) hands the seed to sd.cpp, where a
   * negative one is random (stable-diffusion.cpp:4000-4005); diffusers makes 0 and negatives random
   * (backend/python/diffusers/backend.py:775-778: `if request.seed > 0`).
   */
  backend?: 'stablediffusion-ggml' | 'diffusers';
  /** The model YAML's cfg_scale, given at load (core/config/model_config.go:1313; gosd.go:160); 7 by default here. */
  cfgScale?: number;
  /** The model YAML's `step`; 0 means LocalAI's 15 (image.go:168-171). */
  configStep?: number;
  /** /readyz answers 503 "starting" (core/http/routes/health.go:31-39): a startup preload runs. */
  starting?: boolean;
  /** /v1/images/generations answers with this status and body (objects as JSON). */
  failWith?: { status: number; body: unknown };
  /** Simulated generation time. */
  delayMs?: number;
  /** Every route answers with this redirect (http-body.ts: a misconfigured reverse proxy, a compromised server). */
  redirect?: RedirectEverything;
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** Parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: unknown;
}

/** What one image was really made with, as the backend received it. */
export interface LocalAiRun {
  model: string;
  prompt: string;
  negativePrompt: string;
  /** The seed the backend got after int32() (core/backend/image.go:40), and the one it really used. */
  seedReceived: number;
  seedUsed: number;
  random: boolean;
  steps: number;
  cfg: number;
  width: number;
  height: number;
  /**
   * The starting image's colour when the request had a `file` (image.go:91-98: base64 or a URL, written to a
   * temporary file handed to the backend as Src); the backend changes it by its own fixed strength, 0.75
   * (backend/go/stablediffusion-ggml/gosd.go:204-205), whatever the request says.
   */
  init?: [number, number, number];
  strength?: number;
}

export interface FakeLocalAi {
  url: string;
  /** The image models, live: a test adds or removes one as a model is installed or deleted. */
  models: string[];
  /** The chat models, live. */
  chatModels: string[];
  requests: RecordedRequest[];
  runs: LocalAiRun[];
  close(): Promise<void>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** schema.ErrorResponse{Error: &schema.APIError{Message, Code}} (core/http/app.go:227-229; schema/openai.go:11-20). */
function apiError(code: number, message: string, type = '') {
  return { error: { code, message, type } };
}

export async function createFakeLocalAi(options: FakeLocalAiOptions = {}): Promise<FakeLocalAi> {
  const models = [...(options.models ?? ['stablediffusion'])];
  const chatModels = [...(options.chatModels ?? [])];
  const requests: RecordedRequest[] = [];
  const runs: LocalAiRun[] = [];
  const files = new Map<string, Uint8Array>();
  let baseUrl = '';

  async function handleGeneration(text: string, contentType: string | undefined, response: ServerResponse): Promise<void> {
    // Echo's BindBody decodes a non-empty body only as its media type says, exactly application/json here;
    // anything else is ErrUnsupportedMediaType (labstack/echo bind.go:76-122, v4.15.1 as LocalAI's go.mod
    // pins), which SetModelAndConfig turns into a 400 (core/http/middleware/request.go:130-131).
    const mediaType = (contentType ?? '').split(';')[0]?.trim();
    if (text !== '' && mediaType !== 'application/json') {
      return sendJson(response, 400, apiError(400, 'failed parsing request body: code=415, message=Unsupported Media Type'));
    }
    const input = parseBody(text);
    // Echo's bind: a body that is not a JSON object is a 400 HTTPError, rendered by the custom handler.
    if (!isRecord(input)) return sendJson(response, 400, apiError(400, 'code=400, message=Syntax error: offset=1, error=invalid character'));
    // request.go:157-167: an unknown model; without one the first image model is picked.
    const model = typeof input['model'] === 'string' && input['model'] !== '' ? input['model'] : models[0];
    if (model === undefined) return sendJson(response, 400, apiError(400, 'code=400, message=Bad Request'));
    if (!models.includes(model) && !chatModels.includes(model)) {
      return sendJson(response, 404, apiError(404, `model "${model}" not found. To see available models, call GET /v1/models`, 'invalid_request_error'));
    }
    // A chat model is loaded in llama-cpp, whose gRPC server has no GenerateImage: the generated service's default
    // answers UNIMPLEMENTED with no message (core/backend/image.go:29; backend/cpp/llama-cpp/grpc-server.cpp has
    // none), and the error handler renders the Go error as a 500 (core/http/app.go:200-229).
    if (chatModels.includes(model)) return sendJson(response, 500, apiError(500, 'rpc error: code = Unimplemented desc = '));
    if (options.failWith !== undefined) return sendJson(response, options.failWith.status, options.failWith.body);
    // image.go:133-149: no "x" means 512x512; a part that is not a number is an error (a 500).
    let size = typeof input['size'] === 'string' ? input['size'] : '';
    if (!size.includes('x')) size = '512x512';
    const parts = size.split('x');
    if (parts.length !== 2 || !parts.every((part) => /^[+-]?\d+$/.test(part))) return sendJson(response, 500, apiError(500, "invalid value for 'size'"));
    const [width, height] = parts.map(Number) as [number, number];
    // image.go:161-166: the prompt is split at "|": [0] positive, [1] negative, the rest dropped.
    // `negative_prompt` is merged into the config (request.go:314-316) but this endpoint never reads it.
    const prompt = typeof input['prompt'] === 'string' ? input['prompt'] : '';
    // No prompt string, no PromptStrings (request.go:631-640): the loop makes nothing and data is [].
    if (prompt === '') return sendJson(response, 200, { created: Math.floor(Date.now() / 1000), id: randomUUID(), data: [] });
    const pieces = prompt.split('|');
    // image.go:168-175: `step`, singular; `steps` is no field of any request struct.
    const step = typeof input['step'] === 'number' && input['step'] !== 0 ? input['step'] : options.configStep || 15;
    // prediction.go:123 `Seed *int` (64-bit), then `Seed: int32(seed)` (core/backend/image.go:40): the low 32 bits.
    // Absent: RAND_SEED = -1 (core/config/generic_defaults.go:31-34).
    const seedSent = typeof input['seed'] === 'number' ? input['seed'] : -1;
    const seedReceived = Number(BigInt.asIntN(32, BigInt(Math.trunc(seedSent))));
    const random = options.backend === 'diffusers' ? seedReceived <= 0 : seedReceived < 0;
    // image.go:91-98, processImageFile (:259-310): `file`, base64 (or a URL), is the backend's Src; one that does not
    // decode is dropped without a word.
    let init: [number, number, number] | undefined;
    if (typeof input['file'] === 'string' && input['file'] !== '') {
      try {
        init = decodeSolidPng(new Uint8Array(Buffer.from(input['file'], 'base64'))).rgb;
      } catch {
        init = undefined;
      }
    }
    const strength = 0.75;
    // image.go:155-160: `n` runs of the same request (0 means 1), each with *config.Seed: a fixed seed makes the
    // same image n times.
    const n = typeof input['n'] === 'number' && input['n'] > 0 ? Math.trunc(input['n']) : 1;
    const data: Record<string, unknown>[] = [];
    for (let index = 0; index < n; index++) {
      const seedUsed = random ? Math.floor(Math.random() * 2_147_483_648) : seedReceived;
      if (options.delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
      runs.push({
        model,
        prompt: pieces[0] ?? '',
        negativePrompt: pieces[1] ?? '',
        seedReceived,
        seedUsed,
        random,
        steps: step,
        // A request cfg_scale is ignored: the model's own, set at load, paints every image (gosd.go:229).
        cfg: options.cfgScale ?? 7,
        width,
        height,
        ...(init === undefined ? {} : { init, strength }),
      });
      const own: [number, number, number] = [seedUsed & 0xff, step & 0xff, 77];
      const rgb = init === undefined ? own : (init.map((value, channel) => Math.round(value * (1 - strength) + own[channel]! * strength)) as [number, number, number]);
      // stablediffusion-ggml writes no text chunk (cpp/gosd.cpp:1041-1042); nor does diffusers' image.save.
      const png = makePng(width, height, rgb);
      // image.go:151, 210-225: b64_json only when asked; a link under /generated-images/ otherwise. schema.Item's
      // index is never set (image.go:211), so it stays 0.
      const item: Record<string, unknown> = { index: 0 };
      if (input['response_format'] === 'b64_json') item['b64_json'] = Buffer.from(png).toString('base64');
      else {
        const name = `b64${randomUUID().slice(0, 8)}.png`;
        files.set(name, png);
        item['url'] = `${baseUrl}/generated-images/${name}`;
      }
      data.push(item);
    }
    // image.go:232-255.
    sendJson(response, 200, {
      created: Math.floor(Date.now() / 1000),
      id: randomUUID(),
      data,
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, input_tokens: 0, output_tokens: 0, input_tokens_details: { text_tokens: 0, image_tokens: 0 } },
    });
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const address = new URL(request.url ?? '/', 'http://127.0.0.1');
    const text = await readBody(request);
    const method = request.method ?? 'GET';
    requests.push({ method, path: address.pathname, body: parseBody(text) });
    if (options.redirect !== undefined) return sendRedirect(response, options.redirect);
    if (method === 'GET' && address.pathname.startsWith('/generated-images/')) {
      const file = files.get(address.pathname.slice('/generated-images/'.length));
      if (file !== undefined) return void response.writeHead(200, { 'content-type': 'image/png' }).end(file);
    }
    const route = `${method} ${address.pathname}`;
    switch (route) {
      case 'POST /v1/images/generations':
      case 'POST /images/generations':
        return handleGeneration(text, request.headers['content-type'], response);
      // core/http/routes/health.go:23-39; both public (core/http/auth/public_routes.go:25-26).
      case 'GET /healthz':
        return void response.writeHead(200).end();
      case 'GET /readyz':
        if (options.starting === true) return sendJson(response, 503, { status: 'starting', reason: 'startup preload in progress' });
        return void response.writeHead(200).end();
      // core/http/endpoints/openai/list.go:23-39, every configured model, image or not; OpenAIModel{ID, Object}
      // (schema/openai.go:153-156).
      case 'GET /v1/models':
      case 'GET /models':
        return sendJson(response, 200, { object: 'list', data: [...models, ...chatModels].map((id) => ({ id, object: 'model' })) });
      // list_capabilities.go:23-49 (routes/openai.go:279-281): the same names with what each does
      // (config/model_capabilities.go:135-228); an image model's backend makes it "image" (model_config.go:2086-2095).
      case 'GET /v1/models/capabilities':
      case 'GET /models/capabilities':
        if (options.noCapabilitiesRoute === true) return sendJson(response, 404, apiError(404, 'Resource not found'));
        return sendJson(response, 200, {
          object: 'list',
          data: [
            ...models.map((id) => ({ id, object: 'model', capabilities: ['image'], input_modalities: ['text'], output_modalities: ['image'] })),
            ...chatModels.map((id) => ({ id, object: 'model', capabilities: ['chat'], input_modalities: ['text'], output_modalities: ['text'] })),
          ],
        });
      // notFoundHandler (core/http/render.go:33-48) for a client that does not ask for HTML.
      default:
        return sendJson(response, 404, apiError(404, 'Resource not found'));
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, apiError(500, String(error)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  baseUrl = `http://127.0.0.1:${port}`;

  return {
    url: baseUrl,
    models,
    chatModels,
    requests,
    runs,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
