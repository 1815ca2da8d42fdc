// The gallery through the JSON API: every conversation's images newest first, paged with `next`, searched by the
// prompt's words, narrowed to a conversation or a checkpoint, bad parameters refused; an image deleted with its PNG
// and its thumbnail (404 after), its conversation's followers told; thumbnails served, made once, and refused
// clearly for a PNG that is gone or broken.
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useEasel, type TestEasel } from '../helpers/easel.ts';
import { iterateSse, readSse } from '../helpers/sse.ts';

const SD15 = 'v1-5-pruned-emaonly.safetensors';
const SDXL = 'sd_xl_base_1.0.safetensors';

const { easel } = useEasel('each test', { a1111: { stepDelayMs: 1, checkpoints: [SD15, SDXL] } });

interface GalleryImage {
  id: string;
  conversationId: string;
  url: string;
  thumbnailUrl: string;
  prompt: string;
  seed: number | null;
  width: number;
  height: number;
  model: string | null;
  sampler: string | null;
  createdAt: string;
}

interface GalleryAnswer {
  images: GalleryImage[];
  next: string | null;
}

/** Makes an image in the conversation through the API (the fake AUTOMATIC1111 paints it) and answers its id. */
async function makeImage(server: TestEasel, conversationId: string, prompt: string, settings: Record<string, unknown> = {}): Promise<string> {
  const events = await readSse(await server.post(`/api/conversations/${conversationId}/generations`, { prompt, settings: { steps: 1, width: 64, height: 64, ...settings } }));
  const image = events.find((event) => event.type === 'image');
  if (!image) throw new Error(`no image: ${JSON.stringify(events)}`);
  return String(image.data.id);
}

async function gallery(query = ''): Promise<GalleryAnswer> {
  const response = await easel.get(`/api/images${query}`);
  expect(response.status).toBe(200);
  return (await response.json()) as GalleryAnswer;
}

const ids = (answer: GalleryAnswer) => answer.images.map((image) => image.id);

const del = (path: string) => fetch(easel.url + path, { method: 'DELETE' });

describe('GET /api/images', () => {
  it('lists every conversation’s images, newest first, each with its thumbnail and what it was made with', async () => {
    const fox = await easel.newConversation();
    const barn = await easel.newConversation();
    const first = await makeImage(easel, fox, 'a red fox', { seed: 11 });
    const second = await makeImage(easel, barn, 'a red barn', { seed: 22 });
    const third = await makeImage(easel, fox, 'a fox asleep', { seed: 33 });

    const answer = await gallery();
    expect(ids(answer)).toEqual([third, second, first]);
    expect(answer.next).toBeNull();
    const newest = answer.images[0];
    expect(Object.keys(newest ?? {}).sort()).toEqual(['conversationId', 'createdAt', 'height', 'id', 'model', 'prompt', 'sampler', 'scheduler', 'seed', 'thumbnailUrl', 'url', 'width']);
    expect(newest).toMatchObject({
      id: third,
      conversationId: fox,
      url: `/images/${third}.png`,
      thumbnailUrl: `/images/thumbs/${third}.webp`,
      prompt: 'a fox asleep',
      seed: 33,
      width: 64,
      height: 64,
      model: 'v1-5-pruned-emaonly',
      sampler: expect.any(String),
    });
    expect(answer.images.map((image) => image.createdAt)).toEqual([...answer.images.map((image) => image.createdAt)].sort().reverse());
  });

  it('a variation says where it came from (`source`); an image made from a prompt has none', async () => {
    const fox = await easel.newConversation();
    const first = await makeImage(easel, fox, 'a red fox');
    const events = await readSse(await easel.post(`/api/conversations/${fox}/generations`, { prompt: 'a red fox', settings: { steps: 1 }, from: { imageId: first, strength: 0.35 } }));
    const varied = String(events.find((event) => event.type === 'image')?.data.id);
    const [newest, oldest] = (await gallery()).images;
    expect(newest).toMatchObject({ id: varied, source: { imageId: first, strength: 0.35 } });
    expect(oldest?.id).toBe(first);
    expect(oldest).not.toHaveProperty('source');
  });

  it('pages with limit and next: every image once, in order, null at the end; a page’s next holds after its last image is deleted', async () => {
    const id = await easel.newConversation();
    const made: string[] = [];
    for (let index = 0; index < 5; index++) made.push(await makeImage(easel, id, `picture ${index}`));
    const all = ids(await gallery());
    expect(all).toEqual([...made].reverse());

    const first = await gallery('?limit=2');
    expect(ids(first)).toEqual(all.slice(0, 2));
    expect(first.next).toEqual(expect.any(String));
    const second = await gallery(`?limit=2&before=${encodeURIComponent(first.next ?? '')}`);
    expect(ids(second)).toEqual(all.slice(2, 4));
    const third = await gallery(`?limit=2&before=${encodeURIComponent(second.next ?? '')}`);
    expect(ids(third)).toEqual(all.slice(4));
    expect(third.next).toBeNull();

    // The cursor is a place in the order, not an image: the page after it is the same once that image is gone.
    expect((await del(`/api/images/${all[1]}`)).status).toBe(204);
    expect(ids(await gallery(`?limit=2&before=${encodeURIComponent(first.next ?? '')}`))).toEqual(all.slice(2, 4));
    // 60 by default, at most 200.
    expect((await gallery('?limit=200')).images).toHaveLength(4);
  });

  it('q finds the images whose prompt holds every word, in any case (accented letters too)', async () => {
    const id = await easel.newConversation();
    const fox = await makeImage(easel, id, 'A Red Fox in the snow');
    const barn = await makeImage(easel, id, 'red barn at dusk, oil painting');
    const fuchs = await makeImage(easel, id, 'ÄRGERLICHER Fuchs im Schnee');

    expect(ids(await gallery('?q=red'))).toEqual([barn, fox]);
    expect(ids(await gallery('?q=RED%20fox'))).toEqual([fox]);
    expect(ids(await gallery('?q=fox%20barn'))).toEqual([]);
    expect(ids(await gallery('?q=painting,%20dusk'))).toEqual([barn]);
    expect(ids(await gallery(`?q=${encodeURIComponent('ärgerlicher')}`))).toEqual([fuchs]);
    expect(ids(await gallery('?q='))).toEqual([fuchs, barn, fox]);
  });

  it('q looks for its first 16 different words: separators and repeats take none of the 16', async () => {
    const words = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen'.split(' ');
    const id = await easel.newConversation();
    const all = await makeImage(easel, id, words.join(' '));
    const one = await makeImage(easel, id, 'one');

    // A 17th word is not looked for.
    expect(ids(await gallery(`?q=${encodeURIComponent(`${words.join(' ')} zebra`)}`))).toEqual([all]);
    // A leading separator or a word said twice leaves room for the 16th: zebra is looked for, and found nowhere.
    expect(ids(await gallery(`?q=${encodeURIComponent(`, ${words.slice(0, 15).join(' ')} zebra`)}`))).toEqual([]);
    expect(ids(await gallery(`?q=${encodeURIComponent(`${'one '.repeat(16)}zebra`)}`))).toEqual([]);
    expect(ids(await gallery(`?q=${encodeURIComponent(`${'one '.repeat(16)}two`)}`))).toEqual([all]);
    expect(ids(await gallery('?q=one'))).toEqual([one, all]);
  });

  it('an empty value is the same as leaving the parameter out', async () => {
    const id = await easel.newConversation();
    const first = await makeImage(easel, id, 'a red fox');
    const second = await makeImage(easel, id, 'a red barn');
    // What an HTML form sends for its untouched fields.
    expect(ids(await gallery('?q=&conversationId=&checkpoint=&limit=&before='))).toEqual([second, first]);
  });

  it('next holds past the tenth image; a cursor changed in any way is refused', async () => {
    const id = await easel.newConversation();
    const made: string[] = [];
    for (let index = 0; index < 11; index++) made.push(await makeImage(easel, id, `picture ${index}`));
    const first = await gallery('?limit=1');
    expect(ids(first)).toEqual([made[10]]);
    const next = first.next ?? '';
    // The eleventh image's place: more than one digit in the cursor.
    expect(ids(await gallery(`?limit=1&before=${next}`))).toEqual([made[9]]);

    const inside = Buffer.from(next, 'base64url').toString('utf8');
    const changed = [`.${next}`, `${next}.`, Buffer.from(`x${inside}`).toString('base64url'), Buffer.from(`${inside}x`).toString('base64url')];
    for (const cursor of changed) {
      const response = await easel.get(`/api/images?limit=1&before=${encodeURIComponent(cursor)}`);
      expect(response.status, cursor).toBe(422);
    }
  });

  it('conversationId and checkpoint (the model the server said it used) narrow it, alone or together', async () => {
    const models = (await (await easel.get('/api/models')).json()) as { image: { checkpoints: Array<{ name: string }> } };
    const xl = models.image.checkpoints.find((checkpoint) => checkpoint.name.startsWith('sd_xl'))?.name;
    expect(xl).toBeDefined();
    const one = await easel.newConversation();
    const two = await easel.newConversation();
    const oneSd15 = await makeImage(easel, one, 'a lighthouse');
    const oneXl = await makeImage(easel, one, 'a lighthouse at night', { checkpoint: xl });
    const twoXl = await makeImage(easel, two, 'a harbour', { checkpoint: xl });

    expect(ids(await gallery(`?conversationId=${one}`))).toEqual([oneXl, oneSd15]);
    expect(ids(await gallery(`?conversationId=${two}`))).toEqual([twoXl]);
    expect(ids(await gallery('?checkpoint=sd_xl_base_1.0'))).toEqual([twoXl, oneXl]);
    expect(ids(await gallery('?checkpoint=v1-5-pruned-emaonly'))).toEqual([oneSd15]);
    expect(ids(await gallery(`?checkpoint=sd_xl_base_1.0&conversationId=${one}`))).toEqual([oneXl]);
    expect(ids(await gallery(`?checkpoint=sd_xl_base_1.0&conversationId=${one}&q=night`))).toEqual([oneXl]);
    expect(ids(await gallery('?checkpoint=no-such-model'))).toEqual([]);
    expect(ids(await gallery('?conversationId=00000000-0000-4000-8000-000000000000'))).toEqual([]);
  });

  it('refuses bad parameters with 422 and a message naming them', async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['?limit=0', 'limit', /^limit must be a whole number from 1 to 200\.$/],
      ['?limit=201', 'limit', /^limit must be a whole number from 1 to 200\.$/],
      ['?limit=ten', 'limit', /^limit must be a whole number from 1 to 200\.$/],
      ['?limit=1.5', 'limit', /^limit must be a whole number from 1 to 200\.$/],
      // Digits alone: what Number() would also read (hex, exponents, spaces around) is no limit.
      ['?limit=0x10', 'limit', /^limit must be a whole number from 1 to 200\.$/],
      ['?limit=1e2', 'limit', /^limit must be a whole number from 1 to 200\.$/],
      ['?limit=%205', 'limit', /^limit must be a whole number from 1 to 200\.$/],
      ['?limit=5%20', 'limit', /^limit must be a whole number from 1 to 200\.$/],
      ['?before=not-a-cursor', 'before', /^before must be the `next` of an earlier page, as it was given\.$/],
      [`?before=${Buffer.from('12|yesterday').toString('base64url')}`, 'before', /^before must be the `next`/],
      [`?q=${'a'.repeat(501)}`, 'q', /^q holds at most 500 characters\.$/],
      ['?checkpoint=one%0Atwo', 'checkpoint', /one line/],
    ];
    for (const [query, field, message] of cases) {
      const response = await easel.get(`/api/images${query}`);
      expect(response.status, query).toBe(422);
      const body = (await response.json()) as { error: string; fields: Record<string, string> };
      expect(body.fields[field], query).toMatch(message);
      expect(body.error, query).toContain(field);
    }
  });
});

describe('DELETE /api/images/:id', () => {
  it('removes the record, its PNG and its thumbnail: 204, then 404 everywhere', async () => {
    const id = await easel.newConversation();
    const kept = await makeImage(easel, id, 'a kept picture');
    const gone = await makeImage(easel, id, 'a picture to delete');
    const png = join(easel.dataDir, 'images', `${gone}.png`);
    const thumbnail = join(easel.dataDir, 'thumbs', `${gone}.webp`);
    expect((await easel.get(`/images/thumbs/${gone}.webp`)).status).toBe(200);
    expect(existsSync(png)).toBe(true);
    expect(existsSync(thumbnail)).toBe(true);

    const deleted = await del(`/api/images/${gone}`);
    expect(deleted.status).toBe(204);
    expect(existsSync(png)).toBe(false);
    expect(existsSync(thumbnail)).toBe(false);
    expect(ids(await gallery())).toEqual([kept]);
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: Array<{ id: string }> };
    expect(conversation.images.map((image) => image.id)).toEqual([kept]);
    expect((await easel.get(`/images/${gone}.png`)).status).toBe(404);
    expect((await easel.get(`/images/thumbs/${gone}.webp`)).status).toBe(404);

    const again = await del(`/api/images/${gone}`);
    expect(again.status).toBe(404);
    expect(((await again.json()) as { error: string }).error).toBe(`There is no image "${gone}": it was deleted, or the id is wrong.`);
    expect((await del('/api/images/not-an-id')).status).toBe(404);
  });

  it('tells the conversation’s followers: image_deleted with its id', async () => {
    const id = await easel.newConversation();
    const image = await makeImage(easel, id, 'a picture its followers see go');
    const hangup = new AbortController();
    const response = await fetch(`${easel.url}/api/conversations/${id}/events`, { signal: hangup.signal });
    expect(response.status).toBe(200);
    const events = iterateSse(response.body as ReadableStream<Uint8Array>);
    expect((await events.next()).value?.type).toBe('snapshot');
    expect((await del(`/api/images/${image}`)).status).toBe(204);
    let seen: { type: string; data: Record<string, unknown> } | undefined;
    for await (const event of events) {
      if (event.type === 'image_deleted') {
        seen = event;
        break;
      }
    }
    hangup.abort();
    expect(seen?.data).toEqual({ imageId: image });
  });
});

describe('DELETE /api/conversations/:id', () => {
  it('removes the thumbnails of its images with their PNGs', async () => {
    const id = await easel.newConversation();
    const image = await makeImage(easel, id, 'a red fox');
    const thumbnail = join(easel.dataDir, 'thumbs', `${image}.webp`);
    await expect.poll(() => existsSync(thumbnail), { timeout: 10_000 }).toBe(true);
    expect((await del(`/api/conversations/${id}`)).status).toBe(204);
    expect(existsSync(thumbnail)).toBe(false);
  });

  it('removes the thumbnails of images saved while it waited for them to finish', async () => {
    const id = await easel.newConversation();
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'eight foxes', count: 8, settings: { steps: 1, seed: 1, width: 512, height: 512 } });
    const made: string[] = [];
    let deleting: Promise<Response> | undefined;
    // Deleted at the first image: the batch's other images are still being saved, and are kept until it ends.
    for await (const event of iterateSse(response.body!)) {
      if (event.type === 'image') {
        made.push(String(event.data['id']));
        deleting ??= del(`/api/conversations/${id}`);
      }
    }
    expect((await deleting!).status).toBe(204);
    expect(made.length).toBeGreaterThan(1);
    const thumbs = join(easel.dataDir, 'thumbs');
    expect(made.filter((image) => existsSync(join(thumbs, `${image}.webp`)))).toEqual([]);
  });
});

describe('GET /images/thumbs/:id.webp', () => {
  it('serves the WebP made when the image was saved, cached as the PNGs are; made again, once, for an image that predates it', async () => {
    const id = await easel.newConversation();
    const image = await makeImage(easel, id, 'a picture with a thumbnail', { width: 768, height: 512 });
    const thumbnail = join(easel.dataDir, 'thumbs', `${image}.webp`);
    // Made after the image was saved, before anyone asked for it.
    await expect.poll(() => existsSync(thumbnail), { timeout: 10_000 }).toBe(true);

    const response = await easel.get(`/images/thumbs/${image}.webp`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('image/webp');
    expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    const bytes = Buffer.from(await response.arrayBuffer());
    expect(bytes.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(bytes.subarray(8, 12).toString('latin1')).toBe('WEBP');

    // An image from before thumbnails: made at its first request, and kept.
    rmSync(thumbnail);
    expect((await easel.get(`/images/thumbs/${image}.webp`)).status).toBe(200);
    expect(existsSync(thumbnail)).toBe(true);
  });

  it('answers 404 for a name that is no image, an unknown image or a PNG that is gone, and 422 for a PNG that is broken', async () => {
    const id = await easel.newConversation();
    const missing = await makeImage(easel, id, 'its file goes');
    const broken = await makeImage(easel, id, 'its file breaks');
    const thumbs = join(easel.dataDir, 'thumbs');
    await expect.poll(() => existsSync(join(thumbs, `${broken}.webp`)) && existsSync(join(thumbs, `${missing}.webp`)), { timeout: 10_000 }).toBe(true);
    rmSync(join(thumbs, `${missing}.webp`));
    rmSync(join(thumbs, `${broken}.webp`));
    rmSync(join(easel.dataDir, 'images', `${missing}.png`));
    writeFileSync(join(easel.dataDir, 'images', `${broken}.png`), 'not a picture any more');

    for (const name of ['x.webp', `${missing}.png`, `${'0'.repeat(32)}.webp`]) {
      const response = await easel.get(`/images/thumbs/${name}`);
      expect(response.status, name).toBe(404);
    }
    const gone = await easel.get(`/images/thumbs/${missing}.webp`);
    expect(gone.status).toBe(404);
    expect(await gone.text()).toBe(`The image file ${missing}.png is gone from ${join(easel.dataDir, 'images')}, so it has no thumbnail.`);
    const bad = await easel.get(`/images/thumbs/${broken}.webp`);
    expect(bad.status).toBe(422);
    expect(await bad.text()).toMatch(new RegExp(`^The image file ${broken}\\.png cannot be read as a picture \\(.+\\), so it has no thumbnail\\.$`));
    // Easel goes on serving.
    expect((await easel.get('/api/health')).status).toBe(200);
  });
});
