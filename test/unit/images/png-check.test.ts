import { deflateSync, inflateSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkPngImage, DEFAULT_MAX_PNG_PIXELS, expectedImageDataBytes, MAX_PNG_SIDE } from '../../../server/png/index.ts';
import { assemblePng, BROKEN_PNGS, idatOf, makeInterlacedPng, makePng, makePngBomb } from '../../fakes/png-bytes.ts';

async function codeOf(png: Uint8Array): Promise<string> {
  const result = await checkPngImage(png);
  return result.ok ? 'ok' : result.error.code;
}

describe('checkPngImage', () => {
  it('accepts good images, plain and Adam7-interlaced, and reports their header', async () => {
    expect(await checkPngImage(makePng(512, 512))).toEqual({
      ok: true,
      value: { width: 512, height: 512, bitDepth: 8, colorType: 2, interlaced: false },
    });
    expect(await checkPngImage(makeInterlacedPng(33, 17))).toEqual({
      ok: true,
      value: { width: 33, height: 17, bitDepth: 8, colorType: 2, interlaced: true },
    });
    // Sizes where some of the seven passes are empty (fewer than 5 columns or rows).
    for (const [width, height] of [[1, 1], [2, 1], [1, 5], [4, 4], [5, 3], [MAX_PNG_SIDE, 1]] as const) {
      expect(await codeOf(makeInterlacedPng(width, height)), `${width}×${height}`).toBe('ok');
    }
  });

  it('refuses IDAT cut short, naming the fault', async () => {
    const result = await checkPngImage(BROKEN_PNGS.truncatedIdat());
    expect(result).toEqual({ ok: false, error: { code: 'bad_image_data', message: expect.stringMatching(/does not decompress.*cut short/) } });
  });

  it('refuses pixel data of another size than the header promises', async () => {
    const result = await checkPngImage(BROKEN_PNGS.wrongDimensions());
    expect(result).toEqual({ ok: false, error: { code: 'bad_image_data', message: expect.stringContaining('64×64') } });
    expect(result.ok ? '' : result.error.message).toMatch(/holds 3104 bytes where its 64×64 header promises 12352/);
    // More data than promised: a 64×64 header over 64×65 rows.
    const tooMuch = assemblePng({ width: 64, height: 64 }, deflateSync(Buffer.alloc(65 * (1 + 64 * 3))));
    expect(await checkPngImage(tooMuch)).toEqual({ ok: false, error: { code: 'bad_image_data', message: expect.stringMatching(/more than the 12352 bytes/) } });
    // Interlaced data under a plain header, and the reverse.
    expect(await codeOf(BROKEN_PNGS.interlaceMismatch())).toBe('bad_image_data');
    expect(await codeOf(assemblePng({ width: 9, height: 7, interlace: 1 }, idatOf(makePng(9, 7))))).toBe('bad_image_data');
  });

  it('refuses 0 pixels and more than 16384 per side', async () => {
    expect(await checkPngImage(BROKEN_PNGS.zeroWidth())).toEqual({ ok: false, error: { code: 'bad_dimensions', message: expect.stringContaining('0×8 pixels') } });
    expect(await checkPngImage(BROKEN_PNGS.tooWide())).toEqual({
      ok: false,
      error: { code: 'bad_dimensions', message: expect.stringMatching(/20000×1 pixels, more than the 16384 per side/) },
    });
    expect(await codeOf(assemblePng({ width: 4, height: MAX_PNG_SIDE + 1 }, deflateSync(Buffer.alloc(1))))).toBe('bad_dimensions');
  });

  it('refuses header values PNG does not define, and a palette image without PLTE', async () => {
    const data = deflateSync(Buffer.alloc(4 * (1 + 4 * 3)));
    expect(await codeOf(assemblePng({ width: 4, height: 4, colorType: 5 }, data))).toBe('bad_header');
    expect(await codeOf(assemblePng({ width: 4, height: 4, colorType: 2, bitDepth: 4 }, data))).toBe('bad_header');
    const palette = deflateSync(Buffer.alloc(4 * (1 + 4)));
    expect(await codeOf(assemblePng({ width: 4, height: 4, colorType: 3 }, palette))).toBe('bad_image_data');
    expect(await codeOf(assemblePng({ width: 4, height: 4, colorType: 3 }, palette, [{ type: 'PLTE', data: new Uint8Array(3) }]))).toBe('ok');
  });

  it('keeps the chunk-level refusals (signature, CRC)', async () => {
    expect(await codeOf(Uint8Array.of(0xff, 0xd8, 0xff, 0xe0))).toBe('not_png');
    const damaged = makePng(4, 4).slice();
    damaged[45] = (damaged[45] ?? 0) ^ 0xff;
    expect(await codeOf(damaged)).toBe('bad_crc');
  });

  it('stops inflating at the first byte too many: a zlib bomb is refused without inflating it', async () => {
    // 64 MB of zeros deflates to about 64 kB; the header promises 1×1 (4 bytes).
    const bomb = assemblePng({ width: 1, height: 1 }, deflateSync(Buffer.alloc(64 * 1024 * 1024)));
    const result = await checkPngImage(bomb);
    expect(result).toEqual({ ok: false, error: { code: 'bad_image_data', message: expect.stringContaining('more than the 4 bytes') } });
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

describe('expectedImageDataBytes', () => {
  it('matches what an independent Adam7 encoder writes, for every small size', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 40 }), (width, height) => {
        const written = idatOf(makeInterlacedPng(width, height));
        const inflated = inflateSync(written);
        return expectedImageDataBytes({ width, height, bitDepth: 8, colorType: 2, interlaced: true }) === inflated.length;
      }),
    );
  });

  it('packs sub-byte samples per scanline', () => {
    // 1-bit greyscale, 9 px wide: 2 bytes of samples + the filter byte, per row.
    expect(expectedImageDataBytes({ width: 9, height: 3, bitDepth: 1, colorType: 0, interlaced: false })).toBe(9);
    // 16-bit RGBA, 2×2: 1 + 16 bytes a row.
    expect(expectedImageDataBytes({ width: 2, height: 2, bitDepth: 16, colorType: 6, interlaced: false })).toBe(34);
  });
});
