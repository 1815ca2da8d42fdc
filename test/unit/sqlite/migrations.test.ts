// Every earlier schema version migrates to the current one with its data. The old databases are built
// the way the old code built them: its migration files (001, 002: unchanged since, and migrations are
// append-only) applied in order, then filled as the old store wrote (the context as one JSON column).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, PROMPT_SOURCES, TURN_STATUSES } from '../../../server/core/index.ts';
import { createSqliteStore, latestSchemaVersion } from '../../../server/sqlite/index.ts';

const MIGRATIONS = fileURLToPath(new URL('../../../server/sqlite/migrations/', import.meta.url));
const META = { prompt: 'a red fox', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const CONTEXT = [
  { kind: 'user', text: 'a fox', note: '[The user edited the prompt to: "a red fox"]' },
  { kind: 'assistant', text: 'Which fox?', metadata: META },
  { kind: 'user', text: 'in the snow' },
];
const FILE_A = `${'a'.repeat(32)}.png`;
const FILE_B = `${'b'.repeat(32)}.png`;

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A database at `version`, as the code of that version created it. */
function buildOldDatabase(version: number): string {
  const dir = mkdtempSync(join(tmpdir(), `easel-v${version}-`));
  dirs.push(dir);
  const path = join(dir, 'easel.db');
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  for (const file of readdirSync(MIGRATIONS).filter((name) => /^\d{3}-/.test(name)).sort()) {
    const number = Number(file.slice(0, 3));
    if (number > version) break;
    db.transaction(() => {
      db.exec(readFileSync(join(MIGRATIONS, file), 'utf8'));
      db.pragma(`user_version = ${number}`);
    })();
  }
  const conversation = db.prepare('INSERT INTO conversations (id, created_at, updated_at, prompt, settings, context) VALUES (?, ?, ?, ?, ?, ?)');
  conversation.run('fox', '2026-01-01T10:00:00.000Z', '2026-01-01T10:05:00.000Z', 'a red fox', JSON.stringify(DEFAULT_SETTINGS), JSON.stringify(CONTEXT));
  conversation.run('visit', '2026-01-02T10:00:00.000Z', '2026-01-02T10:00:00.000Z', '', JSON.stringify(DEFAULT_SETTINGS), '[]');
  conversation.run('prompt-only', '2026-01-03T10:00:00.000Z', '2026-01-03T10:00:00.000Z', 'a lighthouse', JSON.stringify(DEFAULT_SETTINGS), '[]');
  conversation.run('odd-context', '2026-01-04T10:00:00.000Z', '2026-01-04T10:00:00.000Z', 'x', JSON.stringify(DEFAULT_SETTINGS), '{not json');
  const turn = db.prepare('INSERT INTO turns (id, conversation_id, role, text, metadata, status, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  // Ids with a gap, as deletes never happened but the old code's ids are what images point at.
  turn.run(5, 'fox', 'user', 'a fox', null, 'ok', null, '2026-01-01T10:00:00.000Z');
  turn.run(6, 'fox', 'assistant', 'Which fox?', JSON.stringify(META), 'ok', null, '2026-01-01T10:01:00.000Z');
  turn.run(9, 'fox', 'user', 'in the snow', null, 'ok', null, '2026-01-01T10:02:00.000Z');
  turn.run(10, 'fox', 'assistant', 'Cut', null, 'error', JSON.stringify({ code: 'ollama_stream_failed', message: 'broke' }), '2026-01-01T10:03:00.000Z');
  if (version >= 2) {
    const image = db.prepare(
      `INSERT INTO images (id, conversation_id, turn_id, file, prompt, negative_prompt, steps, cfg, seed, width, height, model, created_at)
       VALUES (?, 'fox', ?, ?, 'a red fox', '', 20, 7, 42, 512, 512, NULL, '2026-01-01T10:04:00.000Z')`,
    );
    image.run('img-a', 6, FILE_A);
    image.run('img-b', null, FILE_B);
  }
  db.close();
  return path;
}

describe.each([1, 2])('a database at schema version %i', (version) => {
  it('migrates to the current version and keeps everything the user made', () => {
    const path = buildOldDatabase(version);
    const store = createSqliteStore({ path });

    // The working context moved to its own rows, entry for entry.
    expect(store.readContext('fox')).toEqual(CONTEXT);
    expect(store.readContext('odd-context')).toEqual([]);
    // The transcript keeps its ids and statuses (images point at those ids).
    const turns = store.listTurns('fox');
    expect(turns.map((t) => [t.id, t.role, t.text, t.status])).toEqual([
      [5, 'user', 'a fox', 'ok'],
      [6, 'assistant', 'Which fox?', 'ok'],
      [9, 'user', 'in the snow', 'ok'],
      [10, 'assistant', 'Cut', 'error'],
    ]);
    expect(turns[3]?.error).toEqual({ code: 'ollama_stream_failed', message: 'broke' });
    if (version >= 2) {
      expect(turns[1]?.images.map((i) => i.file)).toEqual([FILE_A]);
      expect(store.listImages('fox').map((i) => [i.file, i.turnId])).toEqual([
        [FILE_A, 6],
        [FILE_B, null],
      ]);
    }
    // Conversations made by a mere page visit (nothing in them) are gone; the others stay, newest first.
    expect(store.listConversations().map((c) => c.id)).toEqual(['odd-context', 'prompt-only', 'fox']);
    expect(store.getConversation('visit')).toBeUndefined();
    // The prompt each conversation had is its first version; nothing is pinned or waiting.
    expect(store.listPromptVersions('fox').map((v) => [v.prompt, v.source, v.parentId])).toEqual([['a red fox', 'earlier', null]]);
    expect(store.getConversation('fox')).toMatchObject({ promptVersion: store.listPromptVersions('fox')[0]!.id, suggestion: null, pinned: [], settingSuggestions: {} });
    expect(store.getConversation('odd-context')?.promptVersion).toEqual(expect.any(Number));
    if (version >= 2) expect(store.listImages('fox').map((i) => i.promptVersion)).toEqual([null, null]);
    // Old messages and prompts are searchable.
    expect(store.listConversations({ query: 'snow' }).map((c) => c.id)).toEqual(['fox']);
    expect(store.listConversations({ query: 'lighthouse' }).map((c) => c.id)).toEqual(['prompt-only']);

    // New turns continue after the old ids, with the new statuses allowed.
    const { turnId } = store.beginTurn('fox', { user: { text: 'at dusk' }, replaces: [10], context: { kind: 'edit', dropFront: 0, dropBack: 0, append: [{ kind: 'user', text: 'at dusk' }] } }, '2026-01-05T10:00:00.000Z');
    expect(turnId).toBeGreaterThan(10);
    expect(store.listTurns('fox').map((t) => t.status)).toEqual(['ok', 'ok', 'ok', 'replaced', 'ok', 'running']);
    store.close();

    const db = new Database(path);
    expect(db.pragma('user_version', { simple: true })).toBe(latestSchemaVersion());
    expect(db.pragma('foreign_key_check')).toEqual([]);
    expect(db.prepare("SELECT name FROM pragma_table_info('conversations') WHERE name = 'context'").all()).toEqual([]);
    // Foreign keys still hold after the turns table was rebuilt: deleting a turn unlinks its image.
    db.pragma('foreign_keys = ON');
    db.prepare('DELETE FROM turns WHERE id = 6').run();
    if (version >= 2) expect(db.prepare("SELECT turn_id FROM images WHERE id = 'img-a'").get()).toEqual({ turn_id: null });
    db.close();
  });
});

describe('migration 012 (the vision source)', () => {
  it('rebuilds prompt_versions keeping every id and reference, and gives out no deleted id again', () => {
    const path = buildOldDatabase(2);
    const db = new Database(path);
    // Up to 011 as openDatabase migrates: each file in its transaction, foreign keys off meanwhile.
    for (const file of readdirSync(MIGRATIONS).filter((name) => /^\d{3}-/.test(name)).sort()) {
      const number = Number(file.slice(0, 3));
      if (number <= 2 || number > 11) continue;
      db.transaction(() => {
        db.exec(readFileSync(join(MIGRATIONS, file), 'utf8'));
        db.pragma(`user_version = ${number}`);
      })();
    }
    db.pragma('foreign_keys = ON');
    const version = db.prepare("INSERT INTO prompt_versions (conversation_id, parent_id, prompt, source, created_at) VALUES ('fox', ?, ?, 'user', 'now')");
    const first = Number(version.run(null, 'a fox').lastInsertRowid);
    const second = Number(version.run(first, 'a red fox').lastInsertRowid);
    const deleted = Number(version.run(second, 'gone').lastInsertRowid);
    db.prepare('DELETE FROM prompt_versions WHERE id = ?').run(deleted);
    db.prepare("UPDATE conversations SET prompt_version_id = ? WHERE id = 'fox'").run(second);
    db.prepare("UPDATE images SET prompt_version_id = ? WHERE id = 'img-a'").run(first);
    db.close();

    const store = createSqliteStore({ path });
    expect(store.listPromptVersions('fox').filter((v) => v.source === 'user').map((v) => [v.id, v.parentId, v.prompt])).toEqual([
      [first, null, 'a fox'],
      [second, first, 'a red fox'],
    ]);
    expect(store.getConversation('fox')?.promptVersion).toBe(second);
    expect(store.listImages('fox').find((image) => image.id === 'img-a')?.promptVersion).toBe(first);
    const described = store.addUserPromptVersion('fox', 'a fox in the snow', 'later', 'vision');
    expect(described).toBeGreaterThan(deleted);
    expect(store.getPromptVersion('fox', described)).toMatchObject({ source: 'vision', parentId: second });
    store.close();
    const after = new Database(path);
    expect(after.pragma('foreign_key_check')).toEqual([]);
    after.close();
  });
});

describe('the closed sets the schema checks', () => {
  // SQL cannot import the TypeScript lists: the CHECKs in the migrations must take exactly their values.
  it('take exactly every turn status and prompt source the code declares, and refuse any other', () => {
    const dir = mkdtempSync(join(tmpdir(), 'easel-closed-sets-'));
    dirs.push(dir);
    const path = join(dir, 'easel.db');
    createSqliteStore({ path }).close();
    const db = new Database(path);
    try {
      db.prepare("INSERT INTO conversations (id, created_at, updated_at, prompt, settings) VALUES ('c', 'now', 'now', '', ?)").run(JSON.stringify(DEFAULT_SETTINGS));
      const turn = db.prepare("INSERT INTO turns (conversation_id, role, text, status, created_at) VALUES ('c', 'assistant', '', ?, 'now')");
      for (const status of TURN_STATUSES) expect(() => turn.run(status), status).not.toThrow();
      expect(() => turn.run('paused')).toThrow(/CHECK constraint failed/);
      const version = db.prepare("INSERT INTO prompt_versions (conversation_id, prompt, source, created_at) VALUES ('c', 'x', ?, 'now')");
      for (const source of PROMPT_SOURCES) expect(() => version.run(source), source).not.toThrow();
      expect(() => version.run('robot')).toThrow(/CHECK constraint failed/);
    } finally {
      db.close();
    }
  });
});
