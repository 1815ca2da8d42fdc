// V8's CPU profiler in another Node process, through its inspector (the Chrome DevTools Protocol). Node 20
// refuses --cpu-prof in NODE_OPTIONS, and `npm start` takes no node flags; but it takes --inspect-port=0, and
// SIGUSR1 then opens the inspector on a free port. Profiler.stop returns what --cpu-prof would have written.
import WebSocket from 'ws';
import type { CpuProfile } from './cpu-profile.ts';
import { sleep } from './processes.ts';

export interface InspectorSession {
  startProfiling(intervalUs: number): Promise<void>;
  stopProfiling(): Promise<CpuProfile>;
  close(): void;
}

/** Opens the inspector of `pid` (started with --inspect-port=0) and connects to it. */
export async function openInspector(pid: number, readStderr: () => string): Promise<InspectorSession> {
  process.kill(pid, 'SIGUSR1');
  let url: string | undefined;
  for (let i = 0; i < 200 && url === undefined; i++) {
    url = /Debugger listening on (ws:\/\/\S+)/.exec(readStderr())?.[1];
    if (url === undefined) await sleep(25);
  }
  if (url === undefined) throw new Error(`the server (pid ${pid}) opened no inspector after SIGUSR1:\n${readStderr()}`);
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  let nextId = 1;
  const waiting = new Map<number, { resolve: (result: unknown) => void; reject: (error: Error) => void }>();
  socket.on('message', (data) => {
    const message = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (message.id === undefined) return;
    const waiter = waiting.get(message.id);
    waiting.delete(message.id);
    if (message.error) waiter?.reject(new Error(message.error.message));
    else waiter?.resolve(message.result);
  });
  const send = (method: string, params: object = {}) =>
    new Promise<unknown>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  return {
    async startProfiling(intervalUs) {
      await send('Profiler.enable');
      await send('Profiler.setSamplingInterval', { interval: intervalUs });
      await send('Profiler.start');
    },
    async stopProfiling() {
      const { profile } = (await send('Profiler.stop')) as { profile: CpuProfile };
      return profile;
    },
    close: () => socket.close(),
  };
}
