// The gallery's files failing under it, through the whole server: a new image whose thumbnail cannot be made, and
// an image (or its conversation) deleted whose PNG and thumbnail cannot be removed. Each is logged (a WARN naming
// the image or its file); the image is kept, or deleted, all the same.
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { assemblePng } from '../fakes/png-bytes.ts';
import { useEasel, type TestEasel } from '../helpers/easel.ts';
import { readSse } from '../helpers/sse.ts';

/** The fields of each WARN line with this message, as logged. */
function warnings(server: TestEasel, message: string): Array<Record<string, unknown>> {
  const marker = ` WARN  ${message} `;
  return server.logs.filter((line) => line.includes(marker)).map((line) => JSON.parse(line.slice(line.indexOf(marker) + marker.length)) as Record<string, unknown>);
}

/** Generates one image through the API (in a new conversation unless one is given) and answers its id. */
async function makeImage(server: TestEasel, conversationId?: string): Promise<string> {
  conversationId ??= await server.newConversation();
  const events = await readSse(await server.post(`/api/conversations/${conversationId}/generations`, { prompt: 'a fox', settings: { steps: 1, width: 64, height: 64 } }));
  const image = events.find((event) => event.type === 'image');
  if (!image) throw new Error(`no image: ${JSON.stringify(events)}`);
  return String(image.data.id);
}

/**
 * A 64×64 PNG whose every scanline names filter type 9, which PNG does not define: Easel's check (structure, CRCs,
 * the inflated size) passes it, but libvips cannot decode it, so no thumbnail can be made of it.
 */
function undecodablePng(): Uint8Array {
  const row = 1 + 64 * 3;
  const scanlines = Buffer.alloc(row * 64, 0x80);
  for (let y = 0; y < 64; y++) scanlines[y * row] = 9;
  return assemblePng({ width: 64, height: 64 }, deflateSync(scanlines));
}

describe('a new image whose thumbnail cannot be made', () => {
  const { easel } = useEasel('each test', { a1111: { stepDelayMs: 1, image: undecodablePng() } });

  it('is kept, and the thumbnail made at its saving is logged as not made, with the image’s id and why', async () => {
    const id = await makeImage(easel);
    await expect.poll(() => warnings(easel, 'no thumbnail was made for a new image'), { timeout: 10_000 }).toEqual([{ imageId: id, reason: expect.stringMatching(/cannot be read as a picture/) }]);
    expect(((await (await easel.get('/api/images')).json()) as { images: Array<{ id: string }> }).images.map((image) => image.id)).toEqual([id]);
  });
});

describe('an image deleted whose files cannot be removed', () => {
  const { easel } = useEasel('each test', { a1111: { stepDelayMs: 1 } });

  it('is deleted (204), its PNG and thumbnail left behind each logged by name', async () => {
    const id = await makeImage(easel);
    const png = join(easel.dataDir, 'images', `${id}.png`);
    const thumbnail = join(easel.dataDir, 'thumbs', `${id}.webp`);
    await expect.poll(() => existsSync(thumbnail), { timeout: 10_000 }).toBe(true);
    // A folder in place of each file: removing a file does not remove a folder.
    for (const path of [png, thumbnail]) {
      rmSync(path);
      mkdirSync(path);
      writeFileSync(join(path, 'kept'), 'x');
    }

    expect((await fetch(`${easel.url}/api/images/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await easel.get(`/images/thumbs/${id}.webp`)).status).toBe(404);
    expect(warnings(easel, 'the file of a deleted image could not be removed')).toEqual([{ file: `${id}.png`, error: expect.anything() }]);
    expect(warnings(easel, 'the thumbnail of a deleted image could not be removed')).toEqual([{ imageId: id, error: expect.anything() }]);
  });

  it('is deleted with its conversation (204), its thumbnail left behind logged by the image\'s id', async () => {
    const conversationId = await easel.newConversation();
    const id = await makeImage(easel, conversationId);
    const thumbnail = join(easel.dataDir, 'thumbs', `${id}.webp`);
    await expect.poll(() => existsSync(thumbnail), { timeout: 10_000 }).toBe(true);
    rmSync(thumbnail);
    mkdirSync(thumbnail);
    writeFileSync(join(thumbnail, 'kept'), 'x');

    expect((await fetch(`${easel.url}/api/conversations/${conversationId}`, { method: 'DELETE' })).status).toBe(204);
    expect((await easel.get(`/api/conversations/${conversationId}`)).status).toBe(404);
    expect(warnings(easel, 'the thumbnail of a deleted image could not be removed')).toEqual([{ imageId: id, error: expect.anything() }]);
  });
});
