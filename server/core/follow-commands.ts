// Following a conversation or the library: what a page or a client shows first (a snapshot, with a running
// reply's text exactly as shown), and every change after it, numbered, from the live feeds the service fills.
import type { LibraryEvent, LiveEvent } from './events.ts';
import type { ConversationSummary } from './library.ts';
import type { FeedEntry, FollowOptions } from './live-feed.ts';
import { notFound, type Result } from './results.ts';
import { LIBRARY_KEY, type ConversationView, type ServiceState } from './service-state.ts';

/** Following a conversation: a snapshot first unless the reconnect resumed, then its events as they happen. */
export interface ConversationFollowing {
  /** Absent when the follower resumed from the Last-Event-ID it gave. */
  snapshot?: ConversationView;
  /** The id the snapshot stands for (a reconnect with it resumes after it). */
  snapshotId: string;
  /**
   * The reply being written, with its text as of the snapshot (or of the id resumed from): what the follower
   * shows of it before the deltas that `entries` brings. Absent when none runs, or when its text was replaced
   * wholesale since (its `started`, `retry` or `reset` is among the events replayed).
   */
  running?: { turnId: number; text: string };
  entries: AsyncIterable<FeedEntry<LiveEvent>>;
}

/** A conversation as it is now, and the id of the feed's event it stands for: following from it misses nothing. */
export interface ConversationSnapshot {
  view: ConversationView;
  snapshotId: string;
}

export interface LibraryFollowing {
  snapshot?: ConversationSummary[];
  snapshotId: string;
  entries: AsyncIterable<FeedEntry<LibraryEvent>>;
}

export interface FollowCommands {
  /**
   * Every change of a conversation as it happens, from any client: its snapshot (with a running reply's text so
   * far), then its reply's and images' events, `pane`, `title`, `deleted`. A reconnect with the last id it saw
   * resumes without the snapshot while those events are kept (REPLAYED_EVENTS).
   */
  followConversation(id: string, options?: FollowOptions): Result<ConversationFollowing>;
  /** The conversation with a running reply's text exactly as shown now, and the feed id it stands for (a page's first render). */
  snapshotConversation(id: string): ConversationSnapshot | undefined;
  /** The library's list as it changes: created, renamed, updated, deleted. */
  followLibrary(options?: FollowOptions): LibraryFollowing;
}

export function createFollowCommands(state: ServiceState, listConversations: () => ConversationSummary[]): FollowCommands {
  const { findRecord } = state;
  return {
    followConversation(id, options = {}) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      // The snapshot is read in the same step as the follow begins: the events after it are exactly the later ones.
      const following = state.feed.follow(id, options);
      const now = state.shown.get(id);
      if (following.resumed) {
        const running = now ? rewindShownText(now, following.replayed) : undefined;
        return { ok: true, value: { snapshotId: following.snapshotId, ...(running ? { running } : {}), entries: following.entries } };
      }
      const snapshot = withShownText(state.view(record), now);
      return { ok: true, value: { snapshot, snapshotId: following.snapshotId, ...(now ? { running: { ...now } } : {}), entries: following.entries } };
    },

    snapshotConversation(id) {
      const record = findRecord(id);
      if (!record) return undefined;
      return { view: withShownText(state.view(record), state.shown.get(id)), snapshotId: state.feed.mark(id) };
    },

    followLibrary(options = {}) {
      const following = state.libraryFeed.follow(LIBRARY_KEY, options);
      if (following.resumed) return { snapshotId: following.snapshotId, entries: following.entries };
      return { snapshot: listConversations(), snapshotId: following.snapshotId, entries: following.entries };
    },
  };
}

/** The view with its running reply's text as shown now (the stored copy is saved at most once a second). */
function withShownText(view: ConversationView, running: { turnId: number; text: string } | undefined): ConversationView {
  if (!running) return view;
  return { ...view, turns: view.turns.map((turn) => (turn.id === running.turnId ? { ...turn, text: running.text, status: 'running' as const } : turn)) };
}

/**
 * A running reply's text as it was before the replayed events: their deltas taken off its end. Undefined when
 * one of them began the turn or replaced its text wholesale: what came before does not matter then.
 */
function rewindShownText(now: { turnId: number; text: string }, replayed: ReadonlyArray<FeedEntry<LiveEvent>>): { turnId: number; text: string } | undefined {
  let text = now.text;
  // Only a reply sends these, one reply at a time: an earlier one's are replayed only with this one's `started`.
  // So their order does not matter: any start or wholesale change decides, and the deltas' lengths add up.
  for (const { event } of replayed) {
    if (event.type === 'started' || event.type === 'retry' || event.type === 'reset') return undefined;
    if (event.type === 'delta') text = text.slice(0, text.length - event.text.length);
  }
  return { turnId: now.turnId, text };
}
