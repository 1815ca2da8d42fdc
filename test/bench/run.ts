// Speed and memory targets (docs/BENCHMARKS.md). `npm run bench` prints one table and exits 1 when a
// target is missed; `-- --quick` runs fewer rounds; `-- --profile` (or `--profile-page`) profiles the server
// during floods instead; `-- --only flood,latency` runs some sections; `-- --markdown` also prints the table
// as Markdown; `-- --verbose` prints every turn's time and the worst token latencies (and the followers' checks). Never part of
// `npm test`: timings depend on the machine.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { strToU8, zipSync } from 'fflate';
import { MAX_REPLY_CHARS } from '../../server/protocol/index.ts';
import {
  createArrivalTracker,
  createConversation,
  readDeltaTexts,
  readDirect,
  readTurns,
  sendApiMessage,
  sendPageMessage,
  type StreamOptions,
  type StreamResult,
} from './clients.ts';
import { formatSelfTimes, summariseProfile, type CpuProfile } from './cpu-profile.ts';
import { openInspector } from './inspector.ts';
import { measureBatches } from './batches.ts';
import { measureGallery } from './gallery.ts';
import { measureProtocol } from './micro.ts';
import { describeLoad, readCpuNs, readRssMb, sleep, startFakeProcess, startFollowersProcess, startNpmServer, type FakeProcess, type FollowersProcess, type NpmServer } from './processes.ts';
import { floodChunks, floodText, pacedText, pacedToken } from './replies.ts';
import { formatMarkdown, formatTable, judge, median, quantile, quietestSum, type Figure } from './stats.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const SECTIONS = ['protocol', 'startup', 'flood', 'latency', 'growth', 'leak', 'hostile', 'followers', 'gallery', 'batches'] as const;
type Section = (typeof SECTIONS)[number];

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    'profile-page': { type: 'boolean', default: false },
    only: { type: 'string' },
    markdown: { type: 'boolean', default: false },
    verbose: { type: 'boolean', default: false },
  },
});
const quick = flags.quick === true;
const only = flags.only === undefined ? new Set<string>(SECTIONS) : new Set(flags.only.split(',').map((s) => s.trim()));
for (const name of only) if (!(SECTIONS as readonly string[]).includes(name)) throw new Error(`--only: unknown section "${name}"; the sections are ${SECTIONS.join(', ')}`);
const runs = (section: Section) => only.has(section);

const FLOOD_TOKENS = 100_000;
const SMALL_FLOOD_TOKENS = 10_000;
/** A turn this short is almost all fixed cost (request, storage, metadata): subtracted before comparing sizes. */
const TINY_FLOOD_TOKENS = 100;
const PACED_TOKENS = quick ? 300 : 500;
const PACE_MS = 10;
const TURNS = 200;
const REPLY_CHARS = 4_000;
/** Clients following the conversation a reply is written in, reading their streams. */
const FOLLOWERS = 20;
/**
 * Each round of the followed replies: pairs of paced replies of FOLLOWED_TOKENS, one with FOLLOWERS followers,
 * one with none, the order alternating; short replies interleaved, so a burst of the machine's other work lands
 * on both alike.
 */
const FOLLOWED_TOKENS = 200;
const FOLLOWED_PAIRS = quick ? 3 : 6;
/** Clients connected and following while nothing happens: half a conversation each, half the library. */
const IDLE_FOLLOWERS = 100;
/** An idle stretch whose CPU is read (see measureIdleFollowers). */
const IDLE_WINDOW_MS = 5_000;
/** Time given to what a burst of work leaves running (V8's compiler and collector threads) before a reading. */
const SETTLE_MS = 3_000;
const ROUNDS = {
  protocol: quick ? 3 : 5,
  startup: quick ? 3 : 5,
  flood: quick ? 3 : 5,
  latency: quick ? 1 : 3,
  growth: quick ? 1 : 2,
  leakTurns: quick ? 200 : 500,
  followers: quick ? 1 : 3,
  idle: quick ? 1 : 3,
};

if (floodText(FLOOD_TOKENS).length + 200 > MAX_REPLY_CHARS) throw new Error('the flood would pass Easel\'s reply cap; use shorter tokens');

const figures: Figure[] = [];
const log = (line: string) => process.stderr.write(`${line}\n`);
const tempDirs: string[] = [];
const newDataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'easel-bench-'));
  tempDirs.push(dir);
  return dir;
};

log(`Easel bench${quick ? ' (quick)' : ''}: ${cpus().length} cores, ${describeLoad()}, Node ${process.version}`);
log(`npm start runs: ${(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start}`);

const fake = await startFakeProcess();
let exitCode = 0;
try {
  if (flags.profile || flags['profile-page']) await profileServer(fake, flags['profile-page'] ? 'page' : 'api');
  else exitCode = await measureAll(fake);
} finally {
  await fake.close();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
}
process.exit(exitCode);

async function measureAll(fake: FakeProcess): Promise<number> {
  if (runs('protocol')) {
    log('protocol: withholding, parseReply, renderContext…');
    figures.push(...measureProtocol(ROUNDS.protocol));
  }
  if (runs('startup')) await measureStartup(fake);
  if (runs('flood') || runs('latency') || runs('growth')) {
    const server = await startNpmServer({ ollamaUrl: fake.url, dataDir: newDataDir() });
    try {
      if (runs('flood')) await measureFloods(fake, server);
      if (runs('latency')) await measureLatency(fake, server);
      if (runs('growth')) await measureGrowth(fake, server);
    } catch (error) {
      log(`server stderr:\n${server.stderrTail()}`);
      throw error;
    } finally {
      await server.stop();
    }
  }
  if (runs('leak')) await measureLeak(fake);
  if (runs('hostile')) await measureHostileImports(fake);
  if (runs('followers')) await measureFollowers(fake);
  if (runs('gallery')) figures.push(...(await measureGallery({ ollamaUrl: fake.url, dataDir: newDataDir(), quick, log })));
  if (runs('batches')) figures.push(...(await measureBatches({ ollamaUrl: fake.url, dataDir: newDataDir(), quick, log })));

  const judged = figures.map(judge);
  console.log(`\n${formatTable(judged)}`);
  if (flags.markdown) console.log(`\n${formatMarkdown(judged)}`);
  const missed = judged.filter((f) => f.status === 'MISSED').length;
  const targets = judged.filter((f) => f.status !== 'info').length;
  console.log(`\n${describeLoad()} at the end. ${missed === 0 ? `All ${targets} targets met.` : `${missed} of ${targets} targets MISSED.`}`);
  return missed === 0 ? 0 : 1;
}

// --- start-up and idle memory: the real `npm start`, on a data folder that already exists -------------
async function measureStartup(fake: FakeProcess): Promise<void> {
  log(`startup: ${ROUNDS.startup} × npm start (after one to create the data folder)…`);
  const dataDir = newDataDir();
  await (await startNpmServer({ ollamaUrl: fake.url, dataDir })).stop();
  const startupMs: number[] = [];
  const idleMb: number[] = [];
  for (let round = 0; round < ROUNDS.startup; round++) {
    const server = await startNpmServer({ ollamaUrl: fake.url, dataDir });
    startupMs.push(server.startupMs);
    // Idle: started, health answered, its checks of Ollama and the image backend done, nothing asked since.
    await sleep(1_000);
    idleMb.push(readRssMb(server.pid));
    await server.stop();
  }
  // This machine's floor at the moment: how long Node itself takes to start and exit (it varies by half here).
  const bareNodeMs: number[] = [];
  for (let round = 0; round < ROUNDS.startup; round++) {
    const started = performance.now();
    await new Promise((resolve) => spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' }).once('exit', resolve));
    bareNodeMs.push(performance.now() - started);
  }
  figures.push(
    { name: '`node -e 0`, start to exit (the machine\'s floor now)', rounds: bareNodeMs, unit: 'ms' },
    { name: '`npm start` to first GET /api/health', rounds: startupMs, unit: 'ms', target: { kind: 'max', limit: 600 } },
    { name: 'idle RSS of the server process', rounds: idleMb, unit: 'MB', target: { kind: 'max', limit: 80 } },
  );
}

// --- throughput, CPU per token, memory under load, linearity -----------------------------------------
interface PathRun {
  ms: number;
  cpuNs: number;
}

type Send = (url: string, id: string, text: string, options?: StreamOptions) => Promise<StreamResult>;

/** One flood through Easel: a new conversation, the fake primed, the server's CPU read around the request. */
async function floodThroughServer(fake: FakeProcess, server: NpmServer, send: Send, tokens: number): Promise<PathRun> {
  const id = await createConversation(server.url);
  await fake.ask({ type: 'flood', tokens });
  const cpuBefore = readCpuNs(server.pid);
  const result = await send(server.url, id, 'Describe a cat in a hat, at length.');
  const cpuAfter = readCpuNs(server.pid);
  await checkReply(server, id, result, floodText(tokens));
  return { ms: result.ms, cpuNs: cpuAfter - cpuBefore };
}

/** The stored reply is the whole flood, accepted: nothing was cut, lost or refused while the clock ran. */
async function checkReply(server: NpmServer, id: string, result: StreamResult, expected: string): Promise<void> {
  if (result.status !== 200 || !result.contentType.startsWith('text/event-stream')) {
    throw new Error(`expected an event stream, got ${result.status} ${result.contentType}: ${result.body.slice(0, 300)}`);
  }
  const last = (await readTurns(server.url, id)).at(-1);
  if (last?.role !== 'assistant' || last.status !== 'ok' || last.text !== expected) {
    throw new Error(
      `the reply was not delivered whole: ${last?.role} ${last?.status} ${JSON.stringify(last?.error)}, ${last?.text.length} of ${expected.length} characters`,
    );
  }
}

async function floodDirect(fake: FakeProcess, tokens: number): Promise<{ ms: number; cpuNs: number }> {
  await fake.ask({ type: 'flood', tokens });
  const cpuBefore = process.cpuUsage();
  const result = await readDirect(fake.url);
  const cpu = process.cpuUsage(cpuBefore);
  const expected = floodChunks(tokens).join('');
  if (result.text !== expected) throw new Error(`the direct client read ${result.text.length} of ${expected.length} characters`);
  return { ms: result.ms, cpuNs: (cpu.user + cpu.system) * 1000 };
}

async function measureFloods(fake: FakeProcess, server: NpmServer): Promise<void> {
  log(`flood: 4 × ${FLOOD_TOKENS} tokens through the API (warm-up, memory), then ${ROUNDS.flood} rounds of direct, API, page…`);
  for (let i = 0; i < 4; i++) await floodThroughServer(fake, server, sendApiMessage, FLOOD_TOKENS);
  const afterFloodsMb = readRssMb(server.pid);
  await floodDirect(fake, FLOOD_TOKENS);
  await floodThroughServer(fake, server, sendPageMessage, FLOOD_TOKENS);

  const direct: number[] = [];
  const directCpu: number[] = [];
  const apiRatio: number[] = [];
  const pageRatio: number[] = [];
  const apiCpu: number[] = [];
  const pageCpu: number[] = [];
  const linear: number[] = [];
  const linearCpu: number[] = [];
  for (let round = 0; round < ROUNDS.flood; round++) {
    const d = await floodDirect(fake, FLOOD_TOKENS);
    const api = await floodThroughServer(fake, server, sendApiMessage, FLOOD_TOKENS);
    const page = await floodThroughServer(fake, server, sendPageMessage, FLOOD_TOKENS);
    const large: PathRun[] = [api];
    const small: PathRun[] = [];
    const tiny: PathRun[] = [];
    for (let i = 0; i < 2; i++) large.push(await floodThroughServer(fake, server, sendApiMessage, FLOOD_TOKENS));
    for (let i = 0; i < 9; i++) {
      small.push(await floodThroughServer(fake, server, sendApiMessage, SMALL_FLOOD_TOKENS));
      tiny.push(await floodThroughServer(fake, server, sendApiMessage, TINY_FLOOD_TOKENS));
    }
    direct.push(FLOOD_TOKENS / (d.ms / 1000));
    directCpu.push(d.cpuNs / FLOOD_TOKENS / 1000);
    apiRatio.push(d.ms / api.ms);
    pageRatio.push(d.ms / page.ms);
    apiCpu.push(api.cpuNs / FLOOD_TOKENS / 1000);
    pageCpu.push(page.cpuNs / FLOOD_TOKENS / 1000);
    // Whole turns, less a tiny turn's fixed cost: the part that grows with the tokens. (From the first delta
    // on is no measure: one network read can bring thousands of tokens before the first delta.)
    // The median of several runs of each size (3 × 100k, 9 × 10k, 9 × 100): a larger turn meets more
    // collections, so the least of each would favour the small ones; the median keeps the proportions.
    const middle = (runs: PathRun[], of: (run: PathRun) => number) => median(runs.map(of));
    const ms = (run: PathRun) => run.ms;
    const cpu = (run: PathRun) => run.cpuNs;
    linear.push((middle(large, ms) - middle(tiny, ms)) / (middle(small, ms) - middle(tiny, ms)));
    linearCpu.push((middle(large, cpu) - middle(tiny, cpu)) / (middle(small, cpu) - middle(tiny, cpu)));
    const cpuMs = (runs: PathRun[]) => runs.map((run) => (run.cpuNs / 1e6).toFixed(1)).join(', ');
    log(`  round ${round + 1}: direct ${d.ms.toFixed(0)} ms, API ${api.ms.toFixed(0)} ms (CPU ${cpuMs(large)} ms; ${SMALL_FLOOD_TOKENS / 1000}k: ${cpuMs(small)}; ${TINY_FLOOD_TOKENS}: ${cpuMs(tiny)}), page ${page.ms.toFixed(0)} ms`);
  }
  figures.push(
    { name: `throughput, direct \`ollama\` client (${FLOOD_TOKENS / 1000}k tokens)`, rounds: direct, unit: 'tok/s' },
    { name: 'throughput, JSON API path / direct client', rounds: apiRatio, unit: '×', target: { kind: 'min', limit: 0.9 } },
    { name: 'throughput, page (HTML) path / direct client', rounds: pageRatio, unit: '×', target: { kind: 'min', limit: 0.8 } },
    { name: 'server CPU per token, JSON API path', rounds: apiCpu, unit: 'µs', target: { kind: 'max', limit: 3 } },
    { name: 'server CPU per token, page path', rounds: pageCpu, unit: 'µs' },
    { name: 'direct client\'s CPU per token', rounds: directCpu, unit: 'µs' },
    { name: `RSS of the server process after 4 floods of ${FLOOD_TOKENS / 1000}k tokens`, rounds: [afterFloodsMb], unit: 'MB', target: { kind: 'max', limit: 110 } },
    { name: `${FLOOD_TOKENS / 1000}k vs ${SMALL_FLOOD_TOKENS / 1000}k tokens, server CPU of the turn less a ${TINY_FLOOD_TOKENS}-token turn's (API)`, rounds: linearCpu, unit: '×', target: { kind: 'range', limit: 9, upper: 11 }, note: 'linear' },
    { name: `${FLOOD_TOKENS / 1000}k vs ${SMALL_FLOOD_TOKENS / 1000}k tokens, time of the turn less a ${TINY_FLOOD_TOKENS}-token turn's (API)`, rounds: linear, unit: '×' },
  );
}

// --- added latency per token at 100 tok/s -------------------------------------------------------------
/** Per token: arrival at the client minus the moment the fake handed its line to the socket, in ms. */
async function pacedRun(
  fake: FakeProcess,
  read: (onData: (text: string, atNs: number) => void) => Promise<void>,
  tokens = PACED_TOKENS,
): Promise<{ latencies: number[]; gaps: number[]; sentNs: number[] }> {
  await fake.ask({ type: 'paced', tokens, delayMs: PACE_MS });
  const tracker = createArrivalTracker(tokens, pacedToken);
  await read((text, atNs) => tracker.onData(text, atNs));
  const { sentNs = [] } = await fake.ask({ type: 'sent' });
  if (tracker.found !== tokens || sentNs.length !== tokens) {
    throw new Error(`latency run: found ${tracker.found} of ${tokens} tokens at the client, ${sentNs.length} sent`);
  }
  const latencies = tracker.arrivals.map((at, i) => (at - (sentNs[i] as number)) / 1e6);
  if (flags.verbose) log(`  worst: ${latencies.map((l, i) => [i, l] as const).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([i, l]) => `#${i} ${l.toFixed(1)}`).join(', ')}`);
  const gaps = sentNs.slice(1).map((at, i) => (at - (sentNs[i] as number)) / 1e6 - PACE_MS);
  return { latencies, gaps, sentNs };
}

async function measureLatency(fake: FakeProcess, server: NpmServer): Promise<void> {
  log(`latency: ${ROUNDS.latency} rounds of ${PACED_TOKENS} tokens at ${1000 / PACE_MS} tok/s, direct, API and page…`);
  const rows = { directP50: [] as number[], directP99: [] as number[], apiP50: [] as number[], apiP99: [] as number[], pageP50: [] as number[], pageP99: [] as number[], jitter: [] as number[] };
  const throughServer = (send: Send) => async (onData: (text: string, atNs: number) => void) => {
    const id = await createConversation(server.url);
    const result = await send(server.url, id, 'Talk slowly.', { onData, keepBody: true });
    await checkReply(server, id, result, pacedText(PACED_TOKENS));
  };
  for (let round = 0; round < ROUNDS.latency; round++) {
    const direct = await pacedDirect(fake);
    const api = await pacedRun(fake, throughServer(sendApiMessage));
    const page = await pacedRun(fake, throughServer(sendPageMessage));
    const directP50 = quantile(direct.latencies, 0.5);
    rows.directP50.push(directP50);
    rows.directP99.push(quantile(direct.latencies, 0.99));
    // What Easel adds: the path's quantile minus the hop the direct client also pays (its median).
    rows.apiP50.push(quantile(api.latencies, 0.5) - directP50);
    rows.apiP99.push(quantile(api.latencies, 0.99) - directP50);
    rows.pageP50.push(quantile(page.latencies, 0.5) - directP50);
    rows.pageP99.push(quantile(page.latencies, 0.99) - directP50);
    rows.jitter.push(quantile([...direct.gaps, ...api.gaps, ...page.gaps], 0.99));
  }
  figures.push(
    { name: 'added latency per token at 100 tok/s, API path, p50', rounds: rows.apiP50, unit: 'ms', target: { kind: 'max', limit: 1 } },
    { name: 'added latency per token at 100 tok/s, API path, p99', rounds: rows.apiP99, unit: 'ms', target: { kind: 'max', limit: 5 } },
    { name: 'added latency per token at 100 tok/s, page path, p50', rounds: rows.pageP50, unit: 'ms', target: { kind: 'max', limit: 1 } },
    { name: 'added latency per token at 100 tok/s, page path, p99', rounds: rows.pageP99, unit: 'ms', target: { kind: 'max', limit: 5 } },
    { name: 'latency fake → direct client, p50', rounds: rows.directP50, unit: 'ms' },
    { name: 'latency fake → direct client, p99', rounds: rows.directP99, unit: 'ms' },
    { name: 'fake\'s pacing: gap − 10 ms, p99 (measured from real sends)', rounds: rows.jitter, unit: 'ms' },
  );
}

/** The direct client's paced run: each part of the `ollama` client is one token, in order. */
async function pacedDirect(fake: FakeProcess): Promise<{ latencies: number[]; gaps: number[] }> {
  await fake.ask({ type: 'paced', tokens: PACED_TOKENS, delayMs: PACE_MS });
  const arrivals: number[] = [];
  await readDirect(fake.url, (atNs) => arrivals.push(atNs));
  const { sentNs = [] } = await fake.ask({ type: 'sent' });
  if (sentNs.length !== PACED_TOKENS) throw new Error(`latency run: the fake sent ${sentNs.length} of ${PACED_TOKENS} tokens`);
  return {
    latencies: sentNs.map((sent, i) => ((arrivals[i] as number) - sent) / 1e6),
    gaps: sentNs.slice(1).map((at, i) => (at - (sentNs[i] as number)) / 1e6 - PACE_MS),
  };
}

// --- cost per turn as a conversation grows ------------------------------------------------------------
async function measureGrowth(fake: FakeProcess, server: NpmServer): Promise<void> {
  log(`growth: ${ROUNDS.growth} round(s) of two ${TURNS}-turn conversations with ${REPLY_CHARS / 1000} kB replies, API and page turn by turn…`);
  const paths = [
    ['api', sendApiMessage],
    ['page', sendPageMessage],
  ] as const;
  const ratios = { api: [] as number[], page: [] as number[] };
  const early = { api: [] as number[], page: [] as number[] };
  const converse = async (ids: Record<'api' | 'page', string>, turns: number, times: Record<'api' | 'page', number[]>) => {
    await fake.ask({ type: 'prose', turns: 2 * turns, chars: REPLY_CHARS, flood: true });
    // Turn by turn on both paths, so a change in the machine's load touches both alike.
    for (let turn = 0; turn < turns; turn++) {
      for (const [path, send] of paths) {
        const result = await send(server.url, ids[path], `Turn ${turn}: make the hat a little bluer, please.`);
        if (result.status !== 200) throw new Error(`turn ${turn} on the ${path} path: ${result.status}`);
        times[path].push(result.ms);
      }
    }
  };
  // Warm-up: the first turns of a fresh server also compile its code.
  await converse({ api: await createConversation(server.url), page: await createConversation(server.url) }, 20, { api: [], page: [] });
  for (let round = 0; round < ROUNDS.growth; round++) {
    const ids = { api: await createConversation(server.url), page: await createConversation(server.url) };
    const times = { api: [] as number[], page: [] as number[] };
    await converse(ids, TURNS, times);
    for (const [path] of paths) {
      const turns = await readTurns(server.url, ids[path]);
      const last = turns.at(-1);
      if (turns.length !== 2 * TURNS || last?.status !== 'ok' || !last.text.startsWith(`Turn `)) {
        throw new Error(`the ${path} conversation holds ${turns.length} turns, the last ${last?.status}: ${last?.text.slice(0, 80)}`);
      }
      if (flags.verbose) log(`  ${path} turn times: ${times[path].map((t) => t.toFixed(0)).join(' ')}`);
      // The lower quartile of each ten turns: on a shared machine, noise only ever adds time.
      const first = quantile(times[path].slice(10, 20), 0.25);
      const late = quantile(times[path].slice(190, 200), 0.25);
      ratios[path].push(late / first);
      early[path].push(first);
      log(`  ${path}: turns 11–20 ${first.toFixed(1)} ms, turns 191–200 ${late.toFixed(1)} ms`);
    }
  }
  figures.push(
    { name: `turn 191–200 / turn 11–20 time, ${REPLY_CHARS / 1000} kB replies, API`, rounds: ratios.api, unit: '×', target: { kind: 'max', limit: 1.3 } },
    { name: `turn 191–200 / turn 11–20 time, ${REPLY_CHARS / 1000} kB replies, page`, rounds: ratios.page, unit: '×', target: { kind: 'max', limit: 1.3 } },
    { name: `turn 11–20 time, ${REPLY_CHARS / 1000} kB replies, API`, rounds: early.api, unit: 'ms' },
    { name: `turn 11–20 time, ${REPLY_CHARS / 1000} kB replies, page`, rounds: early.page, unit: 'ms' },
  );
}

// --- the leak detector: live heap after a full GC, over many short turns ------------------------------
async function measureLeak(fake: FakeProcess): Promise<void> {
  const turns = ROUNDS.leakTurns;
  log(`leak: 100 + ${turns} short turns against the server in a process that answers "heap after GC" over IPC…`);
  const dataDir = newDataDir();
  // Not `npm start`: only a process of our own can run a full GC on request. The same startServer runs.
  const server = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', 'test/bench/server-process.ts', '--port', '0', '--data-dir', dataDir, '--ollama-url', fake.url, '--image-backend', 'none'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ask = () =>
    new Promise<{ url: string; heapUsedMb: number }>((resolve) => {
      server.once('message', (answer) => resolve(answer as { url: string; heapUsedMb: number }));
      server.send('heap');
    });
  const { url } = await new Promise<{ url: string }>((resolve) => server.once('message', (m) => resolve(m as { url: string })));
  let id = '';
  const turn = async (i: number) => {
    // Conversations of 10 turns: the steady state, where a leak shows as growth per request.
    if (i % 10 === 0) id = await createConversation(url);
    const result = await sendApiMessage(url, id, `message ${i}`);
    if (result.status !== 200) throw new Error(`leak turn ${i}: ${result.status}`);
  };
  await fake.ask({ type: 'prose', turns: 100 + turns, chars: 40, flood: false });
  for (let i = 0; i < 100; i++) await turn(i);
  const heapBefore = (await ask()).heapUsedMb;
  const started = performance.now();
  for (let i = 0; i < turns; i++) await turn(i);
  const turnMs = (performance.now() - started) / turns;
  const heapAfter = (await ask()).heapUsedMb;
  server.kill('SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  figures.push(
    { name: 'a short turn over HTTP with SQLite', rounds: [turnMs], unit: 'ms', target: { kind: 'max', limit: 50 }, note: "Easel's overhead per turn" },
    { name: `server's live heap after GC, growth over ${turns} turns`, rounds: [heapAfter - heapBefore], unit: 'MB', target: { kind: 'max', limit: 3 }, note: 'leak detector' },
  );
}

// --- --profile: where the server's CPU goes during floods ---------------------------------------------
async function profileServer(fake: FakeProcess, path: 'api' | 'page'): Promise<void> {
  log(`profile: npm start, 1 warm-up flood, then V8's CPU profiler over 3 floods of ${FLOOD_TOKENS} tokens through the ${path} path…`);
  const server = await startNpmServer({ ollamaUrl: fake.url, dataDir: newDataDir(), nodeOptions: '--inspect-port=0' });
  const send = path === 'api' ? sendApiMessage : sendPageMessage;
  let profile: CpuProfile;
  try {
    await floodThroughServer(fake, server, send, FLOOD_TOKENS);
    const inspector = await openInspector(server.pid, server.stderrTail);
    await inspector.startProfiling(250);
    for (let i = 0; i < 3; i++) await floodThroughServer(fake, server, send, FLOOD_TOKENS);
    profile = await inspector.stopProfiling();
    inspector.close();
  } catch (error) {
    log(`server stderr:\n${server.stderrTail()}`);
    throw error;
  } finally {
    await server.stop();
  }
  const dir = join(ROOT, 'reports', 'bench');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `server-${path}-${new Date().toISOString().replace(/[:.]/g, '-')}.cpuprofile`);
  writeFileSync(file, JSON.stringify(profile));
  const summary = summariseProfile(profile, ROOT);
  console.log(`\nServer CPU profile, ${path} path, 3 floods of ${FLOOD_TOKENS} tokens: ${summary.busyMs.toFixed(0)} ms busy of ${summary.totalMs.toFixed(0)} ms sampled.`);
  console.log(`Saved as ${file} (open it in Chrome DevTools → Performance, or speedscope).\n`);
  console.log(formatSelfTimes(summary.functions, 20, 'function (self time)'));
  console.log(`\n${formatSelfTimes(summary.modules, 15, 'module or package')}`);
  console.log(`\n${describeLoad()} at the end.`);
}

// --- hostile imports: what a conversation.json shaped to exhaust Easel costs the server (issue 21) ------
async function measureHostileImports(fake: FakeProcess): Promise<void> {
  log('hostile: imports shaped to exhaust memory and the event loop…');
  const server = await startNpmServer({ ollamaUrl: fake.url, dataDir: newDataDir() });
  const shapes: Array<[string, Uint8Array]> = [
    ['30 MB of "["', new Uint8Array(30 * 1024 * 1024).fill(0x5b)],
    ['an object of a million members', strToU8(`{${Array.from({ length: 1_000_000 }, (_, i) => `"k${i}":1`).join(',')}}`)],
    ['a list of a million empty objects', strToU8(`[${Array(1_000_000).fill('{}').join(',')}]`)],
  ];
  try {
    for (const [what, manifest] of shapes) {
      const zip = zipSync({ 'conversation.json': manifest }, { level: 9 });
      const answerMs: number[] = [];
      const healthMs: number[] = [];
      const rssGrowth: number[] = [];
      for (let round = 0; round < ROUNDS.growth + 1; round++) {
        const before = readRssMb(server.pid);
        let peak = before;
        let importing = true;
        // /api/health asked every 20 ms while the import runs: its slowest answer is how long others waited.
        const probing = (async () => {
          while (importing) {
            const started = performance.now();
            await fetch(`${server.url}/api/health`).then((response) => response.arrayBuffer());
            healthMs.push(performance.now() - started);
            peak = Math.max(peak, readRssMb(server.pid));
            await sleep(20);
          }
        })();
        const started = performance.now();
        const response = await fetch(`${server.url}/api/conversations/import`, { method: 'POST', headers: { 'content-type': 'application/zip' }, body: zip });
        await response.arrayBuffer();
        answerMs.push(performance.now() - started);
        if (response.status !== 422) throw new Error(`hostile import "${what}" answered ${response.status}, not 422`);
        importing = false;
        await probing;
        rssGrowth.push(Math.max(peak, readRssMb(server.pid)) - before);
      }
      figures.push(
        { name: `import of ${what}: 422 answered in`, rounds: answerMs, unit: 'ms', target: { kind: 'max', limit: 500 } },
        { name: `import of ${what}: server RSS growth`, rounds: rssGrowth, unit: 'MB', target: { kind: 'max', limit: 100 } },
        { name: `import of ${what}: slowest GET /api/health meanwhile`, rounds: [Math.max(...healthMs)], unit: 'ms', target: { kind: 'max', limit: 250 } },
      );
    }
  } finally {
    await server.stop();
  }
}

// --- followers: clients following a conversation (GET /api/conversations/:id/events) or the library -------
async function measureFollowers(fake: FakeProcess): Promise<void> {
  const followers = await startFollowersProcess();
  try {
    await measureFollowedReplies(fake, followers);
    await measureIdleFollowers(fake, followers);
  } finally {
    await followers.close();
  }
}

/**
 * What followers cost the client writing: paced replies sent with nobody following their conversation and
 * with FOLLOWERS clients reading them live, in alternating pairs. The added latency compares the two sets'
 * latency quantiles, round by round; every follower must have read exactly the sender's deltas.
 */
async function measureFollowedReplies(fake: FakeProcess, followers: FollowersProcess): Promise<void> {
  log(`followers: ${ROUNDS.followers} round(s) of ${FOLLOWED_PAIRS} pairs of ${FOLLOWED_TOKENS}-token replies at ${1000 / PACE_MS} tok/s through the API, one with ${FOLLOWERS} followers of the conversation, one with none…`);
  const server = await startNpmServer({ ollamaUrl: fake.url, dataDir: newDataDir() });
  const follow = (id: string) => followers.ask({ type: 'follow', url: server.url, paths: Array.from({ length: FOLLOWERS }, () => `/api/conversations/${id}/events`) });
  const rows = { addedP50: [] as number[], addedP99: [] as number[], aloneP50: [] as number[], aloneP99: [] as number[], followerP50: [] as number[], followerP99: [] as number[], cpuAlone: [] as number[], cpuFollowed: [] as number[] };
  let followersChecked = 0;
  let followersExact = 0;
  let followersSameEvents = 0;
  const reply = async (followed: boolean) => {
    const id = await createConversation(server.url);
    if (followed) {
      await follow(id);
      await followers.ask({ type: 'track', tokens: FOLLOWED_TOKENS });
    }
    let result: StreamResult | undefined;
    const cpuBefore = readCpuNs(server.pid);
    const paced = await pacedRun(
      fake,
      async (onData) => {
        result = await sendApiMessage(server.url, id, 'Talk slowly.', { onData, keepBody: true });
      },
      FOLLOWED_TOKENS,
    );
    const cpuNs = readCpuNs(server.pid) - cpuBefore;
    if (result === undefined) throw new Error('the paced reply was never sent');
    await checkReply(server, id, result, pacedText(FOLLOWED_TOKENS));
    const followerLatencies: number[] = [];
    if (followed) {
      // After the sender's stream ended: each follower's copy is read once it holds its `done` (or 10 s passed).
      const sent = readDeltaTexts(result.body);
      const { followers: records = [] } = await followers.ask({ type: 'collect', timeoutMs: 10_000 });
      await followers.ask({ type: 'close' });
      if (records.length !== FOLLOWERS) throw new Error(`${records.length} of ${FOLLOWERS} followers answered`);
      for (const [index, record] of records.entries()) {
        followersChecked++;
        const text = record.deltas.join('');
        if (record.done && text === sent.join('')) followersExact++;
        else log(`  follower ${index + 1}: ${record.done ? 'done' : 'NO done'}, ${record.deltas.length} deltas, ${text.length} characters; the sender read ${sent.length} deltas, ${sent.join('').length} characters`);
        if (record.deltas.length === sent.length && record.deltas.every((delta, i) => delta === sent[i])) followersSameEvents++;
        for (const [i, at] of record.arrivals.entries()) if (Number.isFinite(at)) followerLatencies.push((at - (paced.sentNs[i] as number)) / 1e6);
      }
    }
    return { latencies: paced.latencies, cpuNs, followerLatencies };
  };
  try {
    // Warm-up: a fresh server's first turns also compile its code, the follow path's included.
    for (const followed of [true, false]) {
      const id = await createConversation(server.url);
      if (followed) await follow(id);
      await fake.ask({ type: 'prose', turns: 1, chars: 2_000, flood: false });
      const result = await sendApiMessage(server.url, id, 'Warm up.');
      if (result.status !== 200) throw new Error(`warm-up reply: ${result.status}`);
      if (followed) {
        await followers.ask({ type: 'collect', timeoutMs: 10_000 });
        await followers.ask({ type: 'close' });
      }
    }
    for (let round = 0; round < ROUNDS.followers; round++) {
      const alone = { latencies: [] as number[], cpuNs: 0 };
      const followed = { latencies: [] as number[], cpuNs: 0, followerLatencies: [] as number[] };
      for (let pair = 0; pair < FOLLOWED_PAIRS; pair++) {
        for (const withFollowers of pair % 2 === 0 ? [false, true] : [true, false]) {
          const run = await reply(withFollowers);
          const into = withFollowers ? followed : alone;
          into.latencies.push(...run.latencies);
          into.cpuNs += run.cpuNs;
          followed.followerLatencies.push(...run.followerLatencies);
        }
      }
      rows.addedP50.push(quantile(followed.latencies, 0.5) - quantile(alone.latencies, 0.5));
      rows.addedP99.push(quantile(followed.latencies, 0.99) - quantile(alone.latencies, 0.99));
      rows.aloneP50.push(quantile(alone.latencies, 0.5));
      rows.aloneP99.push(quantile(alone.latencies, 0.99));
      rows.followerP50.push(quantile(followed.followerLatencies, 0.5));
      rows.followerP99.push(quantile(followed.followerLatencies, 0.99));
      const tokens = FOLLOWED_PAIRS * FOLLOWED_TOKENS;
      rows.cpuAlone.push(alone.cpuNs / tokens / 1000);
      rows.cpuFollowed.push(followed.cpuNs / tokens / 1000);
      const ms = (values: number[]) => `${quantile(values, 0.5).toFixed(2)}/${quantile(values, 0.99).toFixed(2)}`;
      log(`  round ${round + 1}: fake → sender p50/p99 ${ms(alone.latencies)} ms alone, ${ms(followed.latencies)} ms with ${FOLLOWERS} followers; fake → followers ${ms(followed.followerLatencies)} ms; server CPU ${(alone.cpuNs / 1e6).toFixed(0)} / ${(followed.cpuNs / 1e6).toFixed(0)} ms (${describeLoad()})`);
    }
  } catch (error) {
    log(`server stderr:\n${server.stderrTail()}`);
    throw error;
  } finally {
    await followers.ask({ type: 'close' });
    await server.stop();
  }
  if (followersSameEvents !== followersChecked) log(`  ${followersChecked - followersSameEvents} of ${followersChecked} followers read the sender's text in other deltas`);
  const pairs = `${ROUNDS.followers} × ${FOLLOWED_PAIRS} replies`;
  figures.push(
    { name: `sender's added latency per token with ${FOLLOWERS} followers (vs none), ${1000 / PACE_MS} tok/s, API, p50`, rounds: rows.addedP50, unit: 'ms', target: { kind: 'max', limit: 1 } },
    { name: `sender's added latency per token with ${FOLLOWERS} followers (vs none), ${1000 / PACE_MS} tok/s, API, p99`, rounds: rows.addedP99, unit: 'ms', target: { kind: 'max', limit: 5 } },
    { name: `followers given exactly the sender's deltas (text and done), ${FOLLOWERS} × ${pairs}`, rounds: [(100 * followersExact) / followersChecked], unit: '%', target: { kind: 'min', limit: 100 } },
    { name: 'latency fake → sender, no followers, p50', rounds: rows.aloneP50, unit: 'ms' },
    { name: 'latency fake → sender, no followers, p99', rounds: rows.aloneP99, unit: 'ms' },
    { name: `latency fake → each of ${FOLLOWERS} followers, p50`, rounds: rows.followerP50, unit: 'ms' },
    { name: `latency fake → each of ${FOLLOWERS} followers, p99`, rounds: rows.followerP99, unit: 'ms' },
    { name: `server CPU per token at ${1000 / PACE_MS} tok/s, no followers`, rounds: rows.cpuAlone, unit: 'µs' },
    { name: `server CPU per token at ${1000 / PACE_MS} tok/s, ${FOLLOWERS} followers`, rounds: rows.cpuFollowed, unit: 'µs' },
  );
}

/**
 * What idle followers cost the server: each round a fresh `npm start`, ten conversations of one turn, then
 * IDLE_FOLLOWERS clients connected (half following those conversations, half the library) and nothing else.
 * Each follower's keep-alive comes 15 s after its snapshot, then every 15 s. The server's CPU is read over
 * three stretches after the last snapshot: 3–8 s (what connecting leaves), 12–18 s (a keep-alive for each), and
 * 18–29 s, second by second (idle between keep-alives). V8's memory reducer runs a few collections once, some
 * seconds after a burst of work or ~16 s after start-up, wherever that falls: the target is the quietest 5 s of
 * 18–29 s (a cost paid every second shows in all of them); the whole stretch is shown beside it.
 */
async function measureIdleFollowers(fake: FakeProcess, followers: FollowersProcess): Promise<void> {
  const conversations = 10;
  log(`followers: ${ROUNDS.idle} round(s) of ${IDLE_FOLLOWERS} idle followers (${IDLE_FOLLOWERS / 2} of ${conversations} conversations, ${IDLE_FOLLOWERS / 2} of the library) on a fresh server: RSS, and CPU over 29 s…`);
  const keepAlives = async () => (await followers.ask({ type: 'count' })).keepAlives ?? 0;
  const rows = { rss: [] as number[], quietest: [] as number[], between: [] as number[], connecting: [] as number[], keepAlive: [] as number[] };
  for (let round = 0; round < ROUNDS.idle; round++) {
    const server = await startNpmServer({ ollamaUrl: fake.url, dataDir: newDataDir() });
    try {
      await fake.ask({ type: 'prose', turns: conversations, chars: 400, flood: true });
      const ids: string[] = [];
      for (let i = 0; i < conversations; i++) {
        const id = await createConversation(server.url);
        const result = await sendApiMessage(server.url, id, `Conversation ${i}: a cat in a hat.`);
        if (result.status !== 200) throw new Error(`conversation ${i}: ${result.status}`);
        ids.push(id);
      }
      const paths = Array.from({ length: IDLE_FOLLOWERS }, (_, i) => (i % 2 === 0 ? `/api/conversations/${ids[(i / 2) % conversations]}/events` : '/api/events'));
      // Ten followers that come and go first: what the first follow compiles and loads is not the hundred's.
      await followers.ask({ type: 'follow', url: server.url, paths: paths.slice(0, 10) });
      await followers.ask({ type: 'close' });
      await sleep(SETTLE_MS);
      const rssBefore = readRssMb(server.pid);
      const { open } = await followers.ask({ type: 'follow', url: server.url, paths });
      const connected = performance.now();
      if (open !== IDLE_FOLLOWERS) throw new Error(`${open} of ${IDLE_FOLLOWERS} followers connected`);
      let rssPeak = readRssMb(server.pid);
      /** The server's CPU (ms) in steps of `stepMs`, and the keep-alives the followers read, from `fromMs` to `toMs` after the last snapshot. */
      const stretch = async (fromMs: number, toMs: number, stepMs = toMs - fromMs) => {
        await sleep(connected + fromMs - performance.now());
        const keepAlivesBefore = await keepAlives();
        const steps: number[] = [];
        let cpuNs = readCpuNs(server.pid);
        for (let at = fromMs + stepMs; at <= toMs; at += stepMs) {
          await sleep(connected + at - performance.now());
          const now = readCpuNs(server.pid);
          steps.push((now - cpuNs) / 1e6);
          cpuNs = now;
        }
        rssPeak = Math.max(rssPeak, readRssMb(server.pid));
        return { cpuMs: steps.reduce((sum, step) => sum + step, 0), steps, keepAlives: (await keepAlives()) - keepAlivesBefore };
      };
      const connecting = await stretch(SETTLE_MS, SETTLE_MS + IDLE_WINDOW_MS);
      const keepAlive = await stretch(12_000, 18_000);
      const between = await stretch(18_000, 29_000, 1_000);
      await followers.ask({ type: 'close' });
      if (connecting.keepAlives !== 0 || keepAlive.keepAlives !== IDLE_FOLLOWERS || between.keepAlives !== 0) {
        log(`  keep-alives read: ${connecting.keepAlives} in 3–8 s, ${keepAlive.keepAlives} in 12–18 s, ${between.keepAlives} in 18–29 s (expected 0, ${IDLE_FOLLOWERS}, 0)`);
      }
      const quietest = quietestSum(between.steps, IDLE_WINDOW_MS / 1000);
      rows.rss.push(rssPeak - rssBefore);
      rows.connecting.push(connecting.cpuMs);
      rows.keepAlive.push(keepAlive.cpuMs);
      rows.between.push(between.cpuMs);
      rows.quietest.push(quietest);
      const ms = (value: number) => value.toFixed(2);
      log(`  round ${round + 1}: RSS ${rssBefore.toFixed(1)} → ${rssPeak.toFixed(1)} MB; CPU ms: ${ms(connecting.cpuMs)} in 3–8 s, ${ms(keepAlive.cpuMs)} in 12–18 s (${keepAlive.keepAlives} keep-alives), per second of 18–29 s: ${between.steps.map(ms).join(' ')} (${describeLoad()})`);
    } catch (error) {
      log(`server stderr:\n${server.stderrTail()}`);
      throw error;
    } finally {
      await followers.ask({ type: 'close' });
      await server.stop();
    }
  }
  figures.push(
    { name: `server RSS growth with ${IDLE_FOLLOWERS} idle followers (${IDLE_FOLLOWERS / 2} of conversations, ${IDLE_FOLLOWERS / 2} of the library)`, rounds: rows.rss, unit: 'MB', target: { kind: 'max', limit: 10 } },
    { name: `server CPU idle between keep-alives, ${IDLE_FOLLOWERS} followers: quietest ${IDLE_WINDOW_MS / 1000} s of 18–29 s after`, rounds: rows.quietest, unit: 'ms', target: { kind: 'max', limit: 5 } },
    { name: `server CPU idle between keep-alives, ${IDLE_FOLLOWERS} followers: all 11 s of 18–29 s after`, rounds: rows.between, unit: 'ms' },
    { name: `server CPU over the ${IDLE_WINDOW_MS / 1000} s just after ${IDLE_FOLLOWERS} followers connected (3–8 s after)`, rounds: rows.connecting, unit: 'ms' },
    { name: `server CPU over the 6 s holding a keep-alive for each of ${IDLE_FOLLOWERS} followers (12–18 s after)`, rounds: rows.keepAlive, unit: 'ms' },
  );
}
