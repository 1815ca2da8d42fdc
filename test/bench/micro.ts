// The protocol's hot functions on their own, in the bench's process: withholding, parsing, rendering the context.
import { createWithholder, parseReply, renderContext, type ContextEntry } from '../../server/protocol/index.ts';
import type { Figure } from './stats.ts';
import { BENCH_METADATA } from './replies.ts';

function makeReply(chars: number): string {
  const words = ['The ', 'cat ', 'wears ', 'a ', 'hat—', 'with ', 'a ', '{brim} ', 'and ', '--stars-- ', '\n', '- a list item\n', '----\n'];
  let text = '';
  for (let i = 0; text.length < chars; i++) text += words[i % words.length];
  return `${text}\n---\n${JSON.stringify(BENCH_METADATA)}`;
}

function withholdMs(reply: string, chunkSize: number): number {
  const start = performance.now();
  const withholder = createWithholder();
  for (let i = 0; i < reply.length; i += chunkSize) withholder.push(reply.slice(i, i + chunkSize));
  withholder.finish();
  return performance.now() - start;
}

export function measureProtocol(rounds: number): Figure[] {
  const withholdRate: number[] = [];
  const withholdRatio: number[] = [];
  const parseUs: number[] = [];
  const renderMs: number[] = [];
  const small = makeReply(100_000);
  const large = makeReply(1_000_000);
  const typical = `Sure! Here is your cat.\n---\n{'prompt': 'a tabby cat', 'generate_image': True, 'steps': '20', 'cfg': 7, 'seed': -1,}`;
  const context: ContextEntry[] = [];
  for (let i = 0; i < 500; i++) {
    context.push({ kind: 'user', text: `message ${i} about the picture, with some detail`.repeat(3) });
    context.push({ kind: 'assistant', text: `reply ${i}, a question back`.repeat(3), metadata: BENCH_METADATA });
  }
  // Round 0 warms the JIT up and is not counted.
  for (let round = 0; round <= rounds; round++) {
    if (round === 1) for (const list of [withholdRate, withholdRatio, parseUs, renderMs]) list.length = 0;
    const smallMs = withholdMs(small, 4);
    const largeMs = withholdMs(large, 4);
    withholdRate.push(large.length / 1e6 / (largeMs / 1000));
    withholdRatio.push(largeMs / smallMs);
    const parses = 5_000;
    const parseStart = performance.now();
    for (let i = 0; i < parses; i++) parseReply(typical);
    parseUs.push(((performance.now() - parseStart) * 1000) / parses);
    const renderStart = performance.now();
    for (let i = 0; i < 20; i++) renderContext(context, { numCtx: 8192 });
    renderMs.push((performance.now() - renderStart) / 20);
  }
  return [
    { name: 'withholding 1 MB in 4-character chunks', rounds: withholdRate, unit: 'MB/s', target: { kind: 'min', limit: 2 }, note: 'a model emits < 1 kB/s' },
    { name: 'withholding time, 1 MB ÷ 100 kB', rounds: withholdRatio, unit: '×', target: { kind: 'max', limit: 20 }, note: 'linear ≈ 10×' },
    { name: 'parseReply with repairs', rounds: parseUs, unit: 'µs', target: { kind: 'max', limit: 200 } },
    { name: 'renderContext, 1000 entries → 8192 tokens', rounds: renderMs, unit: 'ms', target: { kind: 'max', limit: 10 } },
  ];
}
