import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Logger, TurnEvent } from '../core/index.ts';

/**
 * Calls `onAbort` if the client hangs up, until `release()` is called. The request's own signal must
 * never be kept or composed (AbortSignal.any): with keep-alive it outlives the request in
 * @hono/node-server, and whatever hangs on it stays in memory.
 */
export function linkToRequest(c: Context, onAbort: () => void): () => void {
  const signal = c.req.raw.signal;
  // Stryker disable next-line ObjectLiteral,BooleanLiteral: a signal aborts once
  signal.addEventListener('abort', onAbort, { once: true });
  // Stryker disable next-line ArrowFunction,StringLiteral: resources only: the response has ended
  return () => signal.removeEventListener('abort', onAbort);
}

/** Runs `work` with a signal that aborts when the client hangs up, unlinked from the request afterwards. */
export async function withRequestSignal<T>(c: Context, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  // Stryker disable next-line StringLiteral: health reads only signal.aborted, and the client that would read the answer is gone
  const release = linkToRequest(c, () => controller.abort(new Error('client disconnected')));
  try {
    // Stryker disable BlockStatement: the finally below emptied: resources only: aborting a finished health check's controller stops nothing
    return await work(controller.signal);
  } finally {
    // Stryker restore BlockStatement
    release();
  }
}

/** Quiet time after which an SSE comment is sent, so proxies and clients see a live connection. */
export const SSE_KEEP_ALIVE_MS = 15_000;

/** Gathered frames written at once when they reach this size, before the event loop's turn ends. */
const MAX_BUFFERED_CHARS = 64 * 1024;

/**
 * One SSE frame, as hono's writeSSE writes it (hono/dist/helper/streaming/sse.js): `event:`, then each
 * line of the data as its own `data:` line, then a blank line.
 */
export function formatSseMessage(message: SseMessage): string {
  if (message.event !== undefined && /[\r\n]/.test(message.event)) throw new Error('an SSE event name must not contain a line break');
  if (message.id !== undefined && /[\r\n\0]/.test(message.id)) throw new Error('an SSE id must not contain a line break or NUL');
  const data = `data: ${String(message.data).split(/\r\n|\r|\n/).join('\ndata: ')}`;
  const id = message.id === undefined ? '' : `id: ${message.id}\n`;
  return message.event ? `${id}event: ${message.event}\n${data}\n\n` : `${id}${data}\n\n`;
}

export interface SseMessage {
  /** The event's id: a client that reconnects sends the last one as Last-Event-ID. */
  id?: string;
  event?: string;
  data: string;
}

/** What a turn's stream sends when Easel itself fails in the middle of it: the documented error, then done. */
export const TURN_STREAM_FAILURE: readonly TurnEvent[] = [
  { type: 'error', code: 'internal_error', message: 'Something went wrong inside Easel; the details are in the server log. What you typed is kept: press Retry.' },
  { type: 'done', attempts: 0, repairs: [], level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null },
];

export interface StreamEventsOptions<E = TurnEvent> {
  events: AsyncIterable<E>;
  /** Aborted when the client hangs up: what it ends is the caller's (a Generate's image; never a reply, which is the server's). */
  hangup: AbortController;
  logger: Logger;
  /** The renderer: JSON for the API, HTML for the page. Undefined sends nothing for that event. */
  render(event: E): SseMessage | readonly SseMessage[] | undefined;
  /** Sent before the first event. */
  first?: SseMessage | readonly SseMessage[];
  /** Sees every event before it is rendered. */
  onEvent?(event: E): void;
  /** Quiet time before a keep-alive comment. Default SSE_KEEP_ALIVE_MS. */
  keepAliveMs?: number;
  /** True after an event the stream ends with (it stops reading: what comes next goes on unread). */
  endAfter?(event: E): boolean;
  /** Sent if Easel fails in the middle of the stream before a `done` (a turn's: TURN_STREAM_FAILURE); none: the stream just ends. */
  failure?: readonly E[];
}

/**
 * Streams a turn's events as SSE, the one way both renderers do it. A client that hangs up aborts the
 * work at once (nobody is reading, and the GPU must not keep generating); writes after a disconnect
 * are skipped. The link to the request's signal is released at the end (see linkToRequest).
 */
export function streamEvents<E>(c: Context, options: StreamEventsOptions<E>): Response {
  const { events, hangup, logger } = options;
  const onHangup = () => hangup.abort(new Error('client disconnected'));
  const release = linkToRequest(c, onHangup);
  return streamSSE(
    c,
    async (stream) => {
      stream.onAbort(onHangup);
      // Any quiet stretch (a model loading, a long image) gets a comment line, which SSE readers skip.
      let keepAlivePending = false;
      const keepAlive = setTimeout(function tick() {
        keepAlive.refresh();
        // Stryker disable next-line ConditionalExpression,LogicalOperator: closed is set after the finally that clears this timer; after an abort hono's write swallows the failure
        if (stream.aborted || stream.closed || keepAlivePending) return;
        keepAlivePending = true;
        void stream.write(': keep-alive\n\n').finally(() => (keepAlivePending = false));
      }, options.keepAliveMs ?? SSE_KEEP_ALIVE_MS);
      // Frames are gathered and written once per event-loop turn: a network read of Ollama's stream can
      // yield dozens of deltas, and one chunked write (and one encode) per token was most of the cost.
      let buffered = '';
      let flushing: Promise<void> | undefined;
      const flush = (): Promise<void> => {
        flushing ??= (async () => {
          try {
            await new Promise<void>((resolve) => setImmediate(resolve));
            while (buffered !== '') {
              const chunk = buffered;
              buffered = '';
              // After a hang-up nothing is written, and nothing fails.
              // Stryker disable next-line ConditionalExpression: hono's write swallows the failure, and there is no reader
              if (stream.aborted) return;
              await stream.write(chunk);
              keepAlive.refresh();
            }
          } finally {
            // In the same step as the loop's last look at the buffer: a frame added after it finds no flush
            // running and starts one (a `.finally()` here would leave a microtask in which it waits unsent).
            flushing = undefined;
          }
        })();
        return flushing;
      };
      const write = async (messages: SseMessage | readonly SseMessage[] | undefined) => {
        for (const message of messages === undefined ? [] : Array.isArray(messages) ? messages : [messages as SseMessage]) {
          buffered += formatSseMessage(message);
        }
        // Stryker disable next-line ConditionalExpression,StringLiteral: an empty flush waits one setImmediate and writes nothing; a frame added meanwhile goes out in the same pass
        if (buffered === '') return;
        const flushed = flush();
        // Backpressure: a slow reader holds the producer once a large batch waits.
        if (buffered.length >= MAX_BUFFERED_CHARS) await flushed;
      };
      const send = async (event: E) => {
        options.onEvent?.(event);
        await write(options.render(event));
      };
      let ended = false;
      try {
        await write(options.first);
        for await (const event of events) {
          await send(event);
          if (isDone(event)) ended = true;
          if (options.endAfter?.(event)) break;
        }
      } catch (error) {
        // A bug must not leak its internal text as a raw `event: error` (hono's default): the client
        // gets the documented error and done events, and the details go to the log.
        logger.error('event stream failed', { path: c.req.path, error });
        if (!ended && !stream.aborted) {
          try {
            for (const event of options.failure ?? []) await send(event);
          } catch (failure) {
            // The renderer fails even for these: the stream ends without them rather than reach hono's last
            // resort, which would send the exception's own words to the client as `event: error`.
            logger.error('event stream could not send its error', { path: c.req.path, error: failure });
          }
        }
      } finally {
        // Stryker disable next-line LogicalOperator: when the loop is skipped only a write in progress is left, and close() queues behind it
        while (buffered !== '' || flushing) await flush();
        clearTimeout(keepAlive);
        release();
      }
    },
    // Stryker disable next-line BlockStatement: unreachable: the stream's own callback catches every failure
    async (error) => {
      // Stryker disable next-line StringLiteral,ObjectLiteral: unreachable: the stream's own callback catches every failure
      logger.error('event stream failed', { path: c.req.path, error });
    },
  );
}

/** A turn's `done`: after it, no failure events are sent. */
function isDone(event: unknown): boolean {
  return typeof event === 'object' && event !== null && (event as { type?: unknown }).type === 'done';
}
