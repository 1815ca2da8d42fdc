import { describe, expect, it } from 'vitest';
import { createEventBuffer } from '../../../server/core/event-buffer.ts';

describe('createEventBuffer', () => {
  it('hands over what was pushed before and after the reader came, in order, then ends on close', async () => {
    const buffer = createEventBuffer<number>();
    buffer.push(1);
    buffer.push(2);
    const read: number[] = [];
    const reading = (async () => {
      for await (const item of buffer) read.push(item);
    })();
    await new Promise((resolve) => setTimeout(resolve, 5));
    buffer.push(3);
    buffer.close();
    buffer.push(4);
    await reading;
    expect(read).toEqual([1, 2, 3]);
  });

  it('never makes the producer wait: 100 000 items queue while nobody reads, then all arrive', async () => {
    const buffer = createEventBuffer<number>();
    for (let i = 0; i < 100_000; i++) buffer.push(i);
    buffer.close();
    let count = 0;
    let inOrder = true;
    for await (const item of buffer) {
      inOrder &&= item === count;
      count++;
    }
    expect(count).toBe(100_000);
    expect(inOrder).toBe(true);
  });

  it('tells the producer when the reader stops early, not when it reads to the end', async () => {
    let stopped = 0;
    const early = createEventBuffer<number>(() => stopped++);
    early.push(1);
    early.push(2);
    for await (const item of early) if (item === 1) break;
    expect(stopped).toBe(1);

    const whole = createEventBuffer<number>(() => stopped++);
    whole.push(1);
    whole.close();
    for await (const item of whole) expect(item).toBe(1);
    expect(stopped).toBe(1);
  });
});
