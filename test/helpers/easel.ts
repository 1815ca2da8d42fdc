import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../server/config/index.ts';
import { createLogger } from '../../server/core/index.ts';
import { startServer, type RunningServer, type ServerTiming } from '../../server/main.ts';

export interface TestEasel extends RunningServer {
  dataDir: string;
  logs: string[];
  /** POST a JSON body and return the raw Response. */
  post(path: string, body?: unknown, init?: RequestInit): Promise<Response>;
  put(path: string, body: unknown): Promise<Response>;
  get(path: string): Promise<Response>;
  newConversation(): Promise<string>;
}

/** The real server (main.ts wiring, SQLite in a temp dir) on a free loopback port. */
export async function startTestEasel(options: {
  ollamaUrl: string;
  flags?: string[];
  timing?: ServerTiming;
  /** An existing data dir (a restart); it is left in place by close(). Default: a new temp dir, removed by close(). */
  dataDir?: string;
}): Promise<TestEasel> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'easel-test-'));
  const parsed = parseConfig(
    ['--port', '0', '--ollama-url', options.ollamaUrl, '--data-dir', dataDir, '--log-level', 'debug', ...(options.flags ?? [])],
    {},
  );
  if (!parsed.ok || !parsed.value) throw new Error(`bad test config: ${JSON.stringify(parsed)}`);
  const logs: string[] = [];
  const running = await startServer(parsed.value, createLogger({ level: 'debug', write: (line) => logs.push(line) }), options.timing);
  // In token mode the helpers send it, as a script would.
  const auth: Record<string, string> = running.token === undefined ? {} : { authorization: `Bearer ${running.token}` };
  const json = (method: string, path: string, body: unknown, init?: RequestInit) =>
    fetch(running.url + path, {
      method,
      headers: { 'content-type': 'application/json', ...auth },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      ...init,
    });
  return {
    ...running,
    dataDir,
    logs,
    post: (path, body, init) => json('POST', path, body ?? {}, init),
    put: (path, body) => json('PUT', path, body),
    get: (path) => fetch(running.url + path, { headers: auth }),
    async newConversation() {
      const response = await json('POST', '/api/conversations', {});
      return ((await response.json()) as { id: string }).id;
    },
    async close() {
      await running.close();
      if (options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
