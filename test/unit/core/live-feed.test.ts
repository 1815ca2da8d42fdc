// The live feed: what a follower receives, what a reconnect resumes, and when it must take a snapshot instead.
import { describe, expect, it } from 'vitest';
import { createLiveFeed, type FeedEntry } from '../../../server/core/live-feed.ts';

/** Reads what is queued now, without waiting for more. */
async function readQueued<E>(entries: AsyncIterable<FeedEntry<E>>, count: number): Promise<Array<FeedEntry<E>>> {
  const read: Array<FeedEntry<E>> = [];
  const iterator = entries[Symbol.asyncIterator]();
  while (read.length < count) {
    const step = await iterator.next();
    if (step.done) break;
    read.push(step.value);
  }
  return read;
}

describe('live feed', () => {
  it('sends every event published after the follow began, with increasing ids', async () => {
    const feed = createLiveFeed<string>({ epoch: 'e1' });
    feed.publish('a', 'before');
    const following = feed.follow('a');
    expect(following.resumed).toBe(false);
    expect(following.snapshotId).toBe('e1.1');
    feed.publish('a', 'one');
    feed.publish('b', 'elsewhere');
    feed.publish('a', 'two');
    expect(await readQueued(following.entries, 2)).toEqual([
      { id: 'e1.2', event: 'one' },
      { id: 'e1.4', event: 'two' },
    ]);
  });

  it('a reconnect with the last id it saw resumes with exactly what it missed', async () => {
    const feed = createLiveFeed<string>({ epoch: 'e1' });
    const first = feed.follow('a');
    for (const word of ['one', 'two', 'three']) feed.publish('a', word);
    const seen = await readQueued(first.entries, 1);
    const again = feed.follow('a', { lastEventId: seen[0]?.id });
    expect(again.resumed).toBe(true);
    feed.publish('a', 'four');
    expect((await readQueued(again.entries, 3)).map((entry) => entry.event)).toEqual(['two', 'three', 'four']);
  });

  it('a snapshot taken before the first event resumes with every event since', async () => {
    const feed = createLiveFeed<string>({ epoch: 'e1' });
    feed.publish('other', 'x');
    const first = feed.follow('a');
    feed.publish('a', 'one');
    const again = feed.follow('a', { lastEventId: first.snapshotId });
    expect(again.resumed).toBe(true);
    expect((await readQueued(again.entries, 1)).map((entry) => entry.event)).toEqual(['one']);
  });

  it('asks for a snapshot when the missed events are no longer kept, the id is of another process, or it is not an id', () => {
    const feed = createLiveFeed<number>({ epoch: 'e1', replayed: 3 });
    const first = feed.follow('a');
    for (let index = 0; index < 5; index++) feed.publish('a', index);
    expect(feed.follow('a', { lastEventId: first.snapshotId }).resumed).toBe(false);
    expect(feed.follow('a', { lastEventId: 'e1.2' }).resumed).toBe(true);
    expect(feed.follow('a', { lastEventId: 'e1.1' }).resumed).toBe(false);
    expect(feed.follow('a', { lastEventId: 'e0.4' }).resumed).toBe(false);
    expect(feed.follow('a', { lastEventId: 'nonsense' }).resumed).toBe(false);
    expect(feed.follow('a', { lastEventId: 'e1.99' }).resumed).toBe(false);
  });

  it('a key forgotten and made again never resumes from an id of its earlier life', () => {
    const feed = createLiveFeed<string>({ epoch: 'e1', maxIdleKeys: 1 });
    feed.publish('a', 'one');
    feed.publish('b', 'forgets a');
    feed.publish('a', 'a again');
    expect(feed.follow('a', { lastEventId: 'e1.1' }).resumed).toBe(false);
  });

  it('a follower that reads too slowly is dropped after what it had; others go on', async () => {
    const feed = createLiveFeed<number>({ epoch: 'e1', maxUnread: 2 });
    const slow = feed.follow('a');
    const other = feed.follow('a');
    feed.publish('a', 1);
    feed.publish('a', 2);
    expect(feed.countFollowers('a')).toBe(2);
    feed.publish('a', 3);
    const read: number[] = [];
    for await (const entry of slow.entries) read.push(entry.event);
    expect(read).toEqual([1, 2]);
    expect((await readQueued(other.entries, 2)).map((entry) => entry.event)).toEqual([1, 2]);
  });

  it('close ends every follower after what was queued; the signal ends one', async () => {
    const feed = createLiveFeed<string>({ epoch: 'e1' });
    const following = feed.follow('a');
    const controller = new AbortController();
    const leaving = feed.follow('a', { signal: controller.signal });
    controller.abort();
    const left: string[] = [];
    for await (const entry of leaving.entries) left.push(entry.event);
    expect(left).toEqual([]);
    feed.publish('a', 'deleted');
    feed.close('a');
    const read: string[] = [];
    for await (const entry of following.entries) read.push(entry.event);
    expect(read).toEqual(['deleted']);
    expect(feed.countFollowers('a')).toBe(0);
  });
});
