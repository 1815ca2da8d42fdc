// streamEvents at its edges: the exact failure events and log lines, a client that hangs up, a slow
// reader (keep-alive comments and backpressure), endAfter, and the last frames before the stream closes.
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../server/core/index.ts';
import { createLogger } from '../../../server/core/index.ts';
import { renderEventJson } from '../../../server/http/api.ts';
import { formatSseMessage, streamEvents, TURN_STREAM_FAILURE, type StreamEventsOptions } from '../../../server/http/stream-events.ts';
import { readSse } from '../../helpers/sse.ts';

const DONE: TurnEvent = { type: 'done', attempts: 1, repairs: [], level: 'clean', evalCount: 1, tokensPerSecond: 1, firstTokenMs: 1 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function createStreamingApp(events: () => AsyncGenerator<TurnEvent>, extra: Partial<StreamEventsOptions> = {}) {
  const logs: string[] = [];
  const logger = createLogger({ level: 'error', write: (line) => logs.push(line) });
  const hangups: AbortController[] = [];
  const app = new Hono();
  app.get('/stream', (c) => {
    const hangup = new AbortController();
    hangups.push(hangup);
    return streamEvents(c, { events: events(), hangup, logger, render: renderEventJson, failure: TURN_STREAM_FAILURE, ...extra });
  });
  return { app, logs, hangups };
}

async function readText(response: Response): Promise<string> {
  return new Response(response.body).text();
}

describe('formatSseMessage', () => {
  it('refuses an event name with a line break, which would forge another frame', () => {
    expect(() => formatSseMessage({ event: 'delta\nevent: done', data: '{}' })).toThrow('an SSE event name must not contain a line break');
    expect(() => formatSseMessage({ event: 'delta\r', data: '{}' })).toThrow('an SSE event name must not contain a line break');
  });
});

describe('a failure inside the stream', () => {
  it('ends with exactly the documented done event and logs "event stream failed" with the path', async () => {
    const { app, logs } = createStreamingApp(async function* () {
      yield { type: 'delta', text: 'Hello' };
      throw new Error('boom inside');
    });
    const events = await readSse(await app.request('/stream'));
    expect(events.at(-1)).toEqual({
      type: 'done',
      data: { attempts: 0, repairs: [], level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null },
    });
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(/ ERROR event stream failed \{"path":"\/stream","error":.*boom inside/);
  });

  it('a renderer that fails even for the error event ends the stream without its words reaching the client, and says so in the log', async () => {
    const { app, logs } = createStreamingApp(
      async function* () {
        yield { type: 'delta', text: 'Hello' };
      },
      {
        render: () => {
          throw new Error('render broke');
        },
      },
    );
    const body = await readText(await app.request('/stream'));
    expect(body).not.toContain('render broke');
    expect(body).not.toContain('event: error');
    expect(logs).toHaveLength(2);
    expect(logs[0]).toMatch(/ ERROR event stream failed \{"path":"\/stream","error":.*render broke/);
    expect(logs[1]).toMatch(/ ERROR event stream could not send its error \{"path":"\/stream","error":.*render broke/);
  });
});

describe('endAfter', () => {
  it('ends the stream after the event it names; what comes next is not sent', async () => {
    let after = false;
    const { app } = createStreamingApp(
      async function* () {
        yield { type: 'delta', text: 'a' };
        yield DONE;
        after = true;
        yield { type: 'delta', text: 'unread' };
      },
      { endAfter: (event) => event.type === 'done' },
    );
    const events = await readSse(await app.request('/stream'));
    expect(events.map((event) => event.type)).toEqual(['delta', 'done']);
    expect(after).toBe(false);
  });
});

describe('the last frames', () => {
  it('every frame of a generator that ends at once is delivered before the stream closes', async () => {
    const { app } = createStreamingApp(async function* () {
      yield { type: 'delta', text: 'a' };
      yield DONE;
    });
    const events = await readSse(await app.request('/stream'));
    expect(events.map((event) => event.type)).toEqual(['delta', 'done']);
  });
});

describe('a client that hangs up', () => {
  it('aborts the turn at once, with the reason "client disconnected"', async () => {
    const { app, hangups } = createStreamingApp(async function* () {
      yield { type: 'delta', text: 'a' };
      // The turn goes on until it is aborted (or gives up after 1 s).
      await Promise.race([sleep(1000), new Promise((resolve) => hangups[0]!.signal.addEventListener('abort', resolve))]);
      yield DONE;
    });
    const client = new AbortController();
    // app.request() ties the request's signal to the client; nobody reads or cancels the body here.
    await app.request(new Request('http://localhost/stream', { signal: client.signal }));
    await sleep(20);
    client.abort();
    await sleep(20);
    expect(hangups[0]!.signal.aborted).toBe(true);
    expect((hangups[0]!.signal.reason as Error).message).toBe('client disconnected');
  });
});

describe('keep-alive comments', () => {
  it('each quiet stretch gets its comments, not only the first', async () => {
    const { app } = createStreamingApp(
      async function* () {
        yield { type: 'delta', text: 'a' };
        await sleep(200);
        yield DONE;
      },
      { keepAliveMs: 20 },
    );
    const text = await readText(await app.request('/stream'));
    expect(text.match(/^: keep-alive$/gm)?.length ?? 0).toBeGreaterThanOrEqual(3);
  });

  it('a reader that does not read gets no pile of comments: one waits at a time', async () => {
    const { app } = createStreamingApp(
      async function* () {
        await sleep(150);
        yield DONE;
      },
      { keepAliveMs: 5 },
    );
    const response = await app.request('/stream');
    // Nothing is read during the quiet stretch: ~30 ticks, of which one write at a time may wait.
    await sleep(150);
    const text = await readText(response);
    expect(text.match(/^: keep-alive$/gm)?.length ?? 0).toBeLessThanOrEqual(4);
    expect(text).toContain('event: done');
  });
});

describe('backpressure', () => {
  it('a slow reader holds the producer once 64 KiB (exactly) waits to be written', async () => {
    let passedBig = false;
    // `data: ` + data + a blank line: exactly 64 KiB.
    const big = 'x'.repeat(64 * 1024 - 8);
    const { app } = createStreamingApp(
      async function* () {
        yield { type: 'delta', text: 'small' };
        // Let the small frame go out and fill what the response stream holds by itself.
        await sleep(20);
        yield { type: 'delta', text: big };
        passedBig = true;
        yield DONE;
      },
      { render: (event) => (event.type === 'delta' ? { data: event.text } : renderEventJson(event)) },
    );
    const response = await app.request('/stream');
    await sleep(100);
    expect(passedBig).toBe(false);
    const text = await readText(response);
    expect(passedBig).toBe(true);
    expect(text).toContain(`data: ${big}\n\n`);
    expect(text).toContain('event: done');
  });
});
