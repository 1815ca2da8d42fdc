// The one redirect rule of every image adapter: an image server's 3xx is refused, never followed. A redirect
// may lead to another host (a misconfigured proxy, a compromised server): Easel must not send it requests.
import { ImageBackendError } from '../core/errors.ts';
import { truncate } from '../util/index.ts';

export interface ImageServerFetchOptions {
  /** Who answers, for a person ("ComfyUI", "LocalAI"); a function when the adapter learns it later. */
  label: string | (() => string);
  /** The address Easel was given (--image-url), named in the message. */
  url: string;
}

/** fetch, but a redirect answer is an ImageBackendError instead of a Response. */
export type ImageServerFetch = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** What a redirect answer was: its status and Location header (null when it had none), and the request that got it. */
export interface RedirectAnswer {
  method: string;
  requestUrl: string | URL;
  status: number;
  location: string | null;
}

export function isRedirectStatus(status: number): boolean {
  return status >= 300 && status < 400;
}

/** Where a Location points, resolved against the request's URL as a client would; quoted as sent when it is no URL. */
function describeLocation(location: string | null, requestUrl: string | URL): string {
  // Stryker disable next-line MethodExpression: fetch (undici) and node:http trim a header's value: a Location of spaces arrives as ''
  if (location === null || location.trim() === '') return ', no Location';
  try {
    return ` to ${new URL(location, requestUrl).href}`;
  } catch {
    return ` to "${truncate(location.slice(0, 200))}", which is no address`;
  }
}

/** The refusal of a redirect, for the fetches here and for ComfyUI's WebSocket handshake alike. */
export function createRedirectError(options: ImageServerFetchOptions, answer: RedirectAnswer): ImageBackendError {
  const label = typeof options.label === 'function' ? options.label() : options.label;
  const path = URL.canParse(answer.requestUrl) ? new URL(answer.requestUrl).pathname : String(answer.requestUrl);
  return new ImageBackendError(
    'bad_response',
    `${label} at ${options.url} answered ${answer.method.toUpperCase()} ${path} with a redirect (HTTP ${answer.status}${describeLocation(answer.location, answer.requestUrl)}). Easel follows no redirect of an image server, so it sent nothing there. Set --image-url to the address the server really answers at.`,
  );
}

/**
 * Every request of an image adapter goes through this: `redirect: 'manual'` whatever the caller asked (Node's
 * fetch, undici, then hands back the 3xx itself with its headers), and a 3xx is refused with its body unread.
 */
export function createImageServerFetch(fetchImpl: typeof fetch, options: ImageServerFetchOptions): ImageServerFetch {
  return async (input, init = {}) => {
    const response = await fetchImpl(input, { ...init, redirect: 'manual' });
    if (!isRedirectStatus(response.status)) return response;
    await response.body?.cancel().catch(() => {});
    throw createRedirectError(options, { method: init.method ?? 'GET', requestUrl: input, status: response.status, location: response.headers.get('location') });
  };
}
