// The real server in its own process, for the bench: same wiring as `npm start` (startServer), plus
// an IPC question the bench asks — "how big is the live heap after a full GC?" — which RSS cannot answer.
import { parseConfig } from '../../server/config/index.ts';
import { createLogger } from '../../server/core/index.ts';
import { startServer } from '../../server/main.ts';

const parsed = parseConfig(process.argv.slice(2), {});
if (!parsed.ok || parsed.value === null) throw new Error(`bad bench flags: ${JSON.stringify(parsed)}`);
const running = await startServer(parsed.value, createLogger({ level: 'warn', write: (line) => process.stderr.write(`${line}\n`) }));
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

process.on('message', (message) => {
  if (message !== 'heap') return;
  gc();
  gc();
  const { heapUsed } = process.memoryUsage();
  process.send?.({ url: running.url, heapUsedMb: heapUsed / 1e6 });
});
process.send?.({ url: running.url, heapUsedMb: process.memoryUsage().heapUsed / 1e6 });
