// The one SSE streaming helper of the API and the page: a failure inside a stream reaches the client
// in the documented event shapes, never as hono's raw `event: error` with internal text.
import fc from 'fast-check';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../server/core/index.ts';
import { createLogger } from '../../../server/core/index.ts';
import { renderEventJson } from '../../../server/http/api.ts';
import { formatSseMessage, streamEvents, TURN_STREAM_FAILURE } from '../../../server/http/stream-events.ts';
import { readSse } from '../../helpers/sse.ts';

function createStreamingApp(events: () => AsyncGenerator<TurnEvent>) {
  const logs: string[] = [];
  const logger = createLogger({ level: 'error', write: (line) => logs.push(line) });
  const app = new Hono();
  app.get('/stream', (c) => streamEvents(c, { events: events(), hangup: new AbortController(), logger, render: renderEventJson, failure: TURN_STREAM_FAILURE }));
  return { app, logs };
}

describe('streamEvents', () => {
  it('a failure mid-stream ends with the documented error and done events; the internals go to the log only', async () => {
    const { app, logs } = createStreamingApp(async function* () {
      yield { type: 'delta', text: 'Hello' };
      throw new Error('SQLITE_FULL: database or disk is full');
    });
    const events = await readSse(await app.request('/stream'));
    expect(events.map((event) => event.type)).toEqual(['delta', 'error', 'done']);
    expect(events[1]?.data).toMatchObject({ code: 'internal_error' });
    expect(String(events[1]?.data.message)).toContain('press Retry');
    expect(JSON.stringify(events)).not.toContain('SQLITE_FULL');
    expect(events[2]?.data).toMatchObject({ level: 'error' });
    expect(logs.join('\n')).toContain('SQLITE_FULL');
  });

  it('a failure after done adds nothing the client would misread', async () => {
    const { app } = createStreamingApp(async function* () {
      yield { type: 'done', attempts: 1, repairs: [], level: 'clean', evalCount: 1, tokensPerSecond: 1, firstTokenMs: 1 };
      throw new Error('late');
    });
    const events = await readSse(await app.request('/stream'));
    expect(events.map((event) => event.type)).toEqual(['done']);
  });

  it('gathers the events of one event-loop turn into one write, every event intact and in order', async () => {
    const { app } = createStreamingApp(async function* () {
      // 500 deltas without waiting for I/O: what one network read of Ollama's stream can produce.
      for (let i = 0; i < 500; i++) yield { type: 'delta', text: `t${i} ` };
      await new Promise((resolve) => setTimeout(resolve, 20));
      yield { type: 'delta', text: 'later' };
      yield { type: 'done', attempts: 1, repairs: [], level: 'clean', evalCount: 501, tokensPerSecond: 1, firstTokenMs: 1 };
    });
    const response = await app.request('/stream');
    const reads: string[] = [];
    const decoder = new TextDecoder();
    const reader = response.body!.getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) reads.push(decoder.decode(read.value, { stream: true }));
    const text = reads.join('');
    const deltas = [...text.matchAll(/^event: delta\ndata: (.*)$/gm)].map((match) => (JSON.parse(match[1]!) as { text: string }).text);
    expect(deltas).toEqual([...Array.from({ length: 500 }, (_, i) => `t${i} `), 'later']);
    expect(text.endsWith('\n\n')).toBe(true);
    // One write per turn of the event loop, not one per event (502 events).
    expect(reads.length).toBeLessThanOrEqual(4);
  });

  it('frames each message exactly as hono\'s writeSSE does, whatever line breaks the data holds', async () => {
    const viaHono = async (message: { event?: string; data: string }) => {
      const app = new Hono();
      app.get('/', (c) => streamSSE(c, (stream) => stream.writeSSE(message)));
      return (await app.request('/')).text();
    };
    await fc.assert(
      fc.asyncProperty(
        fc.option(fc.constantFrom('delta', 'done', 'error'), { nil: undefined }),
        fc.array(fc.constantFrom('a', ' ', '\n', '\r', '\r\n', ':', 'é', '{"x":1}', ''), { maxLength: 12 }).map((parts) => parts.join('')),
        async (event, data) => {
          const message = event === undefined ? { data } : { event, data };
          expect(formatSseMessage(message)).toBe(await viaHono(message));
        },
      ),
      { numRuns: 200 },
    );
  });
});
