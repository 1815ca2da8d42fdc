// A reference image through the whole app: POST /api/conversations/:id/references takes a PNG, JPEG or WebP as the
// body, stores it as a PNG image of the conversation (an empty prompt, nothing it was made with), and `from` varies
// from it like any other image: the image server's img2img gets that PNG. Another type is 415, more pixels than
// --max-image-pixels 422, and the page's route answers with the chat entry and its Vary buttons.
import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { checkPngImage } from '../../server/png/index.ts';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { decodeSolidPng, makePng } from '../fakes/png-bytes.ts';
import { closeAfterEachTest, type TestEasel } from '../helpers/easel.ts';
import { iterateSse, readSse } from '../helpers/sse.ts';

const { track, startEasel: easelWith } = closeAfterEachTest();

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

function sendReference(easel: TestEasel, conversation: string, body: Uint8Array | string, type: string): Promise<Response> {
  return easel.post(`/api/conversations/${conversation}/references`, undefined, { headers: { 'content-type': type }, body: body as BodyInit });
}

async function withA1111() {
  const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
  const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
  return { a1111, easel };
}

const solid = (width: number, height: number) => sharp({ create: { width, height, channels: 3, background: { r: 200, g: 120, b: 40 } } });

describe('POST /api/conversations/:id/references', () => {
  it('takes a PNG, a JPEG and a WebP, and stores each as a PNG image of the conversation', async () => {
    const { easel } = await withA1111();
    const id = await easel.newConversation();
    const sent = [
      { type: 'image/png', bytes: makePng(48, 32), width: 48, height: 32 },
      { type: 'image/jpeg', bytes: new Uint8Array(await solid(40, 24).jpeg().toBuffer()), width: 40, height: 24 },
      { type: 'image/webp', bytes: new Uint8Array(await solid(20, 30).webp().toBuffer()), width: 20, height: 30 },
    ];
    const ids: string[] = [];
    for (const picture of sent) {
      const response = await sendReference(easel, id, picture.bytes, picture.type);
      expect(response.status, await response.clone().text()).toBe(201);
      const body = (await response.json()) as { id: string; url: string; width: number; height: number };
      expect(body).toEqual({ id: expect.stringMatching(/^[a-f0-9]{32}$/), url: `/images/${body.id}.png`, width: picture.width, height: picture.height });
      const png = new Uint8Array(await (await easel.get(body.url)).arrayBuffer());
      expect([...png.slice(0, 8)]).toEqual(PNG_SIGNATURE);
      const checked = await checkPngImage(png);
      expect(checked.ok && { width: checked.value.width, height: checked.value.height }).toEqual({ width: picture.width, height: picture.height });
      ids.push(body.id);
    }
    // Stored as images of the conversation: no prompt, nothing it was made with, no source.
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: Record<string, unknown>[] };
    expect(conversation.images.map((image) => image['id'])).toEqual(ids);
    for (const image of conversation.images) {
      expect(image).toMatchObject({ prompt: '', negativePrompt: '', steps: null, cfg: null, seed: null, sampler: null, model: null, source: null });
    }
    // And in the gallery.
    const gallery = (await (await easel.get('/api/images')).json()) as { images: { id: string }[] };
    expect(gallery.images.map((image) => image.id).sort()).toEqual([...ids].sort());
  });

  it('refuses a text body with 415 naming what to send, and stores nothing', async () => {
    const { easel } = await withA1111();
    const id = await easel.newConversation();
    const response = await sendReference(easel, id, 'not a picture', 'text/plain');
    expect(response.status).toBe(415);
    const { error } = (await response.json()) as { error: string };
    expect(error).toContain('image/png, image/jpeg or image/webp');
    expect(error).toContain('"text/plain"');
    // A picture type whose bytes are no picture: 422.
    const garbage = await sendReference(easel, id, 'not a picture', 'image/jpeg');
    expect(garbage.status).toBe(422);
    expect(readdirSync(join(easel.dataDir, 'images'))).toEqual([]);
  });

  it('refuses a picture of more pixels than --max-image-pixels with 422 saying so', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url, '--max-image-pixels', '4096']);
    const id = await easel.newConversation();
    const response = await sendReference(easel, id, new Uint8Array(await solid(128, 64).jpeg().toBuffer()), 'image/jpeg');
    expect(response.status).toBe(422);
    const { error } = (await response.json()) as { error: string };
    expect(error).toContain('128×64 pixels');
    expect(error).toContain('--max-image-pixels');
    expect(readdirSync(join(easel.dataDir, 'images'))).toEqual([]);
  });

  it('refuses an unknown conversation with 404', async () => {
    const { easel } = await withA1111();
    const response = await sendReference(easel, 'f'.repeat(8), makePng(8, 8), 'image/png');
    expect(response.status).toBe(404);
  });

  it('is a starting point for Vary: img2img gets the stored PNG', async () => {
    const { a1111, easel } = await withA1111();
    const id = await easel.newConversation();
    const added = (await (await sendReference(easel, id, new Uint8Array(await solid(64, 96).jpeg().toBuffer()), 'image/jpeg')).json()) as { id: string; url: string };
    const stored = new Uint8Array(await (await easel.get(added.url)).arrayBuffer());
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox', settings: { seed: 7 }, from: { imageId: added.id, strength: 0.35 } });
    expect(response.status, await response.clone().text()).toBe(200);
    const image = (await readSse(response)).find((event) => event.type === 'image')?.data;
    expect(image).toMatchObject({ source: { imageId: added.id, strength: 0.35 }, width: 64, height: 96 });
    const sent = a1111.requests.filter((request) => request.path === '/sdapi/v1/img2img');
    expect(sent).toHaveLength(1);
    const body = sent[0]!.body as Record<string, unknown>;
    expect(body).toMatchObject({ prompt: 'a red fox', denoising_strength: 0.35, width: 64, height: 96 });
    expect(Buffer.from(String((body['init_images'] as string[])[0]), 'base64').equals(Buffer.from(stored))).toBe(true);
    expect(decodeSolidPng(stored).width).toBe(64);
  });
});

describe('POST /c/:id/references (the page)', () => {
  it('answers with the chat entry and its Vary buttons, or the refusal in the image error slot', async () => {
    const { easel } = await withA1111();
    const id = await easel.newConversation();
    const form = new FormData();
    form.append('file', new Blob([makePng(16, 16) as Uint8Array<ArrayBuffer>], { type: 'image/png' }), 'fox.png');
    const response = await easel.post(`/c/${id}/references`, undefined, { headers: {}, body: form });
    expect(response.status, await response.clone().text()).toBe(201);
    const page = await response.text();
    expect(page).toContain('<hx-partial hx-target="#log" hx-swap="beforeend">');
    expect(page).toContain('Reference image');
    expect(page).toMatch(/name="from" value="[a-f0-9]{32}:0.35"[^>]*>Vary \(subtle\)/);

    const text = new FormData();
    text.append('file', new Blob(['hello'], { type: 'text/plain' }), 'notes.txt');
    const refused = await easel.post(`/c/${id}/references`, undefined, { headers: {}, body: text });
    expect(refused.status).toBe(415);
    expect(await refused.text()).toMatch(/hx-target="#image-error"[\s\S]*notes\.txt is not a PNG, JPEG or WebP picture/);
  });

  it('on the empty page the picture starts the conversation; a refused one starts none', async () => {
    const { easel } = await withA1111();
    const id = randomUUID();
    const text = new FormData();
    text.append('file', new Blob(['hello'], { type: 'text/plain' }), 'notes.txt');
    text.append('startNew', '1');
    expect((await easel.post(`/c/${id}/references`, undefined, { headers: {}, body: text })).status).toBe(415);
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);

    const form = new FormData();
    form.append('file', new Blob([makePng(16, 16) as Uint8Array<ArrayBuffer>], { type: 'image/png' }), 'fox.png');
    form.append('startNew', '1');
    const response = await easel.post(`/c/${id}/references`, undefined, { headers: {}, body: form });
    expect(response.status, await response.clone().text()).toBe(201);
    // The page becomes the conversation's: its head, its live stream, the library told.
    expect(response.headers.get('hx-trigger')).toContain('easel:list');
    const page = await response.text();
    expect(page).toContain('<hx-partial hx-target="#start-new" hx-swap="delete">');
    expect(page).toMatch(/hx-target="#live" hx-swap="outerHTML"/);
    const stored = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: Array<{ prompt: string }> };
    expect(stored.images).toHaveLength(1);
  });

  it('every follower of the conversation hears of a new reference: reference_added with its id', async () => {
    const { easel } = await withA1111();
    const id = await easel.newConversation();
    const hangup = new AbortController();
    const response = await fetch(`${easel.url}/api/conversations/${id}/events`, { signal: hangup.signal });
    const events = iterateSse(response.body as ReadableStream<Uint8Array>);
    expect((await events.next()).value?.type).toBe('snapshot');
    const added = (await (await sendReference(easel, id, makePng(8, 8), 'image/png')).json()) as { id: string };
    let seen: { type: string; data: Record<string, unknown> } | undefined;
    for await (const event of events) {
      if (event.type === 'reference_added') {
        seen = event;
        break;
      }
    }
    hangup.abort();
    expect(seen?.data).toEqual({ imageId: added.id });
  });
});
