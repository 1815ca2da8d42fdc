import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { estimateEncoderTokens } from '../../protocol/index.ts';

export interface Asset {
  body: Uint8Array;
  contentType: string;
  etag: string;
}

const WEB_DIR = fileURLToPath(new URL('../../../web/', import.meta.url));

// htmx and its SSE extension come from the pinned npm package, served by us so the page works offline.
const HTMX_FILES: Record<string, string> = {
  'htmx.min.js': 'dist/htmx.min.js',
  'htmx.min.js.map': 'dist/htmx.min.js.map',
  'hx-sse.min.js': 'dist/ext/hx-sse.min.js',
  'hx-sse.min.js.map': 'dist/ext/hx-sse.min.js.map',
};

const WEB_FILES = ['easel.css', 'easel.js', 'favicon.svg'];

// The modules web/easel.js imports: every web/js/*.js, served beside it (/assets/<name>.js), so its
// `./name.js` imports resolve there. A name another asset has is refused at start-up.
const MODULES_DIR = join(WEB_DIR, 'js');

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.map': 'application/json; charset=utf-8',
};

/** The page's token counter's module: the server's estimate itself, not a copy of its rule (web/js/prompt-count.js). */
const TOKEN_ESTIMATE_MODULE = 'token-estimate.js';

/**
 * `estimateEncoderTokens` as a browser module, from the function the server runs (as loaded: transpiled, maybe
 * minified, but self-contained: it uses nothing from outside its body).
 */
export function renderTokenEstimateModule(): string {
  return `// Made by Easel from server/protocol/families.ts at start: the server's own estimate.\nconst estimate = ${estimateEncoderTokens.toString()};\nexport { estimate as estimateEncoderTokens };\n`;
}

function addBody(assets: Map<string, Asset>, name: string, body: Uint8Array): void {
  const extension = name.slice(name.lastIndexOf('.'));
  assets.set(name, {
    body,
    // Stryker disable next-line StringLiteral: unreachable: every file loadAssets serves has one of the listed extensions
    contentType: CONTENT_TYPES[extension] ?? 'application/octet-stream',
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
  });
}

/** Reads every asset once at start-up; a missing file is a broken install and fails loudly here. */
export function loadAssets(): Map<string, Asset> {
  const htmxRoot = dirname(createRequire(import.meta.url).resolve('htmx.org/package.json'));
  const assets = new Map<string, Asset>();
  const add = (name: string, path: string) => addBody(assets, name, new Uint8Array(readFileSync(path)));
  for (const [name, path] of Object.entries(HTMX_FILES)) add(name, join(htmxRoot, path));
  for (const name of WEB_FILES) add(name, join(WEB_DIR, name));
  for (const name of readdirSync(MODULES_DIR).filter((file) => file.endsWith('.js')).sort()) {
    if (assets.has(name)) throw new Error(`web/js/${name} has the name of another asset`);
    add(name, join(MODULES_DIR, name));
  }
  addBody(assets, TOKEN_ESTIMATE_MODULE, new TextEncoder().encode(renderTokenEstimateModule()));
  return assets;
}
