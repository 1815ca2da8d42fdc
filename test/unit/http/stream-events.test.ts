// The one SSE streaming helper of the API and the page: a failure inside a stream reaches the client
// in the documented event shapes, never as hono's raw `event: error` with internal text.
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../server/core/index.ts';
import { createLogger } from '../../../server/core/index.ts';
import { renderEventJson } from '../../../server/http/api.ts';
import { streamEvents } from '../../../server/http/stream-events.ts';
import { readSse } from '../../helpers/sse.ts';

function createStreamingApp(events: () => AsyncGenerator<TurnEvent>) {
  const logs: string[] = [];
  const logger = createLogger({ level: 'error', write: (line) => logs.push(line) });
  const app = new Hono();
  app.get('/stream', (c) => streamEvents(c, { events: events(), hangup: new AbortController(), logger, render: renderEventJson }));
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
});
