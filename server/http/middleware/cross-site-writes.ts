import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../../core/index.ts';
import { respondMessage } from '../errors.ts';

/**
 * Refuses every request that is not GET or HEAD when a browser says it came from another page: an
 * `Origin` other than this server's own (`Origin: null` from a sandboxed frame or a file included), or
 * `Sec-Fetch-Site: cross-site` / `same-site` (another port of localhost is the same site). A request
 * with neither header (curl, scripts) passes; a browser always sends one of them on a write.
 *
 * The page has no plain form posts (under `Referrer-Policy: no-referrer` a browser would send them with
 * `Origin: null`): every write goes through htmx's fetch, which sends the page's real origin.
 *
 * hono's `csrf` middleware checks only form-like content types and passes when either header is
 * acceptable; this rule refuses when either header is foreign, whatever the body.
 */
export function refuseCrossSiteWrites(options: { logger: Logger }): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    const site = c.req.header('sec-fetch-site');
    const origin = c.req.header('origin');
    const foreignSite = site !== undefined && !isOwnSite(site);
    const ownOrigin = origin === undefined || isOwnOrigin(origin, c.req.header('host'));
    if (!foreignSite && ownOrigin) return next();
    options.logger.warn('refused a write from another site', { method: c.req.method, path: c.req.path, origin, secFetchSite: site });
    return respondMessage(
      c,
      403,
      'Easel only accepts changes from its own page, and this request came from another site. Open Easel at its own address and try again.',
    );
  };
}

/**
 * Values are compared without regard to case (RFC 9110 §5.5 leaves that to each field; Fetch writes them
 * lower-case, so upper case is a hand-made request). Only `same-origin` (the page) and `none` (a typed
 * address) pass: `cross-site`, `same-site`, an unknown value, and a repeated header (which arrives joined
 * as "same-origin, cross-site") are refused.
 */
function isOwnSite(value: string): boolean {
  const site = value.trim().toLowerCase();
  return site === 'same-origin' || site === 'none';
}

/** The page's own origin has the host the request was sent to (already checked by allowListedHosts). */
function isOwnOrigin(origin: string, host: string | undefined): boolean {
  // Stryker disable next-line BooleanLiteral,ConditionalExpression: unreachable: allowListedHosts runs first and refuses every request without a readable Host
  if (host === undefined) return false;
  try {
    const from = new URL(origin);
    // http for Easel itself; https when a TLS proxy serves it under the same name.
    return (from.protocol === 'http:' || from.protocol === 'https:') && from.host === new URL(`http://${host}`).host;
  } catch {
    // `null` and anything else that is not a URL.
    return false;
  }
}
