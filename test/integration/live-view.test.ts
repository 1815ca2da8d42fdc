// Every page a live view: a reply is the server's task (it outlives the request that asked for it), a
// conversation and the library can be followed from any client (snapshot, numbered events, resume with
// Last-Event-ID), and a change made from an older pane is refused as stale.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFakeOllama, scriptReply, type FakeOllama } from '../fakes/fake-ollama.ts';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { readSse } from '../helpers/sse.ts';

const ASKING = { prompt: 'a fox in the snow', generate_image: false, steps: 20, cfg: 7, seed: -1 };

interface Frame {
  id: string | undefined;
  event: string;
  data: Record<string, unknown>;
}

/** A followed stream's frames, with their ids, read one at a time as they arrive. */
function followFrames(response: Response): { next(): Promise<Frame>; close(): Promise<void> } {
  if (!response.body) throw new Error(`no body (status ${response.status})`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const frames: Frame[] = [];
  let frame: Partial<Frame> & { lines: string[] } = { lines: [] };
  return {
    async next() {
      for (;;) {
        const ready = frames.shift();
        if (ready) return ready;
        const { value, done } = await reader.read();
        if (done) throw new Error('the stream ended');
        buffer += decoder.decode(value, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          if (line === '') {
            if (frame.lines.length > 0) frames.push({ id: frame.id, event: frame.event ?? 'message', data: JSON.parse(frame.lines.join('\n')) as Record<string, unknown> });
            frame = { lines: [] };
          } else if (line.startsWith('id: ')) frame.id = line.slice(4);
          else if (line.startsWith('event: ')) frame.event = line.slice(7);
          else if (line.startsWith('data: ')) frame.lines.push(line.slice(6));
        }
      }
    },
    close: () => reader.cancel(),
  };
}

/** Frames until one of `type` (included), and whose data has `fields` when given. */
async function readUntil(stream: ReturnType<typeof followFrames>, type: string, fields: Record<string, unknown> = {}): Promise<Frame[]> {
  const read: Frame[] = [];
  for (;;) {
    const frame = await stream.next();
    read.push(frame);
    if (frame.event === type && Object.entries(fields).every(([key, value]) => frame.data[key] === value)) return read;
  }
}

function shownFrom(frames: Frame[], start = ''): string {
  let text = start;
  for (const frame of frames) {
    if (frame.event === 'retry') text = '';
    if (frame.event === 'delta') text += String(frame.data.text);
    if (frame.event === 'reset') text = String(frame.data.message);
  }
  return text;
}

let fake: FakeOllama;
let easel: TestEasel;

beforeEach(async () => {
  fake = await createFakeOllama();
  easel = await startTestEasel({ ollamaUrl: fake.url });
});

afterEach(async () => {
  await easel.close();
  await fake.close();
});

const follow = (path: string, headers: Record<string, string> = {}) => fetch(easel.url + path, { headers });

describe('a reply is the server\'s task', () => {
  it('hanging up the request that sent it does not stop it: it is stored whole, ok', async () => {
    const id = await easel.newConversation();
    let release!: () => void;
    fake.enqueue(scriptReply('A fox, curled up in deep snow at dawn.', ASKING, { gate: new Promise<void>((resolve) => (release = resolve)) }));
    const controller = new AbortController();
    const sent = await easel.post(`/api/conversations/${id}/messages`, { text: 'a fox' }, { signal: controller.signal });
    expect(sent.status).toBe(200);
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    for (let tries = 0; tries < 100; tries++) {
      const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { busy: boolean; turns: Array<{ status: string; text: string }> };
      if (!conversation.busy) {
        expect(conversation.turns.at(-1)).toMatchObject({ status: 'ok', text: 'A fox, curled up in deep snow at dawn.' });
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error('the reply never finished');
  });

  it('Stop from another client stops it, and every follower sees it end as stopped', async () => {
    const id = await easel.newConversation();
    fake.enqueue(scriptReply('word '.repeat(200), ASKING, { delayMs: 20 }));
    const following = followFrames(await follow(`/api/conversations/${id}/events`));
    await readUntil(following, 'snapshot');
    const sent = easel.post(`/api/conversations/${id}/messages`, { text: 'a fox' });
    await readUntil(following, 'delta');
    const stopped = (await (await easel.post(`/api/conversations/${id}/stop`)).json()) as { stopped: boolean };
    expect(stopped.stopped).toBe(true);
    const end = (await readUntil(following, 'done')).at(-1);
    expect(end?.data).toMatchObject({ level: 'stopped' });
    await readSse(await sent);
    await following.close();
  });
});

describe('following a conversation', () => {
  it('starts with a snapshot; a running reply\'s text in it and the deltas after it are exactly the stored reply', async () => {
    const id = await easel.newConversation();
    const reply = 'A fox sleeps in the snow, its tail over its nose, under a pale pink dawn sky.';
    let release!: () => void;
    fake.enqueue(scriptReply(reply, ASKING, { gate: new Promise<void>((resolve) => (release = resolve)) }));
    const first = followFrames(await follow(`/api/conversations/${id}/events`));
    await readUntil(first, 'snapshot');
    const sent = easel.post(`/api/conversations/${id}/messages`, { text: 'a fox' });
    await readUntil(first, 'delta');
    // A second page opens while the reply is written.
    const late = followFrames(await follow(`/api/conversations/${id}/events`));
    const [snapshot] = await readUntil(late, 'snapshot');
    const conversation = snapshot?.data.conversation as { turns: Array<{ id: number; status: string; text: string }> };
    const running = conversation.turns.at(-1);
    expect(running?.status).toBe('running');
    expect(running?.text.length).toBeGreaterThan(0);
    expect(snapshot?.id).toMatch(/^[a-z0-9]+\.\d+$/);
    release();
    const after = await readUntil(late, 'done');
    expect(after.every((frame) => frame.event === 'title' || frame.event === 'pane' || frame.data.turnId === running?.id)).toBe(true);
    expect(shownFrom(after, running?.text)).toBe(reply);
    const stored = (await (await easel.get(`/api/conversations/${id}`)).json()) as { turns: Array<{ text: string }> };
    expect(stored.turns.at(-1)?.text).toBe(reply);
    await readSse(await sent);
    await first.close();
    await late.close();
  });

  it('a reconnect with Last-Event-ID gets exactly what it missed; an unknown id gets a fresh snapshot', async () => {
    const id = await easel.newConversation();
    fake.enqueue(scriptReply('One two three four five six seven eight.', ASKING));
    const first = followFrames(await follow(`/api/conversations/${id}/events`));
    await readUntil(first, 'snapshot');
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'count' }));
    const all = await readUntil(first, 'done');
    await first.close();
    const cut = all[2];
    const resumed = followFrames(await follow(`/api/conversations/${id}/events`, { 'last-event-id': cut?.id ?? '' }));
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a wolf' });
    const again = await readUntil(resumed, 'pane', { prompt: 'a wolf' });
    // Nothing lost, nothing repeated, no snapshot: the frames after the cut, then the new change.
    expect(again.slice(0, all.length - 3).map((frame) => frame.id)).toEqual(all.slice(3).map((frame) => frame.id));
    expect(again.some((frame) => frame.event === 'snapshot')).toBe(false);
    expect(again.at(-1)?.data).toMatchObject({ prompt: 'a wolf' });
    await resumed.close();
    const fresh = followFrames(await follow(`/api/conversations/${id}/events`, { 'last-event-id': 'gone.42' }));
    expect((await fresh.next()).event).toBe('snapshot');
    await fresh.close();
  });

  it('a prompt, settings, a title and a deletion made by one client reach the others', async () => {
    const id = await easel.newConversation();
    const following = followFrames(await follow(`/api/conversations/${id}/events`));
    const library = followFrames(await follow('/api/events'));
    await readUntil(following, 'snapshot');
    await readUntil(library, 'snapshot');
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a red fox' });
    expect((await readUntil(following, 'pane')).at(-1)?.data).toMatchObject({ prompt: 'a red fox', paneRevision: 1 });
    await easel.put(`/api/conversations/${id}/settings`, { steps: 33 });
    expect((await readUntil(following, 'pane')).at(-1)?.data).toMatchObject({ settings: { steps: 33 }, pinned: ['steps'], paneRevision: 2 });
    const renamed = await fetch(`${easel.url}/api/conversations/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title: 'Foxes' }) });
    expect(renamed.status).toBe(200);
    expect((await readUntil(following, 'title')).at(-1)?.data).toEqual({ title: 'Foxes' });
    expect((await readUntil(library, 'renamed')).at(-1)?.data).toMatchObject({ conversation: { id, title: 'Foxes' } });
    await fetch(`${easel.url}/api/conversations/${id}`, { method: 'DELETE' });
    expect((await readUntil(following, 'deleted')).at(-1)?.event).toBe('deleted');
    await expect(following.next()).rejects.toThrow('the stream ended');
    expect((await readUntil(library, 'deleted')).at(-1)?.data).toEqual({ id });
    await library.close();
  });

  it('the library hears of a conversation made elsewhere', async () => {
    const library = followFrames(await follow('/api/events'));
    await readUntil(library, 'snapshot');
    const id = await easel.newConversation();
    expect((await readUntil(library, 'created')).at(-1)?.data).toMatchObject({ conversation: { id } });
    await library.close();
  });

  it('the library followed again with Last-Event-ID gets what it missed, without a snapshot', async () => {
    const first = followFrames(await follow('/api/events'));
    const snapshot = await first.next();
    expect(snapshot.event).toBe('snapshot');
    await first.close();
    const id = await easel.newConversation();
    const resumed = followFrames(await follow('/api/events', { 'last-event-id': snapshot.id ?? '' }));
    expect(await resumed.next()).toMatchObject({ event: 'created', data: { conversation: { id } } });
    await resumed.close();
  });

  it('following an unknown conversation is 404', async () => {
    expect((await follow('/api/conversations/nope/events')).status).toBe(404);
  });
});

describe('no stale write wins', () => {
  it('a change from an older paneRevision is 409 stale with the current pane, and changes nothing', async () => {
    const id = await easel.newConversation();
    const first = (await (await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a fox', baseRevision: 0 })).json()) as { paneRevision: number };
    expect(first.paneRevision).toBe(1);
    // Tab B still shows revision 0.
    const writes: Array<[string, Promise<Response>]> = [
      ['prompt', easel.put(`/api/conversations/${id}/prompt`, { prompt: 'an old prompt', baseRevision: 0 })],
      ['settings', easel.put(`/api/conversations/${id}/settings`, { steps: 40, baseRevision: 0 })],
      ['undo', easel.post(`/api/conversations/${id}/prompt/undo`, { baseRevision: 0 })],
      ['suggestion', easel.post(`/api/conversations/${id}/suggestion`, { accept: false, baseRevision: 0 })],
      ['generation', easel.post(`/api/conversations/${id}/generations`, { prompt: 'an old prompt', baseRevision: 0 })],
      ['message', easel.post(`/api/conversations/${id}/messages`, { text: 'hello', baseRevision: 0 })],
    ];
    for (const [name, write] of writes) {
      const response = await write;
      expect(response.status, name).toBe(409);
      const body = (await response.json()) as { code: string; message: string; error: string; pane: { prompt: string; paneRevision: number } };
      expect(body.code, name).toBe('stale');
      expect(body.message, name).toMatch(/changed elsewhere/);
      expect(body.pane, name).toMatchObject({ prompt: 'a fox', paneRevision: 1 });
    }
    const after = (await (await easel.get(`/api/conversations/${id}`)).json()) as { prompt: string; paneRevision: number; settings: { steps: number }; turns: unknown[] };
    expect(after).toMatchObject({ prompt: 'a fox', paneRevision: 1, settings: { steps: 20 }, turns: [] });
    // The current revision, or none (a script), goes through.
    expect((await easel.put(`/api/conversations/${id}/settings`, { steps: 40, baseRevision: 1 })).status).toBe(200);
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a wolf' })).status).toBe(200);
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a cat', baseRevision: 'one' })).status).toBe(422);
  });
});
