// Speed and memory targets. Run with `npm run bench`; exits 1 when a target is missed.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// Never part of `npm test`: timings depend on the machine, so they are measured here, not asserted in tests.
import { createWithholder, parseReply, renderContext, type ContextEntry } from '../../server/protocol/index.ts';
import { createFakeOllama, scriptReply } from '../fakes/fake-ollama.ts';
import { readSse } from '../helpers/sse.ts';

interface Row {
  name: string;
  value: number;
  unit: string;
  target: string;
  ok: boolean;
}
const rows: Row[] = [];
const record = (name: string, value: number, unit: string, target: string, ok: boolean) => rows.push({ name, value, unit, target, ok });

const METADATA = { prompt: 'a tabby cat wearing a blue wizard hat', generate_image: true, steps: 20, cfg: 7, seed: -1 };

function makeReply(chars: number): string {
  const words = ['The ', 'cat ', 'wears ', 'a ', 'hat—', 'with ', 'a ', '{brim} ', 'and ', '--stars-- ', '\n', '- a list item\n', '----\n'];
  let text = '';
  for (let i = 0; text.length < chars; i++) text += words[i % words.length];
  return `${text}\n---\n${JSON.stringify(METADATA)}`;
}

function withholdMs(reply: string, chunkSize: number): number {
  const start = performance.now();
  const withholder = createWithholder();
  for (let i = 0; i < reply.length; i += chunkSize) withholder.push(reply.slice(i, i + chunkSize));
  withholder.finish();
  return performance.now() - start;
}

function best(runs: number, fn: () => number): number {
  let min = Infinity;
  for (let i = 0; i < runs; i++) min = Math.min(min, fn());
  return min;
}

// 1. Withholding is linear in the reply length (seed 002: never rescan per chunk).
const small = makeReply(100_000);
const large = makeReply(1_000_000);
withholdMs(large, 4);
const smallMs = best(5, () => withholdMs(small, 4));
const largeMs = best(5, () => withholdMs(large, 4));
const mbPerSecond = large.length / 1e6 / (largeMs / 1000);
record('withhold 1 MB in 4-char chunks', round(mbPerSecond), 'MB/s', '≥ 2 MB/s (a model emits < 1 kB/s)', mbPerSecond >= 2);
const ratio = largeMs / smallMs;
record('withhold time ratio 1 MB / 100 kB', round(ratio), '×', '≤ 20× (linear ≈ 10×)', ratio <= 20);

// 2. Parsing a typical reply with a repair.
const typical = `Sure! Here is your cat.\n---\n{'prompt': 'a tabby cat', 'generate_image': True, 'steps': '20', 'cfg': 7, 'seed': -1,}`;
const parses = 20_000;
const parseStart = performance.now();
for (let i = 0; i < parses; i++) parseReply(typical);
const parseUs = ((performance.now() - parseStart) * 1000) / parses;
record('parseReply with repairs', round(parseUs), 'µs', '≤ 200 µs', parseUs <= 200);

// 3. Rendering and trimming a long working context.
const context: ContextEntry[] = [];
for (let i = 0; i < 500; i++) {
  context.push({ kind: 'user', text: `message ${i} about the picture, with some detail`.repeat(3) });
  context.push({ kind: 'assistant', text: `reply ${i}, a question back`.repeat(3), metadata: METADATA });
}
const renderStart = performance.now();
for (let i = 0; i < 100; i++) renderContext(context, { numCtx: 8192 });
const renderMs = (performance.now() - renderStart) / 100;
record('renderContext, 1000 entries → 8192 tokens', round(renderMs), 'ms', '≤ 10 ms', renderMs <= 10);

// 4. Whole turns through the HTTP API against the real server in its own process (so the fake's
// records do not count), real ollama client, fake Ollama: per-turn overhead, and the server's live
// heap after a full GC, which shows a leak where RSS only shows V8 growing lazily.
const fake = await createFakeOllama();
const dataDir = mkdtempSync(join(tmpdir(), 'easel-bench-'));
const server = spawn(
  process.execPath,
  ['--expose-gc', '--import', 'tsx', 'test/bench/server-process.ts', '--port', '0', '--data-dir', dataDir, '--ollama-url', fake.url],
  { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] },
);
const ask = () =>
  new Promise<{ url: string; heapUsedMb: number }>((resolve) => {
    server.once('message', (answer) => resolve(answer as { url: string; heapUsedMb: number }));
    server.send('heap');
  });
const baseUrl = (await new Promise<{ url: string }>((resolve) => server.once('message', (m) => resolve(m as { url: string })))).url;
const post = (path: string, body: unknown) =>
  fetch(baseUrl + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
let id = '';
async function turn(i: number) {
  // Conversations of 10 turns: the steady state, where a leak shows as growth per request.
  if (i % 10 === 0) id = ((await (await post('/api/conversations', {})).json()) as { id: string }).id;
  fake.enqueue(scriptReply(`Reply number ${i}. What next?`, METADATA));
  return readSse(await post(`/api/conversations/${id}/messages`, { text: `message ${i}` }));
}
for (let i = 0; i < 100; i++) await turn(i);
const heapBefore = (await ask()).heapUsedMb;
const turns = 500;
const turnStart = performance.now();
for (let i = 0; i < turns; i++) await turn(i);
const turnMs = (performance.now() - turnStart) / turns;
const heapAfter = (await ask()).heapUsedMb;
const rssMb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))?.[1]) / 1024;
record(`turn over HTTP incl. SQLite (${turns} turns)`, round(turnMs), 'ms', '≤ 50 ms', turnMs <= 50);
record(`server live heap growth over ${turns} turns`, round(heapAfter - heapBefore), 'MB', '≤ 3 MB (no leak)', heapAfter - heapBefore <= 3);
record('server resident memory after the run', round(rssMb), 'MB', '≤ 250 MB', rssMb <= 250);
server.kill('SIGTERM');
await new Promise((resolve) => server.once('exit', resolve));
rmSync(dataDir, { recursive: true, force: true });
await fake.close();

const width = Math.max(...rows.map((r) => r.name.length));
for (const row of rows) {
  console.log(`${row.ok ? 'ok  ' : 'MISS'} ${row.name.padEnd(width)}  ${String(row.value).padStart(8)} ${row.unit.padEnd(5)} target ${row.target}`);
}
const missed = rows.filter((r) => !r.ok).length;
console.log(missed === 0 ? `\nall ${rows.length} targets met` : `\n${missed} of ${rows.length} targets missed`);
process.exit(missed === 0 ? 0 : 1);

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
