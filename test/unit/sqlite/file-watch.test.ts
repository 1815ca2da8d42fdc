// The database file changed under a running store: deleted, replaced by another file, its folder replaced,
// damaged. What each write then throws (word for word), the copy of what the store had (saved once, named by
// the time), and each log line with its fields. A write that fails for another reason is not called damage.
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_SETTINGS, type ConversationStore } from '../../../server/core/index.ts';
import type { Logger } from '../../../server/core/logger.ts';
import { createSqliteStore } from '../../../server/sqlite/index.ts';
import { damageFromPage2 } from '../../helpers/damage-database.ts';

const at = '2026-11-23T10:00:00.000Z';
/** The clock when the first write meets the missing file, and the copy's name it gives. */
const FIRST_WRITE = new Date('2026-11-23T10:15:30.123Z');
const COPY_NAME = 'easel-recovered-2026-11-23T10-15-30-123Z.db';

const cleanups: Array<() => void> = [];
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(FIRST_WRITE);
});
afterEach(() => {
  vi.useRealTimers();
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'easel-watch-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

type Line = [level: string, message: string, fields: Record<string, unknown> | undefined];

/** A store on `path` with one conversation, and every line it logs. */
function storeWithConversation(path: string): { store: ConversationStore; lines: Line[] } {
  const lines: Line[] = [];
  const keep = (level: string) => (message: string, fields?: Record<string, unknown>) => lines.push([level, message, fields]);
  const logger: Logger = { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') };
  const store = createSqliteStore({ path, logger });
  cleanups.push(() => store.close());
  store.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS, prompt: 'a red fox' });
  return { store, lines };
}

/** What a thrown error carries, for one exact comparison. */
function thrown(work: () => unknown): Record<string, unknown> {
  try {
    work();
  } catch (error) {
    const { name, message } = error as Error;
    const { code, location, recoveredTo, replaced } = error as { code?: unknown; location?: unknown; recoveredTo?: unknown; replaced?: unknown };
    return { name, code, message, location, recoveredTo, replaced };
  }
  throw new Error('nothing was thrown');
}

const recoveredCopies = (dir: string) => readdirSync(dir).filter((name) => name.includes('-recovered-'));

describe('the database file deleted under a running store', () => {
  it('the first write saves one copy, named by the time, and says so; every write is refused as deleted, logged once', () => {
    const dir = tempDir();
    const path = join(dir, 'easel.db');
    const { store, lines } = storeWithConversation(path);
    rmSync(path);

    const copy = join(dir, COPY_NAME);
    const refused = { name: 'StorageError', code: 'gone', message: `The database file ${path} was deleted while Easel had it open.`, location: path, recoveredTo: copy, replaced: false };
    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toEqual(refused);
    // Later writes: refused the same way, pointing at the same copy; no second copy is made.
    vi.setSystemTime(new Date('2026-11-23T10:16:00.000Z'));
    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toEqual(refused);
    expect(thrown(() => store.createConversation({ id: 'c2', createdAt: at, settings: DEFAULT_SETTINGS }))).toEqual(refused);

    expect(recoveredCopies(dir)).toEqual([COPY_NAME]);
    expect(lines).toEqual([
      ['info', 'saved a copy of the database Easel had open', { path, copy }],
      ['error', 'the database file was deleted while Easel was running; writes are refused', { path, recoveredTo: copy }],
    ]);
    // The copy holds what the store had.
    store.close();
    const restored = createSqliteStore({ path: copy });
    cleanups.push(() => restored.close());
    expect(restored.getConversation('c1')?.prompt).toBe('a red fox');
  });

  it('when the copy cannot be saved (a file already has its name): that is logged, and the refusal names no copy', () => {
    const dir = tempDir();
    const path = join(dir, 'easel.db');
    const { store, lines } = storeWithConversation(path);
    writeFileSync(join(dir, COPY_NAME), 'someone else\'s file');
    rmSync(path);

    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toEqual({
      name: 'StorageError', code: 'gone', message: `The database file ${path} was deleted while Easel had it open.`, location: path, recoveredTo: undefined, replaced: false,
    });
    expect(lines).toEqual([
      ['error', 'could not save a copy of the database Easel had open', { path, copy: join(dir, COPY_NAME), error: expect.objectContaining({ name: 'SqliteError' }) }],
      ['error', 'the database file was deleted while Easel was running; writes are refused', { path, recoveredTo: undefined }],
    ]);
    // It is not tried again on the next write.
    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toMatchObject({ code: 'gone', recoveredTo: undefined });
    expect(lines).toHaveLength(2);
  });

  it('its folder replaced by a file: writes are refused as deleted, and the copy, which cannot be saved there, is logged', () => {
    const parent = tempDir();
    const dir = join(parent, 'data');
    mkdirSync(dir);
    const path = join(dir, 'easel.db');
    const { store, lines } = storeWithConversation(path);
    renameSync(dir, join(parent, 'moved'));
    writeFileSync(dir, 'not a folder');

    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toEqual({
      name: 'StorageError', code: 'gone', message: `The database file ${path} was deleted while Easel had it open.`, location: path, recoveredTo: undefined, replaced: false,
    });
    expect(lines.map(([level, message]) => [level, message])).toEqual([
      ['error', 'could not save a copy of the database Easel had open'],
      ['error', 'the database file was deleted while Easel was running; writes are refused'],
    ]);
  });
});

describe('the database file replaced under a running store', () => {
  it('every write is refused as replaced, with the copy of what the store had; logged once', () => {
    const dir = tempDir();
    const path = join(dir, 'easel.db');
    const { store, lines } = storeWithConversation(path);
    new Database(join(dir, 'other.db')).close();
    renameSync(join(dir, 'other.db'), path);

    const copy = join(dir, COPY_NAME);
    const refused = { name: 'StorageError', code: 'gone', message: `The database file ${path} was replaced while Easel had it open.`, location: path, recoveredTo: copy, replaced: true };
    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toEqual(refused);
    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toEqual(refused);
    expect(lines).toEqual([
      ['info', 'saved a copy of the database Easel had open', { path, copy }],
      ['error', 'the database file was replaced while Easel was running; writes are refused', { path, recoveredTo: copy }],
    ]);
  });
});

describe('the database file damaged under a running store', () => {

  it('reads and writes fail as corrupt; logged once, with the path and SQLite\'s error', () => {
    const path = join(tempDir(), 'easel.db');
    const { store, lines } = storeWithConversation(path);
    damageFromPage2(path);

    const damaged = { name: 'StorageError', code: 'corrupt', message: `Using ${path} failed: the file is damaged (SQLITE_CORRUPT: database disk image is malformed).`, location: path, recoveredTo: undefined, replaced: false };
    expect(thrown(() => store.listConversations())).toEqual(damaged);
    expect(thrown(() => store.getConversation('c1'))).toEqual(damaged);
    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toEqual(damaged);
    expect(lines).toEqual([['error', 'the database is damaged', { path, error: expect.objectContaining({ name: 'SqliteError', code: 'SQLITE_CORRUPT' }) }]]);
  });

  it('a write that fails for another reason is not logged as damage (its caller says what happened)', () => {
    const path = join(tempDir(), 'easel.db');
    const { store, lines } = storeWithConversation(path);
    const other = new Database(path);
    other.exec("CREATE TRIGGER no_titles BEFORE UPDATE OF title ON conversations BEGIN SELECT RAISE(ABORT, 'injected failure'); END");
    other.close();

    expect(thrown(() => store.renameConversation('c1', 'Foxes'))).toMatchObject({ name: 'StorageError', code: 'failed' });
    expect(lines).toEqual([]);
  });
});
