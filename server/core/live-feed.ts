// Every change of a conversation (or of the library's list), numbered, kept for a while and sent to every page
// that follows it. A follower that reconnects with the id of the last event it saw gets what it missed, or,
// when those events are no longer kept, is told to start again from a snapshot.

/** An event with its id: `<epoch>.<sequence>`; the epoch is this process's, so an id from before a restart never resumes. */
export interface FeedEntry<E> {
  id: string;
  event: E;
}

export interface FollowOptions {
  /** The id of the last event the follower saw (SSE's Last-Event-ID). */
  lastEventId?: string | undefined;
  /** Ends the follow (the client hung up). */
  signal?: AbortSignal;
}

export interface Following<E> {
  /**
   * True: `entries` starts with every event after `lastEventId`. False: those events are gone (or none was
   * given), so the follower needs a snapshot first; `snapshotId` is the id that snapshot stands for, read in
   * the same step as the follow began, so the live events after it are exactly the ones that come later.
   */
  resumed: boolean;
  snapshotId: string;
  /** When resumed: the events after `lastEventId` that `entries` starts with (the ones the follower missed). */
  replayed: ReadonlyArray<FeedEntry<E>>;
  entries: AsyncIterable<FeedEntry<E>>;
}

export interface LiveFeed<E> {
  publish(key: string, event: E): void;
  follow(key: string, options?: FollowOptions): Following<E>;
  /** Ends every follower of `key` after what is queued (the conversation was deleted) and forgets its events. */
  close(key: string): void;
  /** How many follow `key` now. */
  countFollowers(key: string): number;
  /**
   * The id of `key`'s latest event (or of the point before its first), for a snapshot taken now: a follow from
   * it later resumes with exactly the events after now, while they are kept.
   */
  mark(key: string): string;
}

export interface LiveFeedOptions {
  /** How many of a key's latest events are kept for a reconnect. Default REPLAYED_EVENTS. */
  replayed?: number;
  /** A follower with this many events unread is dropped (it reconnects and resumes or takes a snapshot). Default MAX_UNREAD. */
  maxUnread?: number;
  /** How many keys keep their events once nobody follows them. Default MAX_IDLE_KEYS. */
  maxIdleKeys?: number;
  /** This process's epoch; default a random one. */
  epoch?: string;
}

/** A reconnect within this many events of a conversation resumes: about 40 s of a fast reply's deltas. */
export const REPLAYED_EVENTS = 2000;
export const MAX_UNREAD = 10_000;
// A conversation nobody follows keeps its events for a reconnect while it is among the few changed last: a
// reply's 2000 deltas are ~300 KB, so 16 such conversations stay under 5 MB.
export const MAX_IDLE_KEYS = 16;

interface Follower<E> {
  queue: Array<FeedEntry<E>>;
  head: number;
  ended: boolean;
  wake: (() => void) | undefined;
}

interface Channel<E> {
  /**
   * The sequence of the event just before the oldest kept one (the feed's sequence when the channel was made,
   * while none was dropped): a follower that saw it misses only kept events.
   */
  beforeKept: number;
  /** The sequence of its latest event (the baseline before any). */
  last: number;
  /** The latest events with their sequences, oldest first, at most `replayed`. */
  kept: Array<{ sequence: number; entry: FeedEntry<E> }>;
  followers: Set<Follower<E>>;
}

export function createLiveFeed<E>(options: LiveFeedOptions = {}): LiveFeed<E> {
  const replayed = options.replayed ?? REPLAYED_EVENTS;
  const maxUnread = options.maxUnread ?? MAX_UNREAD;
  const maxIdleKeys = options.maxIdleKeys ?? MAX_IDLE_KEYS;
  const epoch = options.epoch ?? Math.random().toString(36).slice(2, 10);
  // A Map keeps insertion order: a key published to moves to the end, so the first idle one is the oldest.
  const channels = new Map<string, Channel<E>>();
  // One sequence for every key: a key forgotten and made again never reuses an id another event had.
  let sequence = 0;

  function channelOf(key: string): Channel<E> {
    let channel = channels.get(key);
    if (channel) {
      channels.delete(key);
    } else {
      channel = { beforeKept: sequence, last: sequence, kept: [], followers: new Set() };
      forgetIdle();
    }
    channels.set(key, channel);
    return channel;
  }

  function forgetIdle(): void {
    let idle = 0;
    for (const channel of channels.values()) if (channel.followers.size === 0) idle++;
    for (const [key, channel] of channels) {
      if (idle < maxIdleKeys) return;
      if (channel.followers.size > 0) continue;
      channels.delete(key);
      idle--;
    }
  }

  function end(follower: Follower<E>): void {
    follower.ended = true;
    const wake = follower.wake;
    follower.wake = undefined;
    wake?.();
  }

  function deliver(channel: Channel<E>, follower: Follower<E>, entry: FeedEntry<E>): void {
    if (follower.queue.length - follower.head >= maxUnread) {
      // It reads too slowly to keep up: dropped rather than let its queue grow; it resumes on reconnect.
      channel.followers.delete(follower);
      end(follower);
      return;
    }
    follower.queue.push(entry);
    const wake = follower.wake;
    follower.wake = undefined;
    wake?.();
  }

  async function* read(channel: Channel<E>, follower: Follower<E>, signal: AbortSignal | undefined): AsyncGenerator<FeedEntry<E>> {
    const onAbort = () => end(follower);
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: a signal aborts once, and the finally below removes the listener anyway
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        while (follower.head < follower.queue.length) {
          const entry = follower.queue[follower.head] as FeedEntry<E>;
          follower.head++;
          // Stryker disable next-line ConditionalExpression,BlockStatement: only frees the read entries' memory; reading and the bound go by head
          if (follower.head === follower.queue.length) {
            follower.queue = [];
            follower.head = 0;
          }
          yield entry;
        }
        if (follower.ended || signal?.aborted) return;
        await new Promise<void>((resolve) => (follower.wake = resolve));
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      channel.followers.delete(follower);
    }
  }

  return {
    publish(key, event) {
      const channel = channelOf(key);
      sequence++;
      const entry = { id: `${epoch}.${sequence}`, event };
      channel.last = sequence;
      channel.kept.push({ sequence, entry });
      // Only the latest `replayed` stay; while there are no more, the count is ≤ 0 and nothing is dropped.
      const dropped = channel.kept.splice(0, channel.kept.length - replayed);
      channel.beforeKept = dropped[dropped.length - 1]?.sequence ?? channel.beforeKept;
      for (const follower of channel.followers) deliver(channel, follower, entry);
    },

    follow(key, followOptions = {}) {
      const channel = channelOf(key);
      const follower: Follower<E> = { queue: [], head: 0, ended: false, wake: undefined };
      const missed = findMissed(channel, followOptions.lastEventId);
      if (missed) follower.queue.push(...missed);
      channel.followers.add(follower);
      return {
        resumed: missed !== undefined,
        snapshotId: `${epoch}.${channel.last}`,
        replayed: missed ?? [],
        entries: { [Symbol.asyncIterator]: () => read(channel, follower, followOptions.signal) },
      };
    },

    close(key) {
      const channel = channels.get(key);
      if (!channel) return;
      channels.delete(key);
      for (const follower of channel.followers) end(follower);
      channel.followers.clear();
    },

    countFollowers(key) {
      return channels.get(key)?.followers.size ?? 0;
    },

    mark(key) {
      return `${epoch}.${channelOf(key).last}`;
    },
  };

  /** The kept events after `lastEventId`; undefined when that id is not one this feed can resume from. */
  function findMissed(channel: Channel<E>, lastEventId: string | undefined): Array<FeedEntry<E>> | undefined {
    if (lastEventId === undefined) return undefined;
    const match = /^([a-z0-9]+)\.(\d{1,15})$/.exec(lastEventId);
    if (!match || match[1] !== epoch) return undefined;
    const seen = Number(match[2]);
    // From the newest: a follower is most often behind by a few events, or by none (the latest is the last kept).
    const index = channel.kept.findLastIndex((kept) => kept.sequence === seen);
    if (index >= 0) return channel.kept.slice(index + 1).map((kept) => kept.entry);
    if (seen === channel.beforeKept) return channel.kept.map((kept) => kept.entry);
    return undefined;
  }
}
