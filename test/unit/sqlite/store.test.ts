import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS } from '../../../server/core/index.ts';
import { createSqliteStore } from '../../../server/sqlite/index.ts';

const MIGRATIONS = fileURLToPath(new URL('../../../server/sqlite/migrations/', import.meta.url));
const at = '2026-11-23T10:00:00.000Z';
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('the SQLite store', () => {
  it('keeps the transcript and the working context as separate records', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    store.beginTurn('c1', { role: 'user', text: 'a cat' }, at);
    store.finishTurn('c1', { turn: { role: 'assistant', text: 'Which cat?' }, context: [{ kind: 'user', text: 'a cat' }] }, at);
    // A reset empties the context; the transcript stays.
    store.beginTurn('c1', { role: 'user', text: 'ginger' }, at);
    store.finishTurn('c1', { turn: { role: 'assistant', text: 'reset', status: 'reset' }, context: [] }, at);

    expect(store.getConversation('c1')!.context).toEqual([]);
    expect(store.listTurns('c1').map((t) => [t.role, t.text, t.status])).toEqual([
      ['user', 'a cat', 'ok'],
      ['assistant', 'Which cat?', 'ok'],
      ['user', 'ginger', 'ok'],
      ['assistant', 'reset', 'reset'],
    ]);
  });

  it('a user edit made while a reply streams wins over the model suggestion', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    store.beginTurn('c1', { role: 'user', text: 'a cat' }, at);
    store.setPrompt('c1', 'my own prompt', at);
    store.finishTurn('c1', { turn: { role: 'assistant', text: 'ok' }, context: [], prompt: 'model prompt', settings: { ...DEFAULT_SETTINGS, steps: 5 } }, at);
    const record = store.getConversation('c1')!;
    expect(record.prompt).toBe('my own prompt');
    expect(record.settings.steps).toBe(5);
    // the edit is still pending, so the next user message tells the model about it
    expect(record.pending).toEqual({ promptEdited: true, settingsChanged: false });
    expect(store.beginTurn('c1', { role: 'user', text: 'next' }, at).conversation.pending.promptEdited).toBe(true);
    expect(store.getConversation('c1')!.pending).toEqual({ promptEdited: false, settingsChanged: false });
  });

  it('migrates a file database once and reopens it with its data', () => {
    const dir = mkdtempSync(join(tmpdir(), 'easel-store-'));
    dirs.push(dir);
    const path = join(dir, 'easel.db');
    const first = createSqliteStore({ path });
    first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    first.addImage({
      id: 'i1', conversationId: 'c1', turnId: null, file: 'a'.repeat(32) + '.png', url: '', prompt: 'p', negativePrompt: '',
      steps: 20, cfg: 7, seed: 5, sampler: null, width: 512, height: 512, model: null, createdAt: at,
    });
    first.close();
    const second = createSqliteStore({ path });
    expect(second.getConversation('c1')?.settings).toEqual(DEFAULT_SETTINGS);
    expect(second.listImages('c1').map((i) => [i.seed, i.url])).toEqual([[5, `/images/${'a'.repeat(32)}.png`]]);
    second.close();
  });

  it('migration 003 keeps the images of a version-2 database and then stores values a backend did not claim as null', () => {
    const dir = mkdtempSync(join(tmpdir(), 'easel-store-'));
    dirs.push(dir);
    const path = join(dir, 'easel.db');
    const old = new Database(path);
    for (const file of ['001-init.sql', '002-images.sql']) old.exec(readFileSync(join(MIGRATIONS, file), 'utf8'));
    old.pragma('user_version = 2');
    old.prepare("INSERT INTO conversations (id, created_at, updated_at, settings) VALUES ('c1', ?, ?, ?)").run(at, at, JSON.stringify(DEFAULT_SETTINGS));
    old
      .prepare("INSERT INTO images (id, conversation_id, turn_id, file, prompt, negative_prompt, steps, cfg, seed, width, height, model, created_at) VALUES ('i1', 'c1', NULL, 'old.png', 'p', 'n', 20, 7.5, 42, 512, 512, 'm', ?)")
      .run(at);
    old.close();

    const store = createSqliteStore({ path });
    store.addImage({
      id: 'i2', conversationId: 'c1', turnId: null, file: 'new.png', url: '', prompt: 'q', negativePrompt: '',
      steps: null, cfg: null, seed: null, sampler: null, width: 64, height: 64, model: null, createdAt: at,
    });
    store.addImage({
      id: 'i3', conversationId: 'c1', turnId: null, file: 'euler.png', url: '', prompt: 'r', negativePrompt: '',
      steps: 12, cfg: 6.5, seed: 7, sampler: 'Euler', width: 64, height: 64, model: null, createdAt: at,
    });
    expect(store.listImages('c1').map(({ id, steps, cfg, seed, sampler, negativePrompt, model }) => ({ id, steps, cfg, seed, sampler, negativePrompt, model }))).toEqual([
      { id: 'i1', steps: 20, cfg: 7.5, seed: 42, sampler: null, negativePrompt: 'n', model: 'm' },
      { id: 'i2', steps: null, cfg: null, seed: null, sampler: null, negativePrompt: '', model: null },
      { id: 'i3', steps: 12, cfg: 6.5, seed: 7, sampler: 'Euler', negativePrompt: '', model: null },
    ]);
    store.close();
  });

  it('refuses a turn for an unknown conversation', () => {
    const store = createSqliteStore({ path: ':memory:' });
    expect(() => store.beginTurn('nope', { role: 'user', text: 'hi' }, at)).toThrow(/No conversation/);
  });
});
