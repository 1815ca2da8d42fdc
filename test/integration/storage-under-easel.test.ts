// The database breaking under a running Easel: its file deleted, replaced or damaged. SQLite itself goes on
// writing into a deleted file (everything is lost at the next start) and reports damage as SQLITE_CORRUPT;
// Easel refuses writes with storage_failed saying what happened and what to do, on every route, and keeps a copy.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { createFakeOllama, scriptReply, type FakeOllama } from '../fakes/fake-ollama.ts';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { find, read } from '../helpers/html.ts';
import { sendForm } from '../helpers/page-stage.ts';
import { readSse, readSseFrames } from '../helpers/sse.ts';
import { damageFromPage2 } from '../helpers/damage-database.ts';

const READY = { prompt: 'a red fox', generate_image: false, steps: 20, cfg: 7, seed: -1 };

let fake: FakeOllama;
let easel: TestEasel;
let closed = false;

beforeEach(async () => {
  fake = await createFakeOllama();
  easel = await startTestEasel({ ollamaUrl: fake.url });
  closed = false;
});

afterEach(async () => {
  if (!closed) await easel.close();
  await fake.close();
});

async function chat(text: string): Promise<string> {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply('Here is your fox.', READY));
  const events = await readSse(await easel.post(`/api/conversations/${id}/messages`, { text }));
  expect(events.at(-1)?.type).toBe('done');
  return id;
}

const dbPath = () => join(easel.dataDir, 'easel.db');
const recoveredCopies = () => readdirSync(easel.dataDir).filter((name) => /^easel-recovered-.*\.db$/.test(name));
const logLines = (pattern: RegExp) => easel.logs.filter((line) => pattern.test(line));

describe('the database file deleted under a running Easel', () => {
  it('refuses the next message with storage_failed, gives the text back, saves a copy, and the copy brings everything back', async () => {
    const id = await chat('a red fox');
    rmSync(dbPath());

    const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'in the snow' });
    const events = await readSse(response);
    const error = events.find((event) => event.type === 'error');
    expect(events.some((event) => event.type === 'started')).toBe(false);
    expect(error?.data).toMatchObject({ code: 'storage_failed' });
    const message = (error?.data as { message: string }).message;
    expect(message).toContain(`the database file ${dbPath()} was deleted while Easel was running`);
    expect(message).toContain('your message is back in the box');
    const [copy] = recoveredCopies();
    expect(copy).toBeDefined();
    expect(message).toContain(`stop Easel, move ${join(easel.dataDir, copy!)} (a copy of everything it had) to ${dbPath()} and start Easel again, then send it again.`);
    // Nothing reached the model: the message was not stored.
    expect(fake.chatRequests()).toHaveLength(1);

    // Every write is refused the same way, reads still answer from the open file.
    const created = await easel.post('/api/conversations', {});
    expect(created.status).toBe(503);
    expect(await created.json()).toMatchObject({ code: 'storage_failed', error: expect.stringContaining('was deleted while Easel was running') });
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(200);
    // Logged once, with the path, however many requests met it.
    expect(logLines(/the database file was deleted while Easel was running/)).toHaveLength(1);
    expect(logLines(/the database file was deleted/)[0]).toContain(dbPath());

    // The copy holds the conversation; put in place of the database, a restart finds it.
    const restored = mkdtempSync(join(tmpdir(), 'easel-restored-'));
    renameSync(join(easel.dataDir, copy!), join(restored, 'easel.db'));
    await easel.close();
    closed = true;
    const again = await startTestEasel({ ollamaUrl: fake.url, dataDir: restored });
    try {
      const list = (await (await again.get('/api/conversations')).json()) as { conversations: Array<{ id: string; title: string }> };
      expect(list.conversations.map((c) => c.id)).toEqual([id]);
      const turns = ((await (await again.get(`/api/conversations/${id}`)).json()) as { turns: Array<{ text: string }> }).turns;
      expect(turns.map((turn) => turn.text)).toEqual(['a red fox', 'Here is your fox.']);
    } finally {
      await again.close();
      rmSync(restored, { recursive: true, force: true });
    }
  });

  it('a reply streaming as the file goes: the reply is shown, then storage_failed saying it may be incomplete', async () => {
    const id = await easel.newConversation();
    let release!: () => void;
    fake.enqueue(scriptReply('A fox in the snow, waiting.', READY, { gate: new Promise<void>((resolve) => (release = resolve)) }));
    const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'a red fox' });
    const reading = readSse(response);
    await new Promise((resolve) => setTimeout(resolve, 100));
    rmSync(dbPath());
    release();
    const events = await reading;
    expect(events.some((event) => event.type === 'started')).toBe(true);
    expect(events.find((event) => event.type === 'error')?.data).toMatchObject({
      code: 'storage_failed',
      message: expect.stringContaining('The reply above was shown but may be incomplete after a reload'),
    });
  });
  it('on the page: the words typed come back into the composer, with the error in the bubble', async () => {
    const id = await chat('a red fox');
    rmSync(dbPath());
    const frames = await readSseFrames(await sendForm(easel, 'POST', `/c/${id}/messages`, { text: 'my <unsaved> words', sendKey: randomUUID() }));
    const markup = frames.map((frame) => frame.data).join('');
    expect(find(read(markup), '.restore-text').getAttribute('data-text')).toBe('my <unsaved> words');
    expect(markup).toContain('was deleted while Easel was running');
  });
});

describe('the database going away, met by other requests', () => {
  it('a Generate whose image cannot be recorded says storage_failed, not an image failure, and leaves no PNG behind', async () => {
    const a1111 = await createFakeA1111({ stepDelayMs: 1 });
    const withImages = await startTestEasel({ ollamaUrl: fake.url, flags: ['--image-backend', 'a1111', '--image-url', a1111.url] });
    try {
      const id = await withImages.newConversation();
      rmSync(join(withImages.dataDir, 'easel.db'));
      const events = await readSse(await withImages.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox', settings: { steps: 2 } }));
      expect(events.find((event) => event.type === 'error')?.data).toMatchObject({
        code: 'storage_failed',
        message: expect.stringContaining('Easel could not record the image: the database file'),
      });
      expect(a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img')).toHaveLength(1);
      expect(readdirSync(join(withImages.dataDir, 'images')).filter((name) => name.endsWith('.png'))).toEqual([]);
    } finally {
      await withImages.close();
      await a1111.close();
    }
  });

  it('its folder replaced by a file: writes get 503 storage_failed, not an internal error', async () => {
    const id = await chat('a red fox');
    const saved = mkdtempSync(join(tmpdir(), 'easel-moved-'));
    // The data folder moved away and a plain file put in its place: the path now ends in ENOTDIR.
    renameSync(easel.dataDir, join(saved, 'data'));
    writeFileSync(easel.dataDir, 'not a folder');
    try {
      const response = await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a blue fox' });
      expect(response.status).toBe(503);
      expect(await response.json()).toMatchObject({ code: 'storage_failed' });
    } finally {
      rmSync(easel.dataDir, { force: true });
      renameSync(join(saved, 'data'), easel.dataDir);
      rmSync(saved, { recursive: true, force: true });
    }
  });

  it('a database whose tables were changed behind its back (another program, a foreign file): reads get 503 storage_failed, not 500', async () => {
    const id = await chat('a red fox');
    const other = new Database(dbPath());
    other.pragma('foreign_keys = OFF');
    other.exec('DROP TABLE images');
    other.close();

    const response = await easel.get(`/api/conversations/${id}`);
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ code: 'storage_failed', error: expect.stringContaining('Easel could not read its library') });
    const page = await easel.get(`/c/${id}`);
    expect(page.status).toBe(503);
  });
});

describe('the database file replaced under a running Easel', () => {
  it('refuses writes, naming the replacement, and leaves the new file untouched', async () => {
    const id = await chat('a red fox');
    const other = join(easel.dataDir, 'other.db');
    new Database(other).close();
    renameSync(other, dbPath());

    const response = await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a blue fox' });
    expect(response.status).toBe(503);
    const body = (await response.json()) as { code: string; error: string };
    expect(body.code).toBe('storage_failed');
    expect(body.error).toContain(`Easel could not save the change: the database file ${dbPath()} was replaced by another file while Easel was running`);
    // The new file may be the user's own (a backup put back): the advice does not tell them to overwrite it.
    expect(body.error).toContain(`Stop Easel and start it again to use the file now at ${dbPath()}; to keep what Easel had instead, move`);
    expect(logLines(/the database file was replaced while Easel was running/)).toHaveLength(1);
    const replaced = new Database(dbPath(), { readonly: true });
    try {
      expect(replaced.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'conversations'").get()).toEqual({ n: 0 });
    } finally {
      replaced.close();
    }
  });
});

describe('the database file damaged under a running Easel', () => {
  it('answers every route with 503 storage_failed, page and API, logged once with the path', async () => {
    const id = await chat('a red fox');
    await chat('a blue whale');
    damageFromPage2(dbPath());

    const api = await easel.get('/api/conversations');
    expect(api.status).toBe(503);
    expect(await api.json()).toMatchObject({ code: 'storage_failed', error: expect.stringContaining(`the database ${dbPath()} is damaged`) });
    const one = await easel.get(`/api/conversations/${id}`);
    expect(one.status).toBe(503);
    const page = await easel.get(`/c/${id}`);
    expect(page.status).toBe(503);
    expect(await page.text()).toContain(`move ${dbPath()} aside or restore it from a backup`);
    const home = await easel.get('/');
    expect(home.status).toBe(503);
    const send = await easel.post(`/api/conversations/${id}/messages`, { text: 'again' });
    expect(send.status).toBe(503);
    expect(await send.json()).toMatchObject({ code: 'storage_failed' });
    // The page's own send: the words where the page shows a refusal (the text goes back into the box on any non-200).
    const pageSend = await sendForm(easel, 'POST', `/c/${id}/messages`, { text: 'again', sendKey: randomUUID() }, { 'hx-request': 'true' });
    expect(pageSend.status).toBe(503);
    const refusal = find(read(await pageSend.text()), 'hx-partial');
    expect(refusal.getAttribute('hx-target')).toBe('#composer-status');
    expect(refusal.text).toContain(`the database ${dbPath()} is damaged`);
    expect(logLines(/the database is damaged/)).toHaveLength(1);
    expect(logLines(/the database is damaged/)[0]).toContain(dbPath());
  });
});

