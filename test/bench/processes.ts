// The processes of the bench: the fake Ollama's, the followers', the real `npm start`, and what /proc says about them.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import type { FakeAnswer, FakeCommand } from './fake-process.ts';
import type { FollowersAnswer, FollowersCommand } from './followers-process.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

/** A command as the bench asks it: the id is added on the way. */
type BodyOf<C> = C extends { id: number } ? Omit<C, 'id'> : never;

interface IpcChild<C, A> {
  pid: number;
  ask(command: BodyOf<C>): Promise<Extract<A, { ok: true }>>;
  close(): Promise<void>;
}

/**
 * A helper of the bench in a Node process of its own (`test/bench/<script>`, run with tsx), driven over IPC:
 * each command gets an id and its answer comes back with it. Resolves with the child's first message.
 */
async function startIpcChild<C, A extends { id: number; ok: boolean; error?: string }>(script: string, name: string): Promise<{ first: unknown; child: IpcChild<C, A> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', `test/bench/${script}`], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const first = await new Promise<unknown>((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`the ${name} process exited (${code}) before it was ready`)));
  });
  let nextId = 1;
  const waiting = new Map<number, (answer: A) => void>();
  child.on('message', (m) => {
    const answer = m as A;
    waiting.get(answer.id)?.(answer);
    waiting.delete(answer.id);
  });
  return {
    first,
    child: {
      pid: child.pid as number,
      ask(command) {
        const id = nextId++;
        return new Promise((resolve, reject) => {
          waiting.set(id, (answer) => (answer.ok ? resolve(answer as Extract<A, { ok: true }>) : reject(new Error(`${name}: ${answer.error}`))));
          child.send({ ...command, id });
        });
      },
      close: () => stopChild(child, 'SIGTERM', () => child.disconnect()),
    },
  };
}

export interface FakeProcess extends IpcChild<FakeCommand, FakeAnswer> {
  url: string;
}

export async function startFakeProcess(): Promise<FakeProcess> {
  const { first, child } = await startIpcChild<FakeCommand, FakeAnswer>('fake-process.ts', 'fake Ollama');
  return { ...child, url: (first as { url: string }).url };
}

/** Clients following Easel's live streams, in a process of their own (test/bench/followers-process.ts). */
export type FollowersProcess = IpcChild<FollowersCommand, FollowersAnswer>;

export async function startFollowersProcess(): Promise<FollowersProcess> {
  return (await startIpcChild<FollowersCommand, FollowersAnswer>('followers-process.ts', 'followers')).child;
}

export interface NpmServer {
  url: string;
  /** The process that listens on the port: the server itself, not npm or a shell. */
  pid: number;
  /** Milliseconds from spawning `npm start` to the first 200 from GET /api/health. */
  startupMs: number;
  /** The last lines the server and npm wrote to stderr, for error messages. */
  stderrTail(): string;
  stop(): Promise<void>;
}

/** Runs the real `npm start` (whatever it does today) on a free port; resolves once /api/health answers 200. */
export async function startNpmServer(options: { ollamaUrl: string; dataDir: string; nodeOptions?: string; flags?: string[] }): Promise<NpmServer> {
  const port = await findFreePort();
  const env: NodeJS.ProcessEnv = { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false' };
  for (const key of Object.keys(env)) if (key.startsWith('EASEL_') || key === 'NODE_OPTIONS' || key === 'OLLAMA_HOST') delete env[key];
  if (options.nodeOptions) env.NODE_OPTIONS = options.nodeOptions;
  // A later flag wins: `flags` may name an image backend.
  const flags = ['--port', String(port), '--data-dir', options.dataDir, '--ollama-url', options.ollamaUrl, '--image-backend', 'none', ...(options.flags ?? [])];
  const started = performance.now();
  const npm = spawn('npm', ['start', '--', ...flags], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  npm.stderr?.on('data', (part: Buffer) => (stderr = (stderr + part.toString('utf8')).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const healthy = await Promise.race([waitForHealth(url, 60_000), exited.then((code) => `npm start exited (${code})`)]);
  if (healthy !== true) {
    npm.kill('SIGKILL');
    throw new Error(`npm start did not answer GET /api/health: ${healthy}\n${stderr}`);
  }
  const startupMs = performance.now() - started;
  const pid = findListeningPid(port, npm.pid as number);
  if (pid === undefined) throw new Error(`no process under npm (pid ${npm.pid}) listens on port ${port}`);
  return {
    url,
    pid,
    startupMs,
    stderrTail: () => stderr,
    // npm forwards SIGTERM to its child (docs/DESIGN.md, "The process"); the server stops within 4.5 s.
    stop: () => stopChild(npm, 'SIGTERM', undefined, pid),
  };
}

async function stopChild(child: ChildProcess, signal: NodeJS.Signals, polite?: () => void, serverPid?: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (polite) polite();
  else child.kill(signal);
  const timer = setTimeout(() => {
    child.kill('SIGKILL');
    if (serverPid !== undefined) killQuietly(serverPid);
  }, 8_000);
  await exited;
  clearTimeout(timer);
  // The server's own exit may lag npm's by a moment; wait so the next measurement starts on a quiet machine.
  for (let i = 0; serverPid !== undefined && isAlive(serverPid) && i < 100; i++) await sleep(50);
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Polls GET /api/health every 5 ms; true at the first 200, else the last failure once `timeoutMs` passed. */
async function waitForHealth(url: string, timeoutMs: number): Promise<true | string> {
  const deadline = performance.now() + timeoutMs;
  let last = 'no answer';
  while (performance.now() < deadline) {
    const status = await new Promise<number | string>((resolve) => {
      const req = request(`${url}/api/health`, { agent: false, timeout: 5_000 }, (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      });
      req.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      req.once('timeout', () => req.destroy(new Error('timeout')));
      req.end();
    });
    if (status === 200) return true;
    last = String(status);
    await sleep(5);
  }
  return last;
}

/** The process among `ancestor`'s descendants holding the socket that listens on `port`. */
function findListeningPid(port: number, ancestor: number): number | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // fields: sl local_address rem_address st … inode (10th); 0A is LISTEN.
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === '0A' && fields[9]) inodes.add(fields[9]);
    }
  }
  for (const pid of listDescendants(ancestor)) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (match && inodes.has(match[1] as string)) return pid;
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

function listDescendants(ancestor: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name may hold spaces and parentheses: the fields start after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(Number(entry), ppid);
    } catch {
      // exited meanwhile
    }
  }
  const found: number[] = [];
  const queue = [ancestor];
  while (queue.length > 0) {
    const parent = queue.shift() as number;
    for (const [pid, ppid] of parents) {
      if (ppid === parent) {
        found.push(pid);
        queue.push(pid);
      }
    }
  }
  return found;
}

/**
 * CPU time of one process, all its threads (V8's GC helpers and libuv's pool included), in nanoseconds: the sum of
 * /proc/PID/task/TID/schedstat's first field for the threads alive now, plus what the threads that have ended used,
 * which only /proc/PID/stat's utime + stime (10 ms ticks, every thread it ever had) still counts: that sum less the
 * live threads' own ticks. Falls back to /proc/PID/stat alone where schedstat is missing.
 */
export function readCpuNs(pid: number): number {
  const groupTicks = readStatTicks(`/proc/${pid}/stat`);
  try {
    readFileSync(`/proc/${pid}/schedstat`, 'utf8');
  } catch {
    return groupTicks * TICK_NS;
  }
  let liveNs = 0;
  let liveTicks = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      liveTicks += readStatTicks(`/proc/${pid}/task/${tid}/stat`);
      liveNs += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // a thread that ended meanwhile: the group's ticks count it
    }
  }
  // A thread that ended between the two readings makes the difference negative for a moment: nothing ended before.
  return liveNs + Math.max(0, groupTicks - liveTicks) * TICK_NS;
}

/** USER_HZ is 100 on Linux: utime and stime count 10 ms ticks. */
const TICK_NS = 10_000_000;

/** utime + stime of a /proc stat file: fields 14 and 15, 12 and 13 after the command name. */
function readStatTicks(file: string): number {
  const stat = readFileSync(file, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** Resident memory of a process in MB (VmRSS). */
export function readRssMb(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return kb / 1024;
}

/** The machine's load: cores and the 1/5/15-minute load averages. */
export function describeLoad(): string {
  const [one, five, fifteen] = readFileSync('/proc/loadavg', 'utf8').split(' ');
  return `load average ${one} ${five} ${fifteen}`;
}
