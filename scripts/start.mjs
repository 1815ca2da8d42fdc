// `npm start`: the server as compiled JavaScript, in this very process (so the signals npm forwards reach
// the server itself). tsx's loader would add ~40 MB and ~0.5 s to every start (docs/BENCHMARKS.md).
// The bundle, dist/easel.mjs, is built by esbuild (≈ 0.2 s) when it is missing or older than a source
// file, so a `git pull` needs no extra step. Tests and the dev loop keep running the sources with tsx.
// `node scripts/start.mjs --build-only` (`npm run build`, run by `npm pack` as prepack) builds and exits: the
// packed bundle that the installed `easel` command (bin/easel.mjs) runs.
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
const BUNDLE = join(DIST, 'easel.mjs');
const STAMP = join(DIST, 'easel.json');

if (process.argv[2] === '--build-only') {
  await build();
} else {
  if (!isFresh()) await build();
  const { main } = await import(pathToFileURL(BUNDLE).href);
  await main();
}

/**
 * The bundle exists, was built from this checkout, and no source is newer than its build. (A checkout copied
 * or moved elsewhere rebuilds once: its files' times say nothing about the bundle's.)
 */
function isFresh() {
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(STAMP, 'utf8'));
    statSync(BUNDLE);
  } catch {
    return false;
  }
  return stamp.root === ROOT && newestSourceMs() <= stamp.sourcesMs;
}

function newestSourceMs() {
  // This script too: how the bundle is built lives here.
  let newest = Math.max(...['package.json', 'package-lock.json', 'scripts/start.mjs'].map((file) => statSync(join(ROOT, file)).mtimeMs));
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  walk(join(ROOT, 'server'));
  return newest;
}

async function build() {
  const sourcesMs = newestSourceMs();
  const { build: esbuild } = await import('esbuild');
  const result = await esbuild({
    entryPoints: [join(ROOT, 'server/main.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Names kept: CPU profiles and stack traces stay readable.
    minifyWhitespace: true,
    minifySyntax: true,
    write: false,
    logLevel: 'warning',
    // Two native addons (sharp, loaded at the first thumbnail, with its libvips binaries), an asset path resolved at
    // run time, and two packages loaded only when first needed.
    external: ['better-sqlite3', 'htmx.org', 'sharp', 'undici', 'ws'],
    // CommonJS packages in an ES module bundle still call require() for Node's own modules.
    banner: { js: "import { createRequire as __easelRequire } from 'node:module'; const require = __easelRequire(import.meta.url);" },
    plugins: [keepModuleUrls(), withoutHttp2()],
  });
  const [output] = result.outputFiles;
  mkdirSync(DIST, { recursive: true });
  // Written aside and renamed: two starts at once never run a half-written bundle.
  const temporary = `${BUNDLE}.${process.pid}.tmp`;
  writeFileSync(temporary, output.contents);
  renameSync(temporary, BUNDLE);
  writeFileSync(`${STAMP}.${process.pid}.tmp`, JSON.stringify({ root: ROOT, sourcesMs }));
  renameSync(`${STAMP}.${process.pid}.tmp`, STAMP);
}

/**
 * Easel serves HTTP/1.1 only (`serve()` on node:http). @hono/node-server imports node:http2 just to tell an
 * HTTP/2 request apart (`instanceof Http2ServerRequest`, `constants` to close its stream); loading http2 and
 * tls for that took ~17 ms of every start. A class nothing is an instance of keeps those checks false.
 */
function withoutHttp2() {
  return {
    name: 'without-http2',
    setup(build) {
      build.onResolve({ filter: /^(node:)?http2$/ }, () => ({ path: 'http2', namespace: 'without-http2' }));
      build.onLoad({ filter: /.*/, namespace: 'without-http2' }, () => ({
        contents: 'export class Http2ServerRequest {}\nexport const constants = {};\n',
        loader: 'js',
      }));
    },
  };
}

/**
 * Each server file keeps its own `import.meta.url`: the web assets, the migrations, the default ComfyUI
 * workflow and package.json are found next to the sources, as under tsx. The URL is made from the bundle's own
 * (`new URL('../server/main.ts', import.meta.url)`), not written in whole, so a bundle packed on one machine
 * works wherever the package is installed.
 */
function keepModuleUrls() {
  return {
    name: 'keep-module-urls',
    setup(build) {
      build.onLoad({ filter: /[\\/]server[\\/].*\.ts$/ }, (args) => {
        const source = readFileSync(args.path, 'utf8');
        const fromBundle = relative(DIST, args.path).split(sep).join('/');
        return {
          contents: source.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`),
          loader: 'ts',
          resolveDir: dirname(args.path),
        };
      });
    },
  };
}
