// The ImageBackend behind --image-backend auto: finds the server first (probe.ts), then is the adapter it chose.
import { ImageBackendError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { ImageBackend, ImageBackendHealth, ImageModelOptions, ImageProgress, ImageRequest, ImageResult } from '../core/ports.ts';
import type { FoundImageServer, ProbeResult } from './probe.ts';

export interface AutoImageBackendOptions {
  /** Where to look, in order; the first URL that answers like an image server wins. */
  urls: readonly string[];
  probe: (url: string) => Promise<ProbeResult>;
  /** Makes the adapter for what was found (main.ts wires the adapters). */
  create: (found: FoundImageServer) => ImageBackend;
  logger: Logger;
}

/**
 * Probes on the first health check or image, and again on each later one until something answers: the image
 * server may start after Easel. Once found, the choice stays for the life of the process (a restart looks again).
 */
export function createAutoImageBackend(options: AutoImageBackendOptions): ImageBackend {
  let chosen: { backend: ImageBackend; found: FoundImageServer } | undefined;
  let finding: Promise<void> | undefined;
  // Stryker disable next-line StringLiteral: every reader awaits find() first, which sets it
  let lastDetail = `Easel has not looked at ${options.urls.join(', ')} yet.`;
  let lastReachable = false;

  async function look(): Promise<void> {
    const details: string[] = [];
    let reachable = false;
    for (const url of options.urls) {
      const result = await options.probe(url);
      if (result.found !== null) {
        const backend = options.create(result.found);
        chosen = { backend, found: result.found };
        options.logger.info(
          `--image-backend auto: ${result.found.server} answers at ${result.found.url} (${result.found.evidence}); using the ${backend.name} backend.`,
        );
        return;
      }
      reachable ||= result.reachable;
      details.push(result.detail);
    }
    lastReachable = reachable;
    lastDetail = `No image server found: ${details.join(' ')} Start one (AUTOMATIC1111 or Forge with --api, ComfyUI, LocalAI, stable-diffusion.cpp's sd-server), or set --image-url to where it runs; Easel looks again before the next image.`;
  }

  /** One probe at a time; concurrent callers share it. Never throws. */
  function find(): Promise<void> {
    if (chosen !== undefined) return Promise.resolve();
    finding ??= look()
      .catch((error: unknown) => {
        lastDetail = `Looking for the image server failed: ${String(error)}`;
      })
      .finally(() => {
        finding = undefined;
      });
    return finding;
  }

  async function generate(request: ImageRequest, options: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void }): Promise<ImageResult> {
    await find();
    if (chosen === undefined) throw new ImageBackendError('unreachable', lastDetail);
    return chosen.backend.generate(request, options);
  }

  /** The found adapter's list, found first like an image; nothing found fails as generate would. */
  async function listModels(signal?: AbortSignal): Promise<ImageModelOptions> {
    await find();
    if (chosen === undefined) throw new ImageBackendError('unreachable', lastDetail);
    const { backend } = chosen;
    // Only when the server was found during this call, and its adapter cannot list (the getter below says so after).
    if (backend.listModels === undefined) throw new ImageBackendError('backend_error', `The ${backend.name} backend cannot list the models of ${backend.url}.`);
    return backend.listModels(signal);
  }

  async function checkHealth(signal?: AbortSignal): Promise<ImageBackendHealth> {
    await find();
    if (chosen === undefined) return { reachable: lastReachable, detail: lastDetail };
    const { backend, found } = chosen;
    const health = await backend.checkHealth(signal);
    return {
      ...health,
      server: health.server ?? found.server,
      // Apart from the detail: the page's status line says what answers, /api/health says how it was found too.
      found: `Found ${found.server} at ${found.url} (${found.evidence}), so Easel uses --image-backend ${backend.name}.`,
    };
  }

  return {
    auto: true,
    get name() {
      return chosen?.backend.name ?? 'auto';
    },
    get url() {
      // Stryker disable next-line StringLiteral: the configuration always gives at least one address
      return chosen?.backend.url ?? options.urls[0] ?? '';
    },
    get seedRange() {
      return chosen?.backend.seedRange;
    },
    /** The found adapter's batch (read after `prepare`, which finds it); absent before, and for one without. */
    get generateBatch() {
      const backend = chosen?.backend;
      const batch = backend?.generateBatch;
      return backend === undefined || batch === undefined ? undefined : batch.bind(backend);
    },
    /** Unknown until the server is found; then the adapter's (Vary). */
    get canVary() {
      return chosen?.backend.canVary;
    },
    /** Until found, present: asking finds the server. Once found, the adapter's: absent when it cannot list. */
    get listModels() {
      return chosen === undefined || chosen.backend.listModels !== undefined ? listModels : undefined;
    },
    // Found first, then the adapter's own preparation (the OpenAI-compatible one asks whether sd-server answers).
    async prepare(signal: AbortSignal) {
      await find();
      await chosen?.backend.prepare?.(signal);
    },
    generate,
    checkHealth,
  };
}
