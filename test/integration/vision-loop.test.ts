// The opt-in loop of look and correct, through the whole app: with autoCheck every new picture is checked; with
// autoRefine a picture whose check found misses is made again on its seed from the revised prompt, at most that
// many times, never after the user touched the pane, and Cancel of the images ends it.
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { useEasel } from '../helpers/easel.ts';
import { replyMeta } from '../helpers/replies.ts';
import { readSse } from '../helpers/sse.ts';

const { fake, a1111, easel } = useEasel('each test', {
  a1111: { stepDelayMs: 1 },
  flags: ['--vision-model', 'gemma3:4b'],
  ollama: { models: ['mistral:7b', { name: 'gemma3:4b', capabilities: ['completion', 'vision'] }] },
});

interface Conversation {
  prompt: string;
  images: Array<{ id: string; prompt: string; seed: number | null }>;
  checks: Array<{ imageId: string }>;
  promptVersions: Array<{ source: string }>;
}

const critique = (revisedPrompt: string, misses = 1) =>
  JSON.stringify({ matches: ['a tabby cat'], misses: Array.from({ length: misses }, () => ({ element: 'a blue wizard hat', evidence: 'no hat' })), revisedPrompt });

async function conversation(id: string): Promise<Conversation> {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as Conversation;
}

const visionCalls = () => fake.requests.filter((request) => request.path === '/api/chat' && (request.body as { model?: string }).model === 'gemma3:4b').length;
const txt2img = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').map((request) => request.body as { prompt: string; seed: number });

/** A conversation with the loop's settings, where the model wrote the prompt. */
async function withLoop(autoRefine: number): Promise<string> {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply('A cat.', replyMeta('a tabby cat', { steps: 4 })));
  await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a tabby cat in a blue wizard hat' }));
  expect((await easel.put(`/api/conversations/${id}/settings`, { autoCheck: true, autoRefine, autoGenerate: false })).status).toBe(200);
  return id;
}

const generate = async (id: string) => readSse(await easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 4, seed: 77, width: 64, height: 64 } }));

/** Waits until the loop has done `checks` checks and nothing runs any more. */
async function settle(id: string, checks: number): Promise<Conversation> {
  await expect.poll(async () => (await conversation(id)).checks.length, { timeout: 10_000 }).toBe(checks);
  await new Promise((resolve) => setTimeout(resolve, 300));
  return conversation(id);
}

describe('autoCheck and autoRefine', () => {
  it('autoCheck alone: each new picture is checked, none is made again', async () => {
    const id = await withLoop(0);
    fake.enqueue(critique('a tabby cat wearing a blue wizard hat'));
    await generate(id);
    const after = await settle(id, 1);
    expect(after.images).toHaveLength(1);
    expect(after.checks[0]?.imageId).toBe(after.images[0]?.id);
    // The user's prompt stays; the revised one waits as a suggestion.
    expect(after.prompt).toBe('a tabby cat');
    expect(visionCalls()).toBe(1);
  });

  it('autoRefine 2: two corrections on the same seed, each checked, then it stops', async () => {
    const id = await withLoop(2);
    fake.enqueue(critique('a tabby cat, blue wizard hat'), critique('a tabby cat, (blue wizard hat:1.2)'), critique('a tabby cat, (blue wizard hat:1.3)'));
    await generate(id);
    const after = await settle(id, 3);
    expect(txt2img().map((body) => [body.prompt, body.seed])).toEqual([
      ['a tabby cat', 77],
      ['a tabby cat, blue wizard hat', 77],
      ['a tabby cat, (blue wizard hat:1.2)', 77],
    ]);
    expect(after.images).toHaveLength(3);
    expect(after.checks.map((check) => check.imageId)).toEqual(after.images.map((image) => image.id));
    expect(after.promptVersions.filter((version) => version.source === 'vision')).toHaveLength(2);
    expect(visionCalls()).toBe(3);
  });

  it('stops when nothing is missed', async () => {
    const id = await withLoop(3);
    fake.enqueue(critique('a tabby cat, blue wizard hat'), critique('a tabby cat, blue wizard hat', 0));
    await generate(id);
    const after = await settle(id, 2);
    expect(after.images).toHaveLength(2);
  });

  it('a prompt the user changed while the picture was checked wins: nothing is made again', async () => {
    const id = await withLoop(3);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    fake.enqueue({ chunks: [critique('a tabby cat, blue wizard hat')], gate });
    await generate(id);
    await expect.poll(visionCalls).toBe(1);
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'my own words' })).status).toBe(200);
    release();
    const after = await settle(id, 1);
    expect(after.images).toHaveLength(1);
    expect(after.prompt).toBe('my own words');
  });

  it('Cancel of the images ends a check in flight: no critique, no picture', async () => {
    const id = await withLoop(3);
    fake.enqueue({ chunks: [critique('a tabby cat, blue wizard hat')], gate: new Promise(() => {}) });
    await generate(id);
    await expect.poll(visionCalls).toBe(1);
    const cancelled = await easel.post(`/api/conversations/${id}/images/cancel`, {});
    expect(await cancelled.json()).toEqual({ cancelled: true });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = await conversation(id);
    expect(after.checks).toHaveLength(0);
    expect(after.images).toHaveLength(1);
  });
});
