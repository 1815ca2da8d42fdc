// Nothing the user typed is lost: a write that fails (injected, and a real full disk), SIGTERM and
// kill -9 in the middle of a reply (the server as its own process), and a database Easel cannot use at
// start (exit code 2 with one line saying why).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createFakeOllama, scriptReply, type FakeOllama } from '../fakes/fake-ollama.ts';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { iterateSse, readSse, shownText, type SseEvent } from '../helpers/sse.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function fakeOllama(): Promise<FakeOllama> {
  const fake = await createFakeOllama();
  cleanups.push(() => fake.close());
  return fake;
}

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

interface Stored {
  turns: Array<{ role: string; text: string; status: string }>;
}

async function stored(url: string, id: string): Promise<Stored> {
  return (await (await fetch(`${url}/api/conversations/${id}`)).json()) as Stored;
}

function of(events: SseEvent[], type: string) {
  return events.filter((event) => event.type === type).map((event) => event.data);
}

describe('a write that fails', () => {
  let easel: TestEasel;

  it('as the turn starts: an error event saying what to do, then done; nothing is half-written, nothing reaches the model', async () => {
    const fake = await fakeOllama();
    easel = await startTestEasel({ ollamaUrl: fake.url });
    cleanups.push(() => easel.close());
    const id = await easel.newConversation();
    fake.enqueue(scriptReply('Which cat?', ASKING));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a cat' }));

    // Another connection makes the running reply's row impossible to insert: the transaction fails after
    // the user's message and its context entry were written, and must take them back.
    const db = new Database(join(easel.dataDir, 'easel.db'));
    db.exec(`CREATE TRIGGER no_running BEFORE INSERT ON turns WHEN NEW.status = 'running'
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END`);
    const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'a tabby' });
    expect(response.status).toBe(200);
    const events = await readSse(response);
    expect(events.map((e) => e.type)).toEqual(['error', 'done']);
    expect(of(events, 'error')[0]).toMatchObject({ code: 'storage_failed' });
    expect(String(of(events, 'error')[0]?.message)).toMatch(/could not save your message: the database .*easel\.db reported an error.*back in the box/);
    expect(of(events, 'done')[0]).toMatchObject({ level: 'error' });
    expect(fake.chatRequests()).toHaveLength(1);
    expect((await stored(easel.url, id)).turns.map((t) => t.text)).toEqual(['a cat', 'Which cat?']);
    expect(db.prepare('SELECT count(*) AS n FROM context_entries').get()).toEqual({ n: 2 });
    db.exec('DROP TRIGGER no_running');
    db.close();

    // Sent again, it goes through, and the model sees the conversation exactly once.
    fake.enqueue(scriptReply('A tabby.', ASKING));
    expect(shownText(await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a tabby' })))).toBe('A tabby.');
    expect(fake.chatRequests().at(-1)?.messages?.slice(1).map((m) => m.content.split('\n---\n')[0])).toEqual(['a cat', 'Which cat?', 'a tabby']);
  });

  it('on a real full disk: storage_full says to free space, and everything stored before is kept', async (context) => {
    const mountPoint = mkdtempSync(join(tmpdir(), 'easel-full-'));
    cleanups.push(() => rmSync(mountPoint, { recursive: true, force: true }));
    // A small file system of its own (needs root, as in CI); elsewhere this test says why it skips.
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mountPoint], { encoding: 'utf8' });
    if (mounted.status !== 0) {
      console.warn(`Skipping the full-disk test: cannot mount a small tmpfs here (${(mounted.stderr || mounted.error?.message || 'mount failed').trim()}).`);
      context.skip();
      return;
    }
    cleanups.push(() => {
      spawnSync('umount', ['-l', mountPoint]);
    });
    const fake = await fakeOllama();
    const dataDir = join(mountPoint, 'data');
    mkdirSync(dataDir);
    easel = await startTestEasel({ ollamaUrl: fake.url, dataDir });
    cleanups.push(() => easel.close());
    const id = await easel.newConversation();
    fake.enqueue(scriptReply('Which fox?', ASKING));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a fox' }));

    // Fill every byte left.
    const filler = join(mountPoint, 'filler');
    const block = Buffer.alloc(64 * 1024, 1);
    for (let size = block.length; ; ) {
      try {
        writeFileSync(filler, block, { flag: 'a' });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
        if (size === 1) break;
        size = Math.max(1, Math.floor(size / 4));
        block.fill(1);
        try {
          writeFileSync(filler, block.subarray(0, size), { flag: 'a' });
        } catch {
          size = 1;
        }
      }
    }
    const text = 'a fox in deep snow, '.repeat(300).trim();
    const response = await easel.post(`/api/conversations/${id}/messages`, { text });
    expect(response.status).toBe(200);
    const events = await readSse(response);
    expect(events.map((e) => e.type)).toEqual(['error', 'done']);
    expect(of(events, 'error')[0]).toMatchObject({ code: 'storage_full' });
    expect(String(of(events, 'error')[0]?.message)).toMatch(/the disk holding .*easel\.db is full\. Nothing was saved, and your message is back in the box: free some disk space/);
    expect(fake.chatRequests()).toHaveLength(1);
    expect((await stored(easel.url, id)).turns.map((t) => [t.text, t.status])).toEqual([
      ['a fox', 'ok'],
      ['Which fox?', 'ok'],
    ]);

    rmSync(filler);
    fake.enqueue(scriptReply('Deep snow it is.', ASKING));
    expect(shownText(await readSse(await easel.post(`/api/conversations/${id}/messages`, { text })))).toBe('Deep snow it is.');
    expect((await stored(easel.url, id)).turns.map((t) => t.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
  });
});

interface ServerProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<number | null>;
}

/** The server as `npm start` runs it (node with tsx), on its own: signals reach it directly. */
async function startServerProcess(args: string[]): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts', '--port', '0', ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (data: Buffer) => (output += data.toString()));
  child.stderr!.on('data', (data: Buffer) => (output += data.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  await expect.poll(() => /running at (http:\/\/\S+)/.exec(output)?.[1] ?? (child.exitCode !== null ? 'exited' : undefined), { timeout: 30_000, interval: 50 }).toBeDefined();
  const url = /running at (http:\/\/\S+)/.exec(output)?.[1];
  if (!url) throw new Error(`the server did not start:\n${output}`);
  return { child, url, output: () => output, exited };
}

/** Starts a reply that streams slowly, reads its first words, and waits until they were saved (over 1 s). */
async function startSlowReply(fake: FakeOllama, server: ServerProcess): Promise<{ id: string; shown: () => string }> {
  const id = ((await (await fetch(`${server.url}/api/conversations`, { method: 'POST' })).json()) as { id: string }).id;
  const words = Array.from({ length: 200 }, (_, i) => `word${i} `);
  fake.enqueue({ chunks: words, delayMs: 40 });
  const response = await fetch(`${server.url}/api/conversations/${id}/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'tell me a long story' }),
  });
  let shown = '';
  void (async () => {
    for await (const event of iterateSse(response.body!)) if (event.type === 'delta') shown += String(event.data.text);
  })().catch(() => undefined);
  await expect.poll(() => shown.length, { timeout: 10_000 }).toBeGreaterThan(40);
  // The text is saved at most a second apart: after this wait the first words are on disk.
  await new Promise((resolve) => setTimeout(resolve, 1300));
  return { id, shown: () => shown };
}

describe('the server process dying in the middle of a reply', () => {
  for (const [signal, status] of [
    ['SIGTERM', 'stopped'],
    ['SIGKILL', 'interrupted'],
  ] as const) {
    it(`${signal === 'SIGKILL' ? 'kill -9' : 'SIGTERM'}: the reply is kept (${status}) with its words, and the next request holds the message`, async () => {
      const fake = await fakeOllama();
      const dataDir = tempDir('easel-crash-');
      const flags = ['--data-dir', dataDir, '--ollama-url', fake.url];
      const first = await startServerProcess(flags);
      const { id, shown } = await startSlowReply(fake, first);
      const started = performance.now();
      first.child.kill(signal);
      await first.exited;
      if (signal === 'SIGTERM') expect(performance.now() - started).toBeLessThan(5000);
      const seen = shown();

      const second = await startServerProcess(flags);
      const { turns } = await stored(second.url, id);
      expect(turns.map((t) => [t.role, t.status])).toEqual([
        ['user', 'ok'],
        ['assistant', status],
      ]);
      expect(turns[0]?.text).toBe('tell me a long story');
      // What was saved: the first words at least, never more than was shown.
      expect(turns[1]?.text).toMatch(/^word0 word1 /);
      expect(seen.startsWith(turns[1]!.text)).toBe(true);

      fake.enqueue(scriptReply('A short one.', ASKING));
      const next = await fetch(`${second.url}/api/conversations/${id}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'a short one, please' }),
      });
      expect(shownText(await readSse(next))).toBe('A short one.');
      const messages = fake.chatRequests().at(-1)?.messages ?? [];
      expect(messages.slice(1).map((m) => [m.role, m.content])).toEqual([['user', 'tell me a long story\n\na short one, please']]);
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    });
  }
});

describe('a database Easel cannot use at start', () => {
  function runToExit(args: string[]): Promise<{ status: number | null; stderr: string }> {
    const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts', '--port', '0', '--ollama-url', 'http://127.0.0.1:9', ...args], {
      cwd: REPO,
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 30_000,
    });
    let stderr = '';
    child.stderr!.on('data', (data: Buffer) => (stderr += data.toString()));
    return new Promise((resolve) => child.once('close', (status) => resolve({ status, stderr })));
  }

  it('exits with code 2 and one line naming the file, the cause and what to do', async () => {
    const damaged = tempDir('easel-damaged-');
    writeFileSync(join(damaged, 'easel.db'), 'not a database '.repeat(400));
    const newer = tempDir('easel-newer-');
    const db = new Database(join(newer, 'easel.db'));
    db.pragma('user_version = 999');
    db.close();
    const notADir = join(tempDir('easel-file-'), 'data');
    writeFileSync(notADir, 'a file where the data folder should be');

    const cases: Array<[string, RegExp]> = [
      [damaged, /^easel: The database \S+easel\.db is damaged \(.+\)\. Move it aside and start Easel again/],
      [newer, /^easel: The database \S+easel\.db was written by a newer Easel \(schema version 999; this one knows up to \d+\)\. Update Easel, or start it with another --data-dir\.$/],
      [notADir, /^easel: The data folder \S+ cannot be used: it cannot be written \((EEXIST|ENOTDIR)\)/],
    ];
    // The three start at once (each is a whole Node process with tsx).
    const results = await Promise.all(cases.map(([dataDir]) => runToExit(['--data-dir', dataDir])));
    for (const [index, [dataDir, message]] of cases.entries()) {
      const { status, stderr } = results[index]!;
      expect(status, dataDir).toBe(2);
      const lines = stderr.split('\n').filter((line) => line.startsWith('easel:'));
      expect(lines, stderr).toHaveLength(1);
      expect(lines[0]).toMatch(message);
    }
  });

  it('a read-only data folder: exit code 2 saying it cannot be written', async (context) => {
    const mountPoint = mkdtempSync(join(tmpdir(), 'easel-ro-'));
    cleanups.push(() => rmSync(mountPoint, { recursive: true, force: true }));
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mountPoint]).status !== 0) {
      console.warn('Skipping the read-only test: cannot mount a tmpfs here (needs root).');
      context.skip();
      return;
    }
    cleanups.push(() => {
      spawnSync('umount', ['-l', mountPoint]);
    });
    // A library made while the disk was writable, then the disk turned read-only (as root ignores modes).
    const { status: made } = spawnSync(process.execPath, ['-e', `new (require('better-sqlite3'))(${JSON.stringify(join(mountPoint, 'easel.db'))}).exec('CREATE TABLE t (x)')`], { cwd: REPO });
    expect(made).toBe(0);
    expect(spawnSync('mount', ['-o', 'remount,ro', mountPoint]).status).toBe(0);
    const { status, stderr } = await runToExit(['--data-dir', mountPoint]);
    expect(status).toBe(2);
    expect(stderr).toMatch(/^easel: The data folder \S+ cannot be used: it is on a read-only disk\. Make it writable/m);
  });
});
