// Compare (`promptVersions` in POST …/generations): two versions of the prompt made on the same seeds, each image
// its own record with its version; "This one" (POST …/compare/pick) makes the chosen prompt the current one and
// tells the model, once, with the next message.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { useEasel } from '../helpers/easel.ts';
import { readSse, readSseFrames } from '../helpers/sse.ts';
import { sendForm } from '../helpers/page-stage.ts';
import { replyMeta } from '../helpers/replies.ts';

interface Conversation {
  prompt: string;
  promptVersion: number | null;
  canUndo: boolean;
  promptVersions: Array<{ id: number; parentId: number | null; prompt: string; source: string }>;
  images: Array<{ id: string; prompt: string; seed: number | null; promptVersion: number | null; compareSide?: string }>;
}

const { fake, a1111, easel } = useEasel('each test', { a1111: { stepDelayMs: 1 } });

const txt2img = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').map((request) => request.body as Record<string, unknown>);

async function conversation(id: string): Promise<Conversation> {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as Conversation;
}

/** A conversation whose prompt the model set to 'a red fox in snow', then the user to 'a blue fox in snow at dusk'. */
async function twoVersions(): Promise<{ id: string; a: number; b: number }> {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply('Here it is.', replyMeta('a red fox in snow', { steps: 4 })));
  await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a fox' }));
  expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a blue fox in snow at dusk' })).status).toBe(200);
  const versions = (await conversation(id)).promptVersions;
  return { id, a: versions[0]!.id, b: versions[1]!.id };
}

describe('compare', () => {
  it('makes each version on the same seeds, A first, each image its own record with its version', async () => {
    const { id, a, b } = await twoVersions();
    const response = await easel.post(`/api/conversations/${id}/generations`, { promptVersions: [a, b], count: 2, settings: { steps: 4, seed: 42, width: 64, height: 64 } });
    expect(response.status, await response.clone().text()).toBe(200);
    const events = await readSse(response);
    const images = events.filter((event) => event.type === 'image').map((event) => event.data);
    const generation = events.find((event) => event.type === 'generation')!.data;
    expect(images.map((image) => [image['prompt'], image['seed'], image['promptVersion'], image['compare']])).toEqual([
      ['a red fox in snow', 42, a, { id: generation['id'], side: 'a', index: 0 }],
      ['a red fox in snow', 43, a, { id: generation['id'], side: 'a', index: 1 }],
      ['a blue fox in snow at dusk', 42, b, { id: generation['id'], side: 'b', index: 0 }],
      ['a blue fox in snow at dusk', 43, b, { id: generation['id'], side: 'b', index: 1 }],
    ]);
    // A1111 makes a batch in one job: one request per side, with the same first seed.
    expect(txt2img().map((body) => [body['prompt'], body['seed'], body['batch_size']])).toEqual([
      ['a red fox in snow', 42, 2],
      ['a blue fox in snow at dusk', 42, 2],
    ]);
    const records = (await conversation(id)).images;
    expect(records.map((image) => [image.id, image.seed, image.promptVersion])).toEqual(images.map((image) => [image['id'], image['seed'], image['promptVersion']]));
    expect(events.at(-1)).toMatchObject({ type: 'done', data: { level: 'clean' } });
  });

  it('"previous" compares the pane\'s version with the one it was changed from; the generation names both, each image keeps its side', async () => {
    const { id, a, b } = await twoVersions();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { promptVersions: 'previous', settings: { steps: 4, seed: 9, width: 64, height: 64 } }));
    const generation = events.find((event) => event.type === 'generation')!.data;
    expect(generation['compare']).toEqual({ a: { promptVersion: a, prompt: 'a red fox in snow' }, b: { promptVersion: b, prompt: 'a blue fox in snow at dusk' } });
    expect(txt2img().map((body) => body['prompt'])).toEqual(['a red fox in snow', 'a blue fox in snow at dusk']);
    // Kept with each image, so a reload and every other page draw the two columns.
    expect((await conversation(id)).images.map((image) => [image.promptVersion, image.compareSide])).toEqual([
      [a, 'a'],
      [b, 'b'],
    ]);
    // A plain image says nothing of a side.
    await readSse(await easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 4, width: 64, height: 64 } }));
    expect((await conversation(id)).images.at(-1)).not.toHaveProperty('compareSide');
  });

  it('"previous" with no earlier version is refused with 422, saying so', async () => {
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a lone fox' });
    const refused = await easel.post(`/api/conversations/${id}/generations`, { promptVersions: 'previous' });
    expect(refused.status).toBe(422);
    expect(JSON.stringify(await refused.json())).toContain('no earlier version');
    expect(txt2img()).toHaveLength(0);
  });

  it('a random seed is drawn once: both sides get it', async () => {
    const { id, a, b } = await twoVersions();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { promptVersions: [b, a], settings: { steps: 4, seed: -1, width: 64, height: 64 } }));
    const images = events.filter((event) => event.type === 'image').map((event) => event.data);
    expect(images).toHaveLength(2);
    expect(images[0]!['seed']).toBe(images[1]!['seed']);
    expect(images.map((image) => image['promptVersion'])).toEqual([b, a]);
    expect(new Set(txt2img().map((body) => body['seed'])).size).toBe(1);
  });

  it('refuses with 422 an unknown version (naming it), the same version twice, and promptVersions with prompt', async () => {
    const { id, a, b } = await twoVersions();
    const unknown = await easel.post(`/api/conversations/${id}/generations`, { promptVersions: [a, 9999] });
    expect(unknown.status).toBe(422);
    expect(JSON.stringify(await unknown.json())).toContain('9999');
    expect((await easel.post(`/api/conversations/${id}/generations`, { promptVersions: [a, a] })).status).toBe(422);
    expect((await easel.post(`/api/conversations/${id}/generations`, { promptVersions: [a] })).status).toBe(422);
    expect((await easel.post(`/api/conversations/${id}/generations`, { promptVersions: [a, b], prompt: 'a cat' })).status).toBe(422);
    // Another conversation's version is unknown here.
    const other = await twoVersions();
    expect((await easel.post(`/api/conversations/${id}/generations`, { promptVersions: [a, other.b] })).status).toBe(422);
    expect(txt2img()).toHaveLength(0);
  });

  it('"This one": the chosen prompt becomes current (one undo away) and the next message tells the model once', async () => {
    const { id, a, b } = await twoVersions();
    const picked = await easel.post(`/api/conversations/${id}/compare/pick`, { promptVersion: a, over: b });
    expect(picked.status, await picked.clone().text()).toBe(200);
    expect(await picked.json()).toMatchObject({ prompt: 'a red fox in snow', canUndo: true });
    const stored = await conversation(id);
    expect(stored.promptVersions.at(-1)).toMatchObject({ prompt: 'a red fox in snow', source: 'user', parentId: b });

    fake.enqueue(scriptReply('Red it is.', replyMeta('a red fox in snow', { steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'nice' }));
    const note =
      '[The user compared two prompts on the same seeds and chose: "a red fox in snow" over "a blue fox in snow at dusk" (the difference: the chosen one has "red"; the other had "blue", "at dusk")]';
    const last = fake.chatRequests().at(-1)?.messages?.at(-1)?.content ?? '';
    expect(last).toContain(note);
    expect(last.split('compared two prompts').length - 1).toBe(1);
    // Told once: no edit note beside it, and nothing with the message after.
    expect(last).not.toContain('edited the prompt');
    fake.enqueue(scriptReply('Sure.', replyMeta('a red fox in snow', { steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'more' }));
    expect(fake.chatRequests().at(-1)?.messages?.at(-1)?.content).not.toContain('compared two prompts');
  });

  it('picking the current version keeps the prompt as it is, and still tells the model', async () => {
    const { id, a, b } = await twoVersions();
    const before = (await conversation(id)).promptVersions.length;
    expect((await easel.post(`/api/conversations/${id}/compare/pick`, { promptVersion: b, over: a })).status).toBe(200);
    const stored = await conversation(id);
    expect(stored.promptVersions).toHaveLength(before);
    expect(stored.prompt).toBe('a blue fox in snow at dusk');
    fake.enqueue(scriptReply('Blue it is.', replyMeta('a blue fox in snow at dusk', { steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'ok' }));
    expect(fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toContain('chose: "a blue fox in snow at dusk" over "a red fox in snow"');
  });

  it('the pick refuses an unknown version, a missing one and the same one twice with 422, naming the field', async () => {
    const { id, a } = await twoVersions();
    const pick = async (body: Record<string, unknown>) => {
      const response = await easel.post(`/api/conversations/${id}/compare/pick`, body);
      expect(response.status).toBe(422);
      return (await response.json()) as { error: string; fields: Record<string, string> };
    };
    const unknown = await pick({ promptVersion: a, over: 12345 });
    expect(unknown.error).toMatch(/^over must be the id of a prompt version/);
    expect(unknown.fields.over).toContain('there is no version 12345');
    // Nothing sent: no "there is no version …" of a value never given, straight to where the versions are listed.
    const missing = await pick({});
    expect(missing.error).toMatch(/^promptVersion must be the id of a prompt version/);
    expect(missing.fields.promptVersion).toContain('of this conversation (GET the conversation');
    const same = await pick({ promptVersion: a, over: a });
    expect(same.error).toContain('must be the two different versions');
    expect(same.fields.over).toContain('same version');
  });
});

describe('the page', () => {
  it('"Compare with previous" draws two columns, the differing words marked, each side\'s images in its own column; "This one" picks', async () => {
    const { id, a } = await twoVersions();
    const page = await (await fetch(`${easel.url}/c/${id}`)).text();
    expect(page).toMatch(/<button type="submit" id="prompt-compare"[^>]*form="generate-form"[^>]*name="compare" value="previous"/);
    const frames = await readSseFrames(await sendForm(easel, 'POST', `/c/${id}/generations`, { compare: 'previous', count: '1', seed: '7', steps: '4', cfg: '7', width: '64', height: '64', negativePrompt: '', sendKey: randomUUID() }));
    const html = frames.map((frame) => frame.data).join('\n');
    expect(html).toContain('<article class="msg generated compare"');
    expect(html).toContain('a <mark>red</mark> fox in snow');
    expect(html).toContain('a <mark>blue</mark> fox in snow <mark>at dusk</mark>');
    expect(html).toMatch(/hx-target="#compare-[0-9a-f]+-a-thumbs"/);
    expect(html).toMatch(/hx-target="#compare-[0-9a-f]+-b-thumbs"/);
    expect(txt2img().map((body) => [body['prompt'], body['seed']])).toEqual([
      ['a red fox in snow', 7],
      ['a blue fox in snow at dusk', 7],
    ]);
    // After a reload the same two columns, each side's picture in its own.
    const reloaded = await (await fetch(`${easel.url}/c/${id}`)).text();
    const entry = /<article class="msg generated compare" id="compare-([^"]+)">([\s\S]*?)<\/article>/.exec(reloaded);
    expect(entry?.[2]).toContain('a <mark>red</mark> fox in snow');
    const stored = (await conversation(id)).images;
    expect(entry?.[1]).toBe(stored[0]!.id);
    expect(entry?.[2]).toMatch(new RegExp(`id="compare-${stored[0]!.id}-a-thumbs">[^]*?/images/${stored[0]!.id}\\.png[^]*?id="compare-${stored[0]!.id}-b-thumbs">[^]*?/images/${stored[1]!.id}\\.png`));
    const picked = await sendForm(easel, 'POST', `/c/${id}/compare/pick`, { promptVersion: String(a), over: String((await conversation(id)).promptVersions[1]!.id) });
    expect(picked.status).toBe(200);
    expect((await conversation(id)).prompt).toBe('a red fox in snow');
  });

  it('"Compare with previous" makes the prompt on screen, saved first, against the version it changes', async () => {
    const { id, b } = await twoVersions();
    const frames = await readSseFrames(
      await sendForm(easel, 'POST', `/c/${id}/generations`, { compare: 'previous', prompt: 'a white fox in snow at dusk', count: '1', seed: '3', steps: '4', cfg: '7', width: '64', height: '64', negativePrompt: '', sendKey: randomUUID() }),
    );
    expect(frames.map((frame) => frame.data).join('\n')).toContain('a <mark>white</mark> fox in snow at dusk');
    expect(txt2img().map((body) => body['prompt'])).toEqual(['a blue fox in snow at dusk', 'a white fox in snow at dusk']);
    const stored = await conversation(id);
    expect(stored.promptVersions.at(-1)).toMatchObject({ prompt: 'a white fox in snow at dusk', parentId: b, source: 'user' });
  });
});
