// An adapter's checkHealth within its limit: the adapter reads the answers, this says what a check that got
// none means, the same way for every image server.
import type { ImageBackendHealth } from '../core/ports.ts';
import { ImageBackendError, isImageBackendError } from '../core/errors.ts';
import { formatDuration } from '../util/index.ts';
import { describeConnectionFailure, type ConnectionWords } from './errors.ts';

/** How long a health check (and any short side request of a job) may take, unless the adapter is told otherwise. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 3_000;

export interface HealthCheckOptions {
  healthTimeoutMs: number;
  /** The caller's: its abort cancels the check. */
  signal?: AbortSignal | undefined;
  /** Nothing listening, in the adapter's words; its product and url also name who was slow. */
  connection: ConnectionWords;
  /** Who was slow, when the adapter names it otherwise than `connection.product`. */
  slowProduct?: string;
  /** Why it may be slow, after "did not answer within 3 s; ": "it may be busy loading a model". */
  slowHint?: string;
}

/**
 * Runs `work` with a signal that aborts on the caller's cancel or after healthTimeoutMs, and turns a failure
 * into an answer: cancelled, too slow, a redirect (something answers there, just not the image server), or
 * nothing answering at all.
 */
export async function checkWithin(options: HealthCheckOptions, work: (signal: AbortSignal) => Promise<ImageBackendHealth>): Promise<ImageBackendHealth> {
  const { signal, connection } = options;
  const timeout = AbortSignal.timeout(options.healthTimeoutMs);
  try {
    return await work(signal === undefined ? timeout : AbortSignal.any([signal, timeout]));
  } catch (error) {
    if (signal?.aborted === true) return { reachable: false, detail: 'The health check was cancelled.' };
    if (timeout.aborted) {
      const hint = options.slowHint === undefined ? '' : `; ${options.slowHint}`;
      return {
        reachable: false,
        slow: true,
        detail: `${options.slowProduct ?? connection.product} at ${connection.url} did not answer within ${formatDuration(options.healthTimeoutMs)}${hint}.`,
      };
    }
    // The only ImageBackendError of a check is the refused redirect (createImageServerFetch).
    if (isImageBackendError(error)) return { reachable: true, detail: error.message };
    return { reachable: false, detail: describeConnectionFailure(error, connection).message };
  }
}

/**
 * Runs a listing of the server's models (listModels) within the same limit as a health check, and says what a
 * listing that got no answer means: cancelled, too slow, nothing answering. A refusal the adapter read
 * (an ImageBackendError) goes through as it is.
 */
export async function listWithin<T>(options: HealthCheckOptions, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const { signal, connection } = options;
  const timeout = AbortSignal.timeout(options.healthTimeoutMs);
  try {
    return await work(signal === undefined ? timeout : AbortSignal.any([signal, timeout]));
  } catch (error) {
    if (isImageBackendError(error)) throw error;
    const product = options.slowProduct ?? connection.product;
    if (signal?.aborted === true) throw new ImageBackendError('cancelled', `Listing the models of ${connection.url} was cancelled.`, { cause: error });
    if (timeout.aborted) {
      const hint = options.slowHint === undefined ? '' : `; ${options.slowHint}`;
      throw new ImageBackendError('timeout', `${product} at ${connection.url} did not list its models within ${formatDuration(options.healthTimeoutMs)}${hint}. Try again.`, { cause: error });
    }
    throw describeConnectionFailure(error, connection);
  }
}
