// The vision model through the whole app, against the fake Ollama (a vision model that answers image-bearing
// requests by the schema) and the fake AUTOMATIC1111: Check sends the stored PNG byte for byte with the critique's
// schema and what the user asked, keeps the critique, and leaves the revised prompt as a suggestion (the user's
// prompt untouched); taking it is a `vision` version. Describe makes a picture's description the prompt. Every
// refusal comes before anything is sent to Ollama.
import { describe, expect, it, onTestFinished } from 'vitest';
import { critiqueJsonSchema, describeJsonSchema, FAMILY_STYLES } from '../../server/protocol/index.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { makePng } from '../fakes/png-bytes.ts';
import { startEaselStage, useEasel } from '../helpers/easel.ts';
import { replyMeta } from '../helpers/replies.ts';
import { makePictureOfACat } from '../helpers/vision.ts';
import { iterateSse, readSse } from '../helpers/sse.ts';

const VISION = { name: 'gemma3:4b', capabilities: ['completion', 'vision'] };
const { fake, a1111, easel } = useEasel('each test', {
  a1111: { stepDelayMs: 1 },
  flags: ['--vision-model', 'gemma3:4b'],
  ollama: { models: ['mistral:7b', VISION, { name: 'llava:7b', capabilities: ['completion', 'vision'] }] },
});

interface Conversation {
  prompt: string;
  suggestion: { prompt: string; turnId: number | null; imageId?: string } | null;
  promptVersions: Array<{ prompt: string; source: string }>;
  images: Array<{ id: string; url: string; seed: number | null }>;
  checks: Array<{ imageId: string; model: string; matches: string[]; misses: Array<{ element: string; evidence: string }>; revisedPrompt: string }>;
}

const CRITIQUE = {
  matches: ['a tabby cat', 'a stack of books'],
  misses: [{ element: 'a blue wizard hat', evidence: 'the cat wears no hat' }],
  revisedPrompt: 'a tabby cat wearing a blue wizard hat, sitting on a stack of old books, candlelight',
};

async function conversation(id: string): Promise<Conversation> {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as Conversation;
}

const pictureOfACat = () => makePictureOfACat(fake, easel);

const check = (id: string, imageId: string) => easel.post(`/api/conversations/${id}/images/${imageId}/check`, {});

describe('POST …/images/:imageId/check', () => {
  it('sends the stored PNG byte for byte, the schema and what was asked; keeps the critique; the revised prompt waits as a suggestion', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue(JSON.stringify(CRITIQUE));
    const response = await check(id, imageId);
    expect(response.status, await response.clone().text()).toBe(200);
    const events = await readSse(response);
    expect(events.map((event) => event.type)).toEqual(['critique', 'pane', 'done']);
    expect(events[0]?.data).toMatchObject({ imageId, model: 'gemma3:4b', ...CRITIQUE });

    const sent = fake.requests.filter((request) => request.path === '/api/chat').at(-1)!;
    const body = sent.body as { model: string; format: unknown; messages: Array<{ role: string; content: string }> };
    expect(body.model).toBe('gemma3:4b');
    expect(body.format).toEqual(critiqueJsonSchema);
    const stored = new Uint8Array(await (await easel.get((await conversation(id)).images[0]!.url)).arrayBuffer());
    expect(sent.images?.flat()).toEqual([stored]);
    const user = body.messages.find((message) => message.role === 'user')!.content;
    expect(user).toContain('a tabby cat in a blue wizard hat on old books');
    expect(user).toContain('"a tabby cat on a stack of books"');

    // The user's prompt is theirs: the revised one waits beside it.
    const after = await conversation(id);
    expect(after.prompt).toBe('a tabby cat on a stack of books');
    expect(after.suggestion).toEqual({ prompt: CRITIQUE.revisedPrompt, turnId: null, imageId });
    expect(after.checks).toEqual([expect.objectContaining({ imageId, model: 'gemma3:4b', ...CRITIQUE })]);
  });

  it("quotes the user's last four messages, each cut to 600 characters, leaving out one an edit replaced", async () => {
    const id = await easel.newConversation();
    const say = async (text: string, replaceLast = false) => {
      fake.enqueue(scriptReply('Noted.', replyMeta('a meadow at sunset', { steps: 4 })));
      await readSse(await easel.post(`/api/conversations/${id}/messages`, { text, ...(replaceLast ? { replaceLast } : {}) }));
    };
    const long = `four: ${'x'.repeat(700)}`;
    await say('one: a dog');
    await say('two: a barn');
    await say('three: a typo');
    await say('three: a meadow', true);
    await say(long);
    await say('five: a sunset');
    const made = await readSse(await easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 4, seed: 7, width: 64, height: 64 } }));
    const imageId = String(made.find((event) => event.type === 'image')?.data['id']);
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSse(await check(id, imageId));

    const body = fake.requests.filter((request) => request.path === '/api/chat').at(-1)!.body as { messages: Array<{ role: string; content: string }> };
    const user = body.messages.find((message) => message.role === 'user')!.content;
    for (const quoted of ['two: a barn', 'three: a meadow', long.slice(0, 600), 'five: a sunset']) expect(user).toContain(JSON.stringify(quoted));
    expect(user).not.toContain('one: a dog');
    expect(user).not.toContain('a typo');
    expect(user.indexOf('"two: a barn"')).toBeLessThan(user.indexOf('"five: a sunset"'));
  });

  it('a vision model slower than the bound is hung up on: vision_cancelled saying how long it waited and what to do, nothing kept', async () => {
    const stage = await startEaselStage({ a1111: { stepDelayMs: 1 }, flags: ['--vision-model', 'gemma3:4b'], ollama: { models: ['mistral:7b', VISION] }, timing: { visionTimeoutMs: 1000 } });
    onTestFinished(() => stage.close());
    const { id, imageId } = await makePictureOfACat(stage.fake, stage.easel);
    // A model still loading: nothing, headers included, for a minute.
    stage.fake.enqueue({ chunks: [JSON.stringify(CRITIQUE)], loadMs: 60_000 });
    const events = await readSse(await stage.easel.post(`/api/conversations/${id}/images/${imageId}/check`, {}));
    expect(events.map((event) => event.type)).toEqual(['error', 'done']);
    expect(events[0]?.data).toEqual({
      code: 'vision_cancelled',
      message: 'The vision model took longer than 1 s to answer, so Easel stopped waiting. Try again once it is loaded, or choose a smaller vision model.',
    });
    await stage.fake.waitForHangup();
    expect(((await (await stage.easel.get(`/api/conversations/${id}`)).json()) as Conversation).checks).toEqual([]);
  });

  it("a check never replaces the chat model's suggestion waiting beside the user's own prompt", async () => {
    const { id, imageId } = await pictureOfACat();
    // The user types while the chat model writes: its prompt waits as a suggestion.
    let release!: () => void;
    fake.enqueue({ ...scriptReply('A hat, then.', replyMeta('a tabby cat in a blue wizard hat', { steps: 4 })), gate: new Promise<void>((resolve) => (release = resolve)) });
    const chats = fake.requests.filter((request) => request.path === '/api/chat').length;
    const reply = easel.post(`/api/conversations/${id}/messages`, { text: 'add the hat' });
    await fake.waitForRequests(chats + 1, '/api/chat');
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'my own cat' })).status).toBe(200);
    release();
    await readSse(await reply);
    const waiting = (await conversation(id)).suggestion;
    expect(waiting).toMatchObject({ prompt: 'a tabby cat in a blue wizard hat' });

    fake.enqueue(JSON.stringify(CRITIQUE));
    // The pane does not change, so no pane event is sent.
    expect((await readSse(await check(id, imageId))).map((event) => event.type)).toEqual(['critique', 'done']);
    const after = await conversation(id);
    expect(after.prompt).toBe('my own cat');
    expect(after.suggestion).toEqual(waiting);
    expect(after.checks).toHaveLength(1);
  });

  it('taking the suggestion makes a `vision` version, one undo away, and the chat model hears of it', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSse(await check(id, imageId));
    expect((await easel.post(`/api/conversations/${id}/suggestion`, { accept: true })).status).toBe(200);
    const after = await conversation(id);
    expect(after.prompt).toBe(CRITIQUE.revisedPrompt);
    expect(after.promptVersions.at(-1)).toMatchObject({ prompt: CRITIQUE.revisedPrompt, source: 'vision' });
    fake.enqueue(scriptReply('Nice.', replyMeta(CRITIQUE.revisedPrompt, { steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'good' }));
    expect(fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toContain(CRITIQUE.revisedPrompt);
  });

  it('fix: the revised prompt becomes a `vision` version and the picture is made again on its seed and size', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSse(await check(id, imageId));
    const before = (await conversation(id)).images[0]!;
    // The request's own seed and size give way to the checked picture's.
    const response = await easel.post(`/api/conversations/${id}/generations`, { fix: imageId, settings: { steps: 4, seed: 5, width: 128, height: 128 } });
    expect(response.status, await response.clone().text()).toBe(200);
    const image = (await readSse(response)).find((event) => event.type === 'image')?.data;
    expect(image).toMatchObject({ prompt: CRITIQUE.revisedPrompt, seed: before.seed, width: 64, height: 64 });
    const after = await conversation(id);
    expect(after.prompt).toBe(CRITIQUE.revisedPrompt);
    expect(after.suggestion).toBeNull();
    expect(after.promptVersions.at(-1)).toMatchObject({ prompt: CRITIQUE.revisedPrompt, source: 'vision' });
  });

  it('fix refuses a picture never checked (409), an unknown one and fix with prompt (422)', async () => {
    const { id, imageId } = await pictureOfACat();
    const unchecked = await easel.post(`/api/conversations/${id}/generations`, { fix: imageId });
    expect(unchecked.status).toBe(409);
    expect(await unchecked.text()).toContain('press Check first');
    expect((await easel.post(`/api/conversations/${id}/generations`, { fix: 'nope' })).status).toBe(422);
    expect((await easel.post(`/api/conversations/${id}/generations`, { fix: imageId, prompt: 'a dog' })).status).toBe(422);
    expect((await conversation(id)).images).toHaveLength(1);
    // Checked, but refused for another reason: the prompt stays the user's, nothing taken.
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSse(await check(id, imageId));
    expect((await easel.post(`/api/conversations/${id}/generations`, { fix: imageId, count: 99 })).status).toBe(422);
    const after = await conversation(id);
    expect(after.prompt).toBe('a tabby cat on a stack of books');
    expect(after.suggestion?.prompt).toBe(CRITIQUE.revisedPrompt);
  });

  it('every follower of the conversation gets the critique', async () => {
    const { id, imageId } = await pictureOfACat();
    const hangup = new AbortController();
    const followed = await fetch(`${easel.url}/api/conversations/${id}/events`, { signal: hangup.signal });
    const events = iterateSse(followed.body as ReadableStream<Uint8Array>);
    expect((await events.next()).value?.type).toBe('snapshot');
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSse(await check(id, imageId));
    let seen: Record<string, unknown> | undefined;
    for await (const event of events) {
      if (event.type === 'critique') {
        seen = event.data;
        break;
      }
    }
    hangup.abort();
    expect(seen).toMatchObject({ imageId, revisedPrompt: CRITIQUE.revisedPrompt });
  });

  it('the chat and the vision model are kept loaded for --keep-alive (30m by default), not Ollama\'s 5 minutes', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSse(await check(id, imageId));
    const chats = fake.requests.filter((request) => request.path === '/api/chat').map((request) => request.body as { model: string; keep_alive?: unknown });
    expect(chats.map((body) => [body.model, body.keep_alive])).toEqual([
      ['mistral:7b', '30m'],
      ['gemma3:4b', '30m'],
    ]);
  });

  it('a check waits for the image being made: the vision model is asked only after the image server is done', async () => {
    const { id, imageId } = await pictureOfACat();
    const making = easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 150, width: 64, height: 64 } });
    await expect.poll(() => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length).toBe(2);
    fake.enqueue(JSON.stringify(CRITIQUE));
    const checking = check(id, imageId).then(readSse);
    const made = await readSse(await making);
    const imageAt = Date.now();
    expect(made.some((event) => event.type === 'image')).toBe(true);
    await checking;
    const asked = fake.requests.filter((request) => request.path === '/api/chat').at(-1)!;
    expect((asked.body as { model: string }).model).toBe('gemma3:4b');
    // Asked after the image ended (its event read just now), not while it was being made.
    expect(asked.receivedAt).toBeGreaterThanOrEqual(imageAt - 50);
  });

  it('the revised prompt is made right for the family that paints: Pony\'s quality tags first', async () => {
    const { id, imageId } = await pictureOfACat();
    expect((await easel.put(`/api/conversations/${id}/settings`, { family: 'pony' })).status).toBe(200);
    fake.enqueue(JSON.stringify(CRITIQUE));
    const critique = (await readSse(await check(id, imageId))).find((event) => event.type === 'critique')?.data;
    expect(critique?.['revisedPrompt']).toBe(`${FAMILY_STYLES.pony.qualityTags}, ${CRITIQUE.revisedPrompt}`);
    expect((await conversation(id)).suggestion?.prompt).toBe(critique?.['revisedPrompt']);
  });

  it('the fake vision model answers by the schema when nothing is scripted, as the grammar makes a real one', async () => {
    const { id, imageId } = await pictureOfACat();
    const events = await readSse(await check(id, imageId));
    expect(events.map((event) => event.type)).toEqual(['critique', 'done']);
    expect(events[0]?.data).toMatchObject({ matches: [], misses: [], revisedPrompt: 'a plain scene with one subject in the middle' });
    expect(fake.scriptErrors).toEqual([]);
  });

  it('POST …/checks/cancel ends a check in flight: vision_cancelled, nothing kept, the request to Ollama ended', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue({ chunks: [JSON.stringify(CRITIQUE)], gate: new Promise(() => {}) });
    const checking = check(id, imageId).then(readSse);
    await expect.poll(() => fake.chatRequests().length).toBe(2);
    expect(await (await easel.post(`/api/conversations/${id}/checks/cancel`, {})).json()).toEqual({ cancelled: true });
    const events = await checking;
    expect(events.map((event) => event.type)).toEqual(['error', 'done']);
    expect(events[0]?.data).toMatchObject({ code: 'vision_cancelled' });
    expect(events[1]?.data).toMatchObject({ level: 'stopped' });
    await fake.waitForHangup();
    expect((await conversation(id)).checks).toEqual([]);
  });

  it('deleting the conversation ends its check in flight: nothing is written, no storage error', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue({ chunks: [JSON.stringify(CRITIQUE)], gate: new Promise(() => {}) });
    const checking = check(id, imageId).then(readSse);
    await expect.poll(() => fake.chatRequests().length).toBe(2);
    expect((await fetch(`${easel.url}/api/conversations/${id}`, { method: 'DELETE' })).status).toBe(204);
    const events = await checking;
    expect(events[0]).toMatchObject({ type: 'error', data: { code: 'vision_cancelled' } });
    await fake.waitForHangup();
  });

  it('checks wait their turn: the vision model is asked one picture at a time', async () => {
    const { id, imageId } = await pictureOfACat();
    let release!: () => void;
    fake.enqueue({ chunks: [JSON.stringify(CRITIQUE)], gate: new Promise<void>((resolve) => (release = resolve)) }, JSON.stringify(CRITIQUE));
    const first = check(id, imageId).then(readSse);
    await expect.poll(() => fake.chatRequests().length).toBe(2);
    const second = check(id, imageId).then(readSse);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(fake.chatRequests()).toHaveLength(2);
    release();
    expect((await first).map((event) => event.type)).toContain('critique');
    expect((await second).map((event) => event.type)).toContain('critique');
    expect(fake.chatRequests()).toHaveLength(3);
  });

  it('a check waiting its turn lets an image started meanwhile go first', async () => {
    const { id, imageId } = await pictureOfACat();
    let release!: () => void;
    fake.enqueue({ chunks: [JSON.stringify(CRITIQUE)], gate: new Promise<void>((resolve) => (release = resolve)) }, JSON.stringify(CRITIQUE));
    const hangup = new AbortController();
    const followed = iterateSse((await fetch(`${easel.url}/api/conversations/${id}/events`, { signal: hangup.signal })).body as ReadableStream<Uint8Array>);
    const first = check(id, imageId).then(readSse);
    await expect.poll(() => fake.chatRequests().length).toBe(2);
    const second = check(id, imageId).then(readSse);
    // The second check has joined the line (its check_started comes just before) when an image begins.
    let started = 0;
    for await (const event of followed) if (event.type === 'check_started' && ++started === 2) break;
    hangup.abort();
    const making = easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 150, width: 64, height: 64 } });
    await expect.poll(() => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length).toBe(2);
    release();
    await first;
    const made = await readSse(await making);
    const imageAt = Date.now();
    expect(made.some((event) => event.type === 'image')).toBe(true);
    await second;
    expect(fake.requests.filter((request) => request.path === '/api/chat').at(-1)!.receivedAt).toBeGreaterThanOrEqual(imageAt - 50);
  });

  it('nothing missed: the critique is kept and no suggestion waits', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue(JSON.stringify({ matches: ['a tabby cat'], misses: [], revisedPrompt: 'a tabby cat on a stack of books' }));
    const events = await readSse(await check(id, imageId));
    expect(events.map((event) => event.type)).toEqual(['critique', 'done']);
    expect((await conversation(id)).suggestion).toBeNull();
  });

  it('an answer cut short is asked for once more with a reminder; two unreadable answers are vision_bad_response', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue({ chunks: ['{"matches": ["a tabby cat"], "misses": [{"element": "a blue'], doneReason: 'length' });
    fake.enqueue(JSON.stringify(CRITIQUE));
    const events = await readSse(await check(id, imageId));
    expect(events.map((event) => event.type)).toEqual(['critique', 'pane', 'done']);
    expect(events.at(-1)?.data).toMatchObject({ attempts: 2, level: 'reminder' });
    const retry = fake.requests.filter((request) => request.path === '/api/chat').at(-1)!.body as { format: unknown; messages: Array<{ content: string }> };
    expect(retry.format).toEqual(critiqueJsonSchema);
    expect(retry.messages.at(-1)?.content).toContain('Answer with the JSON object only');

    fake.enqueue({ chunks: ['{"matches": ['], doneReason: 'length' });
    fake.enqueue({ chunks: ['{"misses": ['], doneReason: 'length' });
    const failed = await readSse(await check(id, imageId));
    expect(failed.map((event) => event.type)).toEqual(['error', 'done']);
    expect(failed[0]?.data).toMatchObject({ code: 'vision_bad_response' });
    expect(String(failed[0]?.data['message'])).toContain('gemma3:4b');
  });

  it('refuses before asking Ollama: an unknown image (404), a reference image, a model that cannot see (422)', async () => {
    const { id, imageId } = await pictureOfACat();
    const before = fake.chatRequests().length;
    expect((await check(id, 'no-such-image')).status).toBe(404);
    const other = await easel.newConversation();
    expect((await check(other, imageId)).status).toBe(404);
    const reference = (await (await easel.post(`/api/conversations/${id}/references`, undefined, { headers: { 'content-type': 'image/png' }, body: makePng(8, 8) as BodyInit })).json()) as { id: string };
    const refusedReference = await check(id, reference.id);
    expect(refusedReference.status).toBe(422);
    expect(await refusedReference.text()).toContain('Describe');

    // mistral:7b cannot see: chosen as the vision model it is refused, saying what to pick.
    const chosen = await easel.put(`/api/conversations/${id}/settings`, { visionModel: 'mistral:7b' });
    expect(chosen.status).toBe(422);
    expect(await chosen.text()).toContain('cannot see images');
    expect((await easel.put(`/api/conversations/${id}/settings`, { visionModel: 'llava:7b' })).status).toBe(200);
    expect(fake.chatRequests().length).toBe(before);
  });

  it('the conversation\'s own vision model is used over --vision-model', async () => {
    const { id, imageId } = await pictureOfACat();
    expect((await easel.put(`/api/conversations/${id}/settings`, { visionModel: 'llava:7b' })).status).toBe(200);
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSse(await check(id, imageId));
    expect((fake.requests.filter((request) => request.path === '/api/chat').at(-1)!.body as { model: string }).model).toBe('llava:7b');
  });
});

describe('POST …/describe', () => {
  it('makes the picture\'s description the prompt: a `vision` version, one undo away, the PNG sent as it was converted', async () => {
    const { id } = await pictureOfACat();
    fake.enqueue(JSON.stringify({ prompt: 'a red fox in deep snow, morning light', subject: 'a fox in the snow' }));
    const png = makePng(24, 16);
    const response = await easel.post(`/api/conversations/${id}/describe`, undefined, { headers: { 'content-type': 'image/png' }, body: png as BodyInit });
    expect(response.status, await response.clone().text()).toBe(200);
    const events = await readSse(response);
    expect(events.map((event) => event.type)).toEqual(['description', 'pane', 'done']);
    expect(events[0]?.data).toEqual({ prompt: 'a red fox in deep snow, morning light', subject: 'a fox in the snow' });
    const sent = fake.requests.filter((request) => request.path === '/api/chat').at(-1)!;
    expect((sent.body as { format: unknown }).format).toEqual(describeJsonSchema);
    expect(sent.images?.flat()).toHaveLength(1);
    const after = await conversation(id);
    expect(after.prompt).toBe('a red fox in deep snow, morning light');
    expect(after.promptVersions.at(-1)).toMatchObject({ source: 'vision' });
    expect((await easel.post(`/api/conversations/${id}/prompt/undo`, {})).status).toBe(200);
    expect((await conversation(id)).prompt).toBe('a tabby cat on a stack of books');
  });

  it('an answer cut short is asked for again in the description\'s own shape', async () => {
    const { id } = await pictureOfACat();
    fake.enqueue({ chunks: ['{"prompt": "a red fox'], doneReason: 'length' }, JSON.stringify({ prompt: 'a red fox in the snow', subject: 'a fox' }));
    const events = await readSse(await easel.post(`/api/conversations/${id}/describe`, undefined, { headers: { 'content-type': 'image/png' }, body: makePng(8, 8) as BodyInit }));
    expect(events.at(-1)?.data).toMatchObject({ attempts: 2, level: 'reminder' });
    const retry = fake.requests.filter((request) => request.path === '/api/chat').at(-1)!.body as { messages: Array<{ content: string }> };
    expect(retry.messages.at(-1)?.content).toContain('"subject"');
    expect(retry.messages.at(-1)?.content).not.toContain('revisedPrompt');
  });

  it('refuses what is not a picture with 415 and a picture it cannot read with 422, sending nothing', async () => {
    const id = await easel.newConversation();
    const text = await easel.post(`/api/conversations/${id}/describe`, undefined, { headers: { 'content-type': 'text/plain' }, body: 'hello' });
    expect(text.status).toBe(415);
    expect(await text.text()).toContain('PNG, JPEG or WebP');
    const broken = await easel.post(`/api/conversations/${id}/describe`, undefined, { headers: { 'content-type': 'image/png' }, body: 'not a png' });
    expect(broken.status).toBe(422);
    expect(fake.chatRequests()).toHaveLength(0);
  });
});

describe('without a vision model', () => {
  const bare = useEasel('each test', { a1111: { stepDelayMs: 1 } });

  it('Check and Describe say what to pull, with 503', async () => {
    const id = await bare.easel.newConversation();
    const described = await bare.easel.post(`/api/conversations/${id}/describe`, undefined, { headers: { 'content-type': 'image/png' }, body: makePng(8, 8) as BodyInit });
    expect(described.status).toBe(503);
    expect(await described.text()).toContain('ollama pull gemma3');
    expect(bare.fake.chatRequests()).toHaveLength(0);
  });
});

describe('with --unload-llm (a small GPU)', () => {
  const small = useEasel('each test', {
    a1111: { stepDelayMs: 1 },
    flags: ['--vision-model', 'gemma3:4b', '--unload-llm'],
    ollama: { models: ['mistral:7b', VISION] },
  });

  it('whichever of the chat and the vision model is loaded is unloaded before an image', async () => {
    const id = await small.easel.newConversation();
    small.fake.enqueue(scriptReply('A cat.', replyMeta('a tabby cat', { steps: 4 })));
    await readSse(await small.easel.post(`/api/conversations/${id}/messages`, { text: 'a cat' }));
    const first = (await readSse(await small.easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 4, width: 64, height: 64 } }))).find((event) => event.type === 'image');
    expect(small.fake.unloads).toEqual(['mistral:7b']);
    small.fake.enqueue(JSON.stringify(CRITIQUE));
    await readSse(await small.easel.post(`/api/conversations/${id}/images/${String(first?.data['id'])}/check`, {}));
    const before = small.fake.unloads.length;
    await readSse(await small.easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 4, width: 64, height: 64 } }));
    // The vision model the check loaded goes too (the chat model was not loaded again since).
    expect(small.fake.unloads.slice(before)).toEqual(['gemma3:4b']);
  });
});
