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
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

/** Runs `work` with a signal that aborts when the client hangs up, unlinked from the request afterwards. */
export async function withRequestSignal<T>(c: Context, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const release = linkToRequest(c, () => controller.abort(new Error('client disconnected')));
  try {
    return await work(controller.signal);
  } finally {
    release();
  }
}

const INTERNAL_ERROR_MESSAGE =
  'Something went wrong inside Easel; the details are in the server log. What you typed is kept: press Retry.';

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
  const data = `data: ${String(message.data).split(/\r\n|\r|\n/).join('\ndata: ')}`;
  return message.event ? `event: ${message.event}\n${data}\n\n` : `${data}\n\n`;
}

export interface SseMessage {
  event?: string;
  data: string;
}

export interface StreamEventsOptions {
  events: AsyncIterable<TurnEvent>;
  /** Aborted when the client hangs up, which aborts the turn (and the request to Ollama or the image backend). */
  hangup: AbortController;
  logger: Logger;
  /** The renderer: JSON for the API, HTML for the page. Undefined sends nothing for that event. */
  render(event: TurnEvent): SseMessage | readonly SseMessage[] | undefined;
  /** Sent before the first event. */
  first?: SseMessage | readonly SseMessage[];
  /** Sees every event before it is rendered. */
  onEvent?(event: TurnEvent): void;
  /** Quiet time before a keep-alive comment. Default SSE_KEEP_ALIVE_MS. */
  keepAliveMs?: number;
  /** True after an event the stream ends with (it stops reading: what comes next goes on unread). */
  endAfter?(event: TurnEvent): boolean;
}

/**
 * Streams a turn's events as SSE, the one way both renderers do it. A client that hangs up aborts the
 * work at once (nobody is reading, and the GPU must not keep generating); writes after a disconnect
 * are skipped. The link to the request's signal is released at the end (see linkToRequest).
 */
export function streamEvents(c: Context, options: StreamEventsOptions): Response {
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
        if (buffered === '') return;
        const flushed = flush();
        // Backpressure: a slow reader holds the producer once a large batch waits.
        if (buffered.length >= MAX_BUFFERED_CHARS) await flushed;
      };
      const send = async (event: TurnEvent) => {
        options.onEvent?.(event);
        await write(options.render(event));
      };
      let ended = false;
      try {
        await write(options.first);
        for await (const event of events) {
          await send(event);
          if (event.type === 'done') ended = true;
          if (options.endAfter?.(event)) break;
        }
      } catch (error) {
        // A bug must not leak its internal text as a raw `event: error` (hono's default): the client
        // gets the documented error and done events, and the details go to the log.
        logger.error('event stream failed', { path: c.req.path, error });
        if (!ended && !stream.aborted) {
          try {
            await send({ type: 'error', code: 'internal_error', message: INTERNAL_ERROR_MESSAGE });
            await send({ type: 'done', attempts: 0, repairs: [], level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null });
          } catch (failure) {
            // The renderer fails even for these: the stream ends without them rather than reach hono's last
            // resort, which would send the exception's own words to the client as `event: error`.
            logger.error('event stream could not send its error', { path: c.req.path, error: failure });
          }
        }
      } finally {
        while (buffered !== '' || flushing) await flush();
        clearTimeout(keepAlive);
        release();
      }
    },
    async (error) => {
      logger.error('event stream failed', { path: c.req.path, error });
    },
  );
}
