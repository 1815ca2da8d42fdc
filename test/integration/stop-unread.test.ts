// Stop frees the conversation at once even when the client stopped reading its stream: the turn runs
// as its own task, so a blocked socket can neither keep it busy nor delay storing what was shown.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger, type EaselService, type TurnEvent } from '../../server/core/index.ts';
import { createApp } from '../../server/http/index.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { startTestEasel, type TestEasel, useFakeOllama } from '../helpers/easel.ts';
import { readSse, shownText } from '../helpers/sse.ts';
import { collectAll } from '../helpers/streams.ts';
import { buildService } from '../helpers/service.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const LONG_REPLY = Array.from({ length: 400 }, (_, i) => `word${i} `);

const fake = useFakeOllama('each test');

describe('Stop with a stream nobody reads (the real app through app.request)', () => {
  let dataDir: string;
  let close: () => void;
  let request: (path: string, body?: unknown) => Promise<Response>;

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'easel-stop-'));
    const { service, store } = buildService({ ollamaUrl: fake.url, dbPath: join(dataDir, 'easel.db') });
    const app = createApp({ service, logger: silentLogger, access: { allowedHosts: [] } });
    request = async (path, body) =>
      // A browser or curl always sends Host; the app refuses a request without one (DNS rebinding).
      app.request(
        path,
        body === undefined
          ? { headers: { host: '127.0.0.1' } }
          : { method: 'POST', headers: { host: '127.0.0.1', 'content-type': 'application/json' }, body: JSON.stringify(body) },
      );
    close = () => {
      store.close();
      rmSync(dataDir, { recursive: true, force: true });
    };
  });

  afterEach(() => close());

  it('POST …/stop, then the next message is taken at once and the transcript holds the stopped turn', async () => {
    // A long reply whose stream is read once, then never again: its body takes a few more events, then
    // every write blocks.
    fake.enqueue({ chunks: LONG_REPLY, stallAfter: 50 });
    const id = ((await (await request('/api/conversations', {})).json()) as { id: string }).id;
    const unread = await request(`/api/conversations/${id}/messages`, { text: 'tell me a long story' });
    expect(unread.status).toBe(200);
    const reader = unread.body!.getReader();
    // Read until the first words arrived (the stream opens with `started`), then never again.
    let read = '';
    while (!read.includes('event: delta')) read += new TextDecoder().decode((await reader.read()).value);
    expect(read).toContain('event: started');
    await fake.waitForStall();

    expect(await (await request(`/api/conversations/${id}/stop`, {})).json()).toEqual({ stopped: true });
    await fake.waitForHangup();
    fake.enqueue(scriptReply('A short one.', ASKING));
    const next = await request(`/api/conversations/${id}/messages`, { text: 'a short one then' });
    expect(next.status).toBe(200);
    expect(shownText(await readSse(next))).toBe('A short one.');

    const conversation = (await (await request(`/api/conversations/${id}`)).json()) as any;
    expect(conversation.busy).toBe(false);
    expect(conversation.turns.map((t: any) => [t.role, t.status])).toEqual([
      ['user', 'ok'],
      ['assistant', 'stopped'],
      ['user', 'ok'],
      ['assistant', 'ok'],
    ]);
    // What had been shown when Stop came: the first words at least, at most the 50 sent.
    expect(conversation.turns[1].text).toMatch(/^word0 /);
    expect(LONG_REPLY.slice(0, 50).join('').startsWith(conversation.turns[1].text)).toBe(true);
    await reader.cancel();
  });

  it('a reply nobody reads still finishes and frees the conversation', async () => {
    fake.enqueue(scriptReply('Nobody reads this.', ASKING));
    const id = ((await (await request('/api/conversations', {})).json()) as { id: string }).id;
    const unread = await request(`/api/conversations/${id}/messages`, { text: 'hello' });
    await expect.poll(async () => ((await (await request(`/api/conversations/${id}`)).json()) as any).busy).toBe(false);
    const conversation = (await (await request(`/api/conversations/${id}`)).json()) as any;
    expect(conversation.turns[1]).toMatchObject({ status: 'ok', text: 'Nobody reads this.' });
    await unread.body?.cancel();
  });

  it('a second message while a reply runs is still refused (409)', async () => {
    fake.enqueue({ chunks: LONG_REPLY, delayMs: 5 });
    const id = ((await (await request('/api/conversations', {})).json()) as { id: string }).id;
    const first = await request(`/api/conversations/${id}/messages`, { text: 'one' });
    await fake.waitForRequests(1, '/api/chat');
    const second = await request(`/api/conversations/${id}/messages`, { text: 'two' });
    expect(second.status).toBe(409);
    // Hanging up does not stop a reply (it is the server's); Stop does.
    await first.body?.cancel();
    await request(`/api/conversations/${id}/stop`, {});
    await fake.waitForHangup();
  });
});

describe('turn tasks in the service (real store, real Ollama adapter)', () => {
  let dataDir: string;
  let service: EaselService;
  let close: () => void;

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'easel-tasks-'));
    let store: { close(): void };
    ({ service, store } = buildService({ ollamaUrl: fake.url, dbPath: join(dataDir, 'easel.db') }));
    close = () => {
      store.close();
      rmSync(dataDir, { recursive: true, force: true });
    };
  });

  afterEach(() => close());

  function createdId(target: EaselService): string {
    const created = target.createConversation();
    if (!created.ok) throw new Error(`not created: ${created.error.message}`);
    return created.value.id;
  }

  function send(id: string, text: string): AsyncIterable<TurnEvent> {
    const result = service.sendMessage(id, text, new AbortController().signal);
    if (!result.ok) throw new Error(`not sent: ${result.error.code}`);
    return result.value;
  }

  it('a message sent in the same instant as Stop is stored after the stopped turn, and runs after it', async () => {
    fake.enqueue({ chunks: LONG_REPLY, stallAfter: 3 });
    const id = createdId(service);
    const first = send(id, 'first');
    await fake.waitForStall();
    // Nothing reads `first`; Stop and the next message come together.
    expect(service.stop(id)).toBe(true);
    let release!: () => void;
    fake.enqueue(scriptReply('Second answer.', { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 }, { gate: new Promise<void>((r) => (release = r)) }));
    const second = send(id, 'second');

    // The second turn's message is written once the first turn is stored; the first task is over then.
    await expect.poll(() => service.getConversation(id)!.turns.length).toBe(4);
    await fake.waitForRequests(2, '/api/chat');
    // The finished first task must not have cleared the running second turn's entry.
    expect(service.isBusy(id)).toBe(true);
    const third = service.sendMessage(id, 'third', new AbortController().signal);
    expect(third.ok ? 'accepted' : third.error.code).toBe('busy');

    release();
    const events = await collectAll(second);
    expect(events.at(-1)).toMatchObject({ type: 'done', level: 'clean' });
    const turns = service.getConversation(id)!.turns;
    expect(turns.map((t) => [t.role, t.status])).toEqual([
      ['user', 'ok'],
      ['assistant', 'stopped'],
      ['user', 'ok'],
      ['assistant', 'ok'],
    ]);
    expect(turns.map((t) => t.text)).toEqual(['first', turns[1]!.text, 'second', 'Second answer.']);
    expect(LONG_REPLY.join('').startsWith(turns[1]!.text)).toBe(true);
    expect((await collectAll(first)).at(-1)).toMatchObject({ type: 'done', level: 'stopped' });
  });
});

describe('Stop with a socket that never reads (a real port)', () => {
  let easel: TestEasel;
  const sockets: Socket[] = [];

  beforeEach(async () => {
    easel = await startTestEasel({ ollamaUrl: fake.url });
  });

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await easel.close();
  });

  /** Sends the page's form post and never reads a byte of the answer. */
  function postWithoutReading(path: string, form: Record<string, string>): Socket {
    const { hostname, port } = new URL(easel.url);
    const text = new URLSearchParams(form).toString();
    const socket = connect(Number(port), hostname, () => {
      socket.pause();
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/x-www-form-urlencoded\r\n` +
          `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
      );
    });
    sockets.push(socket);
    return socket;
  }

  it('frees the conversation at once although the socket is full and the client still connected', async () => {
    // 60 000 one-character tokens become about 6 MB of the page's SSE (an <hx-partial> each): more than
    // the socket buffers hold (about 4 MB here), so the server's writes block. Then the model goes quiet.
    const chunks = Array.from({ length: 60_000 }, () => 'x');
    fake.enqueue({ chunks, stallAfter: chunks.length });
    const id = await easel.newConversation();
    postWithoutReading(`/c/${id}/messages`, { text: 'fill the socket', sendKey: 'f'.repeat(24) });
    // Every token reached Easel, although the client read none of the reply.
    await fake.waitForStall();

    expect(await (await easel.post(`/api/conversations/${id}/stop`, {})).json()).toEqual({ stopped: true });
    fake.enqueue(scriptReply('Next.', ASKING));
    const next = await easel.post(`/api/conversations/${id}/messages`, { text: 'next' });
    expect(next.status).toBe(200);
    expect(shownText(await readSse(next))).toBe('Next.');

    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as any;
    expect(conversation.turns.map((t: any) => t.status)).toEqual(['ok', 'stopped', 'ok', 'ok']);
    expect(conversation.turns[1].text).toBe('x'.repeat(60_000));
  });
});
