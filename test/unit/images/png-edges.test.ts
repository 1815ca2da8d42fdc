// Pins the edges of server/png that its mutation run found untested: exact user-facing messages, format
// sniffing near-misses, chunk-walking boundaries, malformed text chunks, A1111 field edge cases and header checks.
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  checkPngImage,
  describeImageBytes,
  encodePng,
  expectedImageDataBytes,
  formatA1111Parameters,
  isPngError,
  MAX_PNG_SIDE,
  parseA1111Parameters,
  PNG_SIGNATURE,
  PngError,
  readPngChunks,
  readPngText,
  writePngText,
} from '../../../server/png/index.ts';
import type { PngChunk } from '../../../server/png/index.ts';
import { assemblePng, makeInterlacedPng, makePng } from '../../fakes/png-bytes.ts';

interface HeaderFields {
  bitDepth?: number;
  colorType?: number;
  compression?: number;
  filter?: number;
  interlace?: number;
}

/** An IHDR chunk with every field settable, including the ones assemblePng always writes as 0. */
function header(width: number, height: number, fields: HeaderFields = {}): PngChunk {
  const data = Buffer.alloc(13);
  data.writeUInt32BE(width, 0);
  data.writeUInt32BE(height, 4);
  data[8] = fields.bitDepth ?? 8;
  data[9] = fields.colorType ?? 2;
  data[10] = fields.compression ?? 0;
  data[11] = fields.filter ?? 0;
  data[12] = fields.interlace ?? 0;
  return { type: 'IHDR', data };
}

const IEND: PngChunk = { type: 'IEND', data: new Uint8Array(0) };

/** Deflated, all-zero scanlines of an 8-bit RGB image: exactly what a width × height header promises. */
function rgbImageData(width: number, height: number): PngChunk {
  return { type: 'IDAT', data: deflateSync(Buffer.alloc(height * (1 + width * 3))) };
}

/** A chunk of `type` whose data is the parts one after another (strings as Latin-1). */
function chunk(type: string, ...parts: (string | number[] | Uint8Array)[]): PngChunk {
  const data = Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'latin1') : Buffer.from(part))));
  return { type, data };
}

/** A valid 1×1 RGB PNG with `extra` chunks between IHDR and IDAT. */
function pngWith(...extra: PngChunk[]): Uint8Array {
  return encodePng([header(1, 1), ...extra, rgbImageData(1, 1), IEND]);
}

function typesOf(png: Uint8Array): string[] {
  const chunks = readPngChunks(png);
  if (!chunks.ok) throw new Error(chunks.error.message);
  return chunks.value.map((chunk) => chunk.type);
}

function bytes(latin1: string): Uint8Array {
  return new Uint8Array(Buffer.from(latin1, 'latin1'));
}

function thrownBy(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('nothing was thrown');
}

describe('chunks.ts', () => {
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
      expect(typesOf(png)).toEqual(['IHDR', 'IDAT', 'IEND']);
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
      expect(typesOf(pngWith(chunk('tEXt', 'Comment\0', 'abcde')))).toEqual(['IHDR', 'tEXt', 'IDAT', 'IEND']);
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
});

describe('text.ts', () => {
  describe('readPngText', () => {
    it('skips text chunks without a keyword: no NUL at all, or a NUL first', () => {
      expect(readPngText(pngWith(chunk('tEXt', 'parameters')))).toEqual({});
      expect(readPngText(pngWith(chunk('tEXt', '\0a fox')))).toEqual({});
    });

    it('reads a one-letter keyword, the shortest PNG allows', () => {
      expect(readPngText(pngWith(chunk('tEXt', 'k\0a fox')))).toEqual({ k: 'a fox' });
    });

    it('skips a zTXt chunk whose compression method is not 0, even when its data would inflate', () => {
      const zipped = deflateSync(Buffer.from('a fox'));
      expect(readPngText(pngWith(chunk('zTXt', 'Comment\0', [1], zipped)))).toEqual({});
      expect(readPngText(pngWith(chunk('zTXt', 'Comment\0', [0], zipped)))).toEqual({ Comment: 'a fox' });
    });

    it('skips an iTXt chunk missing the NUL after its language tag or after its translated keyword', () => {
      // keyword NUL, compression flag, method, language NUL, translated keyword NUL, text
      expect(readPngText(pngWith(chunk('iTXt', 'k\0', [0, 0], 'ja')))).toEqual({});
      expect(readPngText(pngWith(chunk('iTXt', 'k\0', [0, 0], 'ja\0', 'kw')))).toEqual({});
      expect(readPngText(pngWith(chunk('iTXt', 'k\0', [0, 0], 'ja\0', 'kw\0', 'a fox')))).toEqual({ k: 'a fox' });
    });

    it('reads only tEXt, zTXt and iTXt: a chunk of another type shaped like text is not an entry', () => {
      // Chunk types are case-sensitive; 'teXt' is some other (private) chunk, laid out here like an iTXt.
      expect(readPngText(pngWith(chunk('teXt', 'k\0', [0, 0, 0, 0], 'a fox')))).toEqual({});
    });
  });

  describe('writePngText', () => {
    it('puts the new chunk before the first of several IDAT chunks, after other ancillary chunks', () => {
      const png = encodePng([header(1, 1), { type: 'gAMA', data: Uint8Array.of(0, 0, 0xb1, 0x8f) }, rgbImageData(1, 1), rgbImageData(1, 1), IEND]);
      expect(typesOf(writePngText(png, 'parameters', 'a fox'))).toEqual(['IHDR', 'gAMA', 'tEXt', 'IDAT', 'IDAT', 'IEND']);
    });

    it('puts the new chunk before IEND when there is no IDAT', () => {
      const written = writePngText(encodePng([header(1, 1), IEND]), 'parameters', 'a fox');
      expect(typesOf(written)).toEqual(['IHDR', 'tEXt', 'IEND']);
      expect(readPngText(written)).toEqual({ parameters: 'a fox' });
    });

    it('replaces a damaged tEXt chunk that holds only the keyword (no NUL) when writing that keyword', () => {
      const written = writePngText(pngWith(chunk('tEXt', 'parameters'), chunk('tEXt', 'parameter\0kept')), 'parameters', 'a fox');
      expect(typesOf(written)).toEqual(['IHDR', 'tEXt', 'tEXt', 'IDAT', 'IEND']);
      expect(readPngText(written)).toEqual({ parameter: 'kept', parameters: 'a fox' });
    });

    it('refuses an invalid keyword and NUL in the text with PngErrors in the exact words the user sees', () => {
      const badKeyword = thrownBy(() => writePngText(makePng(1, 1), 'two  spaces', 'x'));
      expect(badKeyword).toBeInstanceOf(PngError);
      expect(badKeyword).toMatchObject({
        name: 'PngError',
        code: 'invalid_keyword',
        message: '"two  spaces" cannot be a PNG text keyword: use 1–79 Latin-1 letters without leading, trailing or double spaces.',
      });
      expect(thrownBy(() => writePngText(makePng(1, 1), 'parameters', 'a\0b'))).toMatchObject({
        name: 'PngError',
        code: 'invalid_text',
        message: 'The "parameters" text contains a NUL character, which PNG text cannot hold; remove it first.',
      });
      expect(thrownBy(() => writePngText(bytes('<html>'), 'parameters', 'x'))).toMatchObject({
        code: 'not_png',
        message: 'These bytes are not a PNG (they look like text (HTML or JSON)); the image backend must return PNG images.',
      });
    });
  });
});

describe('a1111-parameters.ts', () => {
  describe('formatA1111Parameters', () => {
    it('writes no Sampler, Model or Version that is empty', () => {
      expect(
        formatA1111Parameters({ prompt: 'a fox', negativePrompt: '', steps: 20, sampler: '', width: 64, height: 64, model: '', version: '' }),
      ).toBe('a fox\nSteps: 20, Size: 64x64');
      expect(
        formatA1111Parameters({ prompt: 'a fox', negativePrompt: '', sampler: 'Euler', width: 64, height: 64, model: 'm', version: 'Easel 0.1.0' }),
      ).toBe('a fox\nSampler: Euler, Size: 64x64, Model: m, Version: Easel 0.1.0');
    });

    it('drops whitespace before the prompt, as A1111 strips the whole text, and a blank prompt altogether', () => {
      expect(formatA1111Parameters({ prompt: '\n  a fox', negativePrompt: '', width: 8, height: 8 })).toBe('a fox\nSize: 8x8');
      expect(formatA1111Parameters({ prompt: '  ', negativePrompt: '', width: 8, height: 8 })).toBe('Size: 8x8');
    });
  });

  describe('parseA1111Parameters', () => {
    it('leaves out every value the line does not hold: the keys are absent, not undefined', () => {
      expect(parseA1111Parameters('a fox\nSize: 64x48, Model hash: abc, Version: v1')).toStrictEqual({
        prompt: 'a fox',
        negativePrompt: '',
        width: 64,
        height: 48,
        fields: { Size: '64x48', 'Model hash': 'abc', Version: 'v1' },
      });
      expect(parseA1111Parameters('a fox\nSteps: 20, Sampler: Euler, CFG scale: 7.5, Seed: -1, Model: m')).toStrictEqual({
        prompt: 'a fox',
        negativePrompt: '',
        steps: 20,
        sampler: 'Euler',
        cfg: 7.5,
        seed: -1,
        model: 'm',
        fields: { Steps: '20', Sampler: 'Euler', 'CFG scale': '7.5', Seed: '-1', Model: 'm' },
      });
    });

    it('trims spaces around values, and reads integers and numbers with surrounding spaces', () => {
      expect(parseA1111Parameters('a fox\nSteps:  20 , Sampler:   Euler a  , CFG scale: 7 , Seed: " 12 "')).toStrictEqual({
        prompt: 'a fox',
        negativePrompt: '',
        steps: 20,
        sampler: 'Euler a',
        cfg: 7,
        seed: 12,
        fields: { Steps: '20', Sampler: 'Euler a', 'CFG scale': '7', Seed: ' 12 ' },
      });
    });

    it('reads no number from Steps "12abc" or "x12", nor from an empty or blank CFG scale', () => {
      expect(parseA1111Parameters('a fox\nSteps: 12abc, Seed: x12, CFG scale: , Size: 8x8')).toStrictEqual({
        prompt: 'a fox',
        negativePrompt: '',
        width: 8,
        height: 8,
        fields: { Steps: '12abc', Seed: 'x12', 'CFG scale': '', Size: '8x8' },
      });
      expect(parseA1111Parameters('a fox\nSteps: 1.5, CFG scale: " ", Size: 8x8')).toStrictEqual({
        prompt: 'a fox',
        negativePrompt: '',
        width: 8,
        height: 8,
        fields: { Steps: '1.5', 'CFG scale': ' ', Size: '8x8' },
      });
    });

    it('reads an empty Sampler, written bare or as "", as no sampler', () => {
      for (const sampler of ['', '""']) {
        expect(parseA1111Parameters(`a fox\nSteps: 20, Sampler: ${sampler}, Size: 8x8`), sampler).toStrictEqual({
          prompt: 'a fox',
          negativePrompt: '',
          steps: 20,
          width: 8,
          height: 8,
          fields: { Steps: '20', Sampler: '', Size: '8x8' },
        });
      }
    });

    it('unquotes JSON-quoted values, and keeps a lone quote or an unclosed quote as written', () => {
      const modelOf = (value: string) => parseA1111Parameters(`a fox\nSteps: 1, Size: 8x8, Model: ${value}`).model;
      expect(modelOf('"sdxl, turbo: v2"')).toBe('sdxl, turbo: v2');
      expect(modelOf('"say \\"hi\\""')).toBe('say "hi"');
      expect(modelOf('"')).toBe('"');
      expect(modelOf('"sdxl')).toBe('"sdxl');
      expect(modelOf('sdxl"')).toBe('sdxl"');
      expect(modelOf('"bad \\x escape"')).toBe('"bad \\x escape"');
    });

    it('reads Size only as WIDTHxHEIGHT', () => {
      const sizeOf = (value: string) => {
        const { width, height } = parseA1111Parameters(`a fox\nSteps: 1, Seed: 2, Size: ${value}`);
        return { width, height };
      };
      expect(sizeOf('640x448')).toEqual({ width: 640, height: 448 });
      expect(sizeOf('640X448')).toEqual({ width: undefined, height: undefined });
      expect(sizeOf('640x')).toEqual({ width: undefined, height: undefined });
      expect(sizeOf('640x448px')).toEqual({ width: undefined, height: undefined });
    });

    it('takes a last line of fewer than three fields as prompt text, and three as parameters', () => {
      expect(parseA1111Parameters('a fox\nSteps: 20, Seed: 1')).toStrictEqual({ prompt: 'a fox\nSteps: 20, Seed: 1', negativePrompt: '', fields: {} });
      expect(parseA1111Parameters('a fox\nSteps: 20, Seed: 1, Size: 8x8')).toMatchObject({ prompt: 'a fox', steps: 20, seed: 1, width: 8 });
    });

    it('ignores whitespace around the whole text and around each prompt line, including before "Negative prompt:"', () => {
      const parsed = parseA1111Parameters('\n  a fox  \n  in snow \n   Negative prompt:   blurry  \n  ugly \nSteps: 20, Seed: 1, Size: 8x8\n\n');
      expect(parsed).toStrictEqual({
        prompt: 'a fox\nin snow',
        negativePrompt: 'blurry\nugly',
        steps: 20,
        seed: 1,
        width: 8,
        height: 8,
        fields: { Steps: '20', Seed: '1', Size: '8x8' },
      });
    });
  });
});

describe('check-image.ts', () => {
  async function messageOf(png: Uint8Array): Promise<string> {
    const result = await checkPngImage(png);
    return result.ok ? 'ok' : `${result.error.code}: ${result.error.message}`;
  }

  describe('the header', () => {
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

  describe('the chunks around the image data', () => {
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

  describe('the image data', () => {
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
});
