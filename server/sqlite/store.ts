// The ConversationStore on SQLite: conversations, turns and prompt versions, composed with the working context
// (context-table.ts) and the images and their checks (image-table.ts); each write one transaction. Opening, migrations and the file's
// watch are open.ts's; rows and their parsing rows.ts's.
import type Database from 'better-sqlite3';
import type {
  BeginTurnInput,
  ContextChange,
  ConversationImport,
  ConversationListing,
  ConversationRecord,
  ConversationStore,
  FinishPane,
  ImageNote,
  NewTurn,
  PendingNotes,
} from '../core/conversation.ts';
import { sourceOfSuggestion, type PinnableField, type PromptSource } from '../core/pane.ts';
import type { Logger } from '../core/logger.ts';
import type { Settings } from '../core/settings.ts';
import { toSearchWords } from '../core/text.ts';
import {
  encodeNotices,
  NO_PENDING,
  toConversation,
  toPromptVersion,
  toTurn,
  type ConversationRow,
  type ListingRow,
  type PromptVersionRow,
  type TurnRow,
} from './rows.ts';
import { createImageTable } from './image-table.ts';
import { createContextTable } from './context-table.ts';
import { openDatabase, StoreError, toStorageError, watchFile } from './open.ts';

export { describeOpenFailure, latestSchemaVersion, StoreError, StoreOpenError, toStorageError, type StoreOpenErrorCode } from './open.ts';

const CONVERSATION_COLUMNS = 'id, title, created_at, updated_at, prompt, settings, pending, prompt_version_id, suggestion, pinned, setting_suggestions, pane_revision';
/** At most this many words of a search are looked up (each one narrows the result). */
const MAX_SEARCH_TERMS = 8;
/** The preview of a conversation in the list is cut here (a reply can be 200 000 characters). */
const PREVIEW_CHARS = 300;

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
  };

  const LISTING_COLUMNS = `${CONVERSATION_COLUMNS.split(', ').map((column) => `c.${column}`).join(', ')},
    (SELECT substr(t.text, 1, ${PREVIEW_CHARS}) FROM turns t WHERE t.conversation_id = c.id AND t.role = 'user' AND t.status != 'replaced' ORDER BY t.id LIMIT 1) AS first_message,
    (SELECT substr(t.text, 1, ${PREVIEW_CHARS}) FROM turns t WHERE t.conversation_id = c.id AND t.status != 'replaced' AND t.text != '' ORDER BY t.id DESC LIMIT 1) AS last_message`;
  const listAll = db.prepare<[number], ListingRow>(`SELECT ${LISTING_COLUMNS} FROM conversations c ORDER BY c.updated_at DESC, c.rowid DESC LIMIT ?`);
  const listOne = db.prepare<[string], ListingRow>(`SELECT ${LISTING_COLUMNS} FROM conversations c WHERE c.id = ?`);
  const listWithImages = db.prepare<[], ListingRow>(
    `SELECT ${LISTING_COLUMNS} FROM conversations c WHERE c.id IN (SELECT conversation_id FROM images) ORDER BY c.updated_at DESC, c.rowid DESC`,
  );
  // One lookup per word: a conversation matches when each word is in one of its messages, its title or its prompt.
  const matchTerm = `SELECT t.conversation_id FROM turns_search s JOIN turns t ON t.id = s.rowid WHERE turns_search MATCH ?
    UNION SELECT conversation_id FROM conversations_search WHERE conversations_search MATCH ?`;
  const searchStatements = new Map<number, Database.Statement<unknown[], ListingRow>>();
  function searchStatement(terms: number): Database.Statement<unknown[], ListingRow> {
    let statement = searchStatements.get(terms);
    // Stryker disable next-line ConditionalExpression: prepared again every time, the same SQL gives the same rows: only CPU time changes
    if (!statement) {
      const matches = Array.from({ length: terms }, () => `SELECT * FROM (${matchTerm})`).join(' INTERSECT ');
      statement = db.prepare<unknown[], ListingRow>(
        `SELECT ${LISTING_COLUMNS} FROM conversations c WHERE c.id IN (${matches}) ORDER BY c.updated_at DESC, c.rowid DESC LIMIT ?`,
      );
      searchStatements.set(terms, statement);
    }
    return statement;
  }

  // ---- The images and their checks (image-table.ts) ----
  const images = createImageTable(db, {
    listWithImages: () => listWithImages.all().map(toListing).filter((listing): listing is ConversationListing => listing !== undefined),
  });

  // ---- The working context (context-table.ts) ----
  const context = createContextTable(db, logger);

  // ---- Rows ----

  const reportUnreadable = (turnId: number) => (column: string, error: unknown) =>
    logger?.warn('left out a part of a turn that cannot be read', { turnId, column, error });

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
    // Stryker disable next-line StringLiteral: the version's ?? '' is reached only when the prompt is a non-empty string
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
    context.write(conversationId, input.context);
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
      context.write(conversationId, outcome.context);
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

  const pickComparedPrompt = db.transaction((conversationId: string, compared: { chosen: string; over: string }, at: string) => {
    const current = requireConversation(conversationId);
    // The comparison's note names the prompt chosen: no edit note of its own.
    if (current.prompt !== compared.chosen) insertVersion(conversationId, { prompt: compared.chosen, source: 'user', turnId: null }, at);
    setPending(conversationId, { compared });
  });

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

  const deleteConversation = db.transaction((id: string) => {
    if (!statements.getConversation.get(id)) return undefined;
    const files = images.listImageFiles(id);
    // Turns, images, the context and the search rows go with it (ON DELETE CASCADE, triggers).
    statements.deleteConversation.run(id);
    return { files: files.map((row) => row.file), imageIds: files.map((row) => row.id) };
  });

  const importConversation = db.transaction((input: ConversationImport) => {
    const { pane } = input;
    // With its versions the prompt's history is inserted below; an older export's prompt becomes the first version.
    insertConversation(pane ? { ...input, prompt: '' } : input, 'earlier');
    const turnIds = input.turns.map((turn) => insertTurn(input.id, turn, turn.createdAt));
    const turnAt = (index: number | null) => (index === null ? null : (turnIds[index] ?? null));
    input.turns.forEach((turn, index) => {
      // Stryker disable next-line ConditionalExpression: a turn without a note binds JSON.stringify(undefined), written as NULL, the value already there
      if (turn.imageNote) statements.setImageNote.run(JSON.stringify(turn.imageNote), turnIds[index]);
    });
    context.write(input.id, { kind: 'replace', entries: input.context });
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
      // Stryker disable next-line StringLiteral: toImageRow has no url column; toImage rebuilds the url from the file name
      images.insertImage({ ...image, conversationId: input.id, turnId: turnAt(image.turn), url: '', promptVersion });
    }
  });


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
    getListing(id) {
      const row = listOne.get(id);
      return row ? toListing(row) : undefined;
    },
    renameConversation(id, title) {
      return write(() => statements.setTitle.run(title, id).changes > 0);
    },
    deleteConversation(id) {
      const deleted = write(() => deleteConversation(id));
      context.forget(id);
      return deleted;
    },
    listTurns(conversationId) {
      const pictures = images.listImages(conversationId);
      return statements.listTurns.all(conversationId).map((row) => toTurn(row, pictures, reportUnreadable(row.id)));
    },
    listLastExchange(conversationId) {
      return statements.listLastExchange.all(conversationId, conversationId).map((row) => toTurn(row, [], reportUnreadable(row.id)));
    },
    readContext: context.read,
    beginTurn(conversationId, input, at) {
      const started = write(() => beginTurn(conversationId, input, at));
      context.cacheChange(conversationId, input.context);
      return started;
    },
    saveReplyText(turnId, text) {
      write(() => statements.saveReplyText.run(text, turnId));
    },
    finishTurn(conversationId, outcome, at) {
      write(() => finishTurn(conversationId, outcome, at));
      context.cacheChange(conversationId, outcome.context);
      return toTurn(statements.getTurn.get(outcome.turnId) as TurnRow, [], reportUnreadable(outcome.turnId));
    },
    addUserPromptVersion(conversationId, prompt, at, source = 'user') {
      return write(() => addPromptVersion(conversationId, { prompt, source, turnId: null }, at, { tellModel: true, clearSuggestion: false }));
    },
    takeSuggestion(conversationId, suggestion, at) {
      return write(() =>
        addPromptVersion(conversationId, { prompt: suggestion.prompt, source: sourceOfSuggestion(suggestion), turnId: suggestion.turnId }, at, {
          // The chat model wrote its own suggestion; the vision model's it has not seen.
          tellModel: suggestion.imageId !== undefined,
          clearSuggestion: true,
        }),
      );
    },
    pickComparedPrompt(conversationId, compared, at) {
      write(() => pickComparedPrompt(conversationId, compared, at));
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
    addImage: (image) => write(() => images.addImage(image)),
    listImages: images.listImages,
    addImageCheck: (check) => write(() => images.addImageCheck(check)),
    listImageChecks: images.listImageChecks,
    getImage: images.getImage,
    listAllImages: images.listAllImages,
    listImageFacets: images.listImageFacets,
    deleteImage: (id) => write(() => images.deleteImage(id)),
    importConversation(input) {
      write(() => importConversation(input));
      context.cache(input.id, [...input.context]);
    },
    close() {
      context.forgetAll();
      db.close();
    },
  };
  for (const name of READ_METHODS) guardRead(store, name, read);
  return store;
}

/** The store's methods that only read: each is guarded against a damaged file (see `read`). */
const READ_METHODS = [
  'getConversation',
  'listImageChecks',
  'listConversations',
  'getListing',
  'listTurns',
  'listLastExchange',
  'readContext',
  'getPromptVersion',
  'listPromptVersionChildren',
  'listPromptVersions',
  'listImages',
  'listAllImages',
  'listImageFacets',
  'getImage',
] as const satisfies ReadonlyArray<keyof ConversationStore>;

function guardRead<K extends (typeof READ_METHODS)[number]>(
  store: ConversationStore,
  name: K,
  read: <A extends unknown[], T>(work: (...args: A) => T) => (...args: A) => T,
): void {
  store[name] = read(store[name] as (...args: unknown[]) => unknown) as ConversationStore[K];
}

/**
 * The user's words as FTS5 terms: split where the tokenizer splits (anything but letters and digits),
 * each one quoted (so no word is read as FTS5 syntax: AND, NEAR, a column filter) and matched as a prefix.
 */
export function toSearchTerms(query: string): string[] {
  return (
    toSearchWords(query)
      .slice(0, MAX_SEARCH_TERMS)
      // Stryker disable next-line StringLiteral: the split leaves no `"` in a word; the escape guards a change of the split
      .map((word) => `"${word.replaceAll('"', '""')}"*`)
  );
}
