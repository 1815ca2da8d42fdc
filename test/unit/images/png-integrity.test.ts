// checkPngImage accepts every valid PNG, plain or Adam7-interlaced, and refuses one whose header, chunk order or
// image data is not what PNG defines, naming the fault.
import { deflateSync, inflateSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkPngImage, encodePng, expectedImageDataBytes, MAX_PNG_SIDE } from '../../../server/png/index.ts';
import type { PngChunk } from '../../../server/png/index.ts';
import { assemblePng, BROKEN_PNGS, idatOf, makeInterlacedPng, makePng } from '../../fakes/png-bytes.ts';
import { IEND, chunk, codeOf, header, messageOf, rgbImageData } from './png-helpers.ts';

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
});

describe('checkPngImage: the header', () => {
  it('names an undefined colour type and a bit depth the colour type does not allow', async () => {
    expect(await messageOf(encodePng([header(1, 1, { colorType: 5 }), rgbImageData(1, 1), IEND]))).toBe(
      'bad_header: The PNG header names colour type 5, which PNG does not define; the file is damaged.',
    );
    expect(await messageOf(encodePng([header(1, 1, { colorType: 2, bitDepth: 4 }), rgbImageData(1, 1), IEND]))).toBe(
      'bad_header: The PNG header pairs colour type 2 with bit depth 4, which PNG does not allow; the file is damaged.',
    );
  });

  it('refuses a compression, a filter or an interlace method PNG does not define, each on its own', async () => {
    const message = 'bad_header: The PNG header names a compression, filter or interlace method PNG does not define; the file is damaged.';
    for (const fields of [{ compression: 1 }, { filter: 1 }, { interlace: 2 }]) {
      expect(await messageOf(encodePng([header(1, 1, fields), rgbImageData(1, 1), IEND])), JSON.stringify(fields)).toBe(message);
    }
    expect(await messageOf(encodePng([header(1, 1), rgbImageData(1, 1), IEND]))).toBe('ok');
  });
});

describe('checkPngImage: the chunks around the image data', () => {
  it('refuses a PNG with no IDAT chunk', async () => {
    expect(await messageOf(encodePng([header(1, 1), IEND]))).toBe(
      'bad_image_data: The PNG has no image data (no IDAT chunk); the file is incomplete.',
    );
  });

  it('accepts image data split over consecutive IDAT chunks, and refuses another chunk between two of them', async () => {
    const data = deflateSync(Buffer.alloc(4 * (1 + 4 * 3)));
    const first: PngChunk = { type: 'IDAT', data: data.subarray(0, 5) };
    const second: PngChunk = { type: 'IDAT', data: data.subarray(5) };
    expect(await messageOf(encodePng([header(4, 4), first, second, IEND]))).toBe('ok');
    expect(await messageOf(encodePng([header(4, 4), first, chunk('tEXt', 'k\0v'), second, IEND]))).toBe(
      'bad_image_data: The PNG has other chunks between its IDAT chunks, which PNG forbids; the file is damaged.',
    );
  });

  it('refuses a palette image without PLTE before its image data, even with a PLTE after it', async () => {
    const palette = { type: 'IDAT', data: deflateSync(Buffer.alloc(2 * (1 + 2))) };
    const plte = { type: 'PLTE', data: new Uint8Array(3) };
    const message = 'bad_image_data: The PNG uses a palette but has no PLTE chunk before its image data; the file is damaged.';
    expect(await messageOf(encodePng([header(2, 2, { colorType: 3 }), palette, IEND]))).toBe(message);
    expect(await messageOf(encodePng([header(2, 2, { colorType: 3 }), palette, plte, IEND]))).toBe(message);
    expect(await messageOf(encodePng([header(2, 2, { colorType: 3 }), plte, palette, IEND]))).toBe('ok');
  });
});

describe('checkPngImage: the image data', () => {
  it('accepts Adam7 images so small that some passes are empty, whose data is exactly the passes that are not', async () => {
    // RGB8: 4 bytes a one-pixel scanline. 1×5: passes 1, 3, 5 (one row each) and 7 (two rows) = 20;
    // 5×1: passes 1, 2, 4 (one pixel) and 6 (two pixels, 7 bytes) = 19; 3×3: 4 + 4 + 7 + 2·4 + 10 = 33.
    const sizes = [[1, 1, 4], [1, 5, 20], [5, 1, 19], [3, 3, 33]] as const;
    for (const [width, height, expected] of sizes) {
      expect(expectedImageDataBytes({ width, height, bitDepth: 8, colorType: 2, interlaced: true }), `${width}×${height}`).toBe(expected);
      expect(await checkPngImage(makeInterlacedPng(width, height)), `${width}×${height}`).toEqual({
        ok: true,
        value: { width, height, bitDepth: 8, colorType: 2, interlaced: true },
      });
    }
  });

  it('calls a stream that breaks within its first 64 KiB damaged, though it already holds more than promised', async () => {
    // The inflate works in 64 KiB pieces, so the break is seen before the excess is counted: the user
    // hears the file is damaged, the truer diagnosis, rather than that it is too long.
    const stored = deflateSync(Buffer.alloc(20_000), { level: 0 });
    const broken = Buffer.concat([stored.subarray(0, -4), Buffer.of(1, 2, 3, 4)]); // wrong Adler-32
    expect(await messageOf(assemblePng({ width: 1, height: 1 }, broken))).toBe(
      "bad_image_data: The PNG's image data does not decompress (incorrect data check); the file is damaged or cut short.",
    );
  });

  it('says "interlaced" in the size it names when the data does not match an Adam7 header', async () => {
    // 30 bytes: the plain 3×3 layout under an interlaced 3×3 header, which needs 33.
    const plain = deflateSync(Buffer.alloc(3 * (1 + 3 * 3)));
    expect(await messageOf(assemblePng({ width: 3, height: 3, interlace: 1 }, plain))).toBe(
      "bad_image_data: The PNG's image data holds 30 bytes where its 3×3 interlaced header promises 33; the image is cut short or damaged.",
    );
    expect(await messageOf(assemblePng({ width: 3, height: 3 }, deflateSync(Buffer.alloc(29))))).toBe(
      "bad_image_data: The PNG's image data holds 29 bytes where its 3×3 header promises 30; the image is cut short or damaged.",
    );
    expect(await messageOf(assemblePng({ width: 3, height: 3, interlace: 1 }, deflateSync(Buffer.alloc(34))))).toBe(
      "bad_image_data: The PNG's image data holds more than the 33 bytes its 3×3 interlaced header promises; the file is damaged.",
    );
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
