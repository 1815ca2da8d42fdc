import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS } from '../../../server/core/index.ts';
import { createSqliteStore } from '../../../server/sqlite/index.ts';

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
      steps: 20, cfg: 7, seed: 5, width: 512, height: 512, model: null, createdAt: at,
    });
    first.close();
    const second = createSqliteStore({ path });
    expect(second.getConversation('c1')?.settings).toEqual(DEFAULT_SETTINGS);
    expect(second.listImages('c1').map((i) => [i.seed, i.url])).toEqual([[5, `/images/${'a'.repeat(32)}.png`]]);
    second.close();
  });

  it('refuses a turn for an unknown conversation', () => {
    const store = createSqliteStore({ path: ':memory:' });
    expect(() => store.beginTurn('nope', { role: 'user', text: 'hi' }, at)).toThrow(/No conversation/);
  });
});
