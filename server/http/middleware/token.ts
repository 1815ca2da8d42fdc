import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import type { Logger } from '../../core/index.ts';
import { isApiPath } from '../errors.ts';
import { html } from '../page/markup.ts';

export const TOKEN_COOKIE = 'easel_token';
const TOKEN_COOKIE_MAX_AGE = 60 * 60 * 24 * 30;

export interface TokenOptions {
  token: string;
  logger: Logger;
}

/**
 * Every request needs the token: `Authorization: Bearer <token>`, or the cookie that opening
 * `/?token=<token>` sets (HttpOnly, SameSite=Strict; the answer is a redirect to the same address
 * without the token, so it does not stay in the history). Otherwise 401: JSON for the API, a small
 * "enter the token" form for the page. Tokens are compared as SHA-256 digests in constant time.
 */
export function requireToken(options: TokenOptions): MiddlewareHandler {
  const expected = digest(options.token);
  const matches = (candidate: string | undefined) => candidate !== undefined && timingSafeEqual(digest(candidate), expected);
  return async (c, next) => {
    const offered = c.req.method === 'GET' || c.req.method === 'HEAD' ? c.req.query('token') : undefined;
    if (offered !== undefined) {
      if (!matches(offered)) {
        options.logger.warn('refused a wrong token', { method: c.req.method, path: c.req.path });
        return refuse(c, 'That token is not the right one. Copy it again from the line Easel printed when it started.');
      }
      setCookie(c, TOKEN_COOKIE, options.token, { path: '/', httpOnly: true, sameSite: 'Strict', maxAge: TOKEN_COOKIE_MAX_AGE });
      const url = new URL(c.req.url);
      url.searchParams.delete('token');
      c.header('Cache-Control', 'no-store');
      return c.redirect(url.pathname + url.search, 303);
    }
    // Stryker disable next-line StringLiteral: with no Authorization header neither text matches /^Bearer\s+…/: the same 401 and log line
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1];
    if (matches(bearer) || matches(getCookie(c, TOKEN_COOKIE))) return next();
    options.logger.debug('asked for the token', { method: c.req.method, path: c.req.path, bearer: bearer !== undefined });
    return refuse(c, bearer === undefined ? undefined : 'That token is not the right one.');
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function refuse(c: Context, problem: string | undefined): Response {
  c.header('Cache-Control', 'no-store');
  if (isApiPath(c.req.path)) {
    c.header('WWW-Authenticate', 'Bearer realm="Easel"');
    const how = 'Send the header Authorization: Bearer <token>; the token is in the URL Easel printed when it started, or the one given with --token.';
    return c.json({ error: problem ? `${problem} ${how}` : `Easel needs its access token. ${how}` }, 401);
  }
  return c.html(String(renderTokenPage(c.req.path, problem)), 401);
}

/** A page of its own (no script, no style: the CSP holds, and the assets need the token too). */
function renderTokenPage(path: string, problem: string | undefined) {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Easel: enter the token</title>
</head>
<body>
<main>
<h1>Easel needs its token</h1>
<p>This Easel can be reached from other machines, so it asks for the token it printed when it started
(the part after <code>?token=</code> in the address it showed), or the one it was given with <code>--token</code>.</p>
${problem ? html`<p role="alert"><strong>${problem}</strong></p>` : ''}
<form method="get" action="${path}">
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Open Easel</button>
</form>
</main>
</body>
</html>`;
}
