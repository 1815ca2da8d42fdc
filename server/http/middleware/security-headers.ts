import type { MiddlewareHandler } from 'hono';
import { secureHeaders } from 'hono/secure-headers';

/**
 * The page's Content-Security-Policy: no inline script or style, nothing from another origin, no
 * framing. Sent on every response (the API and images too), where it costs nothing.
 */
export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/**
 * hono's secureHeaders on every response, errors, refusals and 404s included: nosniff, no referrer,
 * the CSP above, and its other defaults (Cross-Origin-Resource-Policy and -Opener-Policy same-origin,
 * X-Frame-Options). Strict-Transport-Security is off: Easel speaks plain HTTP, and on a LAN name
 * HSTS could only break another service of that machine.
 */
export function addSecurityHeaders(): MiddlewareHandler {
  return secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'self'"],
      scriptSrc: ["'self'"],
      styleSrc: ["'self'"],
      imgSrc: ["'self'", 'data:', 'blob:'],
      connectSrc: ["'self'"],
      objectSrc: ["'none'"],
      baseUri: ["'none'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
    },
    strictTransportSecurity: false,
    xFrameOptions: 'DENY',
    referrerPolicy: 'no-referrer',
    xContentTypeOptions: 'nosniff',
  });
}
