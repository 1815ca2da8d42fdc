// The store's edges: what a user reads when the database fails (each message word for word), the working
// context's cache (seen through a second connection writing behind the store's back), what is stored and
// read back, and the log lines for rows that cannot be read. Real SQLite files in a temp dir throughout.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, StorageError, type ContextChange, type ConversationStore } from '../../../server/core/index.ts';
import type { Logger } from '../../../server/core/logger.ts';
import type { ContextEntry } from '../../../server/protocol/index.ts';
import { createSqliteStore, toSearchTerms } from '../../../server/sqlite/index.ts';
import { StoredValueError } from '../../../server/sqlite/rows.ts';
import { describeOpenFailure, toStorageError } from '../../../server/sqlite/store.ts';

const MIGRATIONS = fileURLToPath(new URL('../../../server/sqlite/migrations/', import.meta.url));
const at = '2026-11-23T10:00:00.000Z';
const META = { prompt: 'a cat', generate_image: false, steps: 20, cfg: 7, seed: -1 };

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'easel-edges-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const tempPath = () => join(tempDir(), 'easel.db');

/** A store on a file, closed after the test (closing it again is harmless). */
function openStore(path: string, logger?: Logger): ConversationStore {
  const store = createSqliteStore({ path, ...(logger ? { logger } : {}) });
  cleanups.push(() => store.close());
  return store;
}

/** A second connection to the same file: another program writing behind the store's back. */
function otherConnection(path: string): Database.Database {
  const db = new Database(path);
  cleanups.push(() => db.close());
  return db;
}

/** A logger that keeps every warning with its fields. */
function recordingLogger(): { logger: Logger; warnings: Array<[string, Record<string, unknown> | undefined]> } {
  const warnings: Array<[string, Record<string, unknown> | undefined]> = [];
  return { logger: { debug() {}, info() {}, warn: (message, fields) => warnings.push([message, fields]), error() {} }, warnings };
}

/** What a thrown error carries, for one exact comparison. */
function thrown(work: () => unknown): { name: string; code: unknown; message: string; location?: unknown; cause: unknown } {
  try {
    work();
  } catch (error) {
    const { name, message, cause } = error as Error;
    const { code, location } = error as { code?: unknown; location?: unknown };
    return { name, code, message, ...(location === undefined ? {} : { location }), cause };
  }
  throw new Error('nothing was thrown');
}

const append = (...entries: ContextEntry[]): ContextChange => ({ kind: 'edit', dropFront: 0, dropBack: 0, append: entries });
const user = (text: string): ContextEntry => ({ kind: 'user', text });
const reply = (text: string): ContextEntry => ({ kind: 'assistant', text, metadata: META });

/** Adds one entry at the end of a conversation's context rows, as another program would. */
function appendRow(db: Database.Database, conversationId: string, entry: ContextEntry | string): void {
  db.prepare('INSERT INTO context_entries (conversation_id, seq, entry) SELECT ?, coalesce(max(seq) + 1, 0), ? FROM context_entries WHERE conversation_id = ?')
    .run(conversationId, typeof entry === 'string' ? entry : JSON.stringify(entry), conversationId);
}

describe('the working context cache', () => {
  it('answers a second read from memory: a row added by another program is not seen', () => {
    const path = tempPath();
    const store = openStore(path);
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    store.beginTurn('c1', { user: { text: 'one' }, replaces: [], context: append(user('one')) }, at);
    expect(store.readContext('c1')).toEqual([user('one')]);
    // Only the store's own writes update its copy: another program's row shows what a read came from.
    appendRow(otherConnection(path), 'c1', user('behind its back'));
    expect(store.readContext('c1')).toEqual([user('one')]);
    // A new store reads the rows.
    store.close();
    expect(openStore(path).readContext('c1')).toEqual([user('one'), user('behind its back')]);
  });

  it('keeps the 32 conversations read last and reads the rows again for the one read before them', () => {
    const path = tempPath();
    const first = openStore(path);
    const ids = Array.from({ length: 33 }, (_, index) => `c${index}`);
    for (const id of ids) first.importConversation({ id, title: null, createdAt: at, updatedAt: at, prompt: '', settings: DEFAULT_SETTINGS, turns: [], context: [user(id)], images: [] });
    first.close();

    const store = openStore(path);
    for (const id of ids) expect(store.readContext(id)).toEqual([user(id)]);
    const other = otherConnection(path);
    for (const id of ids) appendRow(other, id, user('later'));
    // c1 is the oldest of the 32 kept: still from memory. c0 was pushed out: its rows are read again.
    expect(store.readContext('c1')).toEqual([user('c1')]);
    expect(store.readContext('c0')).toEqual([user('c0'), user('later')]);
  });

  it('an edit dropping entries at the front and the back leaves in memory what it leaves in the rows', () => {
    const path = tempPath();
    const store = openStore(path);
    const five = [user('a'), reply('b'), user('c'), reply('d'), user('e')];
    store.importConversation({ id: 'c1', title: null, createdAt: at, updatedAt: at, prompt: '', settings: DEFAULT_SETTINGS, turns: [], context: five, images: [] });
    expect(store.readContext('c1')).toEqual(five);
    store.beginTurn('c1', { user: { text: 'f' }, replaces: [], context: { kind: 'edit', dropFront: 2, dropBack: 1, append: [user('f')] } }, at);
    expect(store.readContext('c1')).toEqual([user('c'), reply('d'), user('f')]);
    store.close();
    expect(openStore(path).readContext('c1')).toEqual([user('c'), reply('d'), user('f')]);
  });

  it('skips a context row that cannot be read, with a log line naming the conversation and the row', () => {
    const path = tempPath();
    const first = openStore(path);
    first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    first.beginTurn('c1', { user: { text: 'one' }, replaces: [], context: append(user('one')) }, at);
    first.close();
    const other = otherConnection(path);
    appendRow(other, 'c1', '{not json');
    appendRow(other, 'c1', user('two'));

    const { logger, warnings } = recordingLogger();
    expect(openStore(path, logger).readContext('c1')).toEqual([user('one'), user('two')]);
    expect(warnings).toEqual([['skipped a working-context entry that cannot be read', { conversationId: 'c1', seq: 1, error: expect.any(StoredValueError) }]]);
  });
});

describe('a conversation whose row cannot be read', () => {
  function storeWithBadRow(settings = '{not json') {
    const path = tempPath();
    const first = openStore(path);
    first.createConversation({ id: 'good', createdAt: at, settings: DEFAULT_SETTINGS });
    first.createConversation({ id: 'bad', createdAt: at, settings: DEFAULT_SETTINGS });
    first.close();
    otherConnection(path).prepare("UPDATE conversations SET settings = ? WHERE id = 'bad'").run(settings);
    const { logger, warnings } = recordingLogger();
    return { store: openStore(path, logger), warnings };
  }
  const line = ['skipped a conversation whose record cannot be read', { conversationId: 'bad', error: expect.any(StoredValueError) }];

  it('read with zod, not cast: JSON of the wrong shape is skipped too; older values of the right types are read', () => {
    const wrong = storeWithBadRow('{"steps": "many"}');
    expect(wrong.store.getConversation('bad')).toBeUndefined();
    expect(wrong.warnings).toEqual([line]);
    // A value stored under other limits, and a field an older Easel did not write: read, the default filling in.
    const older = storeWithBadRow('{"steps": 500, "cfg": 7, "seed": -1, "width": 512, "height": 512, "negativePrompt": ""}');
    expect(older.store.getConversation('bad')?.settings).toEqual({ ...DEFAULT_SETTINGS, steps: 500 });
    expect(older.warnings).toEqual([]);
  });

  it('a part of a turn that cannot be read is left out with a log line; the turn and the rest still show', () => {
    const path = tempPath();
    const first = openStore(path);
    first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    first.beginTurn('c1', { user: { text: 'a cat' }, replaces: [], context: append(user('a cat')) }, at);
    first.close();
    otherConnection(path).prepare("UPDATE turns SET metadata = '{\"prompt\": 5}', notices = '[\"kept\"]' WHERE role = 'assistant'").run();
    const { logger, warnings } = recordingLogger();
    const turns = openStore(path, logger).listTurns('c1');
    expect(turns.at(-1)).toMatchObject({ role: 'assistant', notices: ['kept'] });
    expect(turns.at(-1)).not.toHaveProperty('metadata');
    expect(warnings).toEqual([['left out a part of a turn that cannot be read', { turnId: turns.at(-1)!.id, column: 'metadata', error: expect.any(StoredValueError) }]]);
  });

  it('opened: is not found, with one log line', () => {
    const { store, warnings } = storeWithBadRow();
    expect(store.getConversation('bad')).toBeUndefined();
    expect(warnings).toEqual([line]);
  });

  it('listed: is left out, with one log line', () => {
    const { store, warnings } = storeWithBadRow();
    expect(store.listConversations().map((c) => c.id)).toEqual(['good']);
    expect(warnings).toEqual([line]);
  });
});

describe('what is stored and read back', () => {
  it('a reply starts empty and running', () => {
    const store = openStore(tempPath());
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    store.beginTurn('c1', { user: { text: 'a cat' }, replaces: [], context: append(user('a cat')) }, at);
    expect(store.listTurns('c1').map((t) => [t.role, t.text, t.status])).toEqual([
      ['user', 'a cat', 'ok'],
      ['assistant', '', 'running'],
    ]);
  });

  it('an empty list of notices is stored as none', () => {
    const path = tempPath();
    const store = openStore(path);
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    const { turnId } = store.beginTurn('c1', { user: { text: 'a cat' }, replaces: [], context: append(user('a cat')) }, at);
    store.finishTurn('c1', { turnId, turn: { role: 'assistant', text: 'Which cat?', metadata: META, notices: [] }, context: append(reply('Which cat?')) }, at);
    expect(store.listTurns('c1').map((t) => t.notices)).toEqual([undefined, undefined]);
    expect(otherConnection(path).prepare('SELECT notices FROM turns').all()).toEqual([{ notices: null }, { notices: null }]);
  });

  it('a conversation made without pins stores an empty list of them', () => {
    const path = tempPath();
    openStore(path).createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    expect(otherConnection(path).prepare('SELECT pinned FROM conversations').get()).toEqual({ pinned: '[]' });
  });

  it('a reply that does not mention the waiting suggestion leaves it waiting', () => {
    const store = openStore(tempPath());
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    store.setSuggestion('c1', { prompt: 'the model\'s', turnId: 1 });
    const { turnId } = store.beginTurn('c1', { user: { text: 'more light' }, replaces: [], context: append(user('more light')) }, at);
    store.finishTurn('c1', { turnId, turn: { role: 'assistant', text: 'Done.' }, context: append(), pane: { settings: DEFAULT_SETTINGS, settingSuggestions: {} } }, at);
    expect(store.getConversation('c1')?.suggestion).toEqual({ prompt: 'the model\'s', turnId: 1 });
  });

  it('going back to an earlier prompt version marks the prompt as edited for the model', () => {
    const store = openStore(tempPath());
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS, prompt: 'a cat' });
    const first = store.getConversation('c1')!.promptVersion!;
    // A later version that tells the model nothing (the suggestion the model itself wrote, taken).
    const { turnId } = store.beginTurn('c1', { user: { text: 'a dog?' }, replaces: [], context: append(user('a dog?')) }, at);
    store.takeSuggestion('c1', { prompt: 'a dog', turnId }, at);
    expect(store.getConversation('c1')).toMatchObject({ prompt: 'a dog', pending: { promptEdited: false, settingsChanged: false } });
    store.selectPromptVersion('c1', first);
    expect(store.getConversation('c1')).toMatchObject({ prompt: 'a cat', pending: { promptEdited: true, settingsChanged: false } });
  });

  it('renaming says whether there was a conversation to rename', () => {
    const store = openStore(tempPath());
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    expect(store.renameConversation('c1', 'Cats')).toBe(true);
    expect(store.renameConversation('nope', 'Dogs')).toBe(false);
    expect(store.getConversation('c1')?.title).toBe('Cats');
    expect(store.getConversation('nope')).toBeUndefined();
  });

  it('an import keeps each turn\'s image note, and its waiting suggestion only when its turn exists', () => {
    const store = openStore(tempPath());
    const base = {
      title: null, createdAt: at, updatedAt: at, prompt: 'a fox', settings: DEFAULT_SETTINGS, context: [], images: [],
      turns: [
        { role: 'user' as const, text: 'a fox', createdAt: at },
        { role: 'assistant' as const, text: 'Ready.', metadata: META, createdAt: at, imageNote: { reason: 'auto_off' as const, message: 'Not made.' } },
      ],
    };
    const pane = (turn: number) => ({
      versions: [{ parent: null, prompt: 'a fox', source: 'user' as const, turn: null, createdAt: at }],
      current: 0, suggestion: { prompt: 'a red fox', turn }, pinned: [], settingSuggestions: {},
    });
    store.importConversation({ ...base, id: 'kept', pane: pane(1) });
    store.importConversation({ ...base, id: 'dropped', pane: pane(7) });

    const turns = store.listTurns('kept');
    expect(turns.map((t) => t.imageNote)).toEqual([undefined, { reason: 'auto_off', message: 'Not made.' }]);
    expect(store.getConversation('kept')?.suggestion).toEqual({ prompt: 'a red fox', turnId: turns[1]!.id });
    // A suggestion for a turn the file does not have cannot be shown beside its reply: it is dropped.
    expect(store.getConversation('dropped')?.suggestion).toBeNull();
  });

  it('a search uses the first 8 words and ignores the rest', () => {
    const store = openStore(tempPath());
    const words = 'alpha bravo charlie delta echo foxtrot golf hotel';
    store.beginTurn('c1', { create: { createdAt: at, settings: DEFAULT_SETTINGS, prompt: '', pinned: [] }, user: { text: words }, replaces: [], context: append(user(words)) }, at);
    expect(toSearchTerms(`${words} zulu`)).toHaveLength(8);
    expect(store.listConversations({ query: `${words} zulu` }).map((c) => c.id)).toEqual(['c1']);
  });

  it('closing writes everything into the database file itself: a copy of that file alone has it', () => {
    const dir = tempDir();
    const path = join(dir, 'easel.db');
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS, prompt: 'a cat' });
    store.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    const copy = join(dir, 'copy.db');
    copyFileSync(path, copy);
    expect(openStore(copy).getConversation('c1')?.prompt).toBe('a cat');
  });

  it('an unknown conversation is a StoreError naming it', () => {
    const store = openStore(tempPath());
    expect(thrown(() => store.beginTurn('nope', { user: { text: 'hi' }, replaces: [], context: append(user('hi')) }, at))).toEqual({
      name: 'StoreError', code: undefined, message: 'No conversation with id nope.', cause: undefined,
    });
  });
});

describe('a write that fails', () => {
  it('for any other reason: code failed, and the message says the database failed, with SQLite\'s words', () => {
    const path = tempPath();
    const store = openStore(path);
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    otherConnection(path).exec("CREATE TRIGGER no_titles BEFORE UPDATE OF title ON conversations BEGIN SELECT RAISE(ABORT, 'injected failure'); END");
    expect(thrown(() => store.renameConversation('c1', 'Cats'))).toEqual({
      name: 'StorageError',
      code: 'failed',
      message: `Using ${path} failed: the database failed (SQLITE_CONSTRAINT_TRIGGER: injected failure).`,
      location: path,
      cause: expect.objectContaining({ name: 'SqliteError', code: 'SQLITE_CONSTRAINT_TRIGGER' }),
    });
    expect(store.getConversation('c1')?.title).toBeNull();
  });

  it('on a full disk: code full, and the message says the disk is full', (context) => {
    // A small file system of its own (needs root, as in CI); elsewhere this test says why it skips.
    const mountPoint = tempDir();
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mountPoint], { encoding: 'utf8' });
    if (mounted.status !== 0) {
      console.warn(`Skipping the full-disk test: cannot mount a small tmpfs here (${(mounted.stderr || mounted.error?.message || 'mount failed').trim()}).`);
      context.skip();
      return;
    }
    cleanups.push(() => spawnSync('umount', ['-l', mountPoint]));
    const path = join(mountPoint, 'easel.db');
    const store = openStore(path);
    store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    try {
      writeFileSync(join(mountPoint, 'filler'), Buffer.alloc(4 * 1024 * 1024, 1));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
    }
    expect(thrown(() => store.renameConversation('c1', 'a long title '.repeat(20_000)))).toEqual({
      name: 'StorageError',
      code: 'full',
      message: `Using ${path} failed: the disk is full (SQLITE_FULL: database or disk is full).`,
      location: path,
      cause: expect.objectContaining({ code: 'SQLITE_FULL' }),
    });
    expect(store.getConversation('c1')?.title).toBeNull();
  });
});

describe('opening a database that cannot be used', () => {
  it('in a folder that does not exist: cannot_open, saying to check the file and its folder', () => {
    const path = join(tempDir(), 'missing', 'easel.db');
    expect(thrown(() => createSqliteStore({ path }))).toEqual({
      name: 'StoreOpenError',
      code: 'cannot_open',
      message: `The database ${path} cannot be opened (Cannot open database because the directory does not exist). Check the file and its folder, or start Easel with another --data-dir.`,
      cause: expect.any(TypeError),
    });
  });

  it('that is a folder: cannot_open, with SQLite\'s code', () => {
    const path = tempDir();
    expect(thrown(() => createSqliteStore({ path }))).toEqual({
      name: 'StoreOpenError',
      code: 'cannot_open',
      message: `The database ${path} cannot be opened (SQLITE_CANTOPEN: unable to open database file). Check the file and its folder, or start Easel with another --data-dir.`,
      cause: expect.objectContaining({ code: 'SQLITE_CANTOPEN' }),
    });
  });

  it('whose file cannot be written: read_only, saying to make it writable', (context) => {
    const path = tempPath();
    const first = openStore(path);
    first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    first.close();
    // Root writes any file whatever its mode: there the file is made immutable instead.
    if (process.getuid?.() === 0) {
      const made = spawnSync('chattr', ['+i', path], { encoding: 'utf8' });
      if (made.status !== 0) {
        console.warn(`Skipping the read-only test: cannot make a file immutable here (${(made.stderr || made.error?.message || 'chattr failed').trim()}).`);
        context.skip();
        return;
      }
      cleanups.push(() => spawnSync('chattr', ['-i', path]));
    } else {
      chmodSync(path, 0o444);
    }
    expect(thrown(() => createSqliteStore({ path }))).toEqual({
      name: 'StoreOpenError',
      code: 'read_only',
      message: `The database ${path} cannot be written (SQLITE_READONLY: attempt to write a readonly database). Make it and its folder writable for Easel, or start it with another --data-dir.`,
      cause: expect.objectContaining({ code: 'SQLITE_READONLY' }),
    });
  });

  it('that is not a database: corrupt, saying to move it aside', () => {
    const path = tempPath();
    writeFileSync(path, 'these are not the pages you are looking for'.repeat(200));
    expect(thrown(() => createSqliteStore({ path }))).toEqual({
      name: 'StoreOpenError',
      code: 'corrupt',
      message: `The database ${path} is damaged (SQLITE_NOTADB: file is not a database). Move it aside and start Easel again to begin with an empty library, or restore it from a backup.`,
      cause: expect.objectContaining({ code: 'SQLITE_NOTADB' }),
    });
  });

  it('whose damage only the quick check finds: corrupt, with the check\'s words', () => {
    const path = tempPath();
    const first = openStore(path);
    first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
    first.close();
    // A prompt version that breaks its CHECK: nothing read at start touches that table, only the check does.
    const other = new Database(path);
    other.pragma('ignore_check_constraints = ON');
    other.prepare("INSERT INTO prompt_versions (conversation_id, prompt, source, created_at) VALUES ('c1', 'x', 'bogus', ?)").run(at);
    other.close();
    expect(thrown(() => createSqliteStore({ path }))).toEqual({
      name: 'StoreOpenError',
      code: 'corrupt',
      message: `The database ${path} is damaged (CHECK constraint failed in prompt_versions). Move it aside and start Easel again to begin with an empty library, or restore it from a backup.`,
      cause: undefined,
    });
  });

  /** A database at schema version `version`, as that version's migrations left it. */
  function oldDatabase(version: number): { path: string; db: Database.Database } {
    const path = tempPath();
    const db = new Database(path);
    for (const file of ['001-init.sql', '002-images.sql', '003-library.sql', '004-image-parameters.sql'].slice(0, version)) {
      db.exec(readFileSync(join(MIGRATIONS, file), 'utf8'));
    }
    db.pragma(`user_version = ${version}`);
    return { path, db };
  }

  it('damaged so that a migration fails with an extended SQLITE_CORRUPT code: corrupt, and left at its version', () => {
    const { path, db } = oldDatabase(4);
    db.prepare("INSERT INTO conversations (id, created_at, updated_at, prompt, settings) VALUES ('c1', ?, ?, 'a fox', ?)").run(at, at, JSON.stringify(DEFAULT_SETTINGS));
    // sqlite_sequence with one column: migration 005 inserts into an AUTOINCREMENT table and SQLite refuses.
    db.unsafeMode(true);
    db.pragma('writable_schema = ON');
    db.prepare("UPDATE sqlite_master SET sql = 'CREATE TABLE sqlite_sequence(name)' WHERE name = 'sqlite_sequence'").run();
    db.close();
    expect(thrown(() => createSqliteStore({ path }))).toEqual({
      name: 'StoreOpenError',
      code: 'corrupt',
      message: `The database ${path} is damaged (SQLITE_CORRUPT_SEQUENCE: database disk image is malformed). Move it aside and start Easel again to begin with an empty library, or restore it from a backup.`,
      cause: expect.objectContaining({ code: 'SQLITE_CORRUPT_SEQUENCE' }),
    });
    const after = otherConnection(path);
    expect(after.pragma('user_version', { simple: true })).toBe(4);
  });

  it('whose references a migration would leave broken: refused, and nothing of the migration is kept', () => {
    const { path, db } = oldDatabase(1);
    // A turn of a conversation that is not there (written with foreign keys off).
    db.pragma('foreign_keys = OFF');
    db.prepare("INSERT INTO turns (conversation_id, role, text, created_at) VALUES ('ghost', 'user', 'hi', ?)").run(at);
    db.close();
    expect(thrown(() => createSqliteStore({ path }))).toEqual({
      name: 'StoreOpenError',
      code: 'cannot_open',
      message: `The database ${path} cannot be opened (migration 002-images.sql left 1 broken reference, so nothing was changed). Check the file and its folder, or start Easel with another --data-dir.`,
      cause: expect.objectContaining({ name: 'StoreError' }),
    });
    const after = otherConnection(path);
    expect(after.pragma('user_version', { simple: true })).toBe(1);
    expect(after.prepare("SELECT name FROM sqlite_master WHERE name = 'images'").all()).toEqual([]);

    // Two of them are counted as two.
    const two = oldDatabase(1);
    two.db.pragma('foreign_keys = OFF');
    for (const text of ['hi', 'again']) two.db.prepare("INSERT INTO turns (conversation_id, role, text, created_at) VALUES ('ghost', 'user', ?, ?)").run(text, at);
    two.db.close();
    expect(thrown(() => createSqliteStore({ path: two.path })).message).toContain('(migration 002-images.sql left 2 broken references, so nothing was changed)');
  });
});

describe('what each SQLite code is called', () => {
  // Codes no test here can make SQLite give (a write refused under an open store, SQLITE_PERM from a lock,
  // an extended READONLY code at open): the rule that names them, on better-sqlite3's own error class.
  const sqliteError = (code: string) => new Database.SqliteError(`${code} happened`, code);

  it('a write: full, cannot be written (every READONLY and CANTOPEN code, PERM, AUTH) or failed; other errors pass through', () => {
    const kinds: Array<[string, string, string]> = [
      ['SQLITE_FULL', 'full', 'the disk is full'],
      ['SQLITE_READONLY', 'read_only', 'it cannot be written'],
      ['SQLITE_READONLY_DBMOVED', 'read_only', 'it cannot be written'],
      ['SQLITE_CANTOPEN', 'read_only', 'it cannot be written'],
      ['SQLITE_CANTOPEN_ISDIR', 'read_only', 'it cannot be written'],
      ['SQLITE_PERM', 'read_only', 'it cannot be written'],
      ['SQLITE_AUTH', 'read_only', 'it cannot be written'],
      ['SQLITE_IOERR_WRITE', 'failed', 'the database failed'],
      ['SQLITE_PERMX', 'failed', 'the database failed'],
      ['X_SQLITE_READONLY', 'failed', 'the database failed'],
      ['SQLITE_CORRUPT', 'corrupt', 'the file is damaged'],
      ['SQLITE_CORRUPT_INDEX', 'corrupt', 'the file is damaged'],
      ['SQLITE_NOTADB', 'corrupt', 'the file is damaged'],
    ];
    for (const [code, kind, what] of kinds) {
      const error = toStorageError(sqliteError(code), '/data/easel.db');
      expect(error, code).toBeInstanceOf(StorageError);
      expect(error, code).toMatchObject({ code: kind, location: '/data/easel.db', message: `Using /data/easel.db failed: ${what} (${code}: ${code} happened).` });
    }
    const other = new TypeError('a bug');
    expect(toStorageError(other, '/data/easel.db')).toBe(other);
  });

  it('an open: damaged, cannot be written (READONLY codes, PERM, EACCES, EROFS) or cannot be opened', () => {
    const path = '/data/easel.db';
    const readOnly = (detail: string) => `The database ${path} cannot be written (${detail}). Make it and its folder writable for Easel, or start it with another --data-dir.`;
    const cases: Array<[Error, string, string]> = [
      [sqliteError('SQLITE_READONLY_DIRECTORY'), 'read_only', readOnly('SQLITE_READONLY_DIRECTORY: SQLITE_READONLY_DIRECTORY happened')],
      [sqliteError('SQLITE_PERM'), 'read_only', readOnly('SQLITE_PERM: SQLITE_PERM happened')],
      [Object.assign(new Error('permission denied'), { code: 'EACCES' }), 'read_only', readOnly('EACCES: permission denied')],
      [Object.assign(new Error('read-only file system'), { code: 'EROFS' }), 'read_only', readOnly('EROFS: read-only file system')],
      [sqliteError('SQLITE_PERMX'), 'cannot_open', `The database ${path} cannot be opened (SQLITE_PERMX: SQLITE_PERMX happened). Check the file and its folder, or start Easel with another --data-dir.`],
      [sqliteError('X_SQLITE_READONLY'), 'cannot_open', `The database ${path} cannot be opened (X_SQLITE_READONLY: X_SQLITE_READONLY happened). Check the file and its folder, or start Easel with another --data-dir.`],
    ];
    for (const [error, code, message] of cases) {
      expect(describeOpenFailure(error, path), message).toMatchObject({ name: 'StoreOpenError', code, message, cause: error });
    }
  });
});
