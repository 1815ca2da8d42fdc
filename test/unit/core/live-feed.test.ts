// The live feed: what a follower receives, what a reconnect resumes, and when it must take a snapshot instead.
import { getEventListeners } from 'node:events';
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

  it('reads the whole Last-Event-ID as one id: text around a valid id is not one; a sequence of two digits is', () => {
    const feed = createLiveFeed<number>({ epoch: 'e1' });
    for (let index = 1; index <= 12; index++) feed.publish('a', index);
    // A header is the client's to send: only an id this feed made, and nothing else, resumes.
    expect(feed.follow('a', { lastEventId: 'x-e1.11' }).resumed).toBe(false);
    expect(feed.follow('a', { lastEventId: 'e1.11x' }).resumed).toBe(false);
    expect(feed.follow('a', { lastEventId: 'e1.11' }).replayed.map((entry) => entry.event)).toEqual([12]);
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

  it('the unread bound counts only what the follower has not read yet', async () => {
    const feed = createLiveFeed<number>({ epoch: 'e1', maxUnread: 2 });
    const iterator = feed.follow('a').entries[Symbol.asyncIterator]();
    feed.publish('a', 1);
    feed.publish('a', 2);
    expect((await iterator.next()).value?.event).toBe(1);
    // One unread: a third event is taken, not counted with the one already read.
    feed.publish('a', 3);
    expect(feed.countFollowers('a')).toBe(1);
    expect((await iterator.next()).value?.event).toBe(2);
    expect((await iterator.next()).value?.event).toBe(3);
  });

  it('a signal aborted while the follower waits ends it at once and lets go of it', async () => {
    const feed = createLiveFeed<string>({ epoch: 'e1' });
    const controller = new AbortController();
    const iterator = feed.follow('a', { signal: controller.signal }).entries[Symbol.asyncIterator]();
    const next = iterator.next();
    controller.abort();
    await new Promise((resolve) => setImmediate(resolve));
    expect(feed.countFollowers('a')).toBe(0);
    expect(await next).toEqual({ done: true, value: undefined });
  });

  it('a follower that stops reading leaves the key and no listener on its signal', async () => {
    const feed = createLiveFeed<string>({ epoch: 'e1' });
    const controller = new AbortController();
    const following = feed.follow('a', { signal: controller.signal });
    feed.publish('a', 'one');
    for await (const entry of following.entries) if (entry.event === 'one') break;
    expect(feed.countFollowers('a')).toBe(0);
    // A page's signal can outlive many follows: each must take its listener away.
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
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

describe('which keys nobody follows keep their events', () => {
  it('the latest changed ones, up to maxIdleKeys: a key published to again counts as new', () => {
    const feed = createLiveFeed<string>({ epoch: 'e1', maxIdleKeys: 2 });
    feed.publish('a', 'one');
    feed.publish('b', 'two');
    feed.publish('a', 'three');
    feed.publish('c', 'four');
    // c made room by forgetting b, the least recently changed, not a.
    expect(feed.follow('a', { lastEventId: 'e1.1' }).replayed.map((entry) => entry.event)).toEqual(['three']);
    expect(feed.follow('c', { lastEventId: 'e1.3' }).resumed).toBe(true);
    expect(feed.follow('b', { lastEventId: 'e1.2' }).resumed).toBe(false);
  });

  it('a followed key neither counts among them nor is forgotten', async () => {
    const feed = createLiveFeed<string>({ epoch: 'e1', maxIdleKeys: 1 });
    const following = feed.follow('f');
    feed.publish('a', 'one');
    feed.publish('b', 'two');
    expect(feed.countFollowers('f')).toBe(1);
    feed.publish('f', 'still followed');
    expect((await readQueued(following.entries, 1)).map((entry) => entry.event)).toEqual(['still followed']);
    expect(feed.follow('b', { lastEventId: 'e1.2' }).resumed).toBe(true);
  });

  it('with room to spare, a followed key does not push out an idle one', () => {
    const feed = createLiveFeed<string>({ epoch: 'e1', maxIdleKeys: 2 });
    feed.follow('f');
    feed.publish('a', 'one');
    feed.publish('b', 'two');
    expect(feed.follow('a', { lastEventId: 'e1.1' }).resumed).toBe(true);
  });
});
