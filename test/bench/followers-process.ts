// Followers of Easel's live streams (GET /api/conversations/:id/events, GET /api/events) in a process of their
// own, so reading 20 or 100 streams costs neither the server (whose CPU and memory the bench reads) nor the
// bench's clock (which times the sender's stream). Each follower is one connection, as a browser's EventSource
// is. The bench drives it over IPC (see FollowersCommand).
import { request, type ClientRequest } from 'node:http';
import { createArrivalTracker, createSseReader } from './clients.ts';
import { pacedToken } from './replies.ts';
import { sleep } from './processes.ts';

export type FollowersCommand =
  /** Opens one follower per path of `url` and answers once every one has read its `snapshot`. */
  | { id: number; type: 'follow'; url: string; paths: string[] }
  /** From now on each follower records the deltas it reads, and when each of `tokens` paced tokens arrived. */
  | { id: number; type: 'track'; tokens: number }
  /** Waits (at most `timeoutMs`) until every follower has read a `done`, then answers what each recorded. */
  | { id: number; type: 'collect'; timeoutMs: number }
  /** How many followers are open and how many keep-alive comments they have read in all. */
  | { id: number; type: 'count' }
  /** Hangs every follower up; answers once their connections are closed. */
  | { id: number; type: 'close' };

export interface FollowerRecord {
  /** The text of each `delta` read since `track`, in order. */
  deltas: string[];
  /** When each paced token arrived (process.hrtime in ns; NaN when it never did). */
  arrivals: number[];
  done: boolean;
}

export type FollowersAnswer =
  | { id: number; ok: true; followers?: FollowerRecord[]; open?: number; keepAlives?: number }
  | { id: number; ok: false; error: string };

interface Follower {
  req: ClientRequest;
  closed: Promise<void>;
  keepAlives: number;
  deltas: string[];
  done: boolean;
  tracker: ReturnType<typeof createArrivalTracker> | undefined;
}

let followers: Follower[] = [];

function openFollower(url: string): Promise<Follower> {
  return new Promise((resolve, reject) => {
    let atNs = 0;
    let snapshot = false;
    const req = request(url, { agent: false, headers: { accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200 || !String(res.headers['content-type']).startsWith('text/event-stream')) {
        res.resume();
        clearTimeout(timer);
        reject(new Error(`GET ${url}: ${res.statusCode} ${res.headers['content-type']}`));
        return;
      }
      res.setEncoding('utf8');
      const read = createSseReader(
        (frame) => {
          if (frame.event === 'snapshot' && !snapshot) {
            snapshot = true;
            clearTimeout(timer);
            resolve(follower);
          } else if (frame.event === 'delta') {
            const { text } = JSON.parse(frame.data) as { text: string };
            follower.deltas.push(text);
            follower.tracker?.onData(text, atNs);
          } else if (frame.event === 'done') {
            follower.done = true;
          }
        },
        () => follower.keepAlives++,
      );
      res.on('data', (text: string) => {
        atNs = Number(process.hrtime.bigint());
        read(text);
      });
      res.on('error', () => {});
    });
    const follower: Follower = {
      req,
      closed: new Promise((done) => req.once('close', () => done())),
      keepAlives: 0,
      deltas: [],
      done: false,
      tracker: undefined,
    };
    // Before the snapshot a failure fails the follow; after it (our hang-up, the server stopping) it is no one's.
    req.on('error', (error) => (snapshot ? undefined : reject(error)));
    // A follower that never gets its snapshot fails the bench rather than hang it.
    const timer = setTimeout(() => {
      if (!snapshot) req.destroy(new Error(`GET ${url}: no snapshot within 30 s`));
    }, 30_000);
    req.end();
  });
}

async function handle(command: FollowersCommand): Promise<Omit<Extract<FollowersAnswer, { ok: true }>, 'id' | 'ok'>> {
  switch (command.type) {
    case 'follow': {
      const opened = await Promise.allSettled(command.paths.map((path) => openFollower(`${command.url}${path}`)));
      for (const result of opened) if (result.status === 'fulfilled') followers.push(result.value);
      const failed = opened.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
      return { open: followers.length };
    }
    case 'track':
      for (const follower of followers) {
        follower.deltas = [];
        follower.done = false;
        follower.tracker = createArrivalTracker(command.tokens, pacedToken);
      }
      return {};
    case 'collect': {
      const deadline = performance.now() + command.timeoutMs;
      while (!followers.every((follower) => follower.done) && performance.now() < deadline) await sleep(10);
      return { followers: followers.map((f) => ({ deltas: f.deltas, arrivals: f.tracker?.arrivals ?? [], done: f.done })) };
    }
    case 'count':
      return { open: followers.length, keepAlives: followers.reduce((sum, f) => sum + f.keepAlives, 0) };
    case 'close': {
      const closing = followers;
      followers = [];
      for (const follower of closing) follower.req.destroy();
      await Promise.all(closing.map((follower) => follower.closed));
      return { open: 0 };
    }
  }
}

process.on('message', (raw) => {
  const command = raw as FollowersCommand;
  handle(command).then(
    (answer) => process.send?.({ id: command.id, ok: true, ...answer } satisfies FollowersAnswer),
    (error: unknown) => process.send?.({ id: command.id, ok: false, error: String(error) } satisfies FollowersAnswer),
  );
});
process.on('disconnect', () => {
  for (const follower of followers) follower.req.destroy();
  process.exit(0);
});
process.send?.({ ready: true });
