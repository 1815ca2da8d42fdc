// A batch's target (docs/BENCHMARKS.md): a batch of 8 through Easel adds no more than 5 % to the image server's own
// time. The server is the fake AUTOMATIC1111, which samples a whole batch in one pass as the real one does on a GPU
// (20 steps of 50 ms: 1 s); its own time is the same request sent to it directly. Easel's is POST …/generations with
// count 8 until the stream ends: the request, the eight PNG checks and writes, the records and the events.
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { sleep, startNpmServer } from './processes.ts';
import { median, type Figure } from './stats.ts';

const COUNT = 8;
const STEPS = 20;
const STEP_MS = 50;

interface BatchBenchOptions {
  ollamaUrl: string;
  dataDir: string;
  quick: boolean;
  log: (line: string) => void;
}

export async function measureBatches(options: BatchBenchOptions): Promise<Figure[]> {
  const rounds = options.quick ? 3 : 7;
  const a1111 = await createFakeA1111({ stepDelayMs: STEP_MS });
  const server = await startNpmServer({ ollamaUrl: options.ollamaUrl, dataDir: options.dataDir, flags: ['--image-backend', 'a1111', '--image-url', a1111.url] });
  const direct: number[] = [];
  const through: number[] = [];
  try {
    const created = (await (await fetch(`${server.url}/api/conversations`, { method: 'POST' })).json()) as { id: string };
    const settings = { steps: STEPS, width: 512, height: 512, seed: 1000 };
    for (let round = 0; round <= rounds; round++) {
      const started = performance.now();
      const answer = await fetch(`${a1111.url}/sdapi/v1/txt2img`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'a red fox', steps: STEPS, width: 512, height: 512, seed: 1000, batch_size: COUNT, cfg_scale: 7 }),
      });
      await answer.arrayBuffer();
      const directMs = performance.now() - started;
      await sleep(50);
      const begun = performance.now();
      const response = await fetch(`${server.url}/api/conversations/${created.id}/generations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'a red fox', settings, count: COUNT }),
      });
      const text = await response.text();
      const easelMs = performance.now() - begun;
      const images = text.split('\n').filter((line) => line === 'event: image').length;
      if (images !== COUNT) throw new Error(`the batch made ${images} images, not ${COUNT}: ${text.slice(0, 500)}`);
      // The first round warms both up (the bundle's first image path, the fake's first PNG).
      if (round === 0) continue;
      direct.push(directMs);
      through.push(easelMs);
      await sleep(50);
    }
  } finally {
    await server.stop();
    await a1111.close();
  }
  const overhead = through.map((ms, index) => (100 * (ms - (direct[index] as number))) / (direct[index] as number));
  options.log(`  batch of ${COUNT}: server alone ${median(direct).toFixed(0)} ms, through Easel ${median(through).toFixed(0)} ms`);
  return [
    { name: `a batch of ${COUNT} (${STEPS} steps of ${STEP_MS} ms), the image server's own time`, rounds: direct, unit: 'ms' },
    { name: `a batch of ${COUNT}: time Easel adds to the image server's own`, rounds: overhead, unit: '%', target: { kind: 'max', limit: 5 } },
  ];
}
