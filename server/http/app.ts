import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from '../core/index.ts';
import { createApiRoutes, type ApiDeps } from './api.ts';

export const MAX_BODY_BYTES = 64 * 1024;

export interface AppDeps extends ApiDeps {
  logger: Logger;
  /** Routes of the web page (HTML, assets), mounted at `/`. */
  page?: Hono;
  /** Where generated PNGs live; served read-only under /images/. */
  imagesDir?: string;
}

// Image names are 128 random bits: nobody can guess one, and nothing else can be traversed to.
const IMAGE_NAME = /^[a-f0-9]{32}\.png$/;

export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => c.json({ error: `The request body is larger than ${MAX_BODY_BYTES / 1024} KiB; send less text.` }, 413),
    }),
  );
  app.route('/api', createApiRoutes(deps));
  const imagesDir = deps.imagesDir;
  if (imagesDir) {
    app.get('/images/:file', async (c) => {
      const file = c.req.param('file');
      if (!IMAGE_NAME.test(file)) return c.text('Not found', 404);
      const bytes = await readFile(join(imagesDir, file)).catch(() => null);
      if (!bytes) return c.text('Not found', 404);
      return c.body(new Uint8Array(bytes), 200, {
        'content-type': 'image/png',
        // A name is never reused for another picture, so browsers may keep it forever.
        'cache-control': 'public, max-age=31536000, immutable',
        'x-content-type-options': 'nosniff',
      });
    });
  }
  if (deps.page) app.route('/', deps.page);
  app.notFound((c) =>
    c.req.path.startsWith('/api/')
      ? c.json({ error: `No API route ${c.req.method} ${c.req.path}. See docs/API.md.` }, 404)
      : c.text('Not found', 404),
  );
  app.onError((error, c) => {
    deps.logger.error('request failed', { method: c.req.method, path: c.req.path, error });
    return c.req.path.startsWith('/api/')
      ? c.json({ error: 'Easel hit an internal error; the details are in the server log.' }, 500)
      : c.text('Easel hit an internal error; the details are in the server log.', 500);
  });
  return app;
}
