// Opening the database: the checks at start (it opens, is sound, is not from a newer Easel), the numbered
// migrations, and the watch on its file while Easel runs (deleted, replaced, damaged). SQLite's failures become
// errors a person can act on here.
import { readFileSync, readdirSync, statSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { StorageError, type StorageErrorCode } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

export type StoreOpenErrorCode = 'cannot_open' | 'read_only' | 'corrupt' | 'newer_version';

/** The database cannot be used at start-up; the message names the file, the cause and what to do. */
export class StoreOpenError extends Error {
  override readonly name = 'StoreOpenError';
  readonly code: StoreOpenErrorCode;
  constructor(code: StoreOpenErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export class StoreError extends Error {
  override readonly name = 'StoreError';
}

/** The highest schema version this build knows: the number of its last migration. */
export function latestSchemaVersion(): number {
  return Math.max(0, ...listMigrations().map((migration) => migration.version));
}

export interface FileWatch {
  /** Throws the 'gone' StorageError while the path no longer names the file Easel opened. */
  requireSameFile(): void;
  /** Logs a damaged or vanished database once (with its path), and hands the error back to throw. */
  noteFailure(error: unknown): unknown;
}

/**
 * Notices the database file deleted or replaced under a running Easel (its device and inode at the path
 * differ from the ones opened), which SQLite itself never does: it goes on writing into the open file,
 * and everything is lost at the next start. The first time, Easel saves what it had beside the path.
 */
export function watchFile(db: Database.Database, path: string, logger: Logger | undefined): FileWatch {
  const opened = path === ':memory:' ? undefined : statSync(path);
  let recoveredTo: string | undefined;
  let recoveryTried = false;
  const logged = new Set<string>();
  const logOnce = (code: string, message: string, fields: Record<string, unknown>) => {
    if (logged.has(code)) return;
    logged.add(code);
    logger?.error(message, { path, ...fields });
  };

  function saveRecoveryCopy(): void {
    if (recoveryTried) return;
    recoveryTried = true;
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const copy = join(dirname(path), `${basename(path, '.db')}-recovered-${stamp}.db`);
    try {
      // Read through the connection, so the copy holds what Easel had, WAL included, even from a deleted file.
      db.prepare('VACUUM INTO ?').run(copy);
      recoveredTo = copy;
      logger?.info('saved a copy of the database Easel had open', { path, copy });
    } catch (error) {
      logger?.error('could not save a copy of the database Easel had open', { path, copy, error });
    }
  }

  return {
    requireSameFile() {
      if (opened === undefined) return;
      let now: Stats | undefined;
      try {
        // Stryker disable next-line ObjectLiteral,BooleanLiteral: without the option a missing file throws, and the catch below leaves now undefined all the same
        // Stryker disable BlockStatement: the catch below emptied: now is still undefined, as declared, when statSync throws
        now = statSync(path, { throwIfNoEntry: false });
      } catch {
        // ENOTDIR (its folder replaced by a file), EACCES: the path no longer leads to the file Easel opened.
        // Stryker restore BlockStatement
        now = undefined;
      }
      if (now !== undefined && now.ino === opened.ino && now.dev === opened.dev) return;
      const replaced = now !== undefined;
      saveRecoveryCopy();
      logOnce('gone', `the database file was ${replaced ? 'replaced' : 'deleted'} while Easel was running; writes are refused`, { recoveredTo });
      throw new StorageError('gone', `The database file ${path} was ${replaced ? 'replaced' : 'deleted'} while Easel had it open.`, { location: path, recoveredTo, replaced });
    },
    noteFailure(error) {
      if (error instanceof StorageError && error.code === 'corrupt') logOnce('corrupt', 'the database is damaged', { error: error.cause });
      return error;
    },
  };
}

function sqliteCode(error: unknown): string | undefined {
  return error instanceof Database.SqliteError ? error.code : undefined;
}

/** SQLite's failure as the StorageError a person can act on; errors that are not SQLite's pass through. Exported for its tests. */
export function toStorageError(error: unknown, location: string): unknown {
  const code = sqliteCode(error);
  if (code === undefined) return error;
  // Stryker disable next-line MethodExpression: SQLite has no extended SQLITE_FULL_* codes, so endsWith says the same
  const kind: StorageErrorCode = code.startsWith('SQLITE_FULL')
    ? 'full'
    : code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_CANTOPEN') || code === 'SQLITE_PERM' || code === 'SQLITE_AUTH'
      ? 'read_only'
      : code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB'
        ? 'corrupt'
        : 'failed';
  const what = kind === 'full' ? 'the disk is full' : kind === 'read_only' ? 'it cannot be written' : kind === 'corrupt' ? 'the file is damaged' : 'the database failed';
  return new StorageError(kind, `Using ${location} failed: ${what} (${code}: ${(error as Error).message}).`, { location, cause: error });
}

function listMigrations(): Array<{ version: number; file: string }> {
  // Stryker disable next-line MethodExpression: the folder holds only NNN-name.sql files, and readdirSync returns names sorted
  // Stryker disable Regex: the pattern below without ^ or $: every file in the folder matches all three forms
  return readdirSync(MIGRATIONS_DIR)
    .filter((name) => /^\d{3}-[\w-]+\.sql$/.test(name))
    .sort()
    .map((file) => ({ version: Number(file.slice(0, 3)), file }));
}

// Stryker restore Regex

/** Opens, checks and migrates the database, or throws StoreOpenError saying what is wrong and what to do. */
export function openDatabase(path: string): Database.Database {
  let db: Database.Database;
  try {
    db = new Database(path);
  } catch (error) {
    throw describeOpenFailure(error, path);
  }
  try {
    // Stryker disable next-line ConditionalExpression,StringLiteral: quick_check on :memory: too: a new in-memory database is empty and always ok
    if (path !== ':memory:') {
      const check = db.pragma('quick_check', { simple: true });
      if (check !== 'ok') {
        throw new StoreOpenError('corrupt', corruptMessage(path, String(check)));
      }
    }
    const version = db.pragma('user_version', { simple: true }) as number;
    const latest = latestSchemaVersion();
    if (version > latest) {
      throw new StoreOpenError(
        'newer_version',
        `The database ${path} was written by a newer Easel (schema version ${version}; this one knows up to ${latest}). Update Easel, or start it with another --data-dir.`,
      );
    }
    db.pragma('journal_mode = WAL');
    migrate(db);
    db.pragma('foreign_keys = ON');
    // A turn left `running` belongs to a process that ended without finishing it (a crash, kill -9). This
    // write also proves, at start, that the database can be written.
    db.prepare("UPDATE turns SET status = 'interrupted' WHERE status = 'running'").run();
    return db;
  } catch (error) {
    db.close();
    if (error instanceof StoreOpenError) throw error;
    throw describeOpenFailure(error, path);
  }
}

function corruptMessage(path: string, detail: string): string {
  return `The database ${path} is damaged (${detail}). Move it aside and start Easel again to begin with an empty library, or restore it from a backup.`;
}

/** Why the database could not be opened, in words that say what to do. Exported for its tests. */
export function describeOpenFailure(error: unknown, path: string): StoreOpenError {
  const code = sqliteCode(error) ?? (error as NodeJS.ErrnoException).code;
  // An error with no code (better-sqlite3's own, a failed migration) is told in its words alone.
  const detail = code === undefined ? (error as Error).message : `${code}: ${(error as Error).message}`;
  if (code === 'SQLITE_NOTADB' || code?.startsWith('SQLITE_CORRUPT')) {
    return new StoreOpenError('corrupt', corruptMessage(path, detail), { cause: error });
  }
  if (code?.startsWith('SQLITE_READONLY') || code === 'SQLITE_PERM' || code === 'EACCES' || code === 'EROFS') {
    return new StoreOpenError(
      'read_only',
      `The database ${path} cannot be written (${detail}). Make it and its folder writable for Easel, or start it with another --data-dir.`,
      { cause: error },
    );
  }
  return new StoreOpenError(
    'cannot_open',
    `The database ${path} cannot be opened (${detail}). Check the file and its folder, or start Easel with another --data-dir.`,
    { cause: error },
  );
}

/**
 * Applies each numbered .sql file once, in order, recording the version in user_version. Foreign keys are
 * off meanwhile (a migration may rebuild a table: dropping it must not cascade), and checked before commit.
 */
function migrate(db: Database.Database): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  const pending = listMigrations().filter((migration) => migration.version > current);
  // Stryker disable next-line ConditionalExpression: foreign keys go off and on again around nothing
  if (pending.length === 0) return;
  db.pragma('foreign_keys = OFF');
  try {
    for (const migration of pending) {
      db.transaction(() => {
        db.exec(readFileSync(MIGRATIONS_DIR + migration.file, 'utf8'));
        const broken = db.pragma('foreign_key_check') as unknown[];
        if (broken.length > 0) {
          throw new StoreError(`migration ${migration.file} left ${broken.length} broken reference${broken.length === 1 ? '' : 's'}, so nothing was changed`);
        }
        // Stryker disable BlockStatement: the finally below emptied: after a migration openDatabase turns foreign keys on; after a failure the connection is closed
        db.pragma(`user_version = ${migration.version}`);
      })();
    }
  } finally {
    // Stryker restore BlockStatement
    db.pragma('foreign_keys = ON');
  }
}
