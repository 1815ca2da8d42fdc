// Easel installed as a command: `npm pack` makes a package whose global install provides `easel`, which runs from
// wherever it is installed, never writes into its install folder and keeps its data under $XDG_DATA_HOME/easel.
// Slow (the install builds better-sqlite3 with node-gyp: about a minute), so it is its own suite: `npm run test:pack`,
// run by .ci/run after `npm test`.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findClosedPort } from '../helpers/ports.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
const run = promisify(execFile);

const root = mkdtempSync(join(tmpdir(), 'easel-pack-'));
const prefix = join(root, 'prefix');
const easel = join(prefix, 'bin', 'easel');
const installed = join(prefix, 'lib', 'node_modules', 'easel');
const home = join(root, 'home');
const xdgDataHome = join(root, 'xdg-data');
/** The working folder of every run: the installed command must not make ./data in it. */
const workDir = join(root, 'work');

/** The environment of a person's shell: their own HOME and XDG_DATA_HOME, no EASEL_* setting. */
function userEnv(overrides: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, ...overrides };
  for (const name of Object.keys(env)) if (name.startsWith('EASEL_') || env[name] === undefined) delete env[name];
  return env;
}

/** Every file under a folder with its size and modification time: a write into it shows as a difference. */
function snapshot(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (path: string) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile()) {
        const stat = statSync(full);
        files.set(relative(dir, full), `${stat.size} ${stat.mtimeMs}`);
      }
    }
  };
  walk(dir);
  return files;
}

let beforeRuns: Map<string, string>;

beforeAll(async () => {
  for (const dir of [home, workDir]) mkdirSync(dir, { recursive: true });
  const packStarted = performance.now();
  // prepack builds dist/easel.mjs afresh; --json names the tarball.
  const packed = await run('npm', ['pack', '--pack-destination', root, '--json'], { cwd: REPO, maxBuffer: 16 * 1024 * 1024 });
  const [{ filename }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as [{ filename: string }];
  const packMs = performance.now() - packStarted;
  const installStarted = performance.now();
  // better-sqlite3 needs its install script (node-gyp); npm 11 asks for it by name in a global install.
  await run('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', '--allow-scripts=better-sqlite3,esbuild', join(root, filename)], {
    cwd: root,
    maxBuffer: 16 * 1024 * 1024,
  });
  const installMs = performance.now() - installStarted;
  process.stdout.write(`test:pack: npm pack ${(packMs / 1000).toFixed(1)} s, npm install -g ${(installMs / 1000).toFixed(1)} s\n`);
  beforeRuns = snapshot(installed);
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('the package made by npm pack', () => {
  it('ships what runs: the command, the bundle and the files it reads, not the sources, tests or data', () => {
    const files = [...beforeRuns.keys()].filter((file) => !file.startsWith('node_modules/'));
    expect(files).toEqual(expect.arrayContaining(['bin/easel.mjs', 'dist/easel.mjs', 'package.json', 'server/sqlite/migrations/001-init.sql', 'server/comfyui/default-workflow.json', 'web/easel.js', 'web/easel.css']));
    expect(files.filter((file) => /^(test|data|reports|scripts|docs)\/|\.ts$|^dist\/easel\.json$/.test(file))).toEqual([]);
    // The bundle holds no path of the machine that packed it.
    expect(readFileSync(join(installed, 'dist/easel.mjs'), 'utf8')).not.toContain(REPO);
  });

  it('installs an `easel` command that answers --version and --help with its own usage and data folder', async () => {
    expect((await run(easel, ['--version'], { cwd: workDir, env: userEnv({}) })).stdout).toBe(`easel ${VERSION}\n`);

    const help = (await run(easel, ['--help'], { cwd: workDir, env: userEnv({ XDG_DATA_HOME: xdgDataHome }) })).stdout;
    expect(help.split('\n')[0]).toBe('Usage: easel [flags]');
    for (const flag of ['--host', '--port', '--ollama-url', '--model', '--data-dir', '--image-backend', '--unload-llm', '--version']) expect(help).toContain(flag);
    expect(help.replace(/\s+/g, ' ')).toContain(`(default ${xdgDataHome}/easel)`);

    // Without XDG_DATA_HOME (or with a relative one, which the XDG rules ignore): ~/.local/share/easel.
    for (const value of [undefined, 'relative/share']) {
      const fallback = (await run(easel, ['--help'], { cwd: workDir, env: userEnv({ XDG_DATA_HOME: value }) })).stdout;
      expect(fallback.replace(/\s+/g, ' ')).toContain(`(default ${home}/.local/share/easel)`);
    }
  });

  it('serves from any folder, keeps its data under $XDG_DATA_HOME/easel, writes nothing into its install folder, and stops on SIGTERM', async () => {
    const ollamaUrl = `http://127.0.0.1:${await findClosedPort()}`;
    const child = spawn(easel, ['--port', '0', '--ollama-url', ollamaUrl], { cwd: workDir, env: userEnv({ XDG_DATA_HOME: xdgDataHome }), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (data: Buffer) => (output += data.toString()));
    child.stderr.on('data', (data: Buffer) => (output += data.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await expect.poll(() => /running at (http:\/\/\S+)/.exec(output)?.[1], { timeout: 30_000, interval: 100 }).toBeDefined();
      const url = /running at (http:\/\/\S+)/.exec(output)![1]!;

      const health = await fetch(`${url}/api/health`);
      expect(health.status, output).toBe(200);
      // The page and its assets (web/ and htmx from the installed dependencies) are found where it is installed.
      expect((await fetch(`${url}/`)).status).toBe(200);
      expect((await fetch(`${url}/assets/easel.js`)).status).toBe(200);
      expect((await fetch(`${url}/assets/htmx.min.js`)).status).toBe(200);
      // The token counter's module is the bundled server's own function, still self-contained once bundled.
      const estimate = await (await fetch(`${url}/assets/token-estimate.js`)).text();
      const counter = (await import(`data:text/javascript;base64,${Buffer.from(estimate).toString('base64')}`)) as { estimateEncoderTokens(text: string, encoder: string): number };
      expect([counter.estimateEncoderTokens('a red fox, 42 candles', 'clip'), counter.estimateEncoderTokens('a red fox, 42 candles', 't5')]).toEqual([7, 8]);
      // The migrations ran: a conversation can be made and listed.
      expect((await fetch(`${url}/api/conversations`, { method: 'POST' })).status).toBe(201);

      expect(existsSync(join(xdgDataHome, 'easel', 'easel.db'))).toBe(true);
      expect(existsSync(join(workDir, 'data'))).toBe(false);
      expect(snapshot(installed)).toEqual(beforeRuns);

      child.kill('SIGTERM');
      expect(await exited, output).toBe(0);
      expect(output).toContain('SIGTERM: stopping Easel');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
