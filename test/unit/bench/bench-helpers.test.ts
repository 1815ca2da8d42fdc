// The bench's own arithmetic: if these lie, every figure of `npm run bench` does.
import { spawn } from 'node:child_process';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createArrivalTracker, createSseReader, readDeltaTexts, type SseFrame } from '../../bench/clients.ts';
import { describeModule, summariseProfile, type CpuProfile } from '../../bench/cpu-profile.ts';
import { readCpuNs, readRssMb } from '../../bench/processes.ts';
import { floodChunks, floodText, METADATA_TAIL, pacedToken } from '../../bench/replies.ts';
import { judge, median, quantile, quietestSum } from '../../bench/stats.ts';
import { MAX_REPLY_CHARS } from '../../../server/protocol/index.ts';

describe('stats', () => {
  it('interpolates quantiles and takes the median of the rounds', () => {
    expect(quantile([10, 0, 30, 20], 0.5)).toBe(15);
    expect(quantile([1, 2, 3, 4, 5], 0.25)).toBe(2);
    expect(quantile([7], 0.99)).toBe(7);
    expect(median([])).toBeNaN();
  });

  it('finds the quietest stretch of consecutive readings', () => {
    expect(quietestSum([0.3, 80, 40, 0.2, 0.1, 0.4, 0.3, 0.2, 26], 5)).toBeCloseTo(1.2);
    expect(quietestSum([1, 2, 3], 3)).toBe(6);
    expect(quietestSum([1, 2], 3)).toBeNaN();
  });

  it('judges the median against the target, and a figure without one as information', () => {
    expect(judge({ name: 'a', rounds: [1, 5, 2], unit: 'ms', target: { kind: 'max', limit: 2 } })).toMatchObject({ value: 2, status: 'ok' });
    expect(judge({ name: 'b', rounds: [1, 5, 3], unit: 'ms', target: { kind: 'max', limit: 2 } }).status).toBe('MISSED');
    expect(judge({ name: 'c', rounds: [0.85], unit: '×', target: { kind: 'min', limit: 0.9 } }).status).toBe('MISSED');
    expect(judge({ name: 'd', rounds: [11.5], unit: '×', target: { kind: 'range', limit: 9, upper: 11 } }).status).toBe('MISSED');
    expect(judge({ name: 'e', rounds: [10], unit: '×', target: { kind: 'range', limit: 9, upper: 11 } }).status).toBe('ok');
    expect(judge({ name: 'f', rounds: [Number.NaN], unit: 'ms', target: { kind: 'max', limit: 2 } }).status).toBe('MISSED');
    expect(judge({ name: 'g', rounds: [3], unit: 'ms' }).status).toBe('info');
  });
});

describe('replies', () => {
  it('floods short tokens that stay under the reply cap, then the metadata', () => {
    const chunks = floodChunks(100_000);
    expect(chunks).toHaveLength(100_000 + METADATA_TAIL.length);
    expect(chunks.slice(0, 100_000).every((chunk) => chunk.length >= 1 && chunk.length <= 2)).toBe(true);
    expect(chunks.join('').length).toBeLessThan(MAX_REPLY_CHARS);
    expect(floodText(100)).not.toMatch(/[-{`*_=]|\s$/);
  });
});

describe('arrival tracker', () => {
  it('finds each paced token in order, in any framing, a token split across reads included', () => {
    const tracker = createArrivalTracker(12, pacedToken);
    tracker.onData('event: delta\ndata: {"text":" w0q w1', 100);
    tracker.onData('q"}\n\n<span> w2q w3q w4q w5q w6q w7q w8q w9q w10', 200);
    tracker.onData('q</span> w11q', 300);
    expect(tracker.found).toBe(12);
    expect(tracker.arrivals).toEqual([100, 200, 200, 200, 200, 200, 200, 200, 200, 200, 300, 300]);
  });

  it('never takes a later token for an earlier one', () => {
    const tracker = createArrivalTracker(2, pacedToken);
    tracker.onData(' w11q w10q', 5);
    expect(tracker.found).toBe(0);
  });
});

describe('event stream reader', () => {
  it('reads frames and comments in whatever pieces they arrive, a line split across reads included', () => {
    const frames: SseFrame[] = [];
    const comments: string[] = [];
    const read = createSseReader((frame) => frames.push(frame), (comment) => comments.push(comment));
    const stream = 'id: e1.1\nevent: snapshot\ndata: {"a":1}\n\n: keep-alive\n\nevent: delta\ndata: {"text":" w0q"}\n\ndata: one\ndata:two\n\n';
    for (let i = 0; i < stream.length; i += 7) read(stream.slice(i, i + 7));
    expect(frames).toEqual([
      { id: 'e1.1', event: 'snapshot', data: '{"a":1}' },
      { id: undefined, event: 'delta', data: '{"text":" w0q"}' },
      { id: undefined, event: 'message', data: 'one\ntwo' },
    ]);
    expect(comments).toEqual(['keep-alive']);
  });

  it('sends nothing of a frame before its blank line', () => {
    const frames: SseFrame[] = [];
    const read = createSseReader((frame) => frames.push(frame));
    read('event: done\r\ndata: {}\r\n');
    expect(frames).toEqual([]);
    read('\r\n');
    expect(frames).toEqual([{ id: undefined, event: 'done', data: '{}' }]);
  });

  it("takes a JSON API stream's delta texts in order, and nothing else", () => {
    const body = 'event: started\ndata: {"turnId":3}\n\nevent: delta\ndata: {"text":"a\\nb"}\n\nevent: status\ndata: {"text":"x"}\n\nevent: delta\ndata: {"text":" c"}\n\n';
    expect(readDeltaTexts(body)).toEqual(['a\nb', ' c']);
  });
});

describe('cpu profile', () => {
  const frame = (functionName: string, url = '', lineNumber = 0) => ({ functionName, url, lineNumber, columnNumber: 0 });
  const profile: CpuProfile = {
    nodes: [
      { id: 1, callFrame: frame('(root)'), children: [2, 3, 4, 5] },
      { id: 2, callFrame: frame('(idle)') },
      { id: 3, callFrame: frame('writeSSE', 'file:///repo/node_modules/hono/dist/helper/streaming/sse.js', 8) },
      { id: 4, callFrame: frame('push', 'file:///repo/server/protocol/withhold.ts') },
      { id: 5, callFrame: frame('(garbage collector)') },
    ],
    startTime: 1_000,
    endTime: 1_000 + 10_000,
    // Each sample lasts until the next: 3 → 4000 µs, 4 → 1000, 2 → 2000, 3 → 1000, 5 → 2000 (to endTime).
    samples: [3, 4, 2, 3, 5],
    timeDeltas: [0, 4_000, 1_000, 2_000, 1_000],
  };

  it('sums self time per function and per module, as a share of the busy (not idle) time', () => {
    const summary = summariseProfile(profile, '/repo/');
    expect(summary.totalMs).toBe(10);
    expect(summary.busyMs).toBe(8);
    expect(summary.functions.map((f) => [f.name, f.where, f.selfMs, f.share])).toEqual([
      ['writeSSE', 'hono/dist/helper/streaming/sse.js:9', 5, 5 / 8],
      ['(garbage collector)', '', 2, 2 / 8],
      ['push', 'server/protocol/withhold.ts', 1, 1 / 8],
    ]);
    expect(summary.modules.map((m) => [m.name, m.selfMs])).toEqual([
      ['hono', 5],
      ['(garbage collector)', 2],
      ['server/protocol', 1],
    ]);
  });

  it('names packages, Node folders and frames without a script', () => {
    expect(describeModule(frame('x', 'file:///a/node_modules/@hono/node-server/dist/index.mjs'), '/a/')).toBe('@hono/node-server');
    expect(describeModule(frame('x', 'node:internal/webstreams/transformstream'), '/a/')).toBe('node:internal/webstreams');
    expect(describeModule(frame('x', 'node:_http_outgoing'), '/a/')).toBe('node:_http_outgoing');
    expect(describeModule(frame('JSON.parse'), '/a/')).toBe('(native)');
  });
});

describe('/proc readings', () => {
  it('reads a process\'s CPU time as the kernel counts it, all threads included', async () => {
    // A process of its own, as the bench measures its servers: this worker runs other test files too, and a thread
    // of theirs that ends mid-measure would take its time out of the sum.
    const spinner = `process.on('message', () => { const start = process.cpuUsage(); let spin = 0; while (process.cpuUsage(start).user < 200000) spin++; const used = process.cpuUsage(start); process.send({ spin, usageNs: (used.user + used.system) * 1000 }); }); process.send('ready');`;
    const child = spawn(process.execPath, ['-e', spinner], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    onTestFinished(() => void child.kill());
    // 200 ms of spin: a thread that ends is counted in 10 ms ticks, and a tick on 30 ms read as 37 % too much once.
    // Measured once it has started: its start-up is no part of the spin.
    await new Promise<void>((resolve) => child.once('message', () => resolve()));
    const before = readCpuNs(child.pid!);
    const answer = new Promise<{ spin: number; usageNs: number }>((resolve) => child.once('message', (message) => resolve(message as { spin: number; usageNs: number })));
    child.send('spin');
    const { spin, usageNs } = await answer;
    const procNs = readCpuNs(child.pid!) - before;
    expect(spin).toBeGreaterThan(0);
    expect(procNs / usageNs).toBeGreaterThan(0.7);
    expect(procNs / usageNs).toBeLessThan(1.3);
  });

  it("counts the CPU of a thread that ended between two readings (a worker, as libuv's pool or V8's helpers may)", async () => {
    // The worker spins 120 ms of CPU and ends; the process measures itself (getrusage counts ended threads too).
    const withWorker = `const { Worker } = require('node:worker_threads'); process.on('message', () => { const start = process.cpuUsage(); const worker = new Worker("const s = process.hrtime.bigint(); let spin = 0; while (process.hrtime.bigint() - s < 120000000n) spin++;", { eval: true }); worker.on('exit', () => { const used = process.cpuUsage(start); process.send({ usageNs: (used.user + used.system) * 1000 }); }); }); process.send('ready');`;
    const child = spawn(process.execPath, ['-e', withWorker], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    onTestFinished(() => void child.kill());
    await new Promise<void>((resolve) => child.once('message', () => resolve()));
    const before = readCpuNs(child.pid!);
    const answer = new Promise<{ usageNs: number }>((resolve) => child.once('message', (message) => resolve(message as { usageNs: number })));
    child.send('start');
    const { usageNs } = await answer;
    const procNs = readCpuNs(child.pid!) - before;
    // Ticks of 10 ms for the ended thread: a looser upper bound than the live threads' nanoseconds.
    expect(usageNs).toBeGreaterThan(50_000_000);
    expect(procNs / usageNs).toBeGreaterThan(0.7);
    expect(procNs / usageNs).toBeLessThan(1.4);
  });

  it('reads the resident memory in MB', () => {
    const rss = process.memoryUsage().rss / 1024 / 1024;
    expect(Math.abs(readRssMb(process.pid) - rss)).toBeLessThan(rss * 0.1);
  });
});
