import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, isStorageError, type ContextChange, type ConversationStore, type ImageRecord } from '../../../server/core/index.ts';
import type { ContextEntry } from '../../../server/protocol/index.ts';
import { createSqliteStore, latestSchemaVersion, toSearchTerms } from '../../../server/sqlite/index.ts';

const MIGRATIONS = fileURLToPath(new URL('../../../server/sqlite/migrations/', import.meta.url));
const at = '2026-11-23T10:00:00.000Z';
const later = '2026-11-23T11:00:00.000Z';
const META = { prompt: 'a cat', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'easel-store-'));
  dirs.push(dir);
  return join(dir, 'easel.db');
}

const append = (...entries: ContextEntry[]): ContextChange => ({ kind: 'edit', dropFront: 0, dropBack: 0, append: entries });
const user = (text: string): ContextEntry => ({ kind: 'user', text });
const reply = (text: string): ContextEntry => ({ kind: 'assistant', text, metadata: META });

/** One whole exchange, the way the service stores it: begin (message, context, running reply), then finish. */
function exchange(store: ConversationStore, id: string, message: string, answer: string, when = at): number {
  const { turnId } = store.beginTurn(id, { user: { text: message }, replaces: [], context: append(user(message)) }, when);
  store.finishTurn(id, { turnId, turn: { role: 'assistant', text: answer, metadata: META }, context: append(reply(answer)) }, when);
  return turnId;
}

function image(conversationId: string, turnId: number | null, file: string): ImageRecord {
  return {
    id: file.slice(0, 8), conversationId, turnId, file, url: '', prompt: 'p', negativePrompt: '',
    steps: 20, cfg: 7, seed: 5, sampler: null, scheduler: null, width: 512, height: 512, model: null, promptVersion: null, source: null, compareSide: null, createdAt: at,
  };
}

describe('the SQLite store', () => {
  it('keeps the transcript and the working context as separate records', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    exchange(store, 'c1', 'a cat', 'Which cat?');
    // A reset empties the context; the transcript stays.
    const { turnId } = store.beginTurn('c1', { user: { text: 'ginger' }, replaces: [], context: append(user('ginger')) }, at);
    store.finishTurn('c1', { turnId, turn: { role: 'assistant', text: 'reset', status: 'reset' }, context: { kind: 'replace', entries: [] } }, at);

    expect(store.readContext('c1')).toEqual([]);
    expect(store.listTurns('c1').map((t) => [t.role, t.text, t.status])).toEqual([
      ['user', 'a cat', 'ok'],
      ['assistant', 'Which cat?', 'ok'],
      ['user', 'ginger', 'ok'],
      ['assistant', 'reset', 'reset'],
    ]);
  });

  it('keeps the notices of a reply with its turn, and none for a turn without them', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    exchange(store, 'c1', 'a cat', 'Which cat?');
    const { turnId } = store.beginTurn('c1', { user: { text: 'more steps' }, replaces: [], context: append(user('more steps')) }, at);
    const notices = ['steps 500 is out of range: 150 was used.', 'The reply was cut off.'];
    store.finishTurn('c1', { turnId, turn: { role: 'assistant', text: 'Done.', metadata: META, notices }, context: append(reply('Done.')) }, at);

    const turns = store.listTurns('c1');
    expect(turns.map((turn) => turn.notices)).toEqual([undefined, undefined, undefined, notices]);
  });

  it('starts a turn in one transaction: the message in both records and the reply as running', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    const started = store.beginTurn('c1', { user: { text: 'a cat' }, replaces: [], context: append(user('a cat')) }, later);
    store.saveReplyText(started.turnId, 'Which');
    // Another connection sees what a crash would leave: everything written, nothing to redo.
    const other = new Database(path, { readonly: true });
    expect(other.prepare('SELECT role, text, status FROM turns ORDER BY id').all()).toEqual([
      { role: 'user', text: 'a cat', status: 'ok' },
      { role: 'assistant', text: 'Which', status: 'running' },
    ]);
    expect(other.prepare('SELECT entry FROM context_entries').all()).toEqual([{ entry: JSON.stringify(user('a cat')) }]);
    expect(other.prepare('SELECT updated_at FROM conversations').get()).toEqual({ updated_at: later });
    other.close();
    store.close();
  });

  it('marks a reply left running as interrupted when the database is opened again (after a crash)', () => {
    const path = tempPath();
    const first = createSqliteStore({ path });
    first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    const { turnId } = first.beginTurn('c1', { user: { text: 'a cat' }, replaces: [], context: append(user('a cat')) }, at);
    first.saveReplyText(turnId, 'A tabby, or');
    // No finishTurn: the process died here. The file is simply opened again.
    const second = createSqliteStore({ path });
    expect(second.listTurns('c1').map((t) => [t.text, t.status])).toEqual([
      ['a cat', 'ok'],
      ['A tabby, or', 'interrupted'],
    ]);
    expect(second.readContext('c1')).toEqual([user('a cat')]);
    second.close();
    first.close();
  });

  it('appends to the working context row by row and drops entries from either end', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    exchange(store, 'c1', 'one', 'One.');
    exchange(store, 'c1', 'two', 'Two.');
    const { turnId } = store.beginTurn('c1', { user: { text: 'three' }, replaces: [], context: { kind: 'edit', dropFront: 2, dropBack: 1, append: [user('three')] } }, at);
    store.finishTurn('c1', { turnId, turn: { role: 'assistant', text: 'Three.' }, context: append(reply('Three.')) }, at);
    const expected = [user('two'), user('three'), reply('Three.')];
    expect(store.readContext('c1')).toEqual(expected);
    store.close();
    // The cache and the rows agree.
    const reopened = createSqliteStore({ path });
    expect(reopened.readContext('c1')).toEqual(expected);
    reopened.close();
  });

  it('never rewrites the working context for a prompt or settings edit', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    exchange(store, 'c1', 'one', 'One.');
    // Every write to the context table leaves a row in a log, whichever connection makes it.
    const db = new Database(path);
    db.exec(`CREATE TABLE context_writes (what TEXT);
      CREATE TRIGGER log_insert AFTER INSERT ON context_entries BEGIN INSERT INTO context_writes VALUES ('insert'); END;
      CREATE TRIGGER log_delete AFTER DELETE ON context_entries BEGIN INSERT INTO context_writes VALUES ('delete'); END;
      CREATE TRIGGER log_update AFTER UPDATE ON context_entries BEGIN INSERT INTO context_writes VALUES ('update'); END;`);
    const writes = () => db.prepare('SELECT what FROM context_writes').all();
    store.addUserPromptVersion('c1', 'a new prompt', later);
    store.setSettings('c1', { settings: { ...DEFAULT_SETTINGS, steps: 9 }, pinned: ['steps'], settingSuggestions: {} }, { tellModel: true });
    expect(writes()).toEqual([]);
    // The log does see the turn's own writes: one row per new entry, nothing rewritten.
    exchange(store, 'c1', 'two', 'Two.');
    expect(writes()).toEqual([{ what: 'insert' }, { what: 'insert' }]);
    db.close();
    store.close();
  });

  it('keeps every prompt version with its parent: a version, the model\'s, a branch; undo and redo move the current one', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS, prompt: 'a cat' });
    const first = store.getConversation('c1')!.promptVersion!;
    const { turnId, promptVersion: seen } = store.beginTurn('c1', { user: { text: 'a cat' }, replaces: [], context: append(user('a cat')) }, at);
    expect(seen).toBe(first);
    const mine = store.addUserPromptVersion('c1', 'my own prompt', at);
    store.finishTurn(
      'c1',
      {
        turnId,
        turn: { role: 'assistant', text: 'ok' },
        context: append(),
        pane: { version: { prompt: 'model prompt' }, suggestion: null, settings: { ...DEFAULT_SETTINGS, steps: 5 }, settingSuggestions: { cfg: 9 } },
        imageNote: { reason: 'auto_off', message: 'Not made.' },
      },
      at,
    );
    const record = store.getConversation('c1')!;
    expect(record).toMatchObject({ prompt: 'model prompt', settings: { steps: 5 }, settingSuggestions: { cfg: 9 }, suggestion: null });
    expect(store.listTurns('c1').at(-1)?.imageNote).toEqual({ reason: 'auto_off', message: 'Not made.' });
    const versions = store.listPromptVersions('c1');
    expect(versions.map((v) => [v.prompt, v.source, v.parentId, v.turnId])).toEqual([
      ['a cat', 'user', null, null],
      ['my own prompt', 'user', first, null],
      ['model prompt', 'model', mine, turnId],
    ]);
    // the user's edit is pending, so the next user message tells the model about it
    expect(record.pending).toEqual({ promptEdited: true, settingsChanged: false });

    store.selectPromptVersion('c1', mine);
    expect(store.getConversation('c1')).toMatchObject({ prompt: 'my own prompt', promptVersion: mine });
    const branch = store.addUserPromptVersion('c1', 'a branch', later);
    expect(store.listPromptVersionChildren('c1', mine).map((v) => v.id)).toEqual([versions[2]!.id, branch]);
    expect(() => store.selectPromptVersion('c1', 9999)).toThrow(/No prompt version/);
    store.beginTurn('c1', { user: { text: 'next' }, replaces: [], context: append(user('next')) }, at);
    expect(store.getConversation('c1')!.pending).toEqual({ promptEdited: false, settingsChanged: false });
  });

  it('a suggestion, pins and setting suggestions are kept with the conversation', () => {
    const path = tempPath();
    const first = createSqliteStore({ path });
    first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS, pinned: ['seed'] });
    first.setSuggestion('c1', { prompt: 'the model\'s', turnId: 3 });
    first.setSettings('c1', { settings: { ...DEFAULT_SETTINGS, steps: 40 }, pinned: ['steps', 'seed'], settingSuggestions: { steps: 25 } }, { tellModel: false });
    first.close();
    const again = createSqliteStore({ path });
    expect(again.getConversation('c1')).toMatchObject({
      suggestion: { prompt: 'the model\'s', turnId: 3 },
      pinned: ['steps', 'seed'],
      settingSuggestions: { steps: 25 },
      settings: { steps: 40 },
      pending: { promptEdited: false, settingsChanged: false },
    });
    again.close();
  });

  it('creates a conversation with its first message, in the same transaction', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.beginTurn('new', { create: { createdAt: at, settings: DEFAULT_SETTINGS, prompt: 'a fox', pinned: [] }, user: { text: 'hi' }, replaces: [], context: append(user('hi')) }, at);
    expect(store.getConversation('new')).toMatchObject({ prompt: 'a fox', title: null });
    expect(store.listPromptVersions('new').map((v) => v.prompt)).toEqual(['a fox']);
    expect(store.listTurns('new').map((t) => t.status)).toEqual(['ok', 'running']);
  });

  it('marks replaced turns and lists the last exchange without them', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    exchange(store, 'c1', 'one', 'One.');
    const second = exchange(store, 'c1', 'two', 'Two.');
    expect(store.listLastExchange('c1').map((t) => t.text)).toEqual(['two', 'Two.']);
    const { turnId } = store.beginTurn('c1', { replaces: [second], context: append() }, at);
    store.finishTurn('c1', { turnId, turn: { role: 'assistant', text: 'Two again.' }, context: append() }, at);
    expect(store.listTurns('c1').map((t) => [t.text, t.status])).toEqual([
      ['one', 'ok'],
      ['One.', 'ok'],
      ['two', 'ok'],
      ['Two.', 'replaced'],
      ['Two again.', 'ok'],
    ]);
    expect(store.listLastExchange('c1').map((t) => t.text)).toEqual(['two', 'Two again.']);
  });

  it('lists newest activity first, and searches messages, titles and prompts by every word', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'fox', createdAt: at, settings: DEFAULT_SETTINGS });
    exchange(store, 'fox', 'a red fox in the snow', 'What light?', '2026-11-23T10:00:00.000Z');
    store.createConversation({ id: 'cat', createdAt: at, settings: DEFAULT_SETTINGS });
    exchange(store, 'cat', 'a tabby cat', 'Indoors or out?', '2026-11-23T12:00:00.000Z');
    store.createConversation({ id: 'boat', createdAt: '2026-11-23T09:00:00.000Z', settings: DEFAULT_SETTINGS, prompt: 'a sailing boat at dusk' });
    store.renameConversation('boat', 'Harbour études');

    expect(store.listConversations().map((c) => c.id)).toEqual(['cat', 'fox', 'boat']);
    const ids = (query: string) => store.listConversations({ query }).map((c) => c.id);
    expect(ids('fox')).toEqual(['fox']);
    expect(ids('FOX snow')).toEqual(['fox']);
    // Every word must be somewhere in the conversation, not necessarily in one message.
    expect(ids('fox light')).toEqual(['fox']);
    expect(ids('fox tabby')).toEqual([]);
    expect(ids('sail')).toEqual(['boat']);
    expect(ids('etudes')).toEqual(['boat']);
    expect(ids('indoors')).toEqual(['cat']);
    // FTS5 syntax in the user's words is only words.
    expect(ids('"fox" OR cat')).toEqual([]);
    expect(ids('fox) NEAR(snow')).toEqual([]);
    expect(ids('(fox) "snow"')).toEqual(['fox']);
    expect(ids('---')).toEqual(['cat', 'fox', 'boat']);
    const listing = store.listConversations({ query: 'tabby' })[0]!;
    expect(listing).toMatchObject({ firstMessage: 'a tabby cat', lastMessage: 'Indoors or out?', title: null });
  });

  it('quotes every search word, so none is read as FTS5 syntax', () => {
    expect(toSearchTerms('red "fox" - col:x')).toEqual(['"red"*', '"fox"*', '"col"*', '"x"*']);
    expect(toSearchTerms('  ')).toEqual([]);
    // A repeated word does not use up one of the eight: the gallery's search splits the same way (core/text.ts).
    expect(toSearchTerms('fox, fox red')).toEqual(['"fox"*', '"red"*']);
  });

  it('never moves a conversation back in time when an image of an earlier moment is added (a batch shares its first moment)', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    store.addImage(image('c1', null, `${'a'.repeat(32)}.png`));
    // A message sent mid-batch, then the batch's next image, stamped with the batch's first moment.
    exchange(store, 'c1', 'a cat', 'Which cat?', later);
    store.addImage({ ...image('c1', null, `${'b'.repeat(32)}.png`), id: 'bbbbbbb2' });
    expect(store.getConversation('c1')?.updatedAt).toBe(later);
    // A later image still moves it on.
    const latest = '2026-11-23T12:00:00.000Z';
    store.addImage({ ...image('c1', null, `${'c'.repeat(32)}.png`), id: 'ccccccc3', createdAt: latest });
    expect(store.getConversation('c1')?.updatedAt).toBe(latest);
  });

  it('deletes a conversation with its turns, images, context and search rows, and returns its image files', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS, prompt: 'zebra' });
    const turnId = exchange(store, 'c1', 'a zebra', 'Stripes.');
    store.addImage(image('c1', turnId, `${'a'.repeat(32)}.png`));
    store.addImage(image('c1', null, `${'b'.repeat(32)}.png`));
    store.createConversation({ id: 'c2', createdAt: at, settings: DEFAULT_SETTINGS });
    exchange(store, 'c2', 'a zebra too', 'Yes.');

    expect(store.deleteConversation('c1')?.files.sort()).toEqual([`${'a'.repeat(32)}.png`, `${'b'.repeat(32)}.png`]);
    expect(store.getConversation('c1')).toBeUndefined();
    expect(store.readContext('c1')).toEqual([]);
    expect(store.listConversations({ query: 'zebra' }).map((c) => c.id)).toEqual(['c2']);
    expect(store.deleteConversation('c1')).toBeUndefined();
    store.close();
    const db = new Database(path, { readonly: true });
    for (const table of ['turns', 'images', 'context_entries']) {
      expect(db.prepare(`SELECT count(*) AS n FROM ${table} WHERE conversation_id = 'c1'`).get(), table).toEqual({ n: 0 });
    }
    expect(db.prepare("SELECT count(*) AS n FROM conversations_search WHERE conversation_id = 'c1'").get()).toEqual({ n: 0 });
    expect(db.prepare("SELECT count(*) AS n FROM turns_search WHERE turns_search MATCH 'stripes'").get()).toEqual({ n: 0 });
    db.close();
  });

  it('skips a conversation whose row cannot be read, with a log line, instead of failing the list', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'good', createdAt: at, settings: DEFAULT_SETTINGS });
    store.createConversation({ id: 'bad', createdAt: at, settings: DEFAULT_SETTINGS });
    store.close();
    const db = new Database(path);
    db.prepare("UPDATE conversations SET settings = '{not json' WHERE id = 'bad'").run();
    db.close();
    const warnings: string[] = [];
    const logger = { debug() {}, info() {}, warn: (message: string, fields?: Record<string, unknown>) => warnings.push(`${message} ${fields?.conversationId}`), error() {} };
    const reopened = createSqliteStore({ path, logger });
    expect(reopened.listConversations().map((c) => c.id)).toEqual(['good']);
    expect(reopened.getConversation('bad')).toBeUndefined();
    expect(warnings).toContain('skipped a conversation whose record cannot be read bad');
    reopened.close();
  });

  it('turns a write refused by SQLite into a StorageError naming the file', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    // A second connection holds the write lock: SQLite refuses (SQLITE_BUSY), and nothing of the turn is kept.
    const other = new Database(path, { timeout: 0 });
    other.exec('BEGIN IMMEDIATE');
    let caught: unknown;
    try {
      store.beginTurn('c1', { user: { text: 'hello' }, replaces: [], context: append(user('hello')) }, at);
    } catch (error) {
      caught = error;
    }
    other.exec('ROLLBACK');
    other.close();
    expect(isStorageError(caught)).toBe(true);
    expect((caught as Error).message).toContain(path);
    expect(store.listTurns('c1')).toEqual([]);
    expect(store.readContext('c1')).toEqual([]);
    store.close();
  });

  it('migrates a file database once and reopens it with its data', () => {
    const path = tempPath();
    const first = createSqliteStore({ path });
    first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    first.addImage(image('c1', null, `${'a'.repeat(32)}.png`));
    first.close();
    const second = createSqliteStore({ path });
    expect(second.getConversation('c1')?.settings).toEqual(DEFAULT_SETTINGS);
    expect(second.listImages('c1').map((i) => [i.seed, i.url])).toEqual([[5, `/images/${'a'.repeat(32)}.png`]]);
    second.close();
    const db = new Database(path, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(latestSchemaVersion());
    db.close();
  });

  it('migration 004 keeps the images of a version-2 database and then stores values a backend did not claim as null', () => {
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
      steps: null, cfg: null, seed: null, sampler: null, scheduler: null, width: 64, height: 64, model: null, promptVersion: null, source: null, compareSide: null, createdAt: at,
    });
    store.addImage({
      id: 'i3', conversationId: 'c1', turnId: null, file: 'euler.png', url: '', prompt: 'r', negativePrompt: '',
      steps: 12, cfg: 6.5, seed: 7, sampler: 'Euler', scheduler: null, width: 64, height: 64, model: null, promptVersion: null, source: null, compareSide: null, createdAt: at,
    });
    expect(store.listImages('c1').map(({ id, steps, cfg, seed, sampler, negativePrompt, model }) => ({ id, steps, cfg, seed, sampler, negativePrompt, model }))).toEqual([
      { id: 'i1', steps: 20, cfg: 7.5, seed: 42, sampler: null, negativePrompt: 'n', model: 'm' },
      { id: 'i2', steps: null, cfg: null, seed: null, sampler: null, negativePrompt: '', model: null },
      { id: 'i3', steps: 12, cfg: 6.5, seed: 7, sampler: 'Euler', negativePrompt: '', model: null },
    ]);
    store.close();
  });

  it('migration 008 gives the images of a version-7 database no scheduler (null), and then keeps the one an image was made with', () => {
    const path = tempPath();
    const old = new Database(path);
    for (const file of ['001-init.sql', '002-images.sql', '003-library.sql', '004-image-parameters.sql', '005-prompt-versions.sql', '006-turn-notices.sql', '007-pane-revision.sql']) {
      old.exec(readFileSync(join(MIGRATIONS, file), 'utf8'));
    }
    old.pragma('user_version = 7');
    old.prepare("INSERT INTO conversations (id, created_at, updated_at, settings) VALUES ('c1', ?, ?, ?)").run(at, at, JSON.stringify(DEFAULT_SETTINGS));
    old
      .prepare("INSERT INTO images (id, conversation_id, turn_id, file, prompt, negative_prompt, steps, cfg, seed, sampler, width, height, model, created_at) VALUES ('i1', 'c1', NULL, 'old.png', 'p', '', 20, 7, 42, 'Euler', 512, 512, NULL, ?)")
      .run(at);
    old.close();

    const store = createSqliteStore({ path });
    store.addImage({ ...image('c1', null, 'karras.png'), id: 'i2', sampler: 'DPM++ 2M', scheduler: 'Karras' });
    expect(store.listImages('c1').map(({ id, sampler, scheduler }) => ({ id, sampler, scheduler }))).toEqual([
      { id: 'i1', sampler: 'Euler', scheduler: null },
      { id: 'i2', sampler: 'DPM++ 2M', scheduler: 'Karras' },
    ]);
    store.close();
    const db = new Database(path, { readonly: true });
    expect(db.prepare("SELECT scheduler FROM images WHERE id = 'i2'").get()).toEqual({ scheduler: 'Karras' });
    db.close();
  });

  it('refuses a turn for an unknown conversation', () => {
    const store = createSqliteStore({ path: ':memory:' });
    expect(() => store.beginTurn('nope', { user: { text: 'hi' }, replaces: [], context: append(user('hi')) }, at)).toThrow(/No conversation/);
  });

  it('stores an import whole, mapping its images to its turns', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.importConversation({
      id: 'imp', title: 'Imported', createdAt: at, updatedAt: later, prompt: 'p', settings: DEFAULT_SETTINGS,
      turns: [{ role: 'user', text: 'hi', createdAt: at }, { role: 'assistant', text: 'Hello.', metadata: META, createdAt: at }],
      context: [user('hi'), reply('Hello.')],
      images: [{ ...image('imp', null, `${'c'.repeat(32)}.png`), turn: 1 }].map(({ conversationId: _c, turnId: _t, url: _u, ...rest }) => rest),
    });
    const turns = store.listTurns('imp');
    expect(turns.map((t) => t.text)).toEqual(['hi', 'Hello.']);
    expect(turns[1]?.images.map((i) => i.file)).toEqual([`${'c'.repeat(32)}.png`]);
    expect(store.readContext('imp')).toEqual([user('hi'), reply('Hello.')]);
    expect(store.getConversation('imp')).toMatchObject({ title: 'Imported', updatedAt: later });
  });
});

describe('opening a database', () => {
  it('refuses a damaged file, naming it and what to do', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    store.close();
    const bytes = readFileSync(path);
    // Scribble over everything after the header page: the schema's pages are gone.
    const damaged = Buffer.concat([bytes.subarray(0, 100), Buffer.alloc(bytes.length - 100, 0x5a)]);
    rmSync(path);
    rmSync(`${path}-wal`, { force: true });
    rmSync(`${path}-shm`, { force: true });
    writeFileSync(path, damaged);
    expect(() => createSqliteStore({ path })).toThrow(expect.objectContaining({ name: 'StoreOpenError', code: 'corrupt' }));
    expect(() => createSqliteStore({ path })).toThrow(new RegExp(`${path.replaceAll('/', '\\/')} is damaged.*Move it aside`));
  });

  it('refuses a file that is not a database at all', () => {
    const path = tempPath();
    writeFileSync(path, 'these are not the pages you are looking for'.repeat(200));
    expect(() => createSqliteStore({ path })).toThrow(expect.objectContaining({ code: 'corrupt' }));
  });

  it('refuses a database written by a newer Easel and leaves it untouched', () => {
    const path = tempPath();
    createSqliteStore({ path }).close();
    const db = new Database(path);
    db.pragma('user_version = 999');
    db.close();
    expect(() => createSqliteStore({ path })).toThrow(expect.objectContaining({ code: 'newer_version' }));
    expect(() => createSqliteStore({ path })).toThrow(/newer Easel \(schema version 999; this one knows up to \d+\)\. Update Easel/);
    const after = new Database(path, { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(999);
    after.close();
  });
});
