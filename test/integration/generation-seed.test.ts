// Seed 0 is a seed like any other: only −1 asks for a random one (through the API, fake A1111).
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { useEasel } from '../helpers/easel.ts';
import { readSse, type SseEvent } from '../helpers/sse.ts';

const { fake: ollama, a1111, easel } = useEasel('all tests', { a1111: { stepDelayMs: 2 } });

const lastTxt2ImgSeed = () => (a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img').at(-1)?.body as { seed?: unknown }).seed;

function imageOf(events: SseEvent[]): Record<string, unknown> {
  const image = events.find((event) => event.type === 'image');
  if (!image) throw new Error(`no image: ${JSON.stringify(events.filter((e) => e.type === 'error'))}`);
  return image.data;
}

async function storedImageSeeds(id: string): Promise<unknown[]> {
  const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: Array<{ seed: unknown }> };
  return conversation.images.map((image) => image.seed);
}

describe('seed 0', () => {
  it('Generate with seed 0 in the settings sends seed 0 and keeps it', async () => {
    const id = await easel.newConversation();
    expect((await easel.put(`/api/conversations/${id}/settings`, { seed: 0, steps: 2 })).status).toBe(200);
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox' }));
    expect(lastTxt2ImgSeed()).toBe(0);
    expect(imageOf(events).seed).toBe(0);
    expect(await storedImageSeeds(id)).toEqual([0]);
  });

  it('a reply whose metadata says seed 0 makes its image with seed 0', async () => {
    ollama.enqueue(scriptReply('Making it.', { prompt: 'a red fox', generate_image: true, steps: 2, cfg: 7, seed: 0 }));
    const id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a fox, seed 0' }));
    expect(lastTxt2ImgSeed()).toBe(0);
    expect(imageOf(events).seed).toBe(0);
  });

  it('seed −1 is turned into a concrete seed before the backend sees it', async () => {
    const id = await easel.newConversation();
    expect((await easel.put(`/api/conversations/${id}/settings`, { seed: -1, steps: 2 })).status).toBe(200);
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox' }));
    const seed = lastTxt2ImgSeed();
    expect(seed).toEqual(expect.any(Number));
    expect(seed).not.toBe(-1);
    expect(imageOf(events).seed).toBe(seed);
  });
});
