import { afterEach, describe, expect, it, vi } from 'vitest';
import { describeContextChange, describeConversation, createReplySaver, nameImage } from '../../../server/core/index.ts';
import { dropTrailingReplies, rewindToBefore } from '../../../server/core/context-change.ts';
import type { ContextEntry } from '../../../server/protocol/index.ts';

const META = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const user = (text: string, note?: string): ContextEntry => ({ kind: 'user', text, ...(note ? { note } : {}) });
const reply = (text: string): ContextEntry => ({ kind: 'assistant', text, metadata: META });

/** Applies a change the way the store does, to check it yields `after`. */
function apply(before: ContextEntry[], change: ReturnType<typeof describeContextChange>): ContextEntry[] {
  if (change.kind === 'replace') return change.entries;
  return [...before.slice(change.dropFront, before.length - change.dropBack), ...change.append];
}

describe('describeContextChange', () => {
  const a = user('a');
  const b = reply('b');
  const c = user('c');
  const d = reply('d');

  it('writes only what was appended when the entries are kept', () => {
    expect(describeContextChange([a, b], [a, b, c])).toEqual({ kind: 'edit', dropFront: 0, dropBack: 0, append: [c] });
    expect(describeContextChange([], [a])).toEqual({ kind: 'edit', dropFront: 0, dropBack: 0, append: [a] });
    expect(describeContextChange([], [])).toEqual({ kind: 'edit', dropFront: 0, dropBack: 0, append: [] });
  });

  it('drops from the front (a bound) and the back (a rewind, a merged retry)', () => {
    const cases: Array<[ContextEntry[], ContextEntry[]]> = [
      [[a, b, c], [b, c, d]],
      [[a, b, c, d], [a, b]],
      [[a, b, c], [a, b, user('c merged')]],
      [[a, b, c, d], [b, c]],
    ];
    for (const [before, after] of cases) {
      const change = describeContextChange(before, after);
      expect(change.kind).toBe('edit');
      expect(apply(before, change)).toEqual(after);
    }
  });

  it('rewrites the whole context when nothing is kept (a reset, a compaction, copies)', () => {
    expect(describeContextChange([a, b], [])).toEqual({ kind: 'replace', entries: [] });
    expect(describeContextChange([a, b], [{ ...a }, b])).toEqual({ kind: 'replace', entries: [{ ...a }, b] });
  });
});

describe('rewinding the context for Edit and Regenerate', () => {
  it('Edit goes back to before the last message, keeping its note for the edited one', () => {
    const context = [user('a'), reply('A'), user('b', '[note]'), reply('B')];
    expect(rewindToBefore(context, 'b')).toEqual({ context: [user('a'), reply('A')], note: '[note]' });
    // After a reset or compaction the message is not there: only the replies go.
    expect(rewindToBefore([{ kind: 'summary', userWords: ['b'], text: '' }, reply('B')], 'b')).toEqual({
      context: [{ kind: 'summary', userWords: ['b'], text: '' }],
      note: undefined,
    });
  });

  it('Regenerate keeps the message and drops the replies after it', () => {
    expect(dropTrailingReplies([user('a'), reply('A'), reply('A2')])).toEqual([user('a')]);
    expect(dropTrailingReplies([user('a')])).toEqual([user('a')]);
  });
});

describe('createReplySaver', () => {
  afterEach(() => vi.useRealTimers());

  it('saves at once, then at most once a second, and the last text once it rests', () => {
    vi.useFakeTimers();
    const saved: string[] = [];
    const saver = createReplySaver({ save: (text) => saved.push(text), onError: () => {}, intervalMs: 1000, now: () => Date.now() });
    saver.update('A');
    saver.update('A b');
    saver.update('A b c');
    expect(saved).toEqual(['A']);
    vi.advanceTimersByTime(999);
    expect(saved).toEqual(['A']);
    vi.advanceTimersByTime(1);
    expect(saved).toEqual(['A', 'A b c']);
    saver.update('A b c d');
    saver.stop();
    vi.advanceTimersByTime(5000);
    expect(saved).toEqual(['A', 'A b c']);
  });

  it('reports a failed save and goes on', () => {
    vi.useFakeTimers();
    const errors: unknown[] = [];
    const saver = createReplySaver({
      save: () => {
        throw new Error('disk full');
      },
      onError: (error) => errors.push(error),
    });
    saver.update('x');
    expect(errors).toHaveLength(1);
    saver.stop();
  });
});

describe('titles and names', () => {
  const listing = { id: 'c', title: null, firstMessage: null, lastMessage: null, prompt: '', createdAt: 'x', updatedAt: 'y' };

  it('titles a conversation from its first message, its prompt, or not at all', () => {
    expect(describeConversation({ ...listing, firstMessage: '  A red fox\nin the snow' }).title).toBe('A red fox');
    expect(describeConversation({ ...listing, firstMessage: 'word '.repeat(30) }).title).toMatch(/^(word ){10,}word…$/);
    expect(describeConversation({ ...listing, prompt: 'a lighthouse' }).title).toBe('a lighthouse');
    expect(describeConversation(listing).title).toBe('New conversation');
    expect(describeConversation({ ...listing, title: 'Mine', firstMessage: 'x' }).title).toBe('Mine');
    expect(describeConversation({ ...listing, lastMessage: 'Line one\nline two' }).preview).toBe('Line one line two');
  });

  it('names an exported image by its order, prompt and seed', () => {
    expect(nameImage(3, { prompt: 'A Red Fox, in the snow!', seed: 42 })).toBe('03-a-red-fox-in-the-snow-seed-42.png');
    expect(nameImage(1, { prompt: '日本', seed: 1 })).toBe('01-image-seed-1.png');
  });
});
