// What the whole-folder mutation run of server/core showed untested in its small files: titles and
// previews cut at exact bounds, every storage failure's words, the log line's shape and level filter,
// the error classes' names (the log prints them), the reply saver's and watchdog's edges, and the
// context change's exact (minimal) form.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  ChatModelError,
  createLogger,
  createReplySaver,
  describeContextChange,
  describeConversation,
  describeModelHealth,
  describeStorageFailure,
  ImageBackendError,
  StorageError,
  withThumbnails,
} from '../../../server/core/index.ts';
import { rewindToBefore } from '../../../server/core/context-change.ts';
import { shorten } from '../../../server/core/library.ts';
import { describeReplyTimeout, markSlowStart, ReplyTimeoutError, startReplyWatchdog } from '../../../server/core/reply-watchdog.ts';
import type { ChatChunk } from '../../../server/core/ports.ts';
import type { ContextEntry } from '../../../server/protocol/index.ts';
import { collectAll } from '../../helpers/streams.ts';

describe('shorten (titles and previews)', () => {
  it('keeps a line of exactly the bound, and cuts one character more to the bound with an ellipsis', () => {
    expect(shorten('abcdefghij', 10)).toBe('abcdefghij');
    expect(shorten('abcdefghijk', 10)).toBe('abcdefghi…');
  });

  it('cuts at the last space when it lies past half the bound, else inside the word', () => {
    // The cut is 'aaaaaa bb' (9 characters); its space at 6 is past 10 / 2.
    expect(shorten('aaaaaa bbbbbbb', 10)).toBe('aaaaaa…');
    // The space at 5 is not past half: the word is cut.
    expect(shorten('aaaaa bbbbbbbb', 10)).toBe('aaaaa bbb…');
    // At 4, before the half, the same.
    expect(shorten('aaaa bbbbbbbbb', 10)).toBe('aaaa bbbb…');
  });

  it('collapses runs of whitespace and trims, and a preview keeps every line', () => {
    expect(shorten('  a \t\t b  \n second line', 40)).toBe('a b');
    expect(shorten('  a \t\t b  \n second line', 40, false)).toBe('a b second line');
    // Spaces left before the ellipsis go.
    expect(shorten('abcdefgh  ijklmnop', 10)).toBe('abcdefgh…');
    // A title is the first line with words, not an empty line before it.
    expect(shorten('\n\n  A red fox\nin the snow', 60)).toBe('A red fox');
  });

  it('a preview is the last message cut at 140 characters; a conversation without one has none', () => {
    const listing = { id: 'c', title: null, firstMessage: null, lastMessage: null, prompt: '', createdAt: 'x', updatedAt: 'y' };
    expect(describeConversation(listing).preview).toBe('');
    const long = 'x'.repeat(200);
    expect(describeConversation({ ...listing, lastMessage: long }).preview).toBe(`${'x'.repeat(139)}…`);
  });
});

describe('describeStorageFailure for each kind of failure', () => {
  it('a read-only disk and any other failure say what happened and what to do', () => {
    const readOnly = new StorageError('read_only', 'SQLITE_READONLY', { location: '/data/easel.db' });
    const failed = new StorageError('failed', 'SQLITE_CORRUPT', { location: '/data/easel.db' });

    expect(describeStorageFailure(readOnly, 'message')).toEqual({
      code: 'storage_read_only',
      message:
        'Easel could not save your message: /data/easel.db cannot be written (a read-only disk, or Easel may not write there). ' +
        'Nothing was saved, and your message is back in the box: check that Easel may write to its data folder (--data-dir), then send it again.',
    });
    expect(describeStorageFailure(failed, 'change')).toEqual({
      code: 'storage_failed',
      message:
        'Easel could not save the change: the database /data/easel.db reported an error (the details are in the server log). ' +
        'Nothing was changed. Check the server log and the disk, then try again.',
    });
  });
});

describe('createLogger', () => {
  const at = () => new Date('2026-11-26T10:00:00.000Z');

  it('writes one line: time, level, message and the fields as JSON, errors by name and message', () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'debug', write: (line) => lines.push(line), now: at });
    logger.info('plain');
    logger.info('no fields', {});
    logger.warn('with fields', { a: 1, error: new ChatModelError('unreachable', 'refused', { cause: new Error('ECONNREFUSED') }) });

    expect(lines).toEqual([
      '2026-11-26T10:00:00.000Z INFO  plain',
      '2026-11-26T10:00:00.000Z INFO  no fields',
      '2026-11-26T10:00:00.000Z WARN  with fields {"a":1,"error":{"name":"ChatModelError","message":"refused","cause":"ECONNREFUSED"}}',
    ]);
  });

  it('leaves out the levels below its own', () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'warn', write: (line) => lines.push(line), now: at });
    logger.debug('d');
    logger.info('i');
    logger.warn('w');
    logger.error('e');
    expect(lines).toEqual(['2026-11-26T10:00:00.000Z WARN  w', '2026-11-26T10:00:00.000Z ERROR e']);
  });
});

describe('the error classes', () => {
  it('carry the name the log prints, their code and their cause', () => {
    const cause = new Error('disk I/O error');
    const errors = [
      new ChatModelError('unreachable', 'm'),
      new ImageBackendError('timeout', 'm'),
      new StorageError('failed', 'm', { location: '/x', cause }),
      new ReplyTimeoutError('stall', 1000),
    ];
    expect(errors.map((error) => error.name)).toEqual(['ChatModelError', 'ImageBackendError', 'StorageError', 'ReplyTimeoutError']);
    expect(errors[2]?.cause).toBe(cause);
  });
});

describe('describeModelHealth without a version', () => {
  it('says Ollama is ready without a blank where the version would be', () => {
    expect(describeModelHealth({ model: 'mistral:7b', version: null, reachable: true, modelAvailable: true })).toBe('Ollama is ready with mistral:7b.');
  });
});

describe('the reply watchdog, word for word and at its edges', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('the timeout error and the messages say exactly what happened', () => {
    expect(new ReplyTimeoutError('first_token', 1500).message).toBe('no first token from the model within 1500 ms');
    expect(new ReplyTimeoutError('stall', 1500).message).toBe('no token from the model within 1500 ms');
    expect(describeReplyTimeout({ kind: 'first_token', ms: 1500 }, { model: 'm', loaded: undefined }).message).toBe(
      'm did not start answering within 1.5 s: Ollama took too long to load it or to read the conversation, so Easel stopped waiting. ' +
        'Try a smaller model (--model), check with `ollama ps` that it fits in GPU memory, or allow more time with --first-token-timeout. ' +
        'Your message is kept: press Retry.',
    );
    expect(describeReplyTimeout({ kind: 'stall', ms: 1500 }, { model: 'm', loaded: true }).message).toBe(
      'm stopped sending in the middle of its reply: nothing arrived for 1.5 s, so Easel stopped waiting. ' +
        'Check `ollama ps` and the GPU memory (the model may have been pushed out of it) and the Ollama log, try a smaller model (--model), ' +
        'or allow more time with --stall-timeout. What arrived is kept, and your message too: press Retry.',
    );
  });

  it('lines arriving faster than the stall limit keep the call alive however long it runs', () => {
    const watchdog = startReplyWatchdog({ firstTokenMs: 1000, stallMs: 50 });
    watchdog.sawLine();
    for (let i = 0; i < 20; i++) {
      vi.advanceTimersByTime(20);
      watchdog.sawLine();
    }
    expect(watchdog.signal.aborted).toBe(false);
    watchdog.stop();
  });

  it('a line after the limit passed changes nothing: the first limit stays the one reported', () => {
    const watchdog = startReplyWatchdog({ firstTokenMs: 100, stallMs: 10 });
    vi.advanceTimersByTime(100);
    const expired = watchdog.expired;
    expect(expired?.kind).toBe('first_token');
    watchdog.sawLine();
    vi.advanceTimersByTime(1000);
    expect(watchdog.expired).toBe(expired);
  });
});

describe('markSlowStart at its edges', () => {
  it('0 shows no status and never asks for one, however late the first chunk', async () => {
    let asked = 0;
    async function* late(): AsyncGenerator<ChatChunk> {
      await new Promise((resolve) => setTimeout(resolve, 20));
      yield { type: 'text', text: 'Hello' };
    }
    const out = await collectAll(markSlowStart(late(), { afterMs: 0, describe: async () => (asked++, 'Loading…') }));
    expect(out).toEqual([{ type: 'text', text: 'Hello' }]);
    expect(asked).toBe(0);
  });

  it('does not ask Ollama for a status when the first chunk came in time', async () => {
    let asked = 0;
    async function* prompt(): AsyncGenerator<ChatChunk> {
      yield { type: 'text', text: 'Hello' };
    }
    await collectAll(markSlowStart(prompt(), { afterMs: 1000, describe: async () => (asked++, 'Loading…') }));
    expect(asked).toBe(0);
  });
});

describe('createReplySaver at its edges', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('saves at once when exactly one interval has passed, never the same text twice, and nothing after stop', () => {
    const saved: string[] = [];
    const saver = createReplySaver({ save: (text) => saved.push(text), onError: () => {}, intervalMs: 1000, now: () => Date.now() });
    saver.update('A');
    vi.advanceTimersByTime(1000);
    saver.update('A b');
    expect(saved).toEqual(['A', 'A b']);
    saver.update('A b');
    vi.advanceTimersByTime(1000);
    expect(saved).toEqual(['A', 'A b']);
    saver.stop();
    saver.update('A b c');
    vi.advanceTimersByTime(5000);
    expect(saved).toEqual(['A', 'A b']);
  });
});

describe('the context change is the smallest one', () => {
  const META = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
  const a: ContextEntry = { kind: 'user', text: 'a' };
  const b: ContextEntry = { kind: 'assistant', text: 'b', metadata: META };
  const c: ContextEntry = { kind: 'user', text: 'c' };
  const d: ContextEntry = { kind: 'assistant', text: 'd', metadata: META };

  it('a bound that drops the first entry writes only the new one', () => {
    expect(describeContextChange([a, b, c], [b, c, d])).toEqual({ kind: 'edit', dropFront: 1, dropBack: 0, append: [d] });
    expect(describeContextChange([a, b, c, d], [c, d])).toEqual({ kind: 'edit', dropFront: 2, dropBack: 0, append: [] });
  });

  it('Edit after a compaction keeps a summary whose text is the message', () => {
    const summary: ContextEntry = { kind: 'summary', userWords: ['b'], text: 'b' };
    expect(rewindToBefore([summary, b], 'b')).toEqual({ context: [summary], note: undefined });
  });

  it('Edit keeps a last message with other words than the one replaced, and carries no note from it', () => {
    const noted: ContextEntry = { kind: 'user', text: 'c', note: '[note]' };
    expect(rewindToBefore([a, b, noted, d], 'x')).toEqual({ context: [a, b, noted], note: undefined });
  });
});

describe('withThumbnails', () => {
  it("leaves every other member the generator's own, a method that reads `this` included", async () => {
    // A generator written as a class with a private field: its methods need their own `this`, not the wrapper.
    class ClassGenerator {
      readonly configured = true;
      readonly #health = { backend: 'a1111' as const, url: null, configured: true, reachable: true, detail: 'ready' };
      async checkHealth() {
        return this.#health;
      }
      canVary() {
        return this.configured ? (true as const) : undefined;
      }
      async *generate(): AsyncGenerator<never> {}
      async listModels() {
        return null;
      }
      async settled() {}
    }
    const wrapped = withThumbnails(new ClassGenerator(), () => {});
    expect(await wrapped.checkHealth()).toMatchObject({ detail: 'ready' });
    expect(wrapped.canVary()).toBe(true);
    expect(wrapped.configured).toBe(true);
  });
});
