import { readFileSync, readdirSync, statSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import type {
  BeginTurnInput,
  ContextChange,
  ConversationImport,
  ConversationListing,
  ConversationRecord,
  ConversationStore,
  FinishPane,
  ImageNote,
  ImageRecord,
  NewTurn,
  PendingNotes,
  TranscriptTurn,
  TurnStatus,
} from '../core/conversation.ts';
import { isPinnableField, type PinnableField, type PromptSource, type PromptSuggestion, type PromptVersion, type SettingSuggestions } from '../core/pane.ts';
import { StorageError, type StorageErrorCode } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { Settings } from '../core/settings.ts';
import type { ContextEntry } from '../protocol/index.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
const CONVERSATION_COLUMNS = 'id, title, created_at, updated_at, prompt, settings, pending, prompt_version_id, suggestion, pinned, setting_suggestions';
const NO_PENDING: PendingNotes = { promptEdited: false, settingsChanged: false };
/** Conversations whose parsed working context stays in memory (the ones being talked to). */
const CONTEXT_CACHE_SIZE = 32;
/** At most this many words of a search are looked up (each one narrows the result). */
const MAX_SEARCH_TERMS = 8;
/** The preview of a conversation in the list is cut here (a reply can be 200 000 characters). */
const PREVIEW_CHARS = 300;

interface ConversationRow {
  id: string;
  title: string | null;
  created_at: string;
  updated_at: string;
  prompt: string;
  settings: string;
  pending: string;
  prompt_version_id: number | null;
  suggestion: string | null;
  pinned: string;
  setting_suggestions: string;
}

interface ListingRow extends ConversationRow {
  first_message: string | null;
  last_message: string | null;
}

interface TurnRow {
  id: number;
  role: 'user' | 'assistant';
  text: string;
  metadata: string | null;
  status: TurnStatus;
  error: string | null;
  notices: string | null;
  image_note: string | null;
  created_at: string;
}

interface PromptVersionRow {
  id: number;
  parent_id: number | null;
  prompt: string;
  source: PromptSource;
  turn_id: number | null;
  created_at: string;
}

interface ImageRow {
  id: string;
  conversation_id: string;
  turn_id: number | null;
  file: string;
  prompt: string;
  negative_prompt: string;
  steps: number | null;
  cfg: number | null;
  seed: number | null;
  sampler: string | null;
  width: number;
  height: number;
  model: string | null;
  prompt_version_id: number | null;
  created_at: string;
}

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

export interface SqliteStoreOptions {
  /** A file path or ':memory:'. */
  path: string;
  /** Where unreadable rows are reported (they are skipped, never a 500). */
  logger?: Logger;
}

/**
 * Opens (creating when needed) and migrates the database. Throws StoreOpenError when it cannot be used:
 * not openable, read-only, failing `PRAGMA quick_check`, or written by a newer Easel. Writes throw
 * StorageError (full, read-only, failed); every write is one transaction, so nothing is half-written.
 */
export function createSqliteStore(options: SqliteStoreOptions): ConversationStore {
  const { path } = options;
  const logger = options.logger;
  const db = openDatabase(path);
  const watch = watchFile(db, path, logger);

  const statements = {
    insertConversation: db.prepare(
      'INSERT INTO conversations (id, title, created_at, updated_at, prompt, settings, pinned) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    getConversation: db.prepare<[string], ConversationRow>(
      `SELECT ${CONVERSATION_COLUMNS} FROM conversations WHERE id = ?`,
    ),
    listTurns: db.prepare<[string], TurnRow>('SELECT * FROM turns WHERE conversation_id = ? ORDER BY id'),
    listLastExchange: db.prepare<[string, string], TurnRow>(
      `SELECT * FROM turns WHERE conversation_id = ? AND status != 'replaced'
         AND id >= (SELECT coalesce(max(id), 0) FROM turns WHERE conversation_id = ? AND role = 'user' AND status != 'replaced')
       ORDER BY id`,
    ),
    listImages: db.prepare<[string], ImageRow>('SELECT * FROM images WHERE conversation_id = ? ORDER BY created_at, rowid'),
    listImageFiles: db.prepare<[string], { file: string }>('SELECT file FROM images WHERE conversation_id = ?'),
    insertTurn: db.prepare(
      'INSERT INTO turns (conversation_id, role, text, metadata, status, error, notices, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    getTurn: db.prepare<[number], TurnRow>('SELECT * FROM turns WHERE id = ?'),
    finishTurn: db.prepare('UPDATE turns SET text = ?, metadata = ?, status = ?, error = ?, notices = ?, image_note = ? WHERE id = ? AND conversation_id = ?'),
    setImageNote: db.prepare('UPDATE turns SET image_note = ? WHERE id = ?'),
    saveReplyText: db.prepare("UPDATE turns SET text = ? WHERE id = ? AND status = 'running'"),
    replaceTurn: db.prepare("UPDATE turns SET status = 'replaced' WHERE id = ? AND conversation_id = ?"),
    setPending: db.prepare('UPDATE conversations SET pending = ? WHERE id = ?'),
    touch: db.prepare('UPDATE conversations SET updated_at = ? WHERE id = ?'),
    setPrompt: db.prepare('UPDATE conversations SET prompt = ?, prompt_version_id = ? WHERE id = ?'),
    setSettings: db.prepare('UPDATE conversations SET settings = ?, pinned = ?, setting_suggestions = ? WHERE id = ?'),
    setSuggestion: db.prepare('UPDATE conversations SET suggestion = ? WHERE id = ?'),
    insertVersion: db.prepare(
      'INSERT INTO prompt_versions (conversation_id, parent_id, prompt, source, turn_id, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    getVersion: db.prepare<[number, string], PromptVersionRow>('SELECT * FROM prompt_versions WHERE id = ? AND conversation_id = ?'),
    listVersionChildren: db.prepare<[number, string], PromptVersionRow>('SELECT * FROM prompt_versions WHERE parent_id = ? AND conversation_id = ? ORDER BY id'),
    listVersions: db.prepare<[string], PromptVersionRow>('SELECT * FROM prompt_versions WHERE conversation_id = ? ORDER BY id'),
    setTitle: db.prepare('UPDATE conversations SET title = ? WHERE id = ?'),
    deleteConversation: db.prepare('DELETE FROM conversations WHERE id = ?'),
    insertImage: db.prepare(
      `INSERT INTO images (id, conversation_id, turn_id, file, prompt, negative_prompt, steps, cfg, seed, sampler, width, height, model, prompt_version_id, created_at)
       VALUES (@id, @conversation_id, @turn_id, @file, @prompt, @negative_prompt, @steps, @cfg, @seed, @sampler, @width, @height, @model, @prompt_version_id, @created_at)`,
    ),
    readContext: db.prepare<[string], { seq: number; entry: string }>('SELECT seq, entry FROM context_entries WHERE conversation_id = ? ORDER BY seq'),
    contextBounds: db.prepare<[string], { low: number | null; high: number | null }>(
      'SELECT min(seq) AS low, max(seq) AS high FROM context_entries WHERE conversation_id = ?',
    ),
    dropContextFront: db.prepare(
      'DELETE FROM context_entries WHERE conversation_id = ? AND seq IN (SELECT seq FROM context_entries WHERE conversation_id = ? ORDER BY seq LIMIT ?)',
    ),
    dropContextBack: db.prepare(
      'DELETE FROM context_entries WHERE conversation_id = ? AND seq IN (SELECT seq FROM context_entries WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?)',
    ),
    clearContext: db.prepare('DELETE FROM context_entries WHERE conversation_id = ?'),
    insertContext: db.prepare('INSERT INTO context_entries (conversation_id, seq, entry) VALUES (?, ?, ?)'),
  };

  const LISTING_COLUMNS = `${CONVERSATION_COLUMNS.split(', ').map((column) => `c.${column}`).join(', ')},
    (SELECT substr(t.text, 1, ${PREVIEW_CHARS}) FROM turns t WHERE t.conversation_id = c.id AND t.role = 'user' AND t.status != 'replaced' ORDER BY t.id LIMIT 1) AS first_message,
    (SELECT substr(t.text, 1, ${PREVIEW_CHARS}) FROM turns t WHERE t.conversation_id = c.id AND t.status != 'replaced' AND t.text != '' ORDER BY t.id DESC LIMIT 1) AS last_message`;
  const listAll = db.prepare<[number], ListingRow>(`SELECT ${LISTING_COLUMNS} FROM conversations c ORDER BY c.updated_at DESC, c.rowid DESC LIMIT ?`);
  // One lookup per word: a conversation matches when each word is in one of its messages, its title or its prompt.
  const matchTerm = `SELECT t.conversation_id FROM turns_search s JOIN turns t ON t.id = s.rowid WHERE turns_search MATCH ?
    UNION SELECT conversation_id FROM conversations_search WHERE conversations_search MATCH ?`;
  const searchStatements = new Map<number, Database.Statement<unknown[], ListingRow>>();
  function searchStatement(terms: number): Database.Statement<unknown[], ListingRow> {
    let statement = searchStatements.get(terms);
    if (!statement) {
      const matches = Array.from({ length: terms }, () => `SELECT * FROM (${matchTerm})`).join(' INTERSECT ');
      statement = db.prepare<unknown[], ListingRow>(
        `SELECT ${LISTING_COLUMNS} FROM conversations c WHERE c.id IN (${matches}) ORDER BY c.updated_at DESC, c.rowid DESC LIMIT ?`,
      );
      searchStatements.set(terms, statement);
    }
    return statement;
  }

  // ---- The working context: rows in SQLite, the parsed array cached per conversation (write-through) ----

  const contextCache = new Map<string, ContextEntry[]>();
  function cacheContext(conversationId: string, entries: ContextEntry[]): void {
    contextCache.delete(conversationId);
    contextCache.set(conversationId, entries);
    if (contextCache.size > CONTEXT_CACHE_SIZE) {
      const oldest = contextCache.keys().next();
      if (!oldest.done) contextCache.delete(oldest.value);
    }
  }

  function readContext(conversationId: string): ContextEntry[] {
    const cached = contextCache.get(conversationId);
    if (cached) {
      cacheContext(conversationId, cached);
      return cached;
    }
    const entries: ContextEntry[] = [];
    for (const row of statements.readContext.all(conversationId)) {
      try {
        entries.push(JSON.parse(row.entry) as ContextEntry);
      } catch (error) {
        logger?.warn('skipped a working-context entry that cannot be read', { conversationId, seq: row.seq, error });
      }
    }
    cacheContext(conversationId, entries);
    return entries;
  }

  /** Inside a transaction; the cache is updated by the caller once the transaction committed. */
  function writeContextChange(conversationId: string, change: ContextChange): void {
    if (change.kind === 'replace') {
      statements.clearContext.run(conversationId);
      change.entries.forEach((entry, index) => statements.insertContext.run(conversationId, index, JSON.stringify(entry)));
      return;
    }
    if (change.dropFront > 0) statements.dropContextFront.run(conversationId, conversationId, change.dropFront);
    if (change.dropBack > 0) statements.dropContextBack.run(conversationId, conversationId, change.dropBack);
    if (change.append.length === 0) return;
    const { high } = statements.contextBounds.get(conversationId) ?? { high: null };
    let seq = high === null ? 0 : high + 1;
    for (const entry of change.append) statements.insertContext.run(conversationId, seq++, JSON.stringify(entry));
  }

  function cacheContextChange(conversationId: string, change: ContextChange): void {
    const cached = contextCache.get(conversationId);
    if (change.kind === 'replace') {
      cacheContext(conversationId, [...change.entries]);
      return;
    }
    if (!cached) return;
    const kept = cached.slice(change.dropFront, Math.max(change.dropFront, cached.length - change.dropBack));
    cacheContext(conversationId, [...kept, ...change.append]);
  }

  // ---- Rows ----

  function readConversation(id: string): ConversationRecord | undefined {
    const row = statements.getConversation.get(id);
    if (!row) return undefined;
    try {
      return toConversation(row);
    } catch (error) {
      logger?.warn('skipped a conversation whose record cannot be read', { conversationId: id, error });
      return undefined;
    }
  }

  function insertTurn(conversationId: string, turn: NewTurn, at: string): number {
    const result = statements.insertTurn.run(
      conversationId,
      turn.role,
      turn.text,
      turn.metadata ? JSON.stringify(turn.metadata) : null,
      turn.status ?? 'ok',
      turn.error ? JSON.stringify(turn.error) : null,
      encodeNotices(turn.notices),
      at,
    );
    return Number(result.lastInsertRowid);
  }

  function requireConversation(id: string): ConversationRecord {
    const conversation = readConversation(id);
    if (!conversation) throw new StoreError(`No conversation with id ${id}.`);
    return conversation;
  }

  /** Inside a transaction: the conversation, and its prompt as the first version. */
  function insertConversation(
    input: { id: string; title?: string | null; createdAt: string; updatedAt?: string; settings: Settings; prompt?: string; pinned?: PinnableField[] },
    source: PromptSource = 'user',
  ): void {
    statements.insertConversation.run(
      input.id,
      input.title ?? null,
      input.createdAt,
      input.updatedAt ?? input.createdAt,
      input.prompt ?? '',
      JSON.stringify(input.settings),
      JSON.stringify(input.pinned ?? []),
    );
    if ((input.prompt ?? '') !== '') insertVersion(input.id, { prompt: input.prompt ?? '', source, turnId: null }, input.createdAt);
  }

  /** Inside a transaction: a new version whose parent is the current one, made current. */
  function insertVersion(conversationId: string, version: { prompt: string; source: PromptSource; turnId: number | null }, at: string): number {
    const parent = statements.getConversation.get(conversationId)?.prompt_version_id ?? null;
    const id = Number(statements.insertVersion.run(conversationId, parent, version.prompt, version.source, version.turnId, at).lastInsertRowid);
    statements.setPrompt.run(version.prompt, id, conversationId);
    return id;
  }

  function setPending(conversationId: string, change: Partial<PendingNotes>): void {
    const current = requireConversation(conversationId);
    statements.setPending.run(JSON.stringify({ ...current.pending, ...change }), conversationId);
  }

  const beginTurn = db.transaction((conversationId: string, input: BeginTurnInput, at: string) => {
    if (input.create) insertConversation({ id: conversationId, ...input.create });
    else requireConversation(conversationId);
    const userTurnId = input.user ? insertTurn(conversationId, { role: 'user', text: input.user.text }, at) : null;
    for (const id of input.replaces) statements.replaceTurn.run(id, conversationId);
    writeContextChange(conversationId, input.context);
    const turnId = insertTurn(conversationId, { role: 'assistant', text: '', status: 'running' }, at);
    statements.setPending.run(JSON.stringify(NO_PENDING), conversationId);
    statements.touch.run(at, conversationId);
    const promptVersion = statements.getConversation.get(conversationId)?.prompt_version_id ?? null;
    return { userTurnId, turnId, promptVersion };
  });

  const finishTurn = db.transaction(
    (conversationId: string, outcome: { turnId: number; turn: NewTurn; context: ContextChange; pane?: FinishPane; imageNote?: ImageNote }, at: string) => {
      const current = requireConversation(conversationId);
      const { turn, pane } = outcome;
      statements.finishTurn.run(
        turn.text,
        turn.metadata ? JSON.stringify(turn.metadata) : null,
        turn.status ?? 'ok',
        turn.error ? JSON.stringify(turn.error) : null,
        encodeNotices(turn.notices),
        outcome.imageNote ? JSON.stringify(outcome.imageNote) : null,
        outcome.turnId,
        conversationId,
      );
      writeContextChange(conversationId, outcome.context);
      if (pane) {
        if (pane.version) insertVersion(conversationId, { prompt: pane.version.prompt, source: 'model', turnId: outcome.turnId }, at);
        if (pane.suggestion !== undefined) statements.setSuggestion.run(pane.suggestion ? JSON.stringify(pane.suggestion) : null, conversationId);
        statements.setSettings.run(JSON.stringify(pane.settings), JSON.stringify(current.pinned), JSON.stringify(pane.settingSuggestions), conversationId);
      }
      statements.touch.run(at, conversationId);
    },
  );

  const addPromptVersion = db.transaction(
    (
      conversationId: string,
      version: { prompt: string; source: PromptSource; turnId: number | null },
      at: string,
      options: { tellModel: boolean; clearSuggestion: boolean },
    ) => {
      requireConversation(conversationId);
      const id = insertVersion(conversationId, version, at);
      setPending(conversationId, { promptEdited: options.tellModel });
      if (options.clearSuggestion) statements.setSuggestion.run(null, conversationId);
      return id;
    },
  );

  const selectPromptVersion = db.transaction((conversationId: string, versionId: number) => {
    const version = statements.getVersion.get(versionId, conversationId);
    if (!version) throw new StoreError(`No prompt version ${versionId} in conversation ${conversationId}.`);
    statements.setPrompt.run(version.prompt, version.id, conversationId);
    setPending(conversationId, { promptEdited: true });
  });

  const setSettings = db.transaction((conversationId: string, change: Parameters<ConversationStore['setSettings']>[1], tellModel: boolean) => {
    requireConversation(conversationId);
    statements.setSettings.run(JSON.stringify(change.settings), JSON.stringify(change.pinned), JSON.stringify(change.settingSuggestions), conversationId);
    if (tellModel) setPending(conversationId, { settingsChanged: true });
  });

  const addImage = db.transaction((image: ImageRecord) => {
    statements.insertImage.run(toImageRow(image));
    statements.touch.run(image.createdAt, image.conversationId);
  });

  const deleteConversation = db.transaction((id: string) => {
    if (!statements.getConversation.get(id)) return undefined;
    const files = statements.listImageFiles.all(id).map((row) => row.file);
    // Turns, images, the context and the search rows go with it (ON DELETE CASCADE, triggers).
    statements.deleteConversation.run(id);
    return { files };
  });

  const importConversation = db.transaction((input: ConversationImport) => {
    const { pane } = input;
    // With its versions the prompt's history is inserted below; an older export's prompt becomes the first version.
    insertConversation(pane ? { ...input, prompt: '' } : input, 'earlier');
    const turnIds = input.turns.map((turn) => insertTurn(input.id, turn, turn.createdAt));
    const turnAt = (index: number | null) => (index === null ? null : (turnIds[index] ?? null));
    input.turns.forEach((turn, index) => {
      if (turn.imageNote) statements.setImageNote.run(JSON.stringify(turn.imageNote), turnIds[index]);
    });
    writeContextChange(input.id, { kind: 'replace', entries: input.context });
    const versionIds: number[] = [];
    if (pane) {
      for (const version of pane.versions) {
        const parent = version.parent === null ? null : (versionIds[version.parent] ?? null);
        versionIds.push(Number(statements.insertVersion.run(input.id, parent, version.prompt, version.source, turnAt(version.turn), version.createdAt).lastInsertRowid));
      }
      statements.setPrompt.run(input.prompt, pane.current === null ? null : (versionIds[pane.current] ?? null), input.id);
      const suggestion = pane.suggestion ? { prompt: pane.suggestion.prompt, turnId: turnAt(pane.suggestion.turn) } : null;
      statements.setSuggestion.run(suggestion && suggestion.turnId !== null ? JSON.stringify(suggestion) : null, input.id);
      statements.setSettings.run(JSON.stringify(input.settings), JSON.stringify(pane.pinned), JSON.stringify(pane.settingSuggestions), input.id);
    }
    for (const image of input.images) {
      const promptVersion = image.promptVersion === null ? null : (versionIds[image.promptVersion] ?? null);
      statements.insertImage.run(toImageRow({ ...image, conversationId: input.id, turnId: turnAt(image.turn), url: '', promptVersion }));
    }
  });

  function listImages(conversationId: string): ImageRecord[] {
    return statements.listImages.all(conversationId).map(toImage);
  }

  function toListing(row: ListingRow): ConversationListing | undefined {
    try {
      // The same checks as opening it: a row listed can be opened.
      toConversation(row);
    } catch (error) {
      logger?.warn('skipped a conversation whose record cannot be read', { conversationId: row.id, error });
      return undefined;
    }
    return {
      id: row.id,
      title: row.title,
      firstMessage: row.first_message,
      lastMessage: row.last_message,
      prompt: row.prompt,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }

  /**
   * Every write goes through here: it is refused while the file is not the one Easel opened, and SQLite's
   * failure becomes a StorageError a person can act on.
   */
  function write<T>(work: () => T): T {
    watch.requireSameFile();
    try {
      return work();
    } catch (error) {
      throw watch.noteFailure(toStorageError(error, path));
    }
  }

  /** Reads meet a damaged or foreign file too: SQLite's failure is a StorageError (503), never an internal error. */
  function read<A extends unknown[], T>(work: (...args: A) => T): (...args: A) => T {
    return (...args) => {
      try {
        return work(...args);
      } catch (error) {
        throw watch.noteFailure(toStorageError(error, path));
      }
    };
  }

  const store: ConversationStore = {
    createConversation(input) {
      write(() => db.transaction(() => insertConversation(input))());
      return requireConversation(input.id);
    },
    getConversation: readConversation,
    listConversations({ query, limit = 500 } = {}) {
      const terms = toSearchTerms(query ?? '');
      const rows = terms.length === 0 ? listAll.all(limit) : searchStatement(terms.length).all(...terms.flatMap((term) => [term, term]), limit);
      return rows.map(toListing).filter((listing): listing is ConversationListing => listing !== undefined);
    },
    renameConversation(id, title) {
      return write(() => statements.setTitle.run(title, id).changes > 0);
    },
    deleteConversation(id) {
      const deleted = write(() => deleteConversation(id));
      contextCache.delete(id);
      return deleted;
    },
    listTurns(conversationId) {
      const images = listImages(conversationId);
      return statements.listTurns.all(conversationId).map((row) => toTurn(row, images));
    },
    listLastExchange(conversationId) {
      return statements.listLastExchange.all(conversationId, conversationId).map((row) => toTurn(row, []));
    },
    readContext,
    beginTurn(conversationId, input, at) {
      const started = write(() => beginTurn(conversationId, input, at));
      cacheContextChange(conversationId, input.context);
      return started;
    },
    saveReplyText(turnId, text) {
      write(() => statements.saveReplyText.run(text, turnId));
    },
    finishTurn(conversationId, outcome, at) {
      write(() => finishTurn(conversationId, outcome, at));
      cacheContextChange(conversationId, outcome.context);
      return toTurn(statements.getTurn.get(outcome.turnId) as TurnRow, []);
    },
    addPromptVersion(conversationId, version, at, options) {
      return write(() => addPromptVersion(conversationId, version, at, options));
    },
    selectPromptVersion(conversationId, versionId) {
      write(() => selectPromptVersion(conversationId, versionId));
    },
    getPromptVersion(conversationId, versionId) {
      const row = statements.getVersion.get(versionId, conversationId);
      return row ? toPromptVersion(row) : undefined;
    },
    listPromptVersionChildren(conversationId, versionId) {
      return statements.listVersionChildren.all(versionId, conversationId).map(toPromptVersion);
    },
    listPromptVersions(conversationId) {
      return statements.listVersions.all(conversationId).map(toPromptVersion);
    },
    setSuggestion(conversationId, suggestion) {
      write(() => statements.setSuggestion.run(suggestion ? JSON.stringify(suggestion) : null, conversationId));
    },
    setSettings(conversationId, change, options) {
      write(() => setSettings(conversationId, change, options.tellModel));
    },
    addImage(image) {
      write(() => addImage(image));
    },
    listImages,
    importConversation(input) {
      write(() => importConversation(input));
      cacheContext(input.id, [...input.context]);
    },
    close() {
      contextCache.clear();
      db.close();
    },
  };
  for (const name of READ_METHODS) guardRead(store, name, read);
  return store;
}

/** The store's methods that only read: each is guarded against a damaged file (see `read`). */
const READ_METHODS = [
  'getConversation',
  'listConversations',
  'listTurns',
  'listLastExchange',
  'readContext',
  'getPromptVersion',
  'listPromptVersionChildren',
  'listPromptVersions',
  'listImages',
] as const satisfies ReadonlyArray<keyof ConversationStore>;

function guardRead<K extends (typeof READ_METHODS)[number]>(
  store: ConversationStore,
  name: K,
  read: <A extends unknown[], T>(work: (...args: A) => T) => (...args: A) => T,
): void {
  store[name] = read(store[name] as (...args: unknown[]) => unknown) as ConversationStore[K];
}

interface FileWatch {
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
function watchFile(db: Database.Database, path: string, logger: Logger | undefined): FileWatch {
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
        now = statSync(path, { throwIfNoEntry: false });
      } catch {
        // ENOTDIR (its folder replaced by a file), EACCES: the path no longer leads to the file Easel opened.
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

function toConversation(row: ConversationRow): ConversationRecord {
  return {
    id: row.id,
    title: row.title,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    prompt: row.prompt,
    promptVersion: row.prompt_version_id,
    suggestion: row.suggestion ? (JSON.parse(row.suggestion) as PromptSuggestion) : null,
    settings: JSON.parse(row.settings) as Settings,
    pinned: (JSON.parse(row.pinned) as unknown[]).filter(isPinnableField),
    settingSuggestions: JSON.parse(row.setting_suggestions) as SettingSuggestions,
    pending: { ...NO_PENDING, ...(JSON.parse(row.pending) as Partial<PendingNotes>) },
  };
}

/** NULL when there are none: most turns. */
function encodeNotices(notices: readonly string[] | undefined): string | null {
  return notices && notices.length > 0 ? JSON.stringify(notices) : null;
}

function toPromptVersion(row: PromptVersionRow): PromptVersion {
  return { id: row.id, parentId: row.parent_id, prompt: row.prompt, source: row.source, turnId: row.turn_id, createdAt: row.created_at };
}

function toTurn(row: TurnRow, images: ImageRecord[]): TranscriptTurn {
  return {
    id: row.id,
    role: row.role,
    text: row.text,
    ...(row.metadata ? { metadata: JSON.parse(row.metadata) } : {}),
    status: row.status,
    ...(row.error ? { error: JSON.parse(row.error) } : {}),
    ...(row.notices ? { notices: JSON.parse(row.notices) as string[] } : {}),
    images: images.filter((image) => image.turnId === row.id),
    ...(row.image_note ? { imageNote: JSON.parse(row.image_note) as ImageNote } : {}),
    createdAt: row.created_at,
  };
}

function toImageRow(image: ImageRecord): ImageRow {
  return {
    id: image.id,
    conversation_id: image.conversationId,
    turn_id: image.turnId,
    file: image.file,
    prompt: image.prompt,
    negative_prompt: image.negativePrompt,
    steps: image.steps,
    cfg: image.cfg,
    seed: image.seed,
    sampler: image.sampler,
    width: image.width,
    height: image.height,
    model: image.model,
    prompt_version_id: image.promptVersion,
    created_at: image.createdAt,
  };
}

function toImage(row: ImageRow): ImageRecord {
  return {
    id: row.id,
    conversationId: row.conversation_id,
    turnId: row.turn_id,
    file: row.file,
    url: `/images/${row.file}`,
    prompt: row.prompt,
    negativePrompt: row.negative_prompt,
    steps: row.steps,
    cfg: row.cfg,
    seed: row.seed,
    sampler: row.sampler,
    width: row.width,
    height: row.height,
    model: row.model,
    promptVersion: row.prompt_version_id,
    createdAt: row.created_at,
  };
}

/**
 * The user's words as FTS5 terms: split where the tokenizer splits (anything but letters and digits),
 * each one quoted (so no word is read as FTS5 syntax: AND, NEAR, a column filter) and matched as a prefix.
 */
export function toSearchTerms(query: string): string[] {
  return query
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word !== '')
    .slice(0, MAX_SEARCH_TERMS)
    .map((word) => `"${word.replaceAll('"', '""')}"*`);
}

function sqliteCode(error: unknown): string | undefined {
  return error instanceof Database.SqliteError ? error.code : undefined;
}

/** SQLite's failure as the StorageError a person can act on; errors that are not SQLite's pass through. Exported for its tests. */
export function toStorageError(error: unknown, location: string): unknown {
  const code = sqliteCode(error);
  if (code === undefined) return error;
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
  return readdirSync(MIGRATIONS_DIR)
    .filter((name) => /^\d{3}-[\w-]+\.sql$/.test(name))
    .sort()
    .map((file) => ({ version: Number(file.slice(0, 3)), file }));
}

/** Opens, checks and migrates the database, or throws StoreOpenError saying what is wrong and what to do. */
function openDatabase(path: string): Database.Database {
  let db: Database.Database;
  try {
    db = new Database(path);
  } catch (error) {
    throw describeOpenFailure(error, path);
  }
  try {
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
        db.pragma(`user_version = ${migration.version}`);
      })();
    }
  } finally {
    db.pragma('foreign_keys = ON');
  }
}
