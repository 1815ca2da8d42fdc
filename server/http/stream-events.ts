import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Logger, TurnEvent } from '../core/index.ts';

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
  render(event: TurnEvent): SseMessage | undefined;
  /** Sent before the first event. */
  first?: SseMessage;
  /** Sees every event before it is rendered. */
  onEvent?(event: TurnEvent): void;
  /** Runs once the stream is over, however it ended. */
  onEnd?(): void;
}

/**
 * Streams a turn's events as SSE, the one way both renderers do it. A client that hangs up aborts the
 * work at once (nobody is reading, and the GPU must not keep generating); writes after a disconnect
 * are skipped. The listener on the request's signal is removed at the end: with keep-alive that signal
 * outlives the request, and the listener would keep the whole turn in memory.
 */
export function streamEvents(c: Context, options: StreamEventsOptions): Response {
  const { events, hangup, logger } = options;
  const onHangup = () => hangup.abort(new Error('client disconnected'));
  const requestSignal = c.req.raw.signal;
  requestSignal.addEventListener('abort', onHangup, { once: true });
  return streamSSE(
    c,
    async (stream) => {
      stream.onAbort(onHangup);
      try {
        if (options.first) await stream.writeSSE(options.first);
        for await (const event of events) {
          options.onEvent?.(event);
          const message = options.render(event);
          if (message && !stream.aborted) await stream.writeSSE(message);
        }
      } finally {
        requestSignal.removeEventListener('abort', onHangup);
        options.onEnd?.();
      }
    },
    async (error) => {
      logger.error('event stream failed', { path: c.req.path, error });
    },
  );
}
