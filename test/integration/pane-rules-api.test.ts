// What the user typed is theirs, through the JSON API: prompt versions, the model's waiting suggestion,
// pinned settings, the image made from what the pane shows, "ready but not made", and a chat that never
// waits for the picture. The page obeys the same rules (test/browser/pane-rules.test.ts).
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { startTestEasel, useEasel } from '../helpers/easel.ts';
import { iterateSse, readSse, shownText, type SseEvent } from '../helpers/sse.ts';
import { readyMeta, replyMeta } from '../helpers/replies.ts';

// Few steps: the fake backend's images come quickly.
const meta = (prompt: string, extra: Record<string, unknown> = {}) => replyMeta(prompt, { steps: 4, ...extra });
const ready = (prompt: string, extra: Record<string, unknown> = {}) => readyMeta(prompt, { steps: 4, ...extra });

interface Pane {
  prompt: string;
  promptVersion: number | null;
  canUndo: boolean;
  canRedo: boolean;
  suggestion: { prompt: string; turnId: number } | null;
  settings: Record<string, unknown>;
  pinned: string[];
  settingSuggestions: Record<string, unknown>;
}

interface Conversation extends Pane {
  busy: boolean;
  promptVersions: Array<{ id: number; parentId: number | null; prompt: string; source: string; turnId: number | null }>;
  turns: Array<{ id: number; role: string; status: string; imageNotMade?: { reason: string; message: string } }>;
  images: Array<{ prompt: string; steps: number | null; negativePrompt: string; promptVersion: number | null }>;
}

const { fake, a1111, easel } = useEasel('each test', { a1111: { stepDelayMs: 20 } });

const txt2img = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img');

async function send(id: string, text: string): Promise<SseEvent[]> {
  const response = await easel.post(`/api/conversations/${id}/messages`, { text });
  expect(response.status).toBe(200);
  return readSse(response);
}

async function conversation(id: string): Promise<Conversation> {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as Conversation;
}

async function pane(response: Response, status = 200): Promise<Pane> {
  expect(response.status).toBe(status);
  return (await response.json()) as Pane;
}

/** A conversation whose prompt the model set to `prompt` (and whose images take few steps). */
async function startWith(prompt: string): Promise<string> {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply('Here it is.', meta(prompt)));
  await send(id, 'hello');
  return id;
}

describe('the prompt', () => {
  it('an edit the model saw is superseded by its next prompt, and the automatic image is made from that pane', async () => {
    const id = await startWith('a red fox');
    await pane(await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a red fox, woodblock' }));
    fake.enqueue(scriptReply('Woodblock it is.', ready('a red fox, woodblock print, ukiyo-e')));
    const events = await send(id, 'make it a woodblock print and go ahead');

    // The model heard of the edit, and its prompt (asked to keep the edit) replaced it.
    expect(fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toContain('[The user edited the prompt to: "a red fox, woodblock"]');
    const paneEvent = events.find((event) => event.type === 'pane');
    expect(paneEvent?.data).toMatchObject({ prompt: 'a red fox, woodblock print, ukiyo-e', suggestion: null, canUndo: true });
    expect(events.map((event) => event.type)).toContain('image');
    expect(txt2img().at(-1)?.body).toMatchObject({ prompt: 'a red fox, woodblock print, ukiyo-e' });

    const stored = await conversation(id);
    expect(stored.promptVersions.map(({ prompt, source }) => ({ prompt, source }))).toEqual([
      { prompt: 'a red fox', source: 'model' },
      { prompt: 'a red fox, woodblock', source: 'user' },
      { prompt: 'a red fox, woodblock print, ukiyo-e', source: 'model' },
    ]);
    expect(stored.images[0]).toMatchObject({ prompt: 'a red fox, woodblock print, ukiyo-e', promptVersion: stored.promptVersion });
  });

  it('an edit made while the reply streams wins: the model prompt waits as a suggestion, and no image is made until answered', async () => {
    const id = await startWith('an owl');
    let release!: () => void;
    fake.enqueue({ ...scriptReply('Moonlit, then.', ready('an owl, moonlit')), gate: new Promise<void>((resolve) => (release = resolve)) });
    const reply = easel.post(`/api/conversations/${id}/messages`, { text: 'moonlit, and go' });
    await fake.waitForRequests(2, '/api/chat');
    await pane(await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'my own owl' }));
    release();
    const events = await readSse(await reply);

    const paneEvent = events.find((event) => event.type === 'pane')?.data as unknown as Pane;
    expect(paneEvent).toMatchObject({ prompt: 'my own owl', suggestion: { prompt: 'an owl, moonlit' } });
    expect(events.find((event) => event.type === 'image_not_made')?.data).toMatchObject({ reason: 'suggestion_pending', message: expect.stringMatching(/Use suggestion/) });
    expect(events.map((event) => event.type)).not.toContain('generation');
    expect(txt2img()).toHaveLength(0);
    const stored = await conversation(id);
    expect(stored).toMatchObject({ prompt: 'my own owl', suggestion: { prompt: 'an owl, moonlit', turnId: stored.turns.at(-1)!.id } });
    expect(stored.turns.at(-1)?.imageNotMade?.reason).toBe('suggestion_pending');

    // A bad answer changes nothing; "Keep mine" lets it go; answering twice is a conflict.
    expect((await easel.post(`/api/conversations/${id}/suggestion`, { accept: 'yes' })).status).toBe(422);
    expect(await pane(await easel.post(`/api/conversations/${id}/suggestion`, { accept: false }))).toMatchObject({ prompt: 'my own owl', suggestion: null });
    expect((await easel.post(`/api/conversations/${id}/suggestion`, { accept: false })).status).toBe(409);
  });

  it('an edit made while the FIRST reply streams (no version yet) wins too: the model prompt waits as a suggestion', async () => {
    const id = await easel.newConversation();
    expect((await conversation(id)).promptVersion).toBeNull();
    let release!: () => void;
    fake.enqueue({ ...scriptReply('A fox, then.', ready('a red fox')), gate: new Promise<void>((resolve) => (release = resolve)) });
    const reply = easel.post(`/api/conversations/${id}/messages`, { text: 'a fox, and go' });
    await fake.waitForRequests(1, '/api/chat');
    await pane(await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'my own fox' }));
    release();
    const events = await readSse(await reply);

    expect(events.find((event) => event.type === 'pane')?.data).toMatchObject({ prompt: 'my own fox', suggestion: { prompt: 'a red fox' } });
    expect(events.find((event) => event.type === 'image_not_made')?.data).toMatchObject({ reason: 'suggestion_pending' });
    expect(txt2img()).toHaveLength(0);
    const stored = await conversation(id);
    expect(stored).toMatchObject({ prompt: 'my own fox', suggestion: { prompt: 'a red fox' } });
    expect(stored.promptVersions.map(({ prompt, source }) => ({ prompt, source }))).toEqual([{ prompt: 'my own fox', source: 'user' }]);
  });

  it('"Use suggestion" takes the model prompt as a new version, one undo away from the edit', async () => {
    const id = await startWith('an owl');
    let release!: () => void;
    fake.enqueue({ ...scriptReply('Moonlit, then.', meta('an owl, moonlit')), gate: new Promise<void>((resolve) => (release = resolve)) });
    const reply = easel.post(`/api/conversations/${id}/messages`, { text: 'moonlit' });
    await fake.waitForRequests(2, '/api/chat');
    await pane(await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'my own owl' }));
    release();
    await readSse(await reply);

    expect(await pane(await easel.post(`/api/conversations/${id}/suggestion`, { accept: true }))).toMatchObject({ prompt: 'an owl, moonlit', suggestion: null, canUndo: true });
    expect(await pane(await easel.post(`/api/conversations/${id}/prompt/undo`))).toMatchObject({ prompt: 'my own owl' });
  });

  it('undo and redo step through the versions; the model hears of the prompt undo brought back', async () => {
    const id = await startWith('a cat');
    await pane(await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a cat, oil painting' }));
    expect(await pane(await easel.post(`/api/conversations/${id}/prompt/undo`))).toMatchObject({ prompt: 'a cat', canUndo: false, canRedo: true });
    expect((await easel.post(`/api/conversations/${id}/prompt/undo`)).status).toBe(409);
    expect(await pane(await easel.post(`/api/conversations/${id}/prompt/redo`))).toMatchObject({ prompt: 'a cat, oil painting', canUndo: true, canRedo: false });
    expect((await easel.post(`/api/conversations/${id}/prompt/redo`)).status).toBe(409);
    await pane(await easel.post(`/api/conversations/${id}/prompt/undo`));

    fake.enqueue(scriptReply('Plain cat.', meta('a cat')));
    await send(id, 'keep it plain');
    expect(fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toContain('[The user edited the prompt to: "a cat"]');
  });
});

describe('pinned settings', () => {
  it('a value set by hand is kept against the model; its different value waits beside it; the image uses the pinned one', async () => {
    const id = await startWith('a lighthouse');
    const set = await easel.put(`/api/conversations/${id}/settings`, { steps: 6, negativePrompt: 'blurry' });
    expect(set.status).toBe(200);
    fake.enqueue(scriptReply('Stormy.', ready('a lighthouse in a storm', { steps: 3, cfg: 9, negative_prompt: 'lowres' })));
    const events = await send(id, 'stormy, go');

    expect(events.find((event) => event.type === 'pane')?.data).toMatchObject({
      settings: { steps: 6, cfg: 9, negativePrompt: 'blurry' },
      pinned: ['steps', 'negativePrompt'],
      settingSuggestions: { steps: 3, negativePrompt: 'lowres' },
    });
    expect(txt2img().at(-1)?.body).toMatchObject({ steps: 6, cfg_scale: 9, negative_prompt: 'blurry' });

    // Taking a suggestion is setting the value by hand: it stays pinned, its suggestion is gone.
    expect((await easel.put(`/api/conversations/${id}/settings`, { steps: 3 })).status).toBe(200);
    // Unpinning lets the field follow the model: it takes the waiting value at once.
    expect((await easel.put(`/api/conversations/${id}/settings`, { unpin: ['negativePrompt'] })).status).toBe(200);
    expect(await conversation(id)).toMatchObject({ settings: { steps: 3, negativePrompt: 'lowres' }, pinned: ['steps'], settingSuggestions: {} });
    expect((await easel.put(`/api/conversations/${id}/settings`, { unpin: ['width'] })).status).toBe(422);
  });
});

describe('ready but not made', () => {
  it('with "Generate automatically" off the reply says so, kept with its turn', async () => {
    const id = await startWith('a boat');
    expect((await easel.put(`/api/conversations/${id}/settings`, { autoGenerate: false })).status).toBe(200);
    fake.enqueue(scriptReply('Ready.', ready('a boat at dawn')));
    const events = await send(id, 'go');
    expect(events.find((event) => event.type === 'image_not_made')?.data).toMatchObject({ reason: 'auto_off', message: expect.stringMatching(/press Generate/) });
    expect(txt2img()).toHaveLength(0);
    expect((await conversation(id)).turns.at(-1)?.imageNotMade?.reason).toBe('auto_off');
  });

  it('with no image backend the reply says how to configure one', async () => {
    const bare = await startTestEasel({ ollamaUrl: fake.url });
    try {
      const id = await bare.newConversation();
      fake.enqueue(scriptReply('Ready.', ready('a boat at dawn')));
      const events = await readSse(await bare.post(`/api/conversations/${id}/messages`, { text: 'go' }));
      expect(events.find((event) => event.type === 'image_not_made')?.data).toMatchObject({ reason: 'no_backend', message: expect.stringMatching(/--image-url/) });
    } finally {
      await bare.close();
    }
  });
});

describe('the chat never waits for the picture', () => {
  it('after the reply is done, the next message is sent and answered while its image is still being made', async () => {
    const id = await startWith('a forest');
    fake.enqueue(scriptReply('Making it.', ready('a misty forest', { steps: 60 })));
    const first = await easel.post(`/api/conversations/${id}/messages`, { text: 'go' });
    const stream = iterateSse(first.body!);
    const seen: string[] = [];
    // Read up to `done` by hand: leaving a for-await loop would close the stream.
    for (let step = await stream.next(); !step.done; step = await stream.next()) {
      seen.push(step.value.type);
      if (step.value.type === 'done') break;
    }
    expect(seen).not.toContain('image');
    expect((await conversation(id)).busy).toBe(false);

    fake.enqueue(scriptReply('Birds, sure.', meta('a misty forest, birds')));
    const second = await easel.post(`/api/conversations/${id}/messages`, { text: 'add birds later' });
    expect(second.status).toBe(200);
    expect(shownText(await readSse(second))).toBe('Birds, sure.');
    // 60 steps of 20 ms: the image is still being made.
    expect((await conversation(id)).images).toEqual([]);
    // The first image was still being made while the second reply was answered; it then ends on its own stream.
    const rest: string[] = [];
    for await (const event of stream) rest.push(event.type);
    expect(rest[0]).toBe('generation');
    expect(rest.at(-1)).toBe('image');
    const stored = await conversation(id);
    expect(stored.images.map((image) => image.prompt)).toEqual(['a misty forest']);
  });

  it('an automatic image queued behind a running one says so', async () => {
    const id = await startWith('a desert');
    const generating = await easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 40 } });
    expect(generating.status).toBe(200);
    fake.enqueue(scriptReply('Dunes.', ready('a desert, dunes')));
    const events = await send(id, 'dunes, go');
    expect(events.find((event) => event.type === 'generation')?.data).toMatchObject({ queued: true });
    await readSse(generating);
  });
});
