import { describe, expect, it } from 'vitest';
import { mergeStreams } from '../../../server/util/index.ts';

async function* timed<T>(items: Array<[number, T]>, onReturn?: () => void): AsyncGenerator<T> {
  try {
    for (const [delay, item] of items) {
      await new Promise((resolve) => setTimeout(resolve, delay));
      yield item;
    }
  } finally {
    onReturn?.();
  }
}

describe('mergeStreams', () => {
  it('gives every item of every source as it comes, and ends when all have ended', async () => {
    const merged: string[] = [];
    for await (const item of mergeStreams([timed([[0, 'a1'], [30, 'a2']]), timed([[10, 'b1'], [5, 'b2']])])) merged.push(item);
    expect(merged).toEqual(['a1', 'b1', 'b2', 'a2']);
  });

  it('returning early returns every source', async () => {
    const returned: string[] = [];
    const merged = mergeStreams([timed([[0, 1], [1000, 2]], () => returned.push('a')), timed([[1000, 3]], () => returned.push('b'))]);
    for await (const item of merged) {
      expect(item).toBe(1);
      break;
    }
    expect(returned.sort()).toEqual(['a', 'b']);
  });
});
