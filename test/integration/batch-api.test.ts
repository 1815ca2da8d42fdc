// Batches (`count` in POST …/generations) through the whole app against each server's fake: one request where the
// server makes a batch itself (A1111's batch_size, ComfyUI's latent batch, `n`), one per image where it cannot
// (LocalAI runs `n` with one seed); seeds seed, seed + 1, …; each image its own record, event and PNG.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseA1111Parameters, readPngText } from '../../server/png/index.ts';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../fakes/fake-comfyui.ts';
import { createFakeLocalAi } from '../fakes/fake-localai.ts';
import { createFakeOpenAiImages } from '../fakes/fake-openai-images.ts';
import { createFakeSdServer } from '../fakes/fake-sd-server.ts';
import { BATCH_BODY, startBatchToFirstImage } from '../helpers/batch.ts';
import { closeAfterEachTest, type TestEasel } from '../helpers/easel.ts';
import { find, read } from '../helpers/html.ts';
import { sendForm } from '../helpers/page-stage.ts';
import { iterateSse, readSse, readSseFrames, type SseEvent } from '../helpers/sse.ts';

const started = closeAfterEachTest();
const { track, startEasel: easelWith } = started;

interface Batch {
  events: SseEvent[];
  images: Array<Record<string, unknown>>;
  records: Array<Record<string, unknown>>;
  parameters: string[];
}

async function makeBatch(easel: TestEasel, body: Record<string, unknown>, conversation?: string): Promise<Batch> {
  const id = conversation ?? (await easel.newConversation());
  const response = await easel.post(`/api/conversations/${id}/generations`, body);
  expect(response.status, await response.clone().text()).toBe(200);
  const events = await readSse(response);
  const images = events.filter((event) => event.type === 'image').map((event) => event.data);
  const records = ((await (await easel.get(`/api/conversations/${id}`)).json()) as { images: Array<Record<string, unknown>> }).images;
  const parameters = await Promise.all(images.map(async (image) => readPngText(new Uint8Array(await (await easel.get(String(image['url']))).arrayBuffer()))['parameters'] ?? ''));
  return { events, images, records, parameters };
}

const BODY = BATCH_BODY;


describe('AUTOMATIC1111', () => {
  it('one txt2img with batch_size: seeds 42, 43, 44, each image its own record, event and parameters text', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const batch = await makeBatch(easel, BODY);
    const sent = a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.body).toMatchObject({ batch_size: 3, n_iter: 1 });
    expect(sent[0]!.body).not.toHaveProperty('save_images');
    const generation = batch.events.find((event) => event.type === 'generation')!.data;
    expect(batch.images.map((image) => [image['seed'], image['batch']])).toEqual([
      [42, { index: 0, count: 3 }],
      [43, { index: 1, count: 3 }],
      [44, { index: 2, count: 3 }],
    ]);
    // The first image is the generation's; the others have ids of their own.
    expect(batch.images[0]!['id']).toBe(generation['id']);
    expect(new Set(batch.images.map((image) => image['id'])).size).toBe(3);
    expect(batch.records.map((record) => [record['id'], record['seed']])).toEqual(batch.images.map((image) => [image['id'], image['seed']]));
    // Shown together on the page: they share their moment.
    expect(new Set(batch.records.map((record) => record['createdAt'])).size).toBe(1);
    expect(batch.parameters.map((text) => parseA1111Parameters(text).seed)).toEqual([42, 43, 44]);
    expect(batch.events.at(-1)).toMatchObject({ type: 'done', data: { level: 'clean' } });
  });

  it('a random seed: a random first seed and the ones after it, all different', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const batch = await makeBatch(easel, { ...BODY, settings: { ...BODY.settings, seed: -1 } });
    const seeds = batch.images.map((image) => image['seed'] as number);
    expect(seeds[0]).toBeGreaterThanOrEqual(0);
    expect(seeds).toEqual([seeds[0], seeds[0]! + 1, seeds[0]! + 2]);
    expect((a1111.requests.find((request) => request.path === '/sdapi/v1/txt2img')!.body as Record<string, unknown>)['seed']).toBe(seeds[0]);
  });

  it('Cancel stops the whole batch: one interrupt, image_cancelled, nothing kept', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 40 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const id = await easel.newConversation();
    const response = await easel.post(`/api/conversations/${id}/generations`, { ...BODY, settings: { ...BODY.settings, steps: 50 } });
    const events: SseEvent[] = [];
    for await (const event of iterateSse(response.body!)) {
      events.push(event);
      if (event.type === 'progress') await easel.post(`/api/conversations/${id}/images/cancel`);
    }
    expect(events.filter((event) => event.type === 'image')).toEqual([]);
    expect(events.find((event) => event.type === 'error')?.data).toMatchObject({ code: 'image_cancelled' });
    expect(a1111.interrupts).toBeGreaterThanOrEqual(1);
    expect(a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img')).toHaveLength(1);
  });

  it('a batch followed after it ended: its generation, then every image', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const id = await easel.newConversation();
    const batch = await makeBatch(easel, BODY, id);
    const generation = String(batch.events.find((event) => event.type === 'generation')!.data['id']);
    const followed = await readSse(await easel.get(`/api/conversations/${id}/generations/${generation}/events`));
    expect(followed.filter((event) => event.type === 'image').map((event) => event.data['seed'])).toEqual([42, 43, 44]);
  });

  it('a follower opened mid-batch with ?skip= the images it has gets only the rest (a reload draws the stored ones)', async () => {
    const { easel, id, generation, reading } = await startBatchToFirstImage(started);
    const stored = ((await (await easel.get(`/api/conversations/${id}`)).json()) as { images: Array<{ id: string; seed: number }> }).images;
    expect(stored.map((image) => image.seed)).toEqual([42]);
    const followed = await readSse(await easel.get(`/api/conversations/${id}/generations/${generation}/events?skip=${stored.map((image) => image.id).join(',')}`));
    expect(followed.filter((event) => event.type === 'image').map((event) => event.data['seed'])).toEqual([43, 44]);
    // Without it, a follower gets every image.
    const all = await readSse(await easel.get(`/api/conversations/${id}/generations/${generation}/events`));
    expect(all.filter((event) => event.type === 'image').map((event) => event.data['seed'])).toEqual([42, 43, 44]);    await reading;
  });

  it('count out of 1–8 is 422, and nothing is sent', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const id = await easel.newConversation();
    for (const count of [0, 9, 2.5, '3']) {
      const response = await easel.post(`/api/conversations/${id}/generations`, { ...BODY, count });
      expect(response.status, String(count)).toBe(422);
      expect(((await response.json()) as { error: string }).error).toBe('count must be a whole number from 1 to 8: how many images to make.');
    }
    expect(a1111.requests.filter((request) => request.method === 'POST')).toEqual([]);
  });
});

describe("stable-diffusion.cpp's sd-server", () => {
  it('through /sdapi/v1: batch_size, its own texts per image with seed + i', async () => {
    const sd = await track(createFakeSdServer({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', sd.url]);
    const batch = await makeBatch(easel, BODY);
    expect(sd.runs).toHaveLength(1);
    expect(sd.runs[0]).toMatchObject({ route: '/sdapi/v1/txt2img', count: 3, seed: 42 });
    expect(batch.images.map((image) => image['seed'])).toEqual([42, 43, 44]);
    expect(batch.parameters.map((text) => parseA1111Parameters(text).seed)).toEqual([42, 43, 44]);
  });

  it('through the OpenAI-style route: n, each image seed + i', async () => {
    const sd = await track(createFakeSdServer({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'openai', '--image-url', sd.url]);
    const batch = await makeBatch(easel, BODY);
    expect(sd.runs.at(-1)).toMatchObject({ route: '/v1/images/generations', count: 3, seed: 42 });
    expect(batch.images.map((image) => image['seed'])).toEqual([42, 43, 44]);
  });
});

describe('ComfyUI', () => {
  it("one prompt with EmptyLatentImage's batch_size; every saved file an image; only the first claims the seed", async () => {
    const comfy = await track(createFakeComfyUi({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'comfyui', '--image-url', comfy.url]);
    const batch = await makeBatch(easel, BODY);
    expect(comfy.workflows).toHaveLength(1);
    const graph = comfy.workflows[0] as Record<string, { class_type: string; inputs: Record<string, unknown> }>;
    expect(Object.values(graph).find((node) => node.class_type === 'EmptyLatentImage')?.inputs['batch_size']).toBe(3);
    expect(batch.images).toHaveLength(3);
    // One generator seeded once makes every item's noise (comfy/sample.py): no seed makes the second or third alone.
    expect(batch.images.map((image) => image['seed'] ?? null)).toEqual([42, null, null]);
    expect(batch.records.map((record) => record['seed'])).toEqual([42, null, null]);
    expect(batch.parameters.map((text) => parseA1111Parameters(text).seed ?? null)).toEqual([42, null, null]);
    expect(new Set(batch.images.map((image) => image['url'])).size).toBe(3);
  });
});

describe('OpenAI-style servers', () => {
  it('LocalAI: one request per image, each n 1 with its own seed (its n repeats one seed)', async () => {
    const localai = await track(createFakeLocalAi());
    const easel = await easelWith(['--image-backend', 'localai', '--image-url', localai.url]);
    const batch = await makeBatch(easel, BODY);
    const sent = localai.requests.filter((request) => request.path === '/v1/images/generations').map((request) => request.body as Record<string, unknown>);
    expect(sent.map((body) => [body['n'], body['seed']])).toEqual([
      [1, 42],
      [1, 43],
      [1, 44],
    ]);
    expect(batch.images.map((image) => image['seed'])).toEqual([42, 43, 44]);
    expect(localai.runs.map((run) => run.seedUsed)).toEqual([42, 43, 44]);
  });

  it('LocalAI: a batch whose last seed it cannot take is refused before anything is sent', async () => {
    const localai = await track(createFakeLocalAi());
    const easel = await easelWith(['--image-backend', 'localai', '--image-url', localai.url]);
    const id = await easel.newConversation();
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { ...BODY, settings: { ...BODY.settings, seed: 2_147_483_646 } }));
    expect(events.find((event) => event.type === 'error')?.data).toMatchObject({
      code: 'image_seed_out_of_range',
      message: expect.stringContaining('so a batch of 3 from seed 2147483646 (seeds 2147483646 to 2147483648) cannot be used'),
    });
    expect(localai.runs).toEqual([]);
  });

  it("OpenAI's API: one request with n 3, three images, no seed claimed", async () => {
    const openai = await track(createFakeOpenAiImages());
    const easel = await easelWith(['--image-backend', 'openai', '--image-url', openai.url]);
    const batch = await makeBatch(easel, BODY);
    const sent = openai.requests.filter((request) => request.path === '/v1/images/generations');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.body).toMatchObject({ n: 3 });
    expect(batch.images).toHaveLength(3);
    expect(batch.images.every((image) => image['seed'] === undefined)).toBe(true);
  });
});

describe("the page's Count", () => {
  it('makes a batch shown as one entry, live and after a reload', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const id = await easel.newConversation();
    const frames = await readSseFrames(await sendForm(easel, 'POST', `/c/${id}/generations`, { prompt: 'a fox', count: '3', seed: '7', steps: '4', cfg: '7', width: '64', height: '64', negativePrompt: '', sendKey: randomUUID() }));
    const html = frames.map((frame) => frame.data).join('\n');
    // The first image opens the batch's entry; the next two join its thumbnails.
    expect(html.match(/<article class="msg generated" id="batch-/g)).toHaveLength(1);
    expect(html.match(/hx-target="#batch-[0-9a-f]+-thumbs"/g)).toHaveLength(2);
    expect(html).toContain('Image 3 of 3 is ready.');
    const page = read(await (await fetch(`${easel.url}/c/${id}`)).text());
    const entries = page.querySelectorAll('#log article.generated');
    expect(entries).toHaveLength(1);
    expect(find(page, '#log article.generated').querySelectorAll('button.thumb').map((thumb) => thumb.getAttribute('data-seed'))).toEqual(['7', '8', '9']);
    expect(((a1111.requests.find((request) => request.path === '/sdapi/v1/txt2img')!.body) as Record<string, unknown>)['batch_size']).toBe(3);
  });

  it('a page reloaded mid-batch follows the batch without drawing its stored images again', async () => {
    const { easel, id, generation, reading } = await startBatchToFirstImage(started);
    // The page as drawn now shows image 1; its follower brings 2 and 3 only.
    const page = read(await (await fetch(`${easel.url}/c/${id}`)).text());
    expect(find(page, '#log article.generated').querySelectorAll('button.thumb').map((thumb) => thumb.getAttribute('data-seed'))).toEqual(['42']);
    // The follower names the pictures shown (its first), so one stored meanwhile is neither missed nor drawn twice.
    const follower = find(page, `#generation-${generation} .image-follower`).getAttribute('hx-get');
    expect(follower).toBe(`/c/${id}/images/${generation}/events?skip=${generation}`);
    const frames = await readSseFrames(await fetch(`${easel.url}${follower}`));
    const html = frames.map((frame) => frame.data).join('\n');
    expect(html).not.toContain('Image 1 of 3 is ready.');
    expect(html).toContain('Image 2 of 3 is ready.');
    expect(html).toContain('Image 3 of 3 is ready.');
    await reading;
  });

  it('a count that is not 1–8 is said in the image area', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const id = await easel.newConversation();
    const response = await sendForm(easel, 'POST', `/c/${id}/generations`, { prompt: 'a fox', count: '12', sendKey: randomUUID() });
    expect(response.status).toBe(422);
    expect(await response.text()).toContain('count must be a whole number from 1 to 8');
  });
});
