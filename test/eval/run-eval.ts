// Runs the report card's conversations through the real Easel: the server `npm start` runs (main.ts's
// startServer, SQLite in a temporary folder), driven over its HTTP API like any client. The ladder, the
// repairs and the prompts are the engine's own; this only counts what the `done` events say. With a vision
// model, a second Easel (a fake AUTOMATIC1111 painting the check cases as its image server) has each case's
// picture checked and described, and the critiques are counted the same way.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, type Config } from '../../server/config/index.ts';
import { createLogger } from '../../server/core/index.ts';
import { startServer } from '../../server/main.ts';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { iterateSse } from '../helpers/sse.ts';
import { CHECK_SIZE, renderCases, type CheckCase } from './checks.ts';
import type { EvalConversation } from './conversations.ts';
import type { ImageFamily } from '../../server/protocol/index.ts';
import { countTurns } from './conversations.ts';
import { summariseChecks, summariseTurns, type CheckRecord, type CheckReport, type EvalReport, type TurnRecord } from './report.ts';

export interface EvalOptions {
  /** Easel's own flags: --ollama-url, --model, --llm-seed, --num-ctx, the timeouts. */
  flags: string[];
  /** The environment parseConfig reads (OLLAMA_HOST). */
  env?: Record<string, string | undefined>;
  /** The chat conversations; none (with `checks`) runs the check part alone. */
  conversations: readonly EvalConversation[];
  /** The image model family each conversation's prompts are written for (its `family` setting). */
  family: ImageFamily;
  /** Called after every turn with the turns done and the total. */
  onTurn?: (done: number, total: number) => void;
  /** The check part, after the conversations: the vision model checks and describes each case's picture. */
  checks?: EvalChecks;
}

export interface EvalChecks {
  /** The Ollama vision model (Easel's --vision-model). */
  visionModel: string;
  cases: readonly CheckCase[];
  /** Called after every case (its check and its description) with the cases done and the total. */
  onCheck?: (done: number, total: number) => void;
}

export type EvalResult =
  /** `report` covers no turn when only the checks ran; `checkReport` and `checks` are there when they did. */
  | { ok: true; report: EvalReport; turns: TurnRecord[]; checkReport?: CheckReport; checks?: CheckRecord[] }
  /** `skip`: no Ollama answered (not a failure of the model); otherwise a problem the person must fix. */
  | { ok: false; skip: boolean; reason: string };

type Failure = Extract<EvalResult, { ok: false }>;

export async function runEval(options: EvalOptions): Promise<EvalResult> {
  let chat: { report: EvalReport; turns: TurnRecord[] } | undefined;
  if (options.conversations.length > 0 || options.checks === undefined) {
    const result = await runConversations(options);
    if (!result.ok) return result;
    chat = result;
  }
  if (options.checks === undefined) return { ok: true, report: chat!.report, turns: chat!.turns };
  const checked = await runChecks(options, options.checks);
  if (!checked.ok) return checked;
  const report = chat?.report ?? summariseTurns([], { model: checked.config.model, ollamaUrl: checked.config.ollamaUrl, conversations: 0, family: options.family });
  return { ok: true, report, turns: chat?.turns ?? [], checkReport: checked.report, checks: checked.records };
}

interface StartedEasel {
  ok: true;
  config: Config;
  client: Client;
  close(): Promise<void>;
}

/** The real server on a free loopback port, its data in a temporary folder removed by close(). */
async function startEasel(flags: string[], env: Record<string, string | undefined>): Promise<StartedEasel | Failure> {
  const dataDir = mkdtempSync(join(tmpdir(), 'easel-eval-'));
  const parsed = parseConfig(['--port', '0', '--data-dir', dataDir, '--log-level', 'error', ...flags], env);
  if (!parsed.ok || parsed.value === null) {
    rmSync(dataDir, { recursive: true, force: true });
    return { ok: false, skip: false, reason: parsed.ok ? 'no configuration' : parsed.error.message };
  }
  const config = parsed.value;
  // The server's own warnings (format drift) are what the report counts; they would only clutter the table.
  const server = await startServer(config, createLogger({ level: 'error', write: () => undefined }));
  return {
    ok: true,
    config,
    client: createClient(server.url, server.token),
    async close() {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Whether Ollama answers (else a skip) and, when `chatModel`, whether the chat model is pulled. */
async function checkOllama(client: Client, config: Config, chatModel: boolean): Promise<Failure | undefined> {
  const health = (await (await client.get('/api/health')).json()) as { ollama: { reachable: boolean; modelAvailable: boolean; problem?: string; remedy?: string } };
  if (!health.ollama.reachable) {
    return { ok: false, skip: true, reason: health.ollama.problem ?? `no Ollama answers at ${config.ollamaUrl}: start it with \`ollama serve\`.` };
  }
  if (chatModel && !health.ollama.modelAvailable) {
    return { ok: false, skip: false, reason: health.ollama.problem ?? `${config.model} is not pulled: run \`ollama pull ${config.model}\`` };
  }
  return undefined;
}

async function runConversations(options: EvalOptions): Promise<{ ok: true; report: EvalReport; turns: TurnRecord[] } | Failure> {
  // No image server: a reply ready to paint makes no image, and the turns are the model's alone.
  const started = await startEasel(['--image-backend', 'none', ...options.flags], options.env ?? {});
  if (!started.ok) return started;
  const { config, client } = started;
  try {
    const unusable = await checkOllama(client, config, true);
    if (unusable) return unusable;
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
    await started.close();
  }
}

/**
 * The check part: a fake AUTOMATIC1111 on loopback paints each case's request as its picture, Easel (with it as
 * the image backend and the vision model) makes that picture, checks it, and describes the picture sent as a body.
 */
async function runChecks(options: EvalOptions, checks: EvalChecks): Promise<{ ok: true; config: Config; report: CheckReport; records: CheckRecord[] } | Failure> {
  const { pictures, paint } = await renderCases(checks.cases);
  const painter = await createFakeA1111({ paint, stepDelayMs: 0 });
  try {
    const flags = ['--image-backend', 'a1111', '--image-url', painter.url, '--vision-model', checks.visionModel, ...options.flags];
    const started = await startEasel(flags, options.env ?? {});
    if (!started.ok) return started;
    const { config, client } = started;
    try {
      const unusable = (await checkOllama(client, config, false)) ?? (await checkVisionModel(client, checks.visionModel));
      if (unusable) return unusable;
      const records: CheckRecord[] = [];
      for (const check of checks.cases) {
        records.push(await runCheckCase(client, check, pictures.get(check.request)!));
        checks.onCheck?.(records.length, checks.cases.length);
      }
      return { ok: true, config, report: summariseChecks(records, { visionModel: checks.visionModel, ollamaUrl: config.ollamaUrl }), records };
    } finally {
      await started.close();
    }
  } finally {
    await painter.close();
  }
}

/** The vision model is pulled and can see (Ollama lists `vision` among its capabilities). */
async function checkVisionModel(client: Client, name: string): Promise<Failure | undefined> {
  const models = (await (await client.get('/api/models')).json()) as { chat: { installed: Array<{ name: string; capabilities: string[] }>; problem: string | null } };
  const installed = models.chat.installed.find((model) => model.name === name || model.name === `${name}:latest`);
  if (!installed) return { ok: false, skip: false, reason: models.chat.problem ?? `${name} is not pulled: run \`ollama pull ${name}\`` };
  if (!installed.capabilities.includes('vision')) {
    return { ok: false, skip: false, reason: `${name} cannot see images (Ollama lists no vision capability for it): choose a vision model such as gemma3:4b.` };
  }
  return undefined;
}

/** One case: its picture made from the request, checked (timed), then described from its PNG. */
async function runCheckCase(client: Client, check: CheckCase, png: Uint8Array): Promise<CheckRecord> {
  const id = ((await (await client.post('/api/conversations', {})).json()) as { id: string }).id;
  await expectOk(client.put(`/api/conversations/${id}/settings`, { steps: 1, width: CHECK_SIZE, height: CHECK_SIZE }), 'check settings');
  const imageId = await makePicture(client, id, check.request);

  const started = performance.now();
  const checked = await readVisionStream(await client.post(`/api/conversations/${id}/images/${imageId}/check`, {}), `the check of "${check.request}"`);
  const ms = performance.now() - started;
  const critique = checked.events.get('critique') as { matches: string[]; misses: Array<{ element: string; evidence: string }>; revisedPrompt: string } | undefined;

  const describeStarted = performance.now();
  const described = await readVisionStream(await client.postBytes(`/api/conversations/${id}/describe`, png, 'image/png'), `the description of "${check.request}"`);
  const describeMs = performance.now() - describeStarted;
  const description = described.events.get('description') as { prompt: string; subject: string } | undefined;

  return {
    case: check.name,
    request: check.request,
    present: check.present,
    planted: check.planted,
    shape: check.shape,
    level: checked.level,
    attempts: checked.attempts,
    ...(checked.error === undefined ? {} : { error: checked.error }),
    ...(critique === undefined ? {} : { matches: critique.matches, misses: critique.misses.map(({ element, evidence }) => ({ element, evidence })), revisedPrompt: critique.revisedPrompt }),
    ms,
    describe: {
      level: described.level,
      attempts: described.attempts,
      ...(described.error === undefined ? {} : { error: described.error }),
      ...(description === undefined ? {} : { prompt: description.prompt, subject: description.subject }),
      ms: describeMs,
    },
  };
}

/** Makes the picture of `prompt` (the fake image server paints the case) and returns its image id. */
async function makePicture(client: Client, id: string, prompt: string): Promise<string> {
  const response = await client.post(`/api/conversations/${id}/generations`, { prompt });
  if (response.status !== 200 || !response.body) throw new Error(`Easel refused the picture of "${prompt}" with ${response.status}: ${await response.text()}`);
  let imageId: string | undefined;
  let error: string | undefined;
  for await (const event of iterateSse(response.body)) {
    if (event.type === 'image') imageId ??= String(event.data.id);
    if (event.type === 'error') error ??= `${String(event.data.code)}: ${String(event.data.message)}`;
  }
  if (imageId === undefined) throw new Error(`no picture of "${prompt}" was made (${error ?? 'the stream ended without an image'})`);
  return imageId;
}

/** A check's or a description's stream read to its end: its events by type (the first of each), the error code, done's level and attempts. */
async function readVisionStream(response: Response, what: string): Promise<{ events: Map<string, Record<string, unknown>>; level: string; attempts: number; error?: string }> {
  if (response.status !== 200 || !response.body) throw new Error(`Easel refused ${what} with ${response.status}: ${await response.text()}`);
  const events = new Map<string, Record<string, unknown>>();
  for await (const event of iterateSse(response.body)) {
    if (!events.has(event.type)) events.set(event.type, event.data);
  }
  const done = events.get('done') as { level: string; attempts: number } | undefined;
  if (!done) throw new Error(`${what} ended without a done event`);
  const error = events.get('error');
  return { events, level: done.level, attempts: done.attempts, ...(error === undefined ? {} : { error: String(error.code) }) };
}

interface Client {
  get(path: string): Promise<Response>;
  post(path: string, body: unknown): Promise<Response>;
  put(path: string, body: unknown): Promise<Response>;
  /** POST raw bytes of this content type (a picture to describe). */
  postBytes(path: string, bytes: Uint8Array, type: string): Promise<Response>;
}

function createClient(base: string, token: string | undefined): Client {
  const auth: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const headers: Record<string, string> = { 'content-type': 'application/json', ...auth };
  const send = (method: string, path: string, body?: unknown) =>
    fetch(base + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return {
    get: (path) => send('GET', path),
    post: (path, body) => send('POST', path, body),
    put: (path, body) => send('PUT', path, body),
    postBytes: (path, bytes, type) => fetch(base + path, { method: 'POST', headers: { 'content-type': type, ...auth }, body: bytes as BodyInit }),
  };
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
