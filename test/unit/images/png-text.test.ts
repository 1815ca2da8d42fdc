// PNG text chunks: written as tEXt (Latin-1) or iTXt (UTF-8) before the image data, as A1111 writes them; read
// back from tEXt, zTXt and iTXt as other tools write them; malformed ones skipped, bad keywords refused.
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { encodePng, PngError, readPngChunks, readPngText, writePngText } from '../../../server/png/index.ts';
import type { PngChunk } from '../../../server/png/index.ts';
import { decodeSolidPng, makePng } from '../../fakes/png-bytes.ts';
import { IEND, bytes, chunk, chunkTypes, expectPngError, hasValidCrcs, header, pngWith, rgbImageData, thrownBy } from './png-helpers.ts';

describe('writePngText / readPngText', () => {
  it('round-trips ASCII parameters as a tEXt chunk before IDAT (where A1111 writes it), with valid CRCs', () => {
    const text = 'a red fox\nNegative prompt: blurry\nSteps: 20, CFG scale: 7, Seed: 1, Size: 4x4';
    const written = writePngText(makePng(4, 4, [9, 8, 7]), 'parameters', text);

    expect(readPngText(written)).toEqual({ parameters: text });
    expect(chunkTypes(written)).toEqual(['IHDR', 'tEXt', 'IDAT', 'IEND']);
    expect(hasValidCrcs(written)).toBe(true);
    expect(decodeSolidPng(written)).toEqual({ width: 4, height: 4, rgb: [9, 8, 7] });
  });

  it('keeps Latin-1 text in tEXt and stores anything else as UTF-8 iTXt', () => {
    const latin = writePngText(makePng(2, 2), 'parameters', 'café crème, 50°');
    expect(chunkTypes(latin)).toContain('tEXt');
    expect(readPngText(latin)['parameters']).toBe('café crème, 50°');

    const unicode = '猫が雪の中で, Ünïcödé ✓ 🎨\nNegative prompt: ぼやけ';
    const written = writePngText(makePng(2, 2), 'parameters', unicode);
    expect(chunkTypes(written)).toEqual(['IHDR', 'iTXt', 'IDAT', 'IEND']);
    expect(readPngText(written)).toEqual({ parameters: unicode });
    expect(hasValidCrcs(written)).toBe(true);
  });

  it('replaces an existing entry with the same keyword and keeps the others', () => {
    let png = writePngText(makePng(2, 2), 'parameters', 'first 猫');
    png = writePngText(png, 'Software', 'Easel');
    png = writePngText(png, 'parameters', 'second');

    expect(readPngText(png)).toEqual({ parameters: 'second', Software: 'Easel' });
    expect(chunkTypes(png)).toEqual(['IHDR', 'tEXt', 'tEXt', 'IDAT', 'IEND']);
  });

  it("reads stable-diffusion.cpp's raw UTF-8 in a tEXt chunk as UTF-8, and Latin-1 tEXt as Latin-1", () => {
    const chunks = readPngChunks(makePng(2, 2));
    if (!chunks.ok) throw new Error(chunks.error.message);
    const [header, ...rest] = chunks.value;
    // stb_image_write.h:1208-1217 copies the parameters string's bytes verbatim into tEXt.
    const utf8 = '猫が雪の中で, café ✓\nSteps: 20, CFG scale: 7.000000, Seed: 1';
    const sdcpp = encodePng([header as PngChunk, { type: 'tEXt', data: Buffer.concat([Buffer.from('parameters\0', 'latin1'), Buffer.from(utf8, 'utf8')]) }, ...rest]);
    expect(readPngText(sdcpp)).toEqual({ parameters: utf8 });
    const latin = encodePng([header as PngChunk, { type: 'tEXt', data: Buffer.from('Comment\0café crème, 50°', 'latin1') }, ...rest]);
    expect(readPngText(latin)).toEqual({ Comment: 'café crème, 50°' });
  });

  it('reads compressed zTXt and iTXt chunks as other tools write them', () => {
    const chunks = readPngChunks(makePng(2, 2));
    if (!chunks.ok) throw new Error(chunks.error.message);
    const zTxt: PngChunk = { type: 'zTXt', data: Buffer.concat([Buffer.from('Comment\0', 'latin1'), Buffer.of(0), deflateSync(Buffer.from('zipped café', 'latin1'))]) };
    const iTxt: PngChunk = {
      type: 'iTXt',
      data: Buffer.concat([Buffer.from('prompt\0', 'latin1'), Buffer.of(1, 0), Buffer.from('ja\0プロンプト\0', 'utf8'), deflateSync(Buffer.from('{"3":{"class_type":"KSampler"}} 猫', 'utf8'))]),
    };
    const [header, ...rest] = chunks.value;
    const png = encodePng([header as PngChunk, zTxt, iTxt, ...rest]);

    expect(readPngText(png)).toEqual({ Comment: 'zipped café', prompt: '{"3":{"class_type":"KSampler"}} 猫' });
  });

  it('throws a PngError on bytes that are not a PNG, a bad keyword or NUL in the text', () => {
    expectPngError(() => writePngText(Uint8Array.of(1, 2, 3), 'parameters', 'x'), 'not_png');
    expectPngError(() => writePngText(makePng(2, 2), '', 'x'), 'invalid_keyword');
    expectPngError(() => writePngText(makePng(2, 2), ' parameters', 'x'), 'invalid_keyword');
    expectPngError(() => writePngText(makePng(2, 2), 'k'.repeat(80), 'x'), 'invalid_keyword');
    expectPngError(() => writePngText(makePng(2, 2), 'parameters', 'a\0b'), 'invalid_text');
  });

  it('reads nothing from bytes that are not a PNG', () => {
    expect(readPngText(new TextEncoder().encode('not a png'))).toEqual({});
  });
});

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
    expect(chunkTypes(writePngText(png, 'parameters', 'a fox'))).toEqual(['IHDR', 'gAMA', 'tEXt', 'IDAT', 'IDAT', 'IEND']);
  });

  it('puts the new chunk before IEND when there is no IDAT', () => {
    const written = writePngText(encodePng([header(1, 1), IEND]), 'parameters', 'a fox');
    expect(chunkTypes(written)).toEqual(['IHDR', 'tEXt', 'IEND']);
    expect(readPngText(written)).toEqual({ parameters: 'a fox' });
  });

  it('replaces a damaged tEXt chunk that holds only the keyword (no NUL) when writing that keyword', () => {
    const written = writePngText(pngWith(chunk('tEXt', 'parameters'), chunk('tEXt', 'parameter\0kept')), 'parameters', 'a fox');
    expect(chunkTypes(written)).toEqual(['IHDR', 'tEXt', 'tEXt', 'IDAT', 'IEND']);
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
