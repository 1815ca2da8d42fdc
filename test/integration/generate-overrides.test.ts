// Generate's overrides through the API, at their edges: each refusal names the field it is about (`fields`, which a
// form shows beside that field) in words that say what to send instead (fix with what it cannot go with, Compare's
// promptVersions of every wrong shape, an empty version, Vary's from, count); a comparison needs no prompt in the
// pane; a variation keeps its starting image's size but for the side the request names.
import { describe, expect, it } from 'vitest';
import { createFakeLocalAi } from '../fakes/fake-localai.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { closeAfterEachTest, useEasel } from '../helpers/easel.ts';
import { replyMeta } from '../helpers/replies.ts';
import { readSse } from '../helpers/sse.ts';

interface Refused {
  error: string;
  fields?: Record<string, string>;
}

interface Conversation {
  prompt: string;
  promptVersions: Array<{ id: number; prompt: string }>;
  images: Array<{ id: string; promptVersion: number | null }>;
}

const SMALL = { steps: 4, seed: 42, width: 64, height: 64 };

describe('Generate with fake AUTOMATIC1111', () => {
  const { fake, a1111, easel } = useEasel('all tests', { a1111: { stepDelayMs: 1 } });

  const made = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img' || request.path === '/sdapi/v1/img2img').length;

  async function conversation(id: string): Promise<Conversation> {
    return (await (await easel.get(`/api/conversations/${id}`)).json()) as Conversation;
  }

  /** POST …/generations refused with 422: the whole answer, nothing sent to the image server. */
  async function refused(id: string, body: Record<string, unknown>): Promise<Refused> {
    const before = made();
    const response = await easel.post(`/api/conversations/${id}/generations`, body);
    expect(response.status, JSON.stringify(body)).toBe(422);
    expect(made()).toBe(before);
    return (await response.json()) as Refused;
  }

  /** A conversation whose prompt the model set to 'a red fox in snow' (a), then the user to 'a blue fox' (b). */
  async function twoVersions(): Promise<{ id: string; a: number; b: number }> {
    const id = await easel.newConversation();
    fake.enqueue(scriptReply('Here it is.', replyMeta('a red fox in snow', { steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a fox' }));
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a blue fox' })).status).toBe(200);
    const [a, b] = (await conversation(id)).promptVersions.map((version) => version.id);
    return { id, a: a!, b: b! };
  }

  it('fix with promptVersions, from or an API prompt is refused under fix, naming the other', async () => {
    const { id, a, b } = await twoVersions();
    const from = { imageId: 'f'.repeat(32), strength: 0.5 };
    for (const [other, body] of [
      ['promptVersions', { fix: 'any', promptVersions: [a, b], from }],
      ['from', { fix: 'any', from, prompt: 'a dog' }],
      ['prompt', { fix: 'any', prompt: 'a dog' }],
    ] as const) {
      const answer = await refused(id, body);
      expect(answer.error).toBe(`Send fix or ${other}, not both: Fix and regenerate makes the checked picture again from its revised prompt.`);
      expect(answer.fields).toEqual({ fix: answer.error });
    }
  });

  it('promptVersions of any other shape than two distinct whole ids of stored, non-blank versions is refused under promptVersions', async () => {
    const { id, a, b } = await twoVersions();
    const shape = /^promptVersions must be two prompt version ids, \[a, b\], or "previous"/;
    // A string of two characters, three ids, an id beside a word: none is a pair of ids.
    for (const promptVersions of ['ab', [a, b, b], [a, 'b']]) {
      const answer = await refused(id, { promptVersions });
      expect(answer.error, JSON.stringify(promptVersions)).toMatch(shape);
      expect(answer.fields).toEqual({ promptVersions: answer.error });
    }
    expect((await refused(id, { promptVersions: [b, b] })).error).toMatch(/^promptVersions must be two different versions of the prompt/);
    const both = await refused(id, { promptVersions: [a, b], prompt: 'a cat' });
    expect(both.error).toMatch(/^Send promptVersions or prompt, not both/);
    expect(both.fields).toEqual({ promptVersions: both.error });
    // A version of blanks only has nothing to make.
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: '   ' })).status).toBe(200);
    const blank = (await conversation(id)).promptVersions.at(-1)!;
    expect(blank.prompt).toBe('   ');
    const empty = await refused(id, { promptVersions: [a, blank.id] });
    expect(empty.error).toBe(`Prompt version ${blank.id} is empty: nothing to make.`);
    expect(empty.fields).toEqual({ promptVersions: empty.error });
  });

  it('a comparison is made from its two versions while the pane\'s own prompt is blank', async () => {
    const { id, a, b } = await twoVersions();
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: '' })).status).toBe(200);
    expect((await conversation(id)).prompt).toBe('');
    const response = await easel.post(`/api/conversations/${id}/generations`, { promptVersions: [a, b], settings: SMALL });
    expect(response.status, await response.clone().text()).toBe(200);
    await readSse(response);
    expect((await conversation(id)).images.map((image) => image.promptVersion)).toEqual([a, b]);
  });

  it('a count out of range and a from of the wrong shape or of no stored image are refused under their own field', async () => {
    const id = await easel.newConversation();
    const count = await refused(id, { prompt: 'a fox', count: 9 });
    expect(count.fields).toEqual({ count: count.error });
    const shape = await refused(id, { prompt: 'a fox', from: { imageId: 'x' } });
    expect(shape.error).toMatch(/^from must be \{ "imageId"/);
    expect(shape.fields).toEqual({ from: shape.error });
    const unknown = await refused(id, { prompt: 'a fox', from: { imageId: 'f'.repeat(32), strength: 0.5 } });
    expect(unknown.error).toMatch(/^There is no image "f{32}" to vary/);
    expect(unknown.fields).toEqual({ from: unknown.error });
  });

  it("a variation that names one side of the size keeps that side and takes the other from the pane, not from its starting image", async () => {
    const id = await easel.newConversation();
    expect((await easel.put(`/api/conversations/${id}/settings`, { width: 64, height: 64 })).status).toBe(200);
    const first = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox', settings: { steps: 4, seed: 1, width: 96, height: 128 } }));
    const imageId = first.find((event) => event.type === 'image')!.data['id'];
    const from = { imageId, strength: 0.5 };
    for (const size of [{ width: 80 }, { height: 72 }]) {
      await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox, dusk', settings: { steps: 4, ...size }, from }));
      const sent = a1111.requests.filter((request) => request.path === '/sdapi/v1/img2img').at(-1)!.body as { width: number; height: number };
      expect([sent.width, sent.height], JSON.stringify(size)).toEqual([size.width ?? 64, size.height ?? 64]);
    }
  });
});

describe('Generate with a server that cannot vary', () => {
  const { track, startEasel } = closeAfterEachTest();

  it('Vary is refused under from, in the server\'s own words', async () => {
    const localai = await track(createFakeLocalAi());
    const easel = await startEasel(['--image-backend', 'localai', '--image-url', localai.url]);
    const id = await easel.newConversation();
    const first = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a fox', settings: SMALL }));
    const imageId = first.find((event) => event.type === 'image')!.data['id'];
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a fox', from: { imageId, strength: 0.35 } });
    expect(response.status).toBe(422);
    const answer = (await response.json()) as Refused;
    expect(answer.error).toMatch(/^LocalAI cannot vary an image/);
    expect(answer.fields).toEqual({ from: answer.error });
  });
});
