// The failures every image adapter meets, worded once: nothing listening or a broken connection, a job
// stopped by a cancel or the timeout, an image answer over the cap. Each adapter names itself by the words
// it passes, so the message names the server that really answered (sd-server's says sd-server).
import { ImageBackendError } from '../core/errors.ts';
import { MAX_IMAGE_BYTES } from '../core/image-limits.ts';
import { describeTooLarge, formatBytes, formatDuration, NOT_LISTENING_CODES, readErrorCode, type BodyTooLarge } from '../util/index.ts';

/** Why an image job stopped before its answer: the caller's cancel, or the image timeout. */
export type ImageStopReason = 'cancelled' | 'timeout';

export interface ConnectionWords {
  /** Who should answer, as a sentence starts with it: "ComfyUI", "LocalAI", "The image backend". */
  product: string;
  /** The address Easel was given (--image-url). */
  url: string;
  /** What to start, completing "Start …, or set --image-url to where it runs.": "ComfyUI (python main.py, port 8188 by default)". */
  startHint: string;
}

/** A product inside a sentence: "The image backend" becomes "the image backend"; names stay as they are. */
function inSentence(product: string): string {
  // Stryker disable next-line Regex: no product's name holds "The " but at its start
  return product.replace(/^The /, 'the ');
}

/**
 * A request that got no answer. A code that says nothing listens (NOT_LISTENING_CODES), or none at all, is a
 * server that is not running: say how to start it. Any other code is a connection that broke midway: a crash.
 */
export function describeConnectionFailure(error: unknown, words: ConnectionWords): ImageBackendError {
  const code = readErrorCode(error);
  if (code !== undefined && !NOT_LISTENING_CODES.has(code)) {
    return new ImageBackendError(
      'unreachable',
      `The connection to ${inSentence(words.product)} at ${words.url} broke before the image arrived (${code}). Check its console for a crash, then try again.`,
      { cause: error },
    );
  }
  return new ImageBackendError(
    'unreachable',
    `${words.product} at ${words.url} is not answering${code === undefined ? '' : ` (${code})`}. Start ${words.startHint}, or set --image-url to where it runs.`,
    { cause: error },
  );
}

export interface StoppedWords {
  /** Who was making the image, as a sentence starts with it: "ComfyUI", "stable-diffusion.cpp's sd-server". */
  product: string;
  url: string;
  /** The image timeout, named when it passed. */
  timeoutMs: number;
  /**
   * Left out when the server is asked to stop the job. 'no-interrupt': its API has no interrupt, Easel only stops
   * waiting. { finishes }: the server (named short) cannot stop an image once it runs; it finishes it for nothing.
   */
  cannotStop?: 'no-interrupt' | { finishes: string };
}

/** The error a stopped job ends with: what stopped it, and what became of the image on the server. */
export function describeStopped(reason: ImageStopReason, words: StoppedWords, cause?: unknown): ImageBackendError {
  const { product, url, cannotStop } = words;
  if (reason === 'timeout') {
    const stopped =
      cannotStop === undefined
        ? ', so Easel asked it to stop'
        : cannotStop === 'no-interrupt'
          ? '; Easel stopped waiting (this API cannot interrupt it)'
          : `, Easel stopped waiting (${cannotStop.finishes} cannot stop an image once it runs: it finishes it, and Easel discards it)`;
    return new ImageBackendError(
      'timeout',
      `${product} at ${url} did not finish the image within ${formatDuration(words.timeoutMs)}${stopped}. Lower the steps or size, or raise the image timeout.`,
      { cause },
    );
  }
  if (cannotStop === undefined) return new ImageBackendError('cancelled', `The image was cancelled; ${product} at ${url} was asked to stop.`, { cause });
  if (cannotStop === 'no-interrupt') {
    return new ImageBackendError('cancelled', `The image was cancelled; Easel stopped waiting for ${url} (this API has no interrupt, so the server may finish it anyway).`, { cause });
  }
  return new ImageBackendError(
    'cancelled',
    `The image was cancelled. ${product} at ${url} cannot stop an image once it runs, so it finishes this one and Easel discards it; the next image starts after it.`,
    { cause },
  );
}

export interface TooLargeWords {
  /** Who sent it, as a sentence starts with it. */
  product: string;
  url: string;
  /** The file that was read, when the answer was the image itself; left out for an image inside a JSON answer. */
  file?: string;
  /** What to do, a sentence of its own: "Lower the image size or upscale less in the workflow." */
  hint: string;
}

/**
 * An image answer refused at the cap (readCappedBytes / readCappedText). A JSON answer's cap counts its base64,
 * so it is measured against the PNG it would hold; a file is measured against MAX_IMAGE_BYTES itself.
 */
export function describeImageTooLarge(error: BodyTooLarge, words: TooLargeWords): ImageBackendError {
  const limit = formatBytes(MAX_IMAGE_BYTES);
  const sent =
    words.file === undefined
      ? `sent ${describeTooLarge(error)}, more than Easel accepts for one image (${limit} of PNG)`
      : `sent ${words.file} as ${describeTooLarge(error)}, more than the ${limit} Easel accepts for one image`;
  return new ImageBackendError('too_large', `${words.product} at ${words.url} ${sent}; Easel stopped reading it and kept nothing. ${words.hint}`, { cause: error });
}
