// The A1111 parameters text an image carries: written in AUTOMATIC1111's exact layout with only the values the
// backend used, and read back field by field as A1111 reads it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatA1111Parameters, parseA1111Parameters } from '../../../server/png/index.ts';
import type { A1111Parameters } from '../../../server/png/index.ts';

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

  it("writes the scheduler as A1111's own \"Schedule type\", right after Sampler as create_infotext places it", () => {
    expect(formatA1111Parameters({ ...parameters, sampler: 'DPM++ 2M', scheduler: 'Karras', negativePrompt: '' })).toBe(
      'a red fox in snow, (golden hour:1.2)\nSteps: 20, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7.0, Seed: 123, Size: 512x768, Model: v1-5-pruned-emaonly',
    );
    // Without a sampler it still comes before CFG scale; an empty one, like A1111's None, is not written.
    expect(formatA1111Parameters({ ...parameters, scheduler: 'SGM Uniform' })).toContain('Steps: 20, Schedule type: SGM Uniform, CFG scale: 7.0');
    expect(formatA1111Parameters({ ...parameters, scheduler: '' })).not.toContain('Schedule type');
    expect(parseA1111Parameters(formatA1111Parameters({ ...parameters, sampler: 'Euler', scheduler: 'Align Your Steps' }))).toMatchObject({ sampler: 'Euler', scheduler: 'Align Your Steps' });
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
      scheduler: 'Karras',
    });
    expect(parsed.fields).toMatchObject({ Sampler: 'DPM++ 2M', 'Schedule type': 'Karras', 'Model hash': '6ce0161689', Version: 'v1.10.1' });
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
          scheduler: fc.option(model, { nil: undefined }),
        }),
        (input) => {
          const parsed = parseA1111Parameters(formatA1111Parameters(input));
          const { fields: _fields, ...values } = parsed;
          const expected = { ...input, model: input.model, scheduler: input.scheduler };
          expect({ ...values, model: values.model, scheduler: values.scheduler }).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});

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

  it('reads an empty Schedule type as no scheduler, keeping the field', () => {
    expect(parseA1111Parameters('a fox\nSteps: 20, Sampler: Euler, Schedule type: , Size: 8x8')).toStrictEqual({
      prompt: 'a fox',
      negativePrompt: '',
      steps: 20,
      sampler: 'Euler',
      width: 8,
      height: 8,
      fields: { Steps: '20', Sampler: 'Euler', 'Schedule type': '', Size: '8x8' },
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
