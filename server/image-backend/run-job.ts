// The life of one image job, the same for every adapter: a cancel or the timeout stops it once, interrupts the
// server's job, and decides how it ends, whatever the request in flight then does.
import { ImageBackendError } from '../core/errors.ts';
import { describeConnectionFailure, describeStopped, type ConnectionWords, type ImageStopReason, type StoppedWords } from './errors.ts';

/** How long an image may take before its job is stopped as 'timeout', unless the adapter is told otherwise. */
export const DEFAULT_IMAGE_TIMEOUT_MS = 10 * 60_000;

export interface ImageJobOptions {
  /** The caller's: its abort is a cancel. */
  signal: AbortSignal;
  /** After this long the job stops as 'timeout'. */
  timeoutMs: number;
  /**
   * Asks the server to stop its job; called at the first stop only, before the job's requests are aborted
   * (A1111 keeps working after a disconnect), and awaited before the stop is reported. Best effort: a
   * rejection is ignored. Left out when the server has no interrupt.
   */
  interrupt?: () => Promise<void>;
  /** Who was making the image and what a stop reaches, read at the stop: an adapter may learn meanwhile which server it is. */
  stopWords: () => Omit<StoppedWords, 'timeoutMs'>;
  /** Who should have answered, for a failure that is no ImageBackendError: the connection's. */
  connection: ConnectionWords;
}

/**
 * Runs `work` with a signal that aborts at the first stop. After a stop every outcome is the stopped error
 * (describeStopped), a result included: it came too late to be kept. Otherwise an ImageBackendError goes through
 * as it is, and anything else is a connection failure (describeConnectionFailure).
 */
export async function runImageJob<T>(options: ImageJobOptions, work: (jobSignal: AbortSignal) => Promise<T>): Promise<T> {
  const { signal } = options;
  const describeStop = (reason: ImageStopReason, cause?: unknown) => describeStopped(reason, { ...options.stopWords(), timeoutMs: options.timeoutMs }, cause);
  if (signal.aborted) throw describeStop('cancelled', signal.reason);
  const job = new AbortController();
  let stopped: ImageStopReason | undefined;
  let interrupted: Promise<void> = Promise.resolve();
  const stop = (reason: ImageStopReason) => {
    if (stopped !== undefined) return;
    stopped = reason;
    if (options.interrupt !== undefined) interrupted = options.interrupt().catch(() => {});
    job.abort();
  };
  const onAbort = () => stop('cancelled');
  // Stryker disable next-line ObjectLiteral,BooleanLiteral: the listener is removed in finally anyway
  signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => stop('timeout'), options.timeoutMs);
  let result: T;
  try {
    result = await work(job.signal);
  } catch (error) {
    if (stopped !== undefined) {
      await interrupted;
      throw describeStop(stopped, error);
    }
    if (error instanceof ImageBackendError) throw error;
    throw describeConnectionFailure(error, options.connection);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
  if (stopped !== undefined) {
    await interrupted;
    throw describeStop(stopped);
  }
  return result;
}
