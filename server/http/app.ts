import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { describeStorageFailure, isLoggedByStore, isStorageError, MAX_IMPORT_BYTES, MAX_REFERENCE_BYTES, type Logger } from '../core/index.ts';
import { createApiRoutes, type ApiDeps } from './api.ts';
import { isApiPath, respondMessage, STATUS } from './errors.ts';
import { withRequestSignal } from './stream-events.ts';
import { renderComposerStatus } from './page/index.ts';
import { addSecurityHeaders, allowListedHosts, refuseCrossSiteWrites, requireToken } from './middleware/index.ts';

export const MAX_BODY_BYTES = 64 * 1024;

/** The routes that take a conversation's zip (API: the zip as the body; page: a form holding the file). */
export const IMPORT_PATHS: ReadonlySet<string> = new Set(['/api/conversations/import', '/c/import']);

/** The routes that take a picture as the body (a reference image, one to describe; API and page alike): up to the image limit. */
export const REFERENCE_PATH = /^\/(?:api\/conversations|c)\/[^/]+\/(?:references|describe)$/;

export interface AppDeps extends ApiDeps {
  logger: Logger;
  /** Routes of the web page (HTML, assets), mounted at `/`. */
  page?: Hono;
  /** Where generated PNGs live; served read-only under /images/. */
  imagesDir?: string;
  /** Who may talk to it: see server/http/middleware and docs/SECURITY.md. */
  access: AccessOptions;
}

export interface AccessOptions {
  /** Names besides the loopback ones that the Host header may carry (--host, --allowed-hosts, …). */
  allowedHosts: readonly string[];
  /** When set, every request needs it (a bearer header or the cookie set by /?token=). */
  token?: string | undefined;
}

// Image names are 128 random bits: nobody can guess one, and nothing else can be traversed to.
const IMAGE_NAME = /^[a-f0-9]{32}\.png$/;
const THUMBNAIL_NAME = /^([a-f0-9]{32})\.webp$/;

export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  // Once, for every route (page, API, streams, images, assets, 404s and errors). Headers first, so
  // that the refusals below carry them too.
  app.use('*', addSecurityHeaders());
  app.use('*', allowListedHosts({ hosts: deps.access.allowedHosts, logger: deps.logger }));
  app.use('*', refuseCrossSiteWrites({ logger: deps.logger }));
  if (deps.access.token !== undefined) app.use('*', requireToken({ token: deps.access.token, logger: deps.logger }));
  const textLimit = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => c.json({ error: `The request body is larger than ${MAX_BODY_BYTES / 1024} KiB; send less text.` }, 413),
  });
  // Only an import may be larger: a whole conversation with its images.
  const importLimit = bodyLimit({
    maxSize: MAX_IMPORT_BYTES,
    onError: (c) =>
      respondMessage(c, 413, `The file is larger than ${MAX_IMPORT_BYTES / 1024 / 1024} MB, more than Easel imports at once.`),
  });
  // A reference image may be as large as an image a backend may send.
  const referenceLimit = bodyLimit({
    maxSize: MAX_REFERENCE_BYTES,
    onError: (c) => respondMessage(c, 413, `The picture is larger than ${MAX_REFERENCE_BYTES / 1024 / 1024} MB, more than Easel takes as a picture.`),
  });
  app.use('*', (c, next) =>
    c.req.method === 'POST' && IMPORT_PATHS.has(c.req.path)
      ? importLimit(c, next)
      : c.req.method === 'POST' && REFERENCE_PATH.test(c.req.path)
        ? referenceLimit(c, next)
        : textLimit(c, next),
  );
  app.route('/api', createApiRoutes(deps));
  // A picture's thumbnail for the gallery (WebP, made at its first request when it predates thumbnails): the same
  // rules as the PNGs below; an image that is gone is 404, one whose file cannot be read as a picture 422.
  app.get('/images/thumbs/:file', async (c) => {
    const match = THUMBNAIL_NAME.exec(c.req.param('file'));
    if (!match?.[1]) return c.text('Not found', 404);
    const thumbnail = await withRequestSignal(c, (signal) => deps.service.readThumbnail(match[1] as string, signal));
    if (!thumbnail.ok) return c.text(thumbnail.error.message, STATUS[thumbnail.error.code]);
    return c.body(thumbnail.value as Uint8Array<ArrayBuffer>, 200, {
      'content-type': 'image/webp',
      // An image's thumbnail never changes, and an image id is never reused.
      'cache-control': 'public, max-age=31536000, immutable',
    });
  });
  const imagesDir = deps.imagesDir;
  if (imagesDir) {
    app.get('/images/:file', async (c) => {
      const file = c.req.param('file');
      if (!IMAGE_NAME.test(file)) return c.text('Not found', 404);
      // Stryker disable next-line ArrowFunction: its only reader is if (!bytes): the same 404 either way
      const bytes = await readFile(join(imagesDir, file)).catch(() => null);
      if (!bytes) return c.text('Not found', 404);
      return c.body(new Uint8Array(bytes), 200, {
        'content-type': 'image/png',
        // A name is never reused for another picture, so browsers may keep it forever.
        'cache-control': 'public, max-age=31536000, immutable',
      });
    });
  }
  // Stryker disable next-line StringLiteral: hono's route() merges '' into the base path / just as it does '/'
  if (deps.page) app.route('/', deps.page);
  app.notFound((c) =>
    respondMessage(c, 404, isApiPath(c.req.path) ? `No API route ${c.req.method} ${c.req.path}. See docs/API.md.` : 'Not found'),
  );
  app.onError((error, c) => {
    // A damaged or vanished database met by a read (writes report it as a value): the same 503 everywhere.
    if (isStorageError(error)) {
      if (!isLoggedByStore(error)) deps.logger.error('request failed', { method: c.req.method, path: c.req.path, error });
      const failure = describeStorageFailure(error, 'read');
      if (isApiPath(c.req.path)) return c.json({ error: failure.message, code: failure.code }, 503);
      // The page's own requests (htmx) get the words where the page shows a refusal; the text goes back into the box.
      return c.req.header('hx-request') === 'true' ? c.html(String(renderComposerStatus(failure.message)), 503) : c.text(failure.message, 503);
    }
    deps.logger.error('request failed', { method: c.req.method, path: c.req.path, error });
    return respondMessage(c, 500, 'Easel hit an internal error; the details are in the server log.');
  });
  return app;
}
