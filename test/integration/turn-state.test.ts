// What a turn leaves behind, seen only through the HTTP API: the requests Ollama receives after a
// failure, a Stop or a Retry, what is stored, and that a conversation is never left locked.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { useEasel } from '../helpers/easel.ts';
import { iterateSse, readSse, shownText, type SseEvent } from '../helpers/sse.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const READY = { prompt: 'a tabby cat', generate_image: false, steps: 20, cfg: 7, seed: -1 };

const { fake, easel } = useEasel('each test');

async function send(id: string, text: string): Promise<SseEvent[]> {
  const response = await easel.post(`/api/conversations/${id}/messages`, { text });
  expect(response.status).toBe(200);
  return readSse(response);
}

function of(events: SseEvent[], type: string) {
  return events.filter((event) => event.type === type).map((event) => event.data);
}

type Message = { role: string; content: string };

function request(index: number): Message[] {
  const found = fake.chatRequests().at(index);
  if (!found) throw new Error(`no chat request #${index}; got ${fake.chatRequests().length}`);
  return (found.messages ?? []).map(({ role, content }) => ({ role, content }));
}

interface StoredTurn {
  role: string;
  text: string;
  status: string;
  error?: { code: string; message: string };
}

async function stored(id: string): Promise<{ busy: boolean; turns: StoredTurn[] }> {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as { busy: boolean; turns: StoredTurn[] };
}

/** Sends a message whose reply streams until the test stops it; returns every event of that stream. */
async function sendAndStop(id: string, text: string): Promise<SseEvent[]> {
  fake.enqueue({ chunks: ['Half a ', 'thought, and', ' then more'], gate: new Promise<void>(() => {}) });
  const response = await easel.post(`/api/conversations/${id}/messages`, { text });
  const events: SseEvent[] = [];
  for await (const event of iterateSse(response.body!)) {
    events.push(event);
    if (event.type === 'delta' && events.filter((e) => e.type === 'delta').length === 1) {
      expect(await (await easel.post(`/api/conversations/${id}/stop`, {})).json()).toEqual({ stopped: true });
    }
  }
  return events;
}

describe('the recovery ladder', () => {
  it('each reminder request is built on the turn context: one reminder, only the latest failed reply', async () => {
    // The first reply is cut by the length limit, so its text is not kept: two full reminders follow.
    fake.enqueue({ chunks: ['First try, no JSON.'], doneReason: 'length' }, 'Second try, still none.', scriptReply('Third time lucky.', ASKING));
    const id = await easel.newConversation();
    const events = await send(id, 'a cat');
    expect(of(events, 'done')[0]).toMatchObject({ attempts: 3, level: 'reminder' });

    const first = request(0);
    const second = request(1);
    const third = request(2);
    const reminder = second.at(-2)!;
    expect(reminder.role).toBe('system');
    // The same shape both times: the context, the failed reply, the reminder, the question again.
    expect(second).toEqual([...first, { role: 'assistant', content: 'First try, no JSON.' }, reminder, first.at(-1)]);
    expect(third).toEqual([...first, { role: 'assistant', content: 'Second try, still none.' }, reminder, first.at(-1)]);
    expect(third.filter((m) => m.role === 'system')).toHaveLength(2);
    expect(third.some((m) => m.content.includes('First try'))).toBe(false);
  });
});

describe('an unanswered message is kept for the next one', () => {
  it('after an error, a different next message reaches the model together with the unanswered one', async () => {
    const id = await easel.newConversation();
    fake.setModels([]);
    expect(of(await send(id, 'a cat on a roof'), 'error')[0]).toMatchObject({ code: 'model_not_found' });
    fake.setModels(['mistral:7b']);
    fake.enqueue(scriptReply('A cat on a roof at night.', READY));
    await send(id, 'at night');

    const messages = request(-1);
    expect(messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(messages[1]!.content).toBe('a cat on a roof\n\nat night');
  });

  it('after a Stop, a different next message reaches the model together with the unanswered one', async () => {
    const id = await easel.newConversation();
    const stopped = await sendAndStop(id, 'a long story about a cat');
    expect(of(stopped, 'done')[0]).toMatchObject({ level: 'stopped' });
    fake.enqueue(scriptReply('A short one then.', READY));
    await send(id, 'shorter please');

    const messages = request(-1);
    expect(messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(messages[1]!.content).toBe('a long story about a cat\n\nshorter please');
  });

  it('a Retry after a failed turn keeps the note about the prompt edit', async () => {
    fake.enqueue(scriptReply('A tabby cat.', READY));
    const id = await easel.newConversation();
    await send(id, 'a cat');
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a black cat under the moon' })).status).toBe(200);
    fake.setModels([]);
    expect(of(await send(id, 'add stars'), 'error')).toHaveLength(1);
    // The failed request already carried the note …
    expect(request(-1).at(-1)!.content).toBe('[The user edited the prompt to: "a black cat under the moon"]\n\nadd stars');

    fake.setModels(['mistral:7b']);
    fake.enqueue(scriptReply('Stars added.', READY));
    await send(id, 'add stars');
    // … and so does the Retry, once, with the message once.
    const messages = request(-1);
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(messages.at(-1)!.content).toBe('[The user edited the prompt to: "a black cat under the moon"]\n\nadd stars');
  });
});

describe('what is stored', () => {
  it('a stopped turn keeps the text that was shown', async () => {
    const id = await easel.newConversation();
    const events = await sendAndStop(id, 'a long story');
    const shown = shownText(events);
    expect(shown).toBe('Half a');
    const { turns } = await stored(id);
    expect(turns.map((t) => [t.role, t.status, t.text])).toEqual([
      ['user', 'ok', 'a long story'],
      ['assistant', 'stopped', shown],
    ]);
  });

  it("a failed turn keeps its error: code and message, as the stream said", async () => {
    fake.enqueue({ chunks: ['Hello', ' there', ' friend'], errorAfter: { chunks: 2, message: 'llama runner process has terminated' } });
    const id = await easel.newConversation();
    const events = await send(id, 'hi');
    const error = of(events, 'error')[0]!;
    expect(error.code).toBe('ollama_stream_failed');
    const { turns } = await stored(id);
    expect(turns[1]).toMatchObject({ role: 'assistant', status: 'error', text: 'Hello there', error: { code: error.code, message: error.message } });
  });
});

describe('the conversation is never left locked', () => {
  it('a write that fails at the end of a turn (as on a full disk) ends the stream and frees the conversation', async () => {
    const id = await easel.newConversation();
    // A second connection to the same database makes storing the reply fail, as a full disk would.
    const db = new Database(join(easel.dataDir, 'easel.db'));
    try {
      // The message and the running reply are stored as the turn starts; storing its end fails.
      db.exec(`CREATE TRIGGER fail_reply BEFORE UPDATE OF status ON turns WHEN OLD.status = 'running'
               BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`);
      fake.enqueue(scriptReply('This reply cannot be stored.', READY));
      const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'a cat' });
      expect(response.status).toBe(200);
      const events = await readSse(response);
      expect(events.slice(-2).map((e) => e.type)).toEqual(['error', 'done']);
      expect(of(events, 'error')[0]).toMatchObject({ code: 'storage_failed' });
      expect(String(of(events, 'error')[0]?.message)).toContain('your message is kept');
      await expect.poll(async () => (await stored(id)).busy).toBe(false);
      // What the user typed is kept; the reply keeps what was saved of it as it streamed, interrupted.
      const turns = (await stored(id)).turns;
      expect(turns.map((t) => [t.role, t.status])).toEqual([
        ['user', 'ok'],
        ['assistant', 'interrupted'],
      ]);
      expect(turns[0]?.text).toBe('a cat');
      expect('This reply cannot be stored.'.startsWith(turns[1]!.text)).toBe(true);
    } finally {
      db.exec('DROP TRIGGER IF EXISTS fail_reply');
      db.close();
    }

    fake.enqueue(scriptReply('Now it is stored.', READY));
    const again = await easel.post(`/api/conversations/${id}/messages`, { text: 'a cat, again' });
    expect(again.status).toBe(200);
    expect(shownText(await readSse(again))).toBe('Now it is stored.');
  });
});
