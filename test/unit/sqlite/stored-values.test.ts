// How rows with damaged or old JSON are read: a part of a turn that is not JSON, or not what Easel writes, is
// left out and logged with its column and an error saying which of the two it is; a value an older Easel wrote
// is read. A second connection writes the rows, as another program or an older Easel would have.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, type ConversationStore } from '../../../server/core/index.ts';
import type { Logger } from '../../../server/core/logger.ts';
import { createSqliteStore } from '../../../server/sqlite/index.ts';
import { StoredValueError } from '../../../server/sqlite/rows.ts';

const at = '2026-11-23T10:00:00.000Z';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/**
 * A store whose one reply has its error, notices and image note columns set as given (SQL NULL for null),
 * opened again with a logger that keeps every warning.
 */
function storeWithReply(columns: { error: string | null; notices: string | null; image_note: string | null }): {
  store: ConversationStore;
  replyId: number;
  warnings: Array<[string, Record<string, unknown> | undefined]>;
} {
  const dir = mkdtempSync(join(tmpdir(), 'easel-values-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'easel.db');
  const first = createSqliteStore({ path });
  first.createConversation({ id: 'c1', createdAt: at, settings: DEFAULT_SETTINGS });
  const { turnId } = first.beginTurn('c1', { user: { text: 'a cat' }, replaces: [], context: { kind: 'edit', dropFront: 0, dropBack: 0, append: [] } }, at);
  first.close();
  const other = new Database(path);
  other.prepare("UPDATE turns SET status = 'error', error = ?, notices = ?, image_note = ? WHERE id = ?").run(columns.error, columns.notices, columns.image_note, turnId);
  other.close();
  const warnings: Array<[string, Record<string, unknown> | undefined]> = [];
  const logger: Logger = { debug() {}, info() {}, warn: (message, fields) => warnings.push([message, fields]), error() {} };
  const store = createSqliteStore({ path, logger });
  cleanups.push(() => store.close());
  return { store, replyId: turnId, warnings };
}

/** The error a warning carries: a StoredValueError, under its own name, with these words (and this cause, when given). */
function storedValueError(message: string, cause?: unknown) {
  return expect.objectContaining({ constructor: StoredValueError, name: 'StoredValueError', message, ...(cause === undefined ? {} : { cause }) });
}

describe('a part of a turn that is not JSON', () => {
  it('is left out, logged with its column: error, notices, image_note; the error says it cannot be parsed, with JSON\'s own error as cause', () => {
    const { store, replyId, warnings } = storeWithReply({ error: '{"code": ', notices: '["cut', image_note: 'not json' });
    const reply = store.listTurns('c1').at(-1);
    expect(reply).toEqual({ id: replyId, role: 'assistant', text: '', status: 'error', images: [], createdAt: at });
    const line = (column: string) => ['left out a part of a turn that cannot be read', { turnId: replyId, column, error: storedValueError('a stored JSON value cannot be parsed', expect.any(SyntaxError)) }];
    expect(warnings).toEqual([line('error'), line('notices'), line('image_note')]);
  });
});

describe('a part of a turn that is JSON but not what Easel writes', () => {
  it('is left out, logged with its column, and the error names what is wrong in zod\'s words', () => {
    const { store, replyId, warnings } = storeWithReply({
      error: '{"code": "timeout"}',
      notices: '["kept", 5]',
      image_note: '{"reason": "auto_off", "message": 7}',
    });
    expect(store.listTurns('c1').at(-1)).not.toHaveProperty('notices');
    const line = (column: string, problem: string) => [
      'left out a part of a turn that cannot be read',
      { turnId: replyId, column, error: storedValueError(`a stored value is not what Easel writes: ${problem}`) },
    ];
    expect(warnings).toEqual([
      line('error', 'Invalid input: expected string, received undefined'),
      line('notices', 'Invalid input: expected string, received number'),
      line('image_note', 'Invalid input: expected string, received number'),
    ]);
  });
});

describe('a part of a turn an older or other Easel wrote', () => {
  it('is read: an error code outside today\'s set reads as internal_error, its message kept whole', () => {
    const { store, warnings } = storeWithReply({
      error: '{"code": "a_code_from_elsewhere", "message": "It broke."}',
      notices: '["clamped"]',
      image_note: '{"reason": "auto_off", "message": "Not made."}',
    });
    expect(store.listTurns('c1').at(-1)).toMatchObject({
      error: { code: 'internal_error', message: 'It broke.' },
      notices: ['clamped'],
      imageNote: { reason: 'auto_off', message: 'Not made.' },
    });
    expect(warnings).toEqual([]);
  });
});
