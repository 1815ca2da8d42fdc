// Runs the report card's conversations through the real Easel: the server `npm start` runs (main.ts's
// startServer, SQLite in a temporary folder), driven over its HTTP API like any client. The ladder, the
// repairs and the prompts are the engine's own; this only counts what the `done` events say.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../server/config/index.ts';
import { createLogger } from '../../server/core/index.ts';
import { startServer } from '../../server/main.ts';
import { iterateSse } from '../helpers/sse.ts';
import type { EvalConversation } from './conversations.ts';
import type { ImageFamily } from '../../server/protocol/index.ts';
import { countTurns } from './conversations.ts';
import { summariseTurns, type EvalReport, type TurnRecord } from './report.ts';

export interface EvalOptions {
  /** Easel's own flags: --ollama-url, --model, --llm-seed, --num-ctx, the timeouts. */
  flags: string[];
  /** The environment parseConfig reads (OLLAMA_HOST). */
  env?: Record<string, string | undefined>;
  conversations: readonly EvalConversation[];
  /** The image model family each conversation's prompts are written for (its `family` setting). */
  family: ImageFamily;
  /** Called after every turn with the turns done and the total. */
  onTurn?: (done: number, total: number) => void;
}

export type EvalResult =
  | { ok: true; report: EvalReport; turns: TurnRecord[] }
  /** `skip`: no Ollama answered (not a failure of the model); otherwise a problem the person must fix. */
  | { ok: false; skip: boolean; reason: string };

export async function runEval(options: EvalOptions): Promise<EvalResult> {
  const dataDir = mkdtempSync(join(tmpdir(), 'easel-eval-'));
  const parsed = parseConfig(['--port', '0', '--data-dir', dataDir, '--image-backend', 'none', '--log-level', 'error', ...options.flags], options.env ?? {});
  if (!parsed.ok || parsed.value === null) {
    rmSync(dataDir, { recursive: true, force: true });
    return { ok: false, skip: false, reason: parsed.ok ? 'no configuration' : parsed.error.message };
  }
  const config = parsed.value;
  // The server's own warnings (format drift) are what the report counts; they would only clutter the table.
  const server = await startServer(config, createLogger({ level: 'error', write: () => undefined }));
  const client = createClient(server.url, server.token);
  try {
    const health = (await (await client.get('/api/health')).json()) as { ollama: { reachable: boolean; modelAvailable: boolean; problem?: string; remedy?: string } };
    if (!health.ollama.reachable) {
      return { ok: false, skip: true, reason: health.ollama.problem ?? `no Ollama answers at ${config.ollamaUrl}: start it with \`ollama serve\`.` };
    }
    if (!health.ollama.modelAvailable) {
      return { ok: false, skip: false, reason: health.ollama.problem ?? `${config.model} is not pulled: run \`ollama pull ${config.model}\`` };
    }
    const total = countTurns(options.conversations);
    const turns: TurnRecord[] = [];
    for (const conversation of options.conversations) {
      const id = ((await (await client.post('/api/conversations', {})).json()) as { id: string }).id;
      await expectOk(client.put(`/api/conversations/${id}/settings`, { family: options.family }), 'family choice');
      for (const step of conversation.steps) {
        if ('say' in step) {
          turns.push(await sendTurn(client, id, conversation.name, step.say));
          options.onTurn?.(turns.length, total);
        } else if ('editPrompt' in step) {
          await expectOk(client.put(`/api/conversations/${id}/prompt`, { prompt: step.editPrompt }), 'prompt edit');
        } else {
          await expectOk(client.put(`/api/conversations/${id}/settings`, step.settings), 'settings change');
        }
      }
    }
    const report = summariseTurns(turns, { model: config.model, ollamaUrl: config.ollamaUrl, conversations: options.conversations.length, family: options.family });
    return { ok: true, report, turns };
  } finally {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

interface Client {
  get(path: string): Promise<Response>;
  post(path: string, body: unknown): Promise<Response>;
  put(path: string, body: unknown): Promise<Response>;
}

function createClient(base: string, token: string | undefined): Client {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
  const send = (method: string, path: string, body?: unknown) =>
    fetch(base + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { get: (path) => send('GET', path), post: (path, body) => send('POST', path, body), put: (path, body) => send('PUT', path, body) };
}

async function sendTurn(client: Client, id: string, conversation: string, text: string): Promise<TurnRecord> {
  const response = await client.post(`/api/conversations/${id}/messages`, { text });
  if (response.status !== 200 || !response.body) {
    throw new Error(`Easel refused the message "${text}" with ${response.status}: ${await response.text()}`);
  }
  let error: string | undefined;
  let prompt: string | undefined;
  for await (const event of iterateSse(response.body)) {
    if (event.type === 'error') error ??= String(event.data.code);
    if (event.type === 'metadata') prompt = String(event.data.prompt);
    if (event.type !== 'done') continue;
    const done = event.data as { level: string; attempts: number; repairs: string[]; firstTokenMs: number | null; evalCount: number; tokensPerSecond: number };
    return {
      conversation,
      text,
      level: done.level,
      attempts: done.attempts,
      repairs: done.repairs,
      firstTokenMs: done.firstTokenMs,
      evalCount: done.evalCount,
      tokensPerSecond: done.tokensPerSecond,
      ...(error ? { error } : {}),
      ...(prompt === undefined ? {} : { prompt }),
    };
  }
  throw new Error(`the reply to "${text}" ended without a done event`);
}

async function expectOk(pending: Promise<Response>, what: string): Promise<void> {
  const response = await pending;
  if (!response.ok) throw new Error(`Easel refused the ${what} with ${response.status}: ${await response.text()}`);
}
