import { deflateSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodePng,
  formatA1111Parameters,
  isPngError,
  parseA1111Parameters,
  readPngChunks,
  readPngSize,
  readPngText,
  writePngText,
} from '../../../server/png/index.ts';
import type { A1111Parameters, PngChunk } from '../../../server/png/index.ts';
import { computeCrc32, decodeSolidPng, makePng } from '../../fakes/png-bytes.ts';

/** Checks every chunk CRC with the independent table implementation from the fakes. */
function hasValidCrcs(png: Uint8Array): boolean {
  const bytes = Buffer.from(png);
  for (let offset = 8; offset < bytes.length; ) {
    const length = bytes.readUInt32BE(offset);
    if (computeCrc32(bytes.subarray(offset + 4, offset + 8 + length)) !== bytes.readUInt32BE(offset + 8 + length)) return false;
    offset += 12 + length;
  }
  return true;
}

function chunkTypes(png: Uint8Array): string[] {
  const chunks = readPngChunks(png);
  if (!chunks.ok) throw new Error(chunks.error.message);
  return chunks.value.map((chunk) => chunk.type);
}

function expectPngError(action: () => unknown, code: string): void {
  try {
    action();
  } catch (error) {
    expect(isPngError(error) ? error.code : String(error)).toBe(code);
    return;
  }
  throw new Error(`expected PngError ${code}, nothing was thrown`);
}

describe('makePng (test fixture)', () => {
  it('writes a PNG that decodes back to its size and colour', () => {
    const png = makePng(7, 5, [1, 2, 3]);
    expect(decodeSolidPng(png)).toEqual({ width: 7, height: 5, rgb: [1, 2, 3] });
    expect(hasValidCrcs(png)).toBe(true);
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
});

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

describe('formatA1111Parameters / parseA1111Parameters', () => {
  const parameters: A1111Parameters = {
    prompt: 'a red fox in snow, (golden hour:1.2)',
    negativePrompt: 'blurry, lowres',
    steps: 20,
    cfg: 7,
    seed: 123,
    width: 512,
    height: 768,
    model: 'v1-5-pruned-emaonly',
  };

  it("writes AUTOMATIC1111's exact layout: create_infotext's order, CFG scale as a Python float", () => {
    expect(formatA1111Parameters(parameters)).toBe(
      'a red fox in snow, (golden hour:1.2)\nNegative prompt: blurry, lowres\nSteps: 20, CFG scale: 7.0, Seed: 123, Size: 512x768, Model: v1-5-pruned-emaonly',
    );
    expect(formatA1111Parameters({ ...parameters, sampler: 'Euler', negativePrompt: '' })).toBe(
      'a red fox in snow, (golden hour:1.2)\nSteps: 20, Sampler: Euler, CFG scale: 7.0, Seed: 123, Size: 512x768, Model: v1-5-pruned-emaonly',
    );
  });

  it('omits an empty negative prompt and a missing model, and quotes values with commas', () => {
    expect(formatA1111Parameters({ ...parameters, negativePrompt: '', model: undefined })).toBe(
      'a red fox in snow, (golden hour:1.2)\nSteps: 20, CFG scale: 7.0, Seed: 123, Size: 512x768',
    );
    expect(formatA1111Parameters({ ...parameters, cfg: 7.5, model: 'sdxl, turbo: v2' })).toContain('CFG scale: 7.5, Seed: 123, Size: 512x768, Model: "sdxl, turbo: v2"');
    expect(formatA1111Parameters({ ...parameters, cfg: 0 })).toContain('CFG scale: 0.0,');
  });

  it('writes no value the backend did not use: no Steps, CFG or Seed line entries for a server that ignored them', () => {
    const text = formatA1111Parameters({ prompt: 'a fox', negativePrompt: '', width: 512, height: 512, model: 'sd-cpp-local' });
    expect(text).toBe('a fox\nSize: 512x512, Model: sd-cpp-local');
    expect(text).not.toMatch(/Steps|CFG|Seed|Sampler/);
  });

  it('ends with the writer as Version, so the line of a server that reported nothing still reads as parameters', () => {
    const text = formatA1111Parameters({ prompt: 'a fox', negativePrompt: '', width: 512, height: 512, version: 'Easel 0.1.0' });
    expect(text).toBe('a fox\nSize: 512x512, Version: Easel 0.1.0');
    // Fewer than three fields would be prompt text to A1111 (parse_generation_parameters), and to this parser.
    expect(parseA1111Parameters(`${text}, Model: m`)).toMatchObject({ prompt: 'a fox', width: 512, model: 'm' });
    expect(parseA1111Parameters(text).prompt).toBe(text);
  });

  it('takes the first of two equal keys: sd.cpp repeats the prompt in a JSON block at the end of its line', () => {
    const parsed = parseA1111Parameters('a fox\nSteps: 20, CFG scale: 7.000000, Seed: 42, Size: 64x64, SDCPP: {"prompt":{"positive":"Seed: 5, Steps: 9"}}');
    expect(parsed).toMatchObject({ steps: 20, seed: 42, cfg: 7 });
  });

  it('never quotes the prompt or the negative prompt, and quotes a value only for a comma, colon or newline', () => {
    const text = formatA1111Parameters({ ...parameters, prompt: 'say "hi", then: go', negativePrompt: 'a, b: c', sampler: 'DPM++ 2M "x"' });
    expect(text.split('\n').slice(0, 2)).toEqual(['say "hi", then: go', 'Negative prompt: a, b: c']);
    expect(text).toContain('Sampler: DPM++ 2M "x",');
  });

  it('reads real AUTOMATIC1111 text, keeping the fields Easel does not use', () => {
    const text =
      'masterpiece, a cat\nwearing a hat\nNegative prompt: ugly\nSteps: 30, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 6.5, Seed: 4242, Size: 640x448, Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, Version: v1.10.1';
    const parsed = parseA1111Parameters(text);
    expect(parsed).toMatchObject({
      prompt: 'masterpiece, a cat\nwearing a hat',
      negativePrompt: 'ugly',
      steps: 30,
      cfg: 6.5,
      seed: 4242,
      width: 640,
      height: 448,
      model: 'v1-5-pruned-emaonly',
      sampler: 'DPM++ 2M',
    });
    expect(parsed.fields).toMatchObject({ Sampler: 'DPM++ 2M', 'Model hash': '6ce0161689', Version: 'v1.10.1' });
  });

  it('treats text without a parameters line as a prompt', () => {
    expect(parseA1111Parameters('just a prompt, nothing else')).toEqual({ prompt: 'just a prompt, nothing else', negativePrompt: '', fields: {} });
  });

  it('round-trips any trimmed prompt, negative prompt and settings', () => {
    const line = fc
      .stringMatching(/^[a-zA-Z0-9 ,:()"'\[\]é猫🎨._-]{1,40}$/)
      .map((text) => text.trim())
      .filter((text) => text !== '' && !text.startsWith('Negative prompt:'));
    const block = fc.array(line, { minLength: 1, maxLength: 3 }).map((lines) => lines.join('\n'));
    const model = fc
      .stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9 ,:._/-]{0,30}[a-zA-Z0-9]$/)
      .filter((text) => !text.includes('  '));
    fc.assert(
      fc.property(
        fc.record({
          prompt: block,
          negativePrompt: fc.oneof(fc.constant(''), block),
          steps: fc.integer({ min: 1, max: 150 }),
          cfg: fc.integer({ min: 0, max: 300 }).map((tenths) => tenths / 10),
          seed: fc.integer({ min: 0, max: 4_294_967_295 }),
          width: fc.integer({ min: 8, max: 256 }).map((eighths) => eighths * 8),
          height: fc.integer({ min: 8, max: 256 }).map((eighths) => eighths * 8),
          model: fc.option(model, { nil: undefined }),
        }),
        (input) => {
          const parsed = parseA1111Parameters(formatA1111Parameters(input));
          const { fields: _fields, ...values } = parsed;
          const expected = input.model === undefined ? { ...input, model: undefined } : input;
          expect({ ...values, model: values.model }).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});
