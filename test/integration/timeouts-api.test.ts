// Timeouts that tell the truth, the status line while a model loads, SSE keep-alives and the reply
// size cap: each through a real port against the fake Ollama.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_REPLY_CHARS } from '../../server/protocol/index.ts';
import { createFakeOllama, scriptReply, type FakeOllama } from '../fakes/fake-ollama.ts';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { eventTypes, readSse, shownText, type SseEvent } from '../helpers/sse.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };

let fake: FakeOllama;
const started: TestEasel[] = [];

beforeEach(async () => {
  fake = await createFakeOllama();
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((easel) => easel.close()));
  await fake.close();
});

async function start(options: { flags?: string[]; statusAfterMs?: number; keepAliveMs?: number } = {}): Promise<TestEasel> {
  const easel = await startTestEasel({
    ollamaUrl: fake.url,
    flags: options.flags ?? [],
    // Far away unless a test is about it, so no test sees a status or comment it did not ask for.
    timing: { statusAfterMs: options.statusAfterMs ?? 60_000, keepAliveMs: options.keepAliveMs ?? 60_000 },
  });
  started.push(easel);
  return easel;
}

async function send(easel: TestEasel, id: string, text: string): Promise<SseEvent[]> {
  const response = await easel.post(`/api/conversations/${id}/messages`, { text });
  expect(response.status).toBe(200);
  return readSse(response);
}

function of(events: SseEvent[], type: string) {
  return events.filter((event) => event.type === type).map((event) => event.data);
}

async function conversation(easel: TestEasel, id: string): Promise<any> {
  return (await easel.get(`/api/conversations/${id}`)).json();
}

/** The user messages of the last request to Ollama. */
function lastUserWords(): string {
  const request = fake.chatRequests().at(-1);
  return (request?.messages ?? []).filter((m) => m.role === 'user').map((m) => m.content).join('\n');
}

describe('timeouts that tell the truth', () => {
  it('a model that does not start answering in time: a timeout error, the request aborted, the message kept', async () => {
    // 1 s, not less: on a busy machine the request must reach Ollama before the timeout ends it, or there is no
    // hang-up to see.
    const easel = await start({ flags: ['--first-token-timeout', '1'] });
    // Ollama loading the model: not even headers for a minute.
    fake.enqueue({ ...scriptReply('Too late.', ASKING), loadMs: 60_000 });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'a lighthouse at dusk');

    const error = of(events, 'error')[0];
    expect(error).toMatchObject({ code: 'ollama_first_token_timeout' });
    expect(String(error?.code)).toContain('timeout');
    // A fresh Ollama had the model on disk only: the message says it was loading.
    expect(error?.message).toMatch(/took longer than 1 s to load mistral:7b and start answering/);
    expect(error?.message).toContain('--first-token-timeout');
    expect(error?.message).toContain('ollama ps');
    expect(error?.message).not.toContain('ollama serve');
    expect(error?.message).not.toMatch(/not reachable/);
    expect(of(events, 'done')[0]).toMatchObject({ level: 'error' });
    await fake.waitForHangup();

    const stored = await conversation(easel, id);
    expect(stored.busy).toBe(false);
    expect(stored.turns.map((t: any) => [t.role, t.status])).toEqual([
      ['user', 'ok'],
      ['assistant', 'error'],
    ]);
    expect(stored.turns[1].error.code).toBe('ollama_first_token_timeout');

    // The unanswered message travels with the next one.
    fake.enqueue(scriptReply('Here it is.', ASKING));
    const next = await send(easel, id, 'please try again');
    expect(shownText(next)).toBe('Here it is.');
    expect(lastUserWords()).toContain('a lighthouse at dusk');
  });

  it('a model that stops sending mid-reply: a stall error after the words shown so far, which are kept', async () => {
    const easel = await start({ flags: ['--stall-timeout', '0.3'] });
    fake.enqueue({ chunks: ['Hello', ' there', ' and more'], stallAfter: 2 });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'hi');

    expect(shownText(events)).toBe('Hello there');
    const error = of(events, 'error')[0];
    expect(error).toMatchObject({ code: 'ollama_stall_timeout' });
    expect(error?.message).toMatch(/stopped sending in the middle of its reply: nothing arrived for 0\.3 s/);
    expect(error?.message).toContain('--stall-timeout');
    expect(error?.message).not.toContain('ollama serve');
    await fake.waitForHangup();

    const stored = await conversation(easel, id);
    expect(stored.turns[1]).toMatchObject({ role: 'assistant', status: 'error', text: 'Hello there', error: { code: 'ollama_stall_timeout' } });
    fake.enqueue(scriptReply('Sorry, go on.', ASKING));
    await send(easel, id, 'go on');
    expect(lastUserWords()).toContain('hi');
  });

  it('the first-token limit covers only the start: a slow but steady reply is not cut', async () => {
    const easel = await start({ flags: ['--first-token-timeout', '0.5', '--stall-timeout', '0.5'] });
    // 4 lines 200 ms apart: 0.8 s in all, longer than either limit, but never 0.5 s of silence.
    fake.enqueue({ chunks: ['One two', ' three.', `\n---\n${JSON.stringify(ASKING)}`], delayMs: 200 });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'count');
    expect(of(events, 'error')).toEqual([]);
    expect(shownText(events)).toBe('One two three.');
  });

  it('the reminder and compaction calls obey the same limits', async () => {
    const easel = await start({ flags: ['--first-token-timeout', '0.3'] });
    // Broken metadata and no words: nothing to keep, so a full reminder comes next.
    fake.enqueue('{"prompt": "a cat", "generate_image":', { ...scriptReply('Late.', ASKING), loadMs: 60_000 });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'a cat');
    expect(of(events, 'retry')).toEqual([{ attempt: 2, level: 'reminder' }]);
    expect(of(events, 'error')[0]).toMatchObject({ code: 'ollama_first_token_timeout' });
    await fake.waitForHangup();
  });

  it('so does the metadata-only call: a timeout ends the turn, and the text the user read is kept', async () => {
    const easel = await start({ flags: ['--first-token-timeout', '0.3'] });
    fake.enqueue('No JSON at all.', { chunks: [JSON.stringify(ASKING)], loadMs: 60_000 });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'a cat');
    expect(of(events, 'metadata_retry')).toEqual([{ attempt: 2 }]);
    expect(of(events, 'retry')).toEqual([]);
    expect(of(events, 'error')[0]).toMatchObject({ code: 'ollama_first_token_timeout' });
    expect(shownText(events)).toBe('No JSON at all.');
    await fake.waitForHangup();
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { turns: Array<{ text: string; status: string }> };
    expect(conversation.turns.at(-1)).toMatchObject({ text: 'No JSON at all.', status: 'error' });
  });
});

describe('a connection that breaks', () => {
  it('Ollama dying mid-reply: a stream error after the words shown, which are kept with the message', async () => {
    const easel = await start();
    fake.enqueue({ chunks: ['Hello', ' there', ' friend'], dropAfter: 2 });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'hi');
    expect(shownText(events)).toBe('Hello there');
    expect(of(events, 'error')[0]).toMatchObject({ code: 'ollama_stream_failed', message: expect.stringContaining('broke in the middle of the reply') });
    expect((await conversation(easel, id)).turns[1]).toMatchObject({ status: 'error', text: 'Hello there' });
    fake.enqueue(scriptReply('Back again.', ASKING));
    await send(easel, id, 'still there?');
    expect(lastUserWords()).toContain('hi');
  });
});

describe('while the model has not started', () => {
  it('says "Loading …" when Ollama does not have the model in memory, before the first words', async () => {
    const easel = await start({ statusAfterMs: 50 });
    fake.enqueue(async () => {
      // Easel asks /api/ps as the turn starts; the load begins after it answered.
      await fake.waitForRequests(1, '/api/ps');
      return { ...scriptReply('Ready now.', ASKING), loadMs: 500 };
    });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'a cat');

    expect(events[1]).toEqual({ type: 'status', data: { message: 'Loading mistral:7b…' } });
    expect(eventTypes(events)).toEqual(['started', 'status', 'delta', 'metadata', 'pane', 'done']);
    expect(shownText(events)).toBe('Ready now.');
  });

  it('says it is waiting for the model to answer when Ollama has it in memory already', async () => {
    const easel = await start({ statusAfterMs: 50 });
    fake.setLoaded(['mistral:7b']);
    fake.enqueue(async () => {
      await fake.waitForRequests(1, '/api/ps');
      return { ...scriptReply('Ready now.', ASKING), loadMs: 500 };
    });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'a cat');
    expect(of(events, 'status')).toEqual([{ message: 'Waiting for mistral:7b to start answering…' }]);
  });

  it('the page shows the status in the bubble and the first words take its place', async () => {
    const easel = await start({ statusAfterMs: 50 });
    fake.enqueue(async () => {
      await fake.waitForRequests(1, '/api/ps');
      return { ...scriptReply('Ready now.', ASKING), loadMs: 500 };
    });
    const id = await easel.newConversation();
    const response = await fetch(`${easel.url}/c/${id}/messages`, {
      method: 'POST',
      body: new URLSearchParams({ text: 'a cat', sendKey: 's'.repeat(24) }),
    });
    expect(response.status).toBe(200);
    const body = await response.text();
    const status = /<span class="status" id="(reply-[a-f0-9]+-status)">Loading mistral:7b…<\/span>/.exec(body);
    expect(status).not.toBeNull();
    const removal = body.indexOf(`<hx-partial hx-target="#${status![1]}" hx-swap="delete">`);
    const firstWords = body.search(/-live" hx-swap="beforeend">Rea/);
    expect(removal).toBeGreaterThan(status!.index);
    expect(firstWords).toBeGreaterThan(removal);
  });

  it('keeps a quiet stream alive with SSE comments, on the API and the page', async () => {
    const easel = await start({ keepAliveMs: 40 });
    fake.enqueue({ ...scriptReply('Hi.', ASKING), loadMs: 400 }, { ...scriptReply('Hi.', ASKING), loadMs: 400 });
    const id = await easel.newConversation();
    const api = await (await easel.post(`/api/conversations/${id}/messages`, { text: 'hello' })).text();
    // The turn is stored and begins at once; then the silent load, kept alive.
    expect(api).toMatch(/^event: started\ndata: [^\n]*\n\n: keep-alive\n\n/);
    expect(api).toContain('event: done');

    const page = await (
      await fetch(`${easel.url}/c/${id}/messages`, { method: 'POST', body: new URLSearchParams({ text: 'hello', sendKey: 'p'.repeat(24) }) })
    ).text();
    const comment = page.indexOf('\n\n: keep-alive\n\n');
    expect(comment).toBeGreaterThan(0);
    expect(comment).toBeLessThan(page.search(/-live" hx-swap="beforeend">Hi/));
  });
});

describe('the reply size cap', () => {
  it(`stops a reply past ${MAX_REPLY_CHARS} characters, hangs up on Ollama and says so; the message is kept`, async () => {
    const easel = await start();
    // A model repeating itself for ever: 400 000 characters in 1000-character lines, then more to come.
    fake.enqueue({ chunks: Array.from({ length: 400 }, () => 'la '.repeat(333) + 'l'), stallAfter: 400 });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'sing');

    const shown = shownText(events);
    expect(shown.length).toBeLessThanOrEqual(MAX_REPLY_CHARS);
    expect(shown.length).toBeGreaterThan(MAX_REPLY_CHARS - 1000);
    expect(of(events, 'error')[0]).toMatchObject({ code: 'reply_too_long', message: expect.stringContaining('200,000 characters') });
    expect(of(events, 'retry')).toEqual([]);
    await fake.waitForHangup();
    expect(fake.chatRequests()).toHaveLength(1);

    const stored = await conversation(easel, id);
    expect(stored.turns[1]).toMatchObject({ status: 'error', error: { code: 'reply_too_long' } });
    expect(stored.turns[1].text.length).toBe(shown.length);
    fake.enqueue(scriptReply('Shorter.', ASKING));
    await send(easel, id, 'shorter please');
    expect(lastUserWords()).toContain('sing');
  });

  it('a capped reply whose metadata had arrived is accepted, with a notice', async () => {
    const easel = await start();
    const metadata = JSON.stringify({ ...ASKING, prompt: 'a choir' });
    // The model wrote its reply and metadata, then ran on with trailing text.
    fake.enqueue({ chunks: ['A choir!\n---\n', metadata, ...Array.from({ length: 300 }, () => ' amen'.repeat(200))], stallAfter: 302 });
    const id = await easel.newConversation();
    const events = await send(easel, id, 'a choir');

    expect(shownText(events)).toBe('A choir!');
    const shownMetadata = of(events, 'metadata')[0]!;
    expect(shownMetadata).toMatchObject({ prompt: 'a choir' });
    expect((shownMetadata.notices as string[]).join(' ')).toMatch(/ran past 200,000 characters/);
    await fake.waitForHangup();
    expect((await conversation(easel, id)).prompt).toBe('a choir');
  });
});
