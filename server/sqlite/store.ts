import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import type {
  ConversationRecord,
  ConversationStore,
  ImageRecord,
  NewTurn,
  PendingNotes,
  TranscriptTurn,
  TurnStatus,
} from '../core/conversation.ts';
import type { Settings } from '../core/settings.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
const NO_PENDING: PendingNotes = { promptEdited: false, settingsChanged: false };

interface ConversationRow {
  id: string;
  created_at: string;
  updated_at: string;
  prompt: string;
  settings: string;
  pending: string;
  context: string;
}

interface TurnRow {
  id: number;
  role: 'user' | 'assistant';
  text: string;
  metadata: string | null;
  status: TurnStatus;
  error: string | null;
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
  created_at: string;
}

/** `path` is a file path or ':memory:'. Migrations are the numbered .sql files beside this one. */
export function createSqliteStore(options: { path: string }): ConversationStore {
  const db = new Database(options.path);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  migrate(db);

  const statements = {
    insertConversation: db.prepare(
      'INSERT INTO conversations (id, created_at, updated_at, settings) VALUES (?, ?, ?, ?)',
    ),
    getConversation: db.prepare<[string], ConversationRow>('SELECT * FROM conversations WHERE id = ?'),
    listTurns: db.prepare<[string], TurnRow>('SELECT * FROM turns WHERE conversation_id = ? ORDER BY id'),
    listImages: db.prepare<[string], ImageRow>('SELECT * FROM images WHERE conversation_id = ? ORDER BY created_at, rowid'),
    insertTurn: db.prepare(
      'INSERT INTO turns (conversation_id, role, text, metadata, status, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    getTurn: db.prepare<[number], TurnRow>('SELECT * FROM turns WHERE id = ?'),
    setPending: db.prepare('UPDATE conversations SET pending = ?, updated_at = ? WHERE id = ?'),
    setContext: db.prepare('UPDATE conversations SET context = ?, updated_at = ? WHERE id = ?'),
    setPrompt: db.prepare('UPDATE conversations SET prompt = ?, updated_at = ? WHERE id = ?'),
    setSettings: db.prepare('UPDATE conversations SET settings = ?, updated_at = ? WHERE id = ?'),
    insertImage: db.prepare(
      `INSERT INTO images (id, conversation_id, turn_id, file, prompt, negative_prompt, steps, cfg, seed, sampler, width, height, model, created_at)
       VALUES (@id, @conversation_id, @turn_id, @file, @prompt, @negative_prompt, @steps, @cfg, @seed, @sampler, @width, @height, @model, @created_at)`,
    ),
  };

  function readConversation(id: string): ConversationRecord | undefined {
    const row = statements.getConversation.get(id);
    if (!row) return undefined;
    return {
      id: row.id,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      prompt: row.prompt,
      settings: JSON.parse(row.settings) as Settings,
      pending: { ...NO_PENDING, ...(JSON.parse(row.pending) as Partial<PendingNotes>) },
      context: JSON.parse(row.context) as ConversationRecord['context'],
    };
  }

  function insertTurn(conversationId: string, turn: NewTurn, at: string): number {
    const result = statements.insertTurn.run(
      conversationId,
      turn.role,
      turn.text,
      turn.metadata ? JSON.stringify(turn.metadata) : null,
      turn.status ?? 'ok',
      turn.error ? JSON.stringify(turn.error) : null,
      at,
    );
    return Number(result.lastInsertRowid);
  }

  function toTurn(row: TurnRow, images: ImageRecord[]): TranscriptTurn {
    return {
      id: row.id,
      role: row.role,
      text: row.text,
      ...(row.metadata ? { metadata: JSON.parse(row.metadata) } : {}),
      status: row.status,
      ...(row.error ? { error: JSON.parse(row.error) } : {}),
      images: images.filter((image) => image.turnId === row.id),
      createdAt: row.created_at,
    };
  }

  function requireConversation(id: string): ConversationRecord {
    const conversation = readConversation(id);
    if (!conversation) throw new StoreError(`No conversation with id ${id}.`);
    return conversation;
  }

  const beginTurn = db.transaction((conversationId: string, turn: NewTurn, at: string) => {
    const conversation = requireConversation(conversationId);
    const turnId = insertTurn(conversationId, turn, at);
    statements.setPending.run(JSON.stringify(NO_PENDING), at, conversationId);
    return { turnId, conversation };
  });

  const finishTurn = db.transaction(
    (conversationId: string, outcome: Parameters<ConversationStore['finishTurn']>[1], at: string) => {
      const current = requireConversation(conversationId);
      const turnId = insertTurn(conversationId, outcome.turn, at);
      statements.setContext.run(JSON.stringify(outcome.context), at, conversationId);
      if (outcome.prompt !== undefined && !current.pending.promptEdited) {
        statements.setPrompt.run(outcome.prompt, at, conversationId);
      }
      if (outcome.settings !== undefined && !current.pending.settingsChanged) {
        statements.setSettings.run(JSON.stringify(outcome.settings), at, conversationId);
      }
      return turnId;
    },
  );

  const setPrompt = db.transaction((conversationId: string, prompt: string, at: string) => {
    const current = requireConversation(conversationId);
    statements.setPrompt.run(prompt, at, conversationId);
    statements.setPending.run(JSON.stringify({ ...current.pending, promptEdited: true }), at, conversationId);
  });

  const setSettings = db.transaction((conversationId: string, settings: Settings, at: string) => {
    const current = requireConversation(conversationId);
    statements.setSettings.run(JSON.stringify(settings), at, conversationId);
    statements.setPending.run(JSON.stringify({ ...current.pending, settingsChanged: true }), at, conversationId);
  });

  function listImages(conversationId: string): ImageRecord[] {
    return statements.listImages.all(conversationId).map(toImage);
  }

  return {
    createConversation({ id, createdAt, settings }) {
      statements.insertConversation.run(id, createdAt, createdAt, JSON.stringify(settings));
      return requireConversation(id);
    },
    getConversation: readConversation,
    listTurns(conversationId) {
      const images = listImages(conversationId);
      return statements.listTurns.all(conversationId).map((row) => toTurn(row, images));
    },
    beginTurn(conversationId, turn, at) {
      const { turnId, conversation } = beginTurn(conversationId, turn, at);
      return { turn: toTurn(statements.getTurn.get(turnId) as TurnRow, []), conversation };
    },
    finishTurn(conversationId, outcome, at) {
      const turnId = finishTurn(conversationId, outcome, at);
      return toTurn(statements.getTurn.get(turnId) as TurnRow, []);
    },
    setPrompt(conversationId, prompt, at) {
      setPrompt(conversationId, prompt, at);
    },
    setSettings(conversationId, settings, at) {
      setSettings(conversationId, settings, at);
    },
    addImage(image) {
      statements.insertImage.run({
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
        created_at: image.createdAt,
      });
    },
    listImages,
    close() {
      db.close();
    },
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
    createdAt: row.created_at,
  };
}

export class StoreError extends Error {
  override readonly name = 'StoreError';
}

/** Applies each numbered .sql file once, in order, recording the version in user_version. */
function migrate(db: Database.Database): void {
  const files = readdirSync(MIGRATIONS_DIR)
    .filter((name) => /^\d{3}-[\w-]+\.sql$/.test(name))
    .sort();
  const current = db.pragma('user_version', { simple: true }) as number;
  for (const file of files) {
    const version = Number(file.slice(0, 3));
    if (version <= current) continue;
    db.transaction(() => {
      db.exec(readFileSync(MIGRATIONS_DIR + file, 'utf8'));
      db.pragma(`user_version = ${version}`);
    })();
  }
}
