// --image-backend auto: asks the server at a URL which image server it is, by the routes only that server has.
// Knows every server's routes but imports no adapter: main.ts hands in the factory that makes one.
import { isImageBackendError } from '../core/errors.ts';
import { MAX_BACKEND_ANSWER_BYTES } from '../core/image-limits.ts';
import type { ImageBackendName } from '../core/ports.ts';
import { createImageServerFetch, DEFAULT_HEALTH_TIMEOUT_MS } from '../image-backend/index.ts';
import { formatDuration, isRecord, parseJson, readErrorCode, readTextPrefix } from '../util/index.ts';

export interface FoundImageServer {
  /** The adapter that speaks to it. */
  backend: ImageBackendName;
  /** What answered, for a person: "stable-diffusion.cpp sd-server", "ComfyUI 0.3.64"… */
  server: string;
  url: string;
  /** The request whose answer told, e.g. "GET /sdcpp/v1/capabilities". */
  evidence: string;
}

export type ProbeResult =
  | { found: FoundImageServer }
  | { found: null; reachable: boolean; detail: string };

export interface ProbeOptions {
  fetch?: typeof fetch;
  /** Limit for each request. Default 3 s. */
  timeoutMs?: number;
}

interface Answer {
  status: number;
  body: unknown;
}

/** The checks, most specific first: sd-server also answers /sdapi/v1/options and /v1/models, LocalAI /v1/models. */
const PATHS = {
  sdcpp: '/sdcpp/v1/capabilities',
  a1111: '/sdapi/v1/options',
  comfyui: '/system_stats',
  readyz: '/readyz',
  models: '/v1/models',
} as const;

const TRIED = 'GET /sdcpp/v1/capabilities, /sdapi/v1/options, /system_stats, /readyz and /v1/models';

/**
 * Asks all five routes at once and picks by what answered:
 * - /sdcpp/v1/capabilities: only stable-diffusion.cpp's sd-server (routes_sdcpp.cpp:411) → the a1111 adapter,
 *   whose /sdapi/v1 route reports what it used;
 * - /sdapi/v1/options: AUTOMATIC1111 or Forge with --api (modules/api/api.py) → a1111;
 * - /system_stats with a `system` object: ComfyUI (server.py:543-582) → comfyui;
 * - /readyz answering 200, or 503 {"status":"starting"} during a preload: LocalAI (core/http/routes/health.go:31-39) → localai;
 * - /v1/models with a `data` list: another server with OpenAI's API → openai.
 */
export async function probeImageServer(url: string, options: ProbeOptions = {}): Promise<ProbeResult> {
  // A probe is a health check of every kind of server at once: the same limit as the adapters' checks.
  const timeoutMs = options.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  const base = url.replace(/\/+$/, '').replace(/\/v1$/, '');
  // Like the adapters: a redirect is refused, never followed, and thrown as an ImageBackendError that says where it pointed.
  const fetchImpl = createImageServerFetch(options.fetch ?? globalThis.fetch, { label: 'The server', url: base });
  const failures = new Map<string, unknown>();

  async function ask(path: string): Promise<Answer | undefined> {
    try {
      const response = await fetchImpl(`${base}${path}`, { signal: AbortSignal.timeout(timeoutMs) });
      return { status: response.status, body: parseJson(await readTextPrefix(response, MAX_BACKEND_ANSWER_BYTES)) };
    } catch (error) {
      failures.set(path, error);
      return undefined;
    }
  }

  const [sdcpp, a1111, comfyui, readyz, models] = await Promise.all(Object.values(PATHS).map(ask));
  // In the order of PATHS, not of arrival, so that the message names the same route each time.
  const errors = Object.values(PATHS).flatMap((path) => (failures.has(path) ? [failures.get(path)] : []));
  const found = (backend: ImageBackendName, server: string, path: string): ProbeResult => ({ found: { backend, server, url: base, evidence: `GET ${path}` } });
  if (sdcpp?.status === 200 && isRecord(sdcpp.body)) return found('a1111', 'stable-diffusion.cpp sd-server', PATHS.sdcpp);
  if (a1111?.status === 200 && isRecord(a1111.body)) return found('a1111', 'AUTOMATIC1111', PATHS.a1111);
  if (comfyui?.status === 200 && isRecord(comfyui.body) && isRecord(comfyui.body['system'])) {
    const version = comfyui.body['system']['comfyui_version'];
    return found('comfyui', typeof version === 'string' ? `ComfyUI ${version}` : 'ComfyUI', PATHS.comfyui);
  }
  const listsModels = models?.status === 200 && isRecord(models.body) && Array.isArray(models.body['data']);
  const starting = readyz?.status === 503 && isRecord(readyz.body) && readyz.body['status'] === 'starting';
  if ((readyz?.status === 200 && listsModels) || starting) return found('localai', 'LocalAI', PATHS.readyz);
  if (listsModels) return found('openai', 'an OpenAI-compatible image server', PATHS.models);

  // A server that redirects is there but is no image server at this address: say where it pointed.
  const redirect = errors.find(isImageBackendError);
  if (redirect !== undefined) return { found: null, reachable: true, detail: redirect.message };
  const answered = [sdcpp, a1111, comfyui, readyz, models].some((answer) => answer !== undefined);
  if (answered) {
    return {
      found: null,
      reachable: true,
      detail: `A server answers at ${base}, but not like any image server Easel knows (it tried ${TRIED}). Start AUTOMATIC1111 or Forge with --api, or name the backend with --image-backend.`,
    };
  }
  const code = errors.map(readErrorCode).find((value) => value !== undefined);
  const timedOut = errors.some((error) => error instanceof Error && error.name === 'TimeoutError');
  return {
    found: null,
    reachable: false,
    detail: timedOut
      ? `The server at ${base} did not answer within ${formatDuration(timeoutMs)}.`
      : `Nothing answers at ${base}${code === undefined ? '' : ` (${code})`}.`,
  };
}
