// How a PNG is read chunk by chunk: what arrived instead of a PNG, and each kind of damage (cut short, a bad
// length, type, CRC or first chunk) refused in words that say where.
import { describe, expect, it } from 'vitest';
import { describeImageBytes, encodePng, isPngError, PNG_SIGNATURE, PngError, readPngChunks, readPngSize, readPngText } from '../../../server/png/index.ts';
import type { PngChunk } from '../../../server/png/index.ts';
import { decodeSolidPng, makePng } from '../../fakes/png-bytes.ts';
import { IEND, bytes, chunk, chunkTypes, hasValidCrcs, header, pngWith, rgbImageData } from './png-helpers.ts';

describe('makePng (test fixture)', () => {
  it('writes a PNG that decodes back to its size and colour', () => {
    const png = makePng(7, 5, [1, 2, 3]);
    expect(decodeSolidPng(png)).toEqual({ width: 7, height: 5, rgb: [1, 2, 3] });
    expect(hasValidCrcs(png)).toBe(true);
  });
});

describe('describeImageBytes', () => {
  it('names a PNG as PNG, even the bare 8-byte signature, but not a 7-byte prefix or a signature with one byte wrong', () => {
    expect(describeImageBytes(makePng(1, 1))).toBe('PNG');
    expect(describeImageBytes(PNG_SIGNATURE)).toBe('PNG');
    expect(describeImageBytes(PNG_SIGNATURE.subarray(0, 7))).toBe('unknown data');
    const wrongLastByte = PNG_SIGNATURE.slice();
    wrongLastByte[7] = 0;
    expect(describeImageBytes(wrongLastByte)).toBe('unknown data');
  });

  it('names JPEG bytes (ff d8) as JPEG, and ff alone or d8 alone as unknown data', () => {
    expect(describeImageBytes(Uint8Array.of(0xff, 0xd8, 0xff, 0xe0))).toBe('JPEG');
    expect(describeImageBytes(Uint8Array.of(0xff))).toBe('unknown data');
    expect(describeImageBytes(Uint8Array.of(0xff, 0x00, 0xff, 0xe0))).toBe('unknown data');
    expect(describeImageBytes(Uint8Array.of(0x00, 0xd8, 0xff, 0xe0))).toBe('unknown data');
  });

  it('names RIFF….WEBP as WebP, but not another RIFF file or WEBP without RIFF', () => {
    expect(describeImageBytes(bytes('RIFF\x24\0\0\0WEBPVP8 '))).toBe('WebP');
    expect(describeImageBytes(bytes('RIFF\x24\0\0\0WAVEfmt '))).toBe('unknown data');
    expect(describeImageBytes(bytes('RIFX\x24\0\0\0WEBPVP8 '))).toBe('unknown data');
  });

  it('names GIF87a and GIF89a as GIF, and GIF8 anywhere but the start as unknown data', () => {
    expect(describeImageBytes(bytes('GIF89a\x01\0\x01\0'))).toBe('GIF');
    expect(describeImageBytes(bytes('GIF87a'))).toBe('GIF');
    expect(describeImageBytes(bytes('xxxxxxxxGIF8'))).toBe('unknown data');
  });

  it('names HTML or JSON as text, after any leading whitespace, but not a < or { later in other data', () => {
    expect(describeImageBytes(bytes('<!doctype html>'))).toBe('text (HTML or JSON)');
    expect(describeImageBytes(bytes('{"error":"x"}'))).toBe('text (HTML or JSON)');
    expect(describeImageBytes(bytes('[1, 2]'))).toBe('text (HTML or JSON)');
    expect(describeImageBytes(bytes(' <html>'))).toBe('text (HTML or JSON)');
    expect(describeImageBytes(bytes('\r\n\t  {"a":1}'))).toBe('text (HTML or JSON)');
    expect(describeImageBytes(bytes('oops<html>'))).toBe('unknown data');
    expect(describeImageBytes(bytes('Error: {"a":1}'))).toBe('unknown data');
  });

  it('names 0 bytes as nothing, and anything else unrecognised as unknown data', () => {
    expect(describeImageBytes(new Uint8Array(0))).toBe('nothing (0 bytes)');
    expect(describeImageBytes(bytes('hello'))).toBe('unknown data');
    expect(describeImageBytes(Uint8Array.of(0))).toBe('unknown data');
  });
});

describe('readPngChunks', () => {
  it('splits a valid PNG into IHDR, IDAT, IEND', () => {
    expect(chunkTypes(makePng(4, 4))).toEqual(['IHDR', 'IDAT', 'IEND']);
    expect(readPngSize(makePng(40, 24))).toEqual({ ok: true, value: { width: 40, height: 24 } });
  });

  it.each([
    ['empty input', new Uint8Array(0), 'not_png'],
    ['a JPEG', Uint8Array.of(0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46), 'not_png'],
    ['an HTML page', new TextEncoder().encode('<!doctype html><p>502 Bad Gateway</p>'), 'not_png'],
    ['a PNG cut in half', makePng(16, 16).subarray(0, 40), 'truncated'],
    ['a PNG without IEND', makePng(4, 4).subarray(0, -12), 'truncated'],
  ])('refuses %s with a Result error', (_name, bytes, code) => {
    const result = readPngChunks(bytes);
    expect(result.ok ? 'ok' : result.error.code).toBe(code);
    expect(result.ok ? '' : result.error.message).toMatch(/PNG/);
  });

  it('refuses a PNG whose data no longer matches its CRC', () => {
    const png = makePng(4, 4).slice();
    png[45] = (png[45] ?? 0) ^ 0xff; // inside the IDAT data (IDAT starts at byte 33)
    const result = readPngChunks(png);
    expect(result).toEqual({ ok: false, error: { code: 'bad_crc', message: expect.stringContaining('IDAT') } });
    expect(readPngText(png)).toEqual({});
  });

  it('refuses a PNG that does not start with IHDR', () => {
    const chunks = readPngChunks(makePng(4, 4));
    if (!chunks.ok) throw new Error(chunks.error.message);
    const [header, ...rest] = chunks.value;
    const reordered = encodePng([...rest.slice(0, 1), header as PngChunk, ...rest.slice(1)]);
    const result = readPngChunks(reordered);
    expect(result.ok ? 'ok' : result.error.code).toBe('bad_structure');
  });

  it('says what arrived instead of a PNG, in the exact words the user sees', () => {
    expect(readPngChunks(Uint8Array.of(0xff, 0xd8, 0xff, 0xe0))).toEqual({
      ok: false,
      error: { code: 'not_png', message: 'These bytes are not a PNG (they look like JPEG); the image backend must return PNG images.' },
    });
    expect(readPngChunks(new Uint8Array(0))).toEqual({
      ok: false,
      error: { code: 'not_png', message: 'These bytes are not a PNG (they look like nothing (0 bytes)); the image backend must return PNG images.' },
    });
  });

  it('reads the bare signature as a PNG with no IEND, and a partial chunk header as cut off at its byte', () => {
    // The walk ends exactly at the end of the bytes: that is a missing IEND, not a cut-off chunk.
    const noIend = { ok: false, error: { code: 'truncated', message: 'The PNG has no IEND chunk; the file is incomplete, generate or download it again.' } };
    expect(readPngChunks(PNG_SIGNATURE)).toEqual(noIend);
    expect(readPngChunks(makePng(2, 2).subarray(0, -12))).toEqual(noIend);
    const png = makePng(2, 2);
    expect(readPngChunks(png.subarray(0, png.length - 1))).toEqual({
      ok: false,
      error: {
        code: 'truncated',
        message: `The PNG is cut off at byte ${png.length - 12} of ${png.length - 1}; the file is incomplete, generate or download it again.`,
      },
    });
  });

  it('refuses a chunk type that is not four letters, naming its byte offset', () => {
    // IHDR takes bytes 8–32, so the second chunk starts at byte 33; its CRC is correct, only the type is wrong.
    for (const type of ['ID4T', 'ID T', 'IDA\xc4']) {
      expect(readPngChunks(encodePng([header(1, 1), { type, data: new Uint8Array(4) }, IEND])), type).toEqual({
        ok: false,
        error: { code: 'bad_structure', message: 'The PNG has a malformed chunk at byte 33; the file is damaged.' },
      });
    }
  });

  it('refuses a chunk whose length runs past the end, by 1 byte or by more, naming the chunk and its offset', () => {
    const png = makePng(2, 2).slice();
    const iendAt = png.length - 12;
    const view = new DataView(png.buffer);
    const message = `The PNG's IEND chunk at byte ${iendAt} runs past the end of the file; the file is incomplete.`;
    for (const length of [1, 4, 20, 0x7fffffff]) {
      view.setUint32(iendAt, length);
      expect(readPngChunks(png), `length ${length}`).toEqual({ ok: false, error: { code: 'truncated', message } });
    }
    // The same chunk with its length right is read.
    view.setUint32(iendAt, 0);
    expect(chunkTypes(png)).toEqual(['IHDR', 'IDAT', 'IEND']);
  });

  it("refuses a chunk longer than PNG's limit of 2^31−1 bytes as damage; the limit itself is only past the end", () => {
    const png = encodePng([header(1, 1), { type: 'IEND', data: new Uint8Array(0) }]);
    const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
    view.setUint32(33, 0x80000000);
    expect(readPngChunks(png)).toEqual({
      ok: false,
      error: { code: 'bad_structure', message: "The PNG's IEND chunk at byte 33 claims 2147483648 bytes, more than PNG allows; the file is damaged." },
    });
    view.setUint32(33, 0x7fffffff);
    expect(readPngChunks(png)).toEqual({
      ok: false,
      error: { code: 'truncated', message: "The PNG's IEND chunk at byte 33 runs past the end of the file; the file is incomplete." },
    });
  });

  it('refuses a first chunk that is not IHDR even with IHDR length 13, and an IHDR of any other length', () => {
    const message = 'The PNG does not start with an IHDR header chunk; the file is damaged.';
    const refused = { ok: false, error: { code: 'bad_structure', message } };
    const ihdr = header(1, 1).data;
    expect(readPngChunks(encodePng([{ type: 'tEXt', data: ihdr }, header(1, 1), rgbImageData(1, 1), IEND]))).toEqual(refused);
    expect(readPngChunks(encodePng([{ type: 'IHDR', data: ihdr.subarray(0, 12) }, rgbImageData(1, 1), IEND]))).toEqual(refused);
    expect(readPngChunks(encodePng([{ type: 'IHDR', data: Buffer.concat([ihdr, Buffer.of(0)]) }, rgbImageData(1, 1), IEND]))).toEqual(refused);
    // Only the first chunk must be IHDR: a later chunk of length 13 is fine.
    expect(chunkTypes(pngWith(chunk('tEXt', 'Comment\0', 'abcde')))).toEqual(['IHDR', 'tEXt', 'IDAT', 'IEND']);
  });

  it('names the chunk whose CRC fails, with its offset', () => {
    const png = makePng(2, 2).slice();
    png[45] = (png[45] ?? 0) ^ 0xff; // inside IDAT's data, which starts at byte 41 (the chunk at 33)
    expect(readPngChunks(png)).toEqual({
      ok: false,
      error: { code: 'bad_crc', message: "The PNG's IDAT chunk at byte 33 fails its CRC check; the file is damaged." },
    });
  });
});

describe('PngError', () => {
  it('is named PngError and carries its code, so a log line says what kind of error it is', () => {
    const error = new PngError('bad_crc', 'damaged');
    expect(error.name).toBe('PngError');
    expect(String(error)).toBe('PngError: damaged');
    expect(error.code).toBe('bad_crc');
    expect(isPngError(error)).toBe(true);
    expect(isPngError(new Error('damaged'))).toBe(false);
  });
});
