// `npm start` runs compiled JavaScript (issue 12): scripts/start.mjs builds dist/easel.mjs when it is missing,
// older than a source or built in another folder, and runs it in its own process. `--build-only` (`npm run build`,
// npm pack's prepack) builds whatever the stamp says, and runs nothing.
import { spawnSync } from 'node:child_process';
import { readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const BUNDLE = join(REPO, 'dist/easel.mjs');
const STAMP = join(REPO, 'dist/easel.json');

function runStart(): string {
  const result = spawnSync(process.execPath, ['scripts/start.mjs', '--version'], { cwd: REPO, encoding: 'utf8', timeout: 60_000 });
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  return result.stdout.trim();
}

function readStamp(): { root: string; sourcesMs: number } {
  return JSON.parse(readFileSync(STAMP, 'utf8')) as { root: string; sourcesMs: number };
}

/** Marks the bundle as built long ago (both files dated 2001), so a rebuild shows in its mtime. */
function ageBundle(stamp: { root: string; sourcesMs: number }): void {
  writeFileSync(STAMP, JSON.stringify(stamp));
  const old = new Date('2001-01-01T00:00:00Z');
  utimesSync(BUNDLE, old, old);
}

describe('npm start builds and runs the compiled server', () => {
  it('rebuilds the bundle when a source is newer than its build, and runs it', () => {
    runStart();
    ageBundle({ ...readStamp(), sourcesMs: 0 });

    expect(runStart()).toMatch(/^easel \d+\.\d+\.\d+$/);

    expect(statSync(BUNDLE).mtime.getFullYear()).toBeGreaterThan(2001);
    expect(readStamp().sourcesMs).toBeGreaterThanOrEqual(statSync(join(REPO, 'server/main.ts')).mtimeMs);
    // The files it reads at run time are found from the bundle's own URL, so it runs wherever it is installed.
    const bundle = readFileSync(BUNDLE, 'utf8');
    expect(bundle).not.toContain(REPO);
    expect(bundle).toContain('new URL("../server/sqlite/open.ts",import.meta.url)');
  });

  it('rebuilds a bundle built in another folder (a copied checkout: its files\' times say nothing)', () => {
    runStart();
    ageBundle({ ...readStamp(), root: '/somewhere/else/' });

    runStart();

    expect(statSync(BUNDLE).mtime.getFullYear()).toBeGreaterThan(2001);
    expect(readStamp().root).toBe(REPO);
  });

  it('--build-only builds a fresh bundle anyway, and starts no server', () => {
    runStart();
    ageBundle(readStamp());

    const result = spawnSync(process.execPath, ['scripts/start.mjs', '--build-only'], { cwd: REPO, encoding: 'utf8', timeout: 60_000 });

    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('');
    expect(result.status).toBe(0);
    expect(statSync(BUNDLE).mtime.getFullYear()).toBeGreaterThan(2001);
    expect(readStamp().root).toBe(REPO);
  });

  it('runs a fresh bundle as it is, without building', () => {
    runStart();
    ageBundle(readStamp());

    runStart();

    expect(statSync(BUNDLE).mtime.getFullYear()).toBe(2001);
  });
});
