// The size an image may have: at least one pixel each way, at most 16384 per side and --max-image-pixels in all,
// read from the header before any image data is inflated, and no inflating past what the header promises.
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { checkPngImage, DEFAULT_MAX_PNG_PIXELS, encodePng, MAX_PNG_SIDE } from '../../../server/png/index.ts';
import { assemblePng, BROKEN_PNGS, makePng, makePngBomb } from '../../fakes/png-bytes.ts';
import { IEND, codeOf, header, messageOf, rgbImageData } from './png-helpers.ts';

describe('checkPngImage: the size limits', () => {
  it('refuses 0 pixels and more than 16384 per side', async () => {
    expect(await checkPngImage(BROKEN_PNGS.zeroWidth())).toEqual({ ok: false, error: { code: 'bad_dimensions', message: expect.stringContaining('0×8 pixels') } });
    expect(await checkPngImage(BROKEN_PNGS.tooWide())).toEqual({
      ok: false,
      error: { code: 'bad_dimensions', message: expect.stringMatching(/20000×1 pixels, more than the 16384 per side/) },
    });
    expect(await codeOf(assemblePng({ width: 4, height: MAX_PNG_SIDE + 1 }, deflateSync(Buffer.alloc(1))))).toBe('bad_dimensions');
  });

  it('stops inflating at the first byte too many: a zlib bomb is refused without inflating it', async () => {
    // 64 MB of zeros deflates to about 64 kB; the header promises 1×1 (4 bytes).
    const bomb = assemblePng({ width: 1, height: 1 }, deflateSync(Buffer.alloc(64 * 1024 * 1024)));
    const result = await checkPngImage(bomb);
    expect(result).toEqual({ ok: false, error: { code: 'bad_image_data', message: expect.stringContaining('more than the 4 bytes') } });
  });

  it('refuses 0 pixels in either direction', async () => {
    // An empty deflate stream is exactly what a 0-row image holds, so only the header check can refuse it.
    const empty = { type: 'IDAT', data: deflateSync(Buffer.alloc(0)) };
    expect(await messageOf(encodePng([header(8, 0), empty, IEND]))).toBe(
      'bad_dimensions: The PNG says it is 8×0 pixels; an image needs at least one pixel each way.',
    );
    expect(await messageOf(encodePng([header(0, 8), empty, IEND]))).toBe(
      'bad_dimensions: The PNG says it is 0×8 pixels; an image needs at least one pixel each way.',
    );
  });

  it('accepts 16384 pixels on either side and refuses 16385', async () => {
    expect(await messageOf(makePng(1, MAX_PNG_SIDE))).toBe('ok');
    expect(await messageOf(makePng(MAX_PNG_SIDE, 1))).toBe('ok');
    expect(await messageOf(encodePng([header(1, MAX_PNG_SIDE + 1), rgbImageData(1, MAX_PNG_SIDE + 1), IEND]))).toBe(
      'bad_dimensions: The PNG says it is 1×16385 pixels, more than the 16384 per side Easel accepts.',
    );
    expect(await messageOf(encodePng([header(MAX_PNG_SIDE + 1, 1), rgbImageData(MAX_PNG_SIDE + 1, 1), IEND]))).toBe(
      'bad_dimensions: The PNG says it is 16385×1 pixels, more than the 16384 per side Easel accepts.',
    );
  });
});

describe('checkPngImage: the pixel cap (--max-image-pixels)', () => {
  const BOMB_MESSAGE = 'The PNG says it is 16384×16384 pixels (268 million), more than the 67 million (8192×8192) Easel accepts; raise --max-image-pixels to allow it.';

  it('refuses a 2 MB, 16384×16384 16-bit RGBA bomb from its header, naming the size, in far less than inflating takes', async () => {
    const bomb = makePngBomb();
    expect(bomb.byteLength).toBeLessThan(3 * 1024 * 1024);
    const started = performance.now();
    expect(await checkPngImage(bomb)).toEqual({ ok: false, error: { code: 'bad_dimensions', message: BOMB_MESSAGE } });
    // Inflating its 2 GiB takes seconds; reading IHDR takes nothing.
    expect(performance.now() - started).toBeLessThan(200);
  });

  it('reads the pixel count before any IDAT: a bomb whose image data is no zlib at all gets the same message', async () => {
    expect(await checkPngImage(makePngBomb({ idat: 'garbage' }))).toEqual({ ok: false, error: { code: 'bad_dimensions', message: BOMB_MESSAGE } });
    // Under the cap the same garbage is found out by inflating: the cap came first above.
    expect(await checkPngImage(makePngBomb({ width: 64, height: 64, idat: 'garbage' }))).toEqual({
      ok: false,
      error: { code: 'bad_image_data', message: expect.stringContaining('does not decompress') },
    });
  });

  it('accepts exactly 8192×8192 by default and refuses one row more, with every digit where rounding would hide it', async () => {
    expect(DEFAULT_MAX_PNG_PIXELS).toBe(8192 * 8192);
    // 1-bit greyscale: 8 MB of rows that deflate to 120 kB.
    expect(await checkPngImage(makePngBomb({ width: 8192, height: 8192, bitDepth: 1, colorType: 0 }))).toMatchObject({ ok: true, value: { width: 8192, height: 8192 } });
    expect(await checkPngImage(makePngBomb({ width: 8192, height: 8193, bitDepth: 1, colorType: 0, idat: 'garbage' }))).toEqual({
      ok: false,
      error: {
        code: 'bad_dimensions',
        message: 'The PNG says it is 8192×8193 pixels (67117056), more than the 67108864 (8192×8192) Easel accepts; raise --max-image-pixels to allow it.',
      },
    });
  });

  it('maxPixels lowers or raises the cap; the per-side cap stays whatever it is', async () => {
    expect(await codeOf(makePng(100, 100))).toBe('ok');
    expect(await checkPngImage(makePng(100, 100), { maxPixels: 9_999 })).toEqual({
      ok: false,
      error: { code: 'bad_dimensions', message: 'The PNG says it is 100×100 pixels (10000), more than the 9999 Easel accepts; raise --max-image-pixels to allow it.' },
    });
    expect(await checkPngImage(makePng(100, 100), { maxPixels: 10_000 })).toMatchObject({ ok: true });
    // Raised to 16384×16384, the garbage bomb passes the header and is refused only by inflating.
    expect(await checkPngImage(makePngBomb({ idat: 'garbage' }), { maxPixels: MAX_PNG_SIDE * MAX_PNG_SIDE })).toEqual({
      ok: false,
      error: { code: 'bad_image_data', message: expect.stringContaining('does not decompress') },
    });
    expect(await checkPngImage(BROKEN_PNGS.tooWide(), { maxPixels: 2 ** 40 })).toEqual({ ok: false, error: { code: 'bad_dimensions', message: expect.stringContaining('more than the 16384 per side') } });
  });
});
