// Speed and memory targets. Run with `npm run bench`; exits 1 when a target is missed.
// Never part of `npm test`: timings depend on the machine, so they are measured here, not asserted in tests.
import { createWithholder, parseReply, renderContext, type ContextEntry } from '../../server/protocol/index.ts';
import { createFakeOllama, scriptReply } from '../fakes/fake-ollama.ts';
import { startTestEasel } from '../helpers/easel.ts';
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

// 4. A whole turn through the HTTP API (real server, real ollama client, fake Ollama): overhead and memory.
const fake = await createFakeOllama();
const easel = await startTestEasel({ ollamaUrl: fake.url, flags: ['--log-level', 'error'] });
const id = await easel.newConversation();
async function turn(i: number) {
  fake.enqueue(scriptReply(`Reply number ${i}. What next?`, METADATA));
  return readSse(await easel.post(`/api/conversations/${id}/messages`, { text: `message ${i}` }));
}
for (let i = 0; i < 20; i++) await turn(i);
globalThis.gc?.();
const heapBefore = process.memoryUsage().heapUsed;
const turns = 200;
const turnStart = performance.now();
for (let i = 0; i < turns; i++) await turn(i);
const turnMs = (performance.now() - turnStart) / turns;
globalThis.gc?.();
const heapGrowthMb = (process.memoryUsage().heapUsed - heapBefore) / 1e6;
record(`turn over HTTP incl. SQLite (${turns} turns)`, round(turnMs), 'ms', '≤ 50 ms', turnMs <= 50);
record(`heap growth over ${turns} turns`, round(heapGrowthMb), 'MB', '≤ 40 MB', heapGrowthMb <= 40);
record('resident memory after the run', round(process.memoryUsage().rss / 1e6), 'MB', '≤ 300 MB', process.memoryUsage().rss / 1e6 <= 300);
await easel.close();
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
