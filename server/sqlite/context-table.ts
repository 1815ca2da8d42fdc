// The working context (what the model sees), apart from the transcript: its entries as rows in SQLite, the parsed
// array of the conversations being talked to cached in memory (write-through: the store updates the cache once a
// transaction that changed the rows has committed).
import type Database from 'better-sqlite3';
import type { ContextChange } from '../core/conversation.ts';
import type { Logger } from '../core/logger.ts';
import type { ContextEntry } from '../protocol/index.ts';
import { readContextEntry } from './rows.ts';

/** Conversations whose parsed working context stays in memory (the ones being talked to). */
const CONTEXT_CACHE_SIZE = 32;

export interface ContextTable {
  read(conversationId: string): ContextEntry[];
  /** Inside a transaction; `cacheChange` once it committed. */
  write(conversationId: string, change: ContextChange): void;
  cacheChange(conversationId: string, change: ContextChange): void;
  cache(conversationId: string, entries: ContextEntry[]): void;
  forget(conversationId: string): void;
  forgetAll(): void;
}

export function createContextTable(db: Database.Database, logger: Logger | undefined): ContextTable {
  const statements = {
    read: db.prepare<[string], { seq: number; entry: string }>('SELECT seq, entry FROM context_entries WHERE conversation_id = ? ORDER BY seq'),
    bounds: db.prepare<[string], { low: number | null; high: number | null }>(
      'SELECT min(seq) AS low, max(seq) AS high FROM context_entries WHERE conversation_id = ?',
    ),
    dropFront: db.prepare(
      'DELETE FROM context_entries WHERE conversation_id = ? AND seq IN (SELECT seq FROM context_entries WHERE conversation_id = ? ORDER BY seq LIMIT ?)',
    ),
    dropBack: db.prepare(
      'DELETE FROM context_entries WHERE conversation_id = ? AND seq IN (SELECT seq FROM context_entries WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?)',
    ),
    clear: db.prepare('DELETE FROM context_entries WHERE conversation_id = ?'),
    insert: db.prepare('INSERT INTO context_entries (conversation_id, seq, entry) VALUES (?, ?, ?)'),
  };

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
    for (const row of statements.read.all(conversationId)) {
      try {
        entries.push(readContextEntry(row.entry));
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
      statements.clear.run(conversationId);
      change.entries.forEach((entry, index) => statements.insert.run(conversationId, index, JSON.stringify(entry)));
      return;
    }
    // Stryker disable next-line ConditionalExpression,EqualityOperator: with 0 the DELETE has LIMIT 0 and removes nothing; describeContextChange never gives a negative count
    if (change.dropFront > 0) statements.dropFront.run(conversationId, conversationId, change.dropFront);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: with 0 the DELETE has LIMIT 0 and removes nothing; describeContextChange never gives a negative count
    if (change.dropBack > 0) statements.dropBack.run(conversationId, conversationId, change.dropBack);
    // Stryker disable next-line ConditionalExpression: without it one more SELECT and a loop over nothing: no write
    if (change.append.length === 0) return;
    const { high } = statements.bounds.get(conversationId) ?? { high: null };
    let seq = high === null ? 0 : high + 1;
    for (const entry of change.append) statements.insert.run(conversationId, seq++, JSON.stringify(entry));
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

  return {
    read: readContext,
    write: writeContextChange,
    cacheChange: cacheContextChange,
    cache: cacheContext,
    forget: (conversationId) => void contextCache.delete(conversationId),
    // Stryker disable next-line ArrowFunction: called as the store closes, after which nothing reads the cache: memory only
    forgetAll: () => contextCache.clear(),
  };
}
