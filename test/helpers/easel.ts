import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../server/config/index.ts';
import { createLogger } from '../../server/core/index.ts';
import { startServer, type RunningServer, type ServerTiming } from '../../server/main.ts';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { createFakeA1111, type FakeA1111, type FakeA1111Options } from '../fakes/fake-a1111.ts';
import { createFakeOllama, type FakeOllama, type FakeOllamaOptions } from '../fakes/fake-ollama.ts';
import { late } from './late.ts';

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

export interface EaselStageOptions {
  /** Start a fake AUTOMATIC1111 with these options too, and Easel with it as its image backend. */
  a1111?: FakeA1111Options;
  /** More command-line flags for Easel (after the image backend's). */
  flags?: string[];
  timing?: ServerTiming;
  /** The fake Ollama's options (its installed models, say). */
  ollama?: FakeOllamaOptions;
}

/** The real server with its fakes: the fake Ollama always, a fake AUTOMATIC1111 when it was asked for. */
export interface EaselStage {
  fake: FakeOllama;
  a1111: FakeA1111 | undefined;
  easel: TestEasel;
  /** Closes Easel, then the fakes. */
  close(): Promise<void>;
}

/** The fake Ollama (and a fake AUTOMATIC1111 when `options.a1111` is given), then Easel talking to them. */
export async function startEaselStage(options: EaselStageOptions = {}): Promise<EaselStage> {
  const fake = await createFakeOllama(options.ollama);
  const a1111 = options.a1111 && (await createFakeA1111(options.a1111));
  const imageFlags = a1111 ? ['--image-backend', 'a1111', '--image-url', a1111.url] : [];
  const easel = await startTestEasel({
    ollamaUrl: fake.url,
    flags: [...imageFlags, ...(options.flags ?? [])],
    ...(options.timing ? { timing: options.timing } : {}),
  });
  return {
    fake,
    a1111,
    easel,
    async close() {
      await easel.close();
      await a1111?.close();
      await fake.close();
    },
  };
}

/** Whether a fixture starts afresh before each test, or once for all the tests of its file or describe block. */
export type Lifetime = 'each test' | 'all tests';

function hooksFor(lifetime: Lifetime) {
  return lifetime === 'each test' ? { before: beforeEach, after: afterEach } : { before: beforeAll, after: afterAll };
}

/**
 * The suite's Easel and its fakes (startEaselStage), started before each test or before all of them (`lifetime`),
 * in the file or describe block that calls this, and closed after. A suite's own after-hooks run before the close.
 * The names it returns stand for the running fakes and server inside tests and hooks (see late.ts);
 * `a1111` only when `options.a1111` asked for one.
 */
export function useEasel(lifetime: Lifetime, options: EaselStageOptions = {}): { fake: FakeOllama; a1111: FakeA1111; easel: TestEasel } {
  const { before, after } = hooksFor(lifetime);
  let stage: EaselStage | undefined;
  before(async () => {
    stage = await startEaselStage(options);
  });
  after(async () => {
    await stage?.close();
    stage = undefined;
  });
  return {
    fake: late('the fake Ollama', () => stage?.fake),
    a1111: late('the fake AUTOMATIC1111 (useEasel starts one with `a1111` options)', () => stage?.a1111),
    easel: late('Easel', () => stage?.easel),
  };
}

/** The fake Ollama alone (a suite that builds its own Easel, or none), started and closed as useEasel's. */
export function useFakeOllama(lifetime: Lifetime): FakeOllama {
  const { before, after } = hooksFor(lifetime);
  let fake: FakeOllama | undefined;
  before(async () => {
    fake = await createFakeOllama();
  });
  after(async () => {
    await fake?.close();
    fake = undefined;
  });
  return late('the fake Ollama', () => fake);
}

/** What closeAfterEachTest gives a test to start things with: whatever it starts is closed after that test. */
export interface StartedInTest {
  /** Awaits what `started` starts and closes it after the test. */
  track<T extends { close(): Promise<void> }>(started: Promise<T>): Promise<T>;
  /** Runs `cleanup` after the test. */
  atEnd(cleanup: () => unknown): void;
  /** A fake Ollama and Easel with these flags (an image backend's, say). */
  startEasel(flags: string[]): Promise<TestEasel>;
}

/** For suites whose tests each start their own servers: all that a test started is closed after it, newest first. */
export function closeAfterEachTest(): StartedInTest {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  const track = async <T extends { close(): Promise<void> }>(started: Promise<T>): Promise<T> => {
    const value = await started;
    cleanups.push(() => value.close());
    return value;
  };
  return {
    track,
    atEnd: (cleanup) => void cleanups.push(cleanup),
    startEasel: async (flags) => (await track(startEaselStage({ flags }))).easel,
  };
}
