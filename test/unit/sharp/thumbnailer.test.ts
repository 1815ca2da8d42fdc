// The gallery's thumbnails on sharp: small (the long side at most 384 px, the shape kept, never enlarged), WebP,
// light (≤ 40 kB for a typical 1024² picture), made once and kept beside the images, a broken or missing PNG refused.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger, thumbnailSize } from '../../../server/core/index.ts';
import { createThumbnailer, THUMBNAIL_MAX_BYTES } from '../../../server/sharp/index.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { paintPicture } from '../../helpers/pictures.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

let counter = 0;
/** A fresh image id (32 hex), as Easel names images. */
const newId = () => (++counter).toString(16).padStart(32, 'a');

function setUp(options: { concurrency?: number } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'easel-thumbs-'));
  dirs.push(dataDir);
  const imagesDir = join(dataDir, 'images');
  mkdirSync(imagesDir);
  const logs: string[] = [];
  const thumbsDir = join(dataDir, 'thumbs');
  const thumbnailer = createThumbnailer({ imagesDir, thumbsDir, logger: createLogger({ level: 'debug', write: (line) => logs.push(line) }), ...options });
  /** Stores a PNG as Easel does (`<id>.png`) and answers its id and file name. */
  const store = (png: Uint8Array) => {
    const id = newId();
    writeFileSync(join(imagesDir, `${id}.png`), png);
    return { id, file: `${id}.png` };
  };
  const thumbPath = (id: string) => join(thumbsDir, `${id}.webp`);
  return { imagesDir, thumbsDir, thumbnailer, store, thumbPath, logs };
}

async function made(result: Awaited<ReturnType<ReturnType<typeof createThumbnailer>['ensure']>>): Promise<{ bytes: Uint8Array; width: number; height: number; format: string | undefined }> {
  if (!result.ok) throw new Error(`no thumbnail: ${result.error.code} ${result.error.message}`);
  const meta = await sharp(result.value).metadata();
  return { bytes: result.value, width: meta.width, height: meta.height, format: meta.format };
}

describe('the thumbnailer', () => {
  it('makes a WebP of a typical 1024² picture, 384 px on its long side and at most 40 kB, kept as thumbs/<id>.webp', async () => {
    const { thumbnailer, store, thumbPath } = setUp();
    const image = store(paintPicture(1024, 1024));
    const thumb = await made(await thumbnailer.ensure(image.file, image.id));
    expect(thumb.format).toBe('webp');
    expect(Buffer.from(thumb.bytes.subarray(0, 4)).toString('latin1')).toBe('RIFF');
    expect(Buffer.from(thumb.bytes.subarray(8, 12)).toString('latin1')).toBe('WEBP');
    expect([thumb.width, thumb.height]).toEqual([384, 384]);
    expect(thumb.bytes.length).toBeLessThanOrEqual(THUMBNAIL_MAX_BYTES);
    expect(THUMBNAIL_MAX_BYTES).toBe(40 * 1024);
    // Kept on disk, the same bytes that were answered.
    expect(new Uint8Array(readFileSync(thumbPath(image.id)))).toEqual(thumb.bytes);
  });

  it('keeps the shape and never enlarges: 1024×768 → 384×288, 512×768 → 256×384, 300×200 stays 300×200', async () => {
    const { thumbnailer, store } = setUp();
    for (const [width, height, expected] of [
      [1024, 768, [384, 288]],
      [512, 768, [256, 384]],
      [300, 200, [300, 200]],
    ] as const) {
      const image = store(makePng(width, height, [20, 120, 200]));
      const thumb = await made(await thumbnailer.ensure(image.file, image.id));
      expect([thumb.width, thumb.height]).toEqual(expected);
      // The page's width and height attributes say the same size.
      expect(thumbnailSize(width, height)).toEqual({ width: expected[0], height: expected[1] });
    }
  });

  it('is made once: later asks read the kept file, and asks at the same time share one making', async () => {
    const { thumbnailer, store, thumbPath, thumbsDir } = setUp();
    const image = store(paintPicture(512, 512, 2));
    const [first, second] = await Promise.all([thumbnailer.ensure(image.file, image.id), thumbnailer.ensure(image.file, image.id)]);
    expect(first).toEqual(second);
    // Only the finished file: no temporary name is left behind.
    expect(readdirSync(thumbsDir)).toEqual([`${image.id}.webp`]);
    // The file is what is served from now on: marked, the mark comes back (nothing was made again).
    const mark = new Uint8Array(Buffer.from('RIFF-kept-not-made-again'));
    writeFileSync(thumbPath(image.id), mark);
    const third = await thumbnailer.ensure(image.file, image.id);
    expect(third).toEqual({ ok: true, value: mark });
  });

  it('refuses a broken PNG (cut short, damaged, not a picture) as invalid, and keeps nothing', async () => {
    const { thumbnailer, store, thumbsDir, imagesDir, logs } = setUp();
    const png = paintPicture(256, 256, 3);
    const damaged = new Uint8Array(png);
    // Bytes in the middle of the pixel data overwritten: the zlib stream and the chunk's CRC no longer hold.
    damaged.fill(0x5a, 2000, 2400);
    for (const bytes of [png.subarray(0, Math.floor(png.length / 2)), damaged, new Uint8Array(Buffer.from('not a picture at all'))]) {
      const image = store(bytes);
      const result = await thumbnailer.ensure(image.file, image.id);
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      expect(result.error.code).toBe('invalid');
      expect(result.error.message).toContain(`The image file ${image.file} cannot be read as a picture`);
    }
    expect(existsSync(thumbsDir) ? readdirSync(thumbsDir) : []).toEqual([]);
    // The images folder holds the PNGs alone.
    expect(readdirSync(imagesDir).every((name) => name.endsWith('.png'))).toBe(true);
    expect(logs.some((line) => line.includes('a thumbnail could not be made'))).toBe(true);
  });

  it('answers not_found for a PNG that is gone, and for names that are not an image id and file', async () => {
    const { thumbnailer } = setUp();
    const id = newId();
    expect(await thumbnailer.ensure(`${id}.png`, id)).toMatchObject({ ok: false, error: { code: 'not_found', message: expect.stringContaining(`The image file ${id}.png is gone`) } });
    expect(await thumbnailer.ensure('../easel.db', id)).toMatchObject({ ok: false, error: { code: 'not_found' } });
    expect(await thumbnailer.ensure(`${id}.png`, '../../x')).toMatchObject({ ok: false, error: { code: 'not_found' } });
  });

  it('removes a thumbnail (one never made is no error)', async () => {
    const { thumbnailer, store, thumbPath } = setUp();
    const image = store(makePng(64, 64));
    expect((await thumbnailer.ensure(image.file, image.id)).ok).toBe(true);
    expect(existsSync(thumbPath(image.id))).toBe(true);
    await thumbnailer.remove(image.id);
    expect(existsSync(thumbPath(image.id))).toBe(false);
    await expect(thumbnailer.remove(newId())).resolves.toBeUndefined();
  });

  it('makes at most `concurrency` at once; one whose only caller left before its turn is not made', async () => {
    const { thumbnailer, store, thumbPath } = setUp({ concurrency: 1 });
    const busy = store(paintPicture(1024, 1024, 4));
    const waiting = store(makePng(64, 64));
    const first = thumbnailer.ensure(busy.file, busy.id);
    const leaving = new AbortController();
    const second = thumbnailer.ensure(waiting.file, waiting.id, leaving.signal);
    leaving.abort();
    expect(await second).toMatchObject({ ok: false, error: { code: 'unavailable' } });
    expect((await first).ok).toBe(true);
    await thumbnailer.settled();
    expect(existsSync(thumbPath(waiting.id))).toBe(false);
    // Asked again, it is made.
    expect((await thumbnailer.ensure(waiting.file, waiting.id)).ok).toBe(true);
  });
});
