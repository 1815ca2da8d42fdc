import { describe, expect, it } from 'vitest';
import { changedPhrases, diffPrompts } from '../../../server/protocol/prompt-diff.ts';

const join = (parts: Array<{ text: string }>) => parts.map((part) => part.text).join('');

describe('diffPrompts', () => {
  it('marks the words each side lacks, a run of them as one phrase, and keeps each text whole', () => {
    const a = 'a red fox in snow';
    const b = 'a blue fox in snow at dusk';
    const diff = diffPrompts(a, b);
    expect(join(diff.a)).toBe(a);
    expect(join(diff.b)).toBe(b);
    expect(diff.a).toEqual([
      { text: 'a ', changed: false },
      { text: 'red', changed: true },
      { text: ' fox in snow', changed: false },
    ]);
    expect(changedPhrases(diff.b)).toEqual(['blue', 'at dusk']);
  });

  it('the same words: nothing changed; one side empty: all of the other changed', () => {
    expect(changedPhrases(diffPrompts('a  fox', 'a fox').a)).toEqual([]);
    expect(diffPrompts('', 'a fox')).toEqual({ a: [], b: [{ text: 'a fox', changed: true }] });
  });

  it('keeps the longest common run of words (moved words are changed once)', () => {
    const diff = diffPrompts('cat dog bird', 'dog bird cat');
    expect(changedPhrases(diff.a)).toEqual(['cat']);
    expect(changedPhrases(diff.b)).toEqual(['cat']);
  });

  it('a prompt of 2000 characters is diffed quickly', () => {
    const words = Array.from({ length: 400 }, (_, i) => `w${i % 97}`).join(' ').slice(0, 2000);
    const started = performance.now();
    const diff = diffPrompts(words, words.replace('w5 ', 'x5 '));
    expect(performance.now() - started).toBeLessThan(1000);
    expect(changedPhrases(diff.b)).toEqual(['x5']);
  });
});
