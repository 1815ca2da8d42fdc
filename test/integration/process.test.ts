// `npm start` as a person runs it: a signal to the npm process alone (not its process group, as a service
// manager or `kill PID` sends it) must stop the server, free the port and leave no process of the chain.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { iterateSse } from '../helpers/sse.ts';
import { findClosedPort } from '../helpers/ports.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const STOP_WITHIN_MS = 5000;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Parent pid and state of a live process from /proc, or undefined once it is gone. */
function readStat(pid: number): { ppid: number; state: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name sits in parentheses and may hold spaces: the fields after the last ')' are fixed.
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(ppid), state: state ?? '?' };
  } catch {
    return undefined;
  }
}

/** A zombie has exited; it only waits for its parent to read its status. */
function isRunning(pid: number): boolean {
  const stat = readStat(pid);
  return stat !== undefined && stat.state !== 'Z';
}

/** The pid and every descendant of it, walking /proc. */
function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readStat(Number(name));
    if (stat) children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), Number(name)]);
  }
  const tree = [root];
  for (let index = 0; index < tree.length; index++) tree.push(...(children.get(tree[index]!) ?? []));
  return tree;
}

function isPortOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function findClosedUrl(): Promise<string> {
  return `http://127.0.0.1:${await findClosedPort()}`;
}

interface NpmStart {
  npm: ChildProcess;
  url: string;
  port: number;
  /** npm and everything it started, captured while the server runs. */
  chain: number[];
  log: () => string;
  exited: Promise<number | null>;
}

async function startWithNpm(flags: string[]): Promise<NpmStart> {
  const dataDir = mkdtempSync(join(tmpdir(), 'easel-npm-'));
  const npm = spawn('npm', ['start', '--', '--port', '0', '--data-dir', dataDir, '--ollama-url', await findClosedUrl(), ...flags], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: false,
  });
  let output = '';
  npm.stdout!.on('data', (data: Buffer) => (output += data.toString()));
  npm.stderr!.on('data', (data: Buffer) => (output += data.toString()));
  const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
  let chain: number[] = [npm.pid!];
  cleanups.push(async () => {
    // Only when a test failed half-way: end what this test started, by pid (orphans included).
    for (const pid of chain.reverse()) if (isRunning(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });
  await expect.poll(() => /running at (http:\/\/\S+)/.exec(output)?.[1], { timeout: 30_000, interval: 100 }).toBeDefined();
  const url = /running at (http:\/\/\S+)/.exec(output)![1]!;
  chain = processTree(npm.pid!);
  return { npm, url, port: Number(new URL(url).port), chain: [...chain], log: () => output, exited };
}

async function expectStoppedWithin(started: NpmStart, ms: number): Promise<void> {
  const from = performance.now();
  await expect.poll(() => isPortOpen(started.port), { timeout: ms, interval: 50 }).toBe(false);
  await expect.poll(() => started.chain.filter(isRunning), { timeout: Math.max(100, ms - (performance.now() - from)), interval: 50 }).toEqual([]);
  expect(performance.now() - from).toBeLessThan(ms);
}

describe('npm start and signals', () => {
  it('SIGTERM to npm alone mid-generation: A1111 is interrupted, the port is freed, no process is left', async () => {
    const a1111 = await createFakeA1111({ stepDelayMs: 50 });
    cleanups.push(() => a1111.close());
    const started = await startWithNpm(['--image-backend', 'a1111', '--image-url', a1111.url]);
    // npm and the server itself at least; any process in between must go too.
    expect(started.chain.length).toBeGreaterThanOrEqual(2);

    const id = ((await (await fetch(`${started.url}/api/conversations`, { method: 'POST' })).json()) as { id: string }).id;
    const response = await fetch(`${started.url}/api/conversations/${id}/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'a slow painting', settings: { steps: 150 } }),
    });
    expect(response.status).toBe(200);
    const events = iterateSse(response.body!);
    for (let next = await events.next(); !next.done && next.value.type !== 'progress'; next = await events.next());
    const reading = (async () => {
      for await (const _event of events);
    })().catch(() => {});

    process.kill(started.npm.pid!, 'SIGTERM');
    await expectStoppedWithin(started, STOP_WITHIN_MS);
    expect(a1111.interrupts).toBeGreaterThanOrEqual(1);
    expect(started.log()).toContain('SIGTERM: stopping Easel');
    await reading;
    expect(await started.exited).toBe(0);
  });

  it('SIGINT to npm alone: the server stops within 5 s and frees the port', async () => {
    const started = await startWithNpm([]);
    expect(await isPortOpen(started.port)).toBe(true);
    process.kill(started.npm.pid!, 'SIGINT');
    await expectStoppedWithin(started, STOP_WITHIN_MS);
    expect(started.log()).toContain('SIGINT: stopping Easel');
    expect(await started.exited).toBe(0);
  });

  it('Ctrl-C in a terminal (SIGINT to npm and to the server, npm forwarding another): one graceful stop', async () => {
    const started = await startWithNpm([]);
    const server = started.chain.at(-1)!;
    process.kill(started.npm.pid!, 'SIGINT');
    process.kill(server, 'SIGINT');
    await expectStoppedWithin(started, STOP_WITHIN_MS);
    expect(started.log().match(/SIGINT: stopping Easel/g)).toHaveLength(1);
    expect(await started.exited).toBe(0);
  });
});
