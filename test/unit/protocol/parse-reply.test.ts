import { describe, expect, it } from 'vitest';
import { parseMetadataReply, parseReply } from '../../../server/protocol/index.ts';
import type { ParseResult, ParsedReply } from '../../../server/protocol/index.ts';

const JSON_LINE = '{"prompt": "a tabby cat wearing a blue wizard hat", "generate_image": true, "steps": 20, "cfg": 7, "seed": -1}';
const METADATA = { prompt: 'a tabby cat wearing a blue wizard hat', generate_image: true, steps: 20, cfg: 7, seed: -1 };

function accepted(result: ParseResult): ParsedReply {
  if (!result.ok) throw new Error(`expected an accepted reply, got ${result.error.code}: ${result.error.message}`);
  return result.value;
}

function rejected(result: ParseResult) {
  if (result.ok) throw new Error(`expected a rejected reply, got ${JSON.stringify(result.value)}`);
  return result;
}

describe('parseReply: the format of story 010', () => {
  it('accepts text, the --- line and valid JSON, with no repairs', () => {
    const value = accepted(parseReply(`Perfect! Generating your image now.\n---\n${JSON_LINE}`));
    expect(value).toEqual({ text: 'Perfect! Generating your image now.', metadata: METADATA, repairs: [], notices: [] });
  });

  it('accepts an empty prompt with generate_image false (still asking questions)', () => {
    const reply = 'What kind of cat?\n---\n{"prompt": "", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}';
    expect(accepted(parseReply(reply)).metadata).toEqual({ prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 });
  });

  it('keeps an optional negative_prompt and ignores unknown keys', () => {
    const reply = `Ok\n---\n{"prompt": "a", "generate_image": false, "steps": 20, "cfg": 7, "seed": 5, "negative_prompt": "blurry", "confidence": 0.9}`;
    expect(accepted(parseReply(reply)).metadata).toEqual({
      prompt: 'a',
      generate_image: false,
      steps: 20,
      cfg: 7,
      seed: 5,
      negative_prompt: 'blurry',
    });
  });

  it('reports a missing delimiter and returns the text shown', () => {
    const result = rejected(parseReply('What kind of cat would you like?'));
    expect(result.error.code).toBe('MissingDelimiter');
    expect(result.error.message).toMatch(/---/);
    expect(result.text).toBe('What kind of cat would you like?');
  });

  it('reports invalid JSON after the --- line', () => {
    const result = rejected(parseReply('Here.\n---\n{"prompt": "a cat" @@ "steps": 4}'));
    expect(result.error.code).toBe('InvalidJson');
    expect(result.text).toBe('Here.');
  });

  it('reports a --- line with no JSON object', () => {
    expect(rejected(parseReply('Here.\n---')).error.code).toBe('InvalidJson');
    expect(rejected(parseReply('Here.\n---\n```json\n["a cat"]\n```')).error.code).toBe('InvalidJson');
  });

  it('reports an object that is never closed as invalid rather than guessing the rest', () => {
    const result = rejected(parseReply('Here.\n---\n{"prompt": "a tabby ca'));
    expect(result.error.code).toBe('InvalidJson');
    expect(result.error.message).toMatch(/not closed/);
  });

  it('names the missing required fields', () => {
    const result = rejected(parseReply('Here.\n---\n{"prompt": "a cat", "cfg": 7}'));
    expect(result.error).toMatchObject({ code: 'MissingFields', fields: ['generate_image', 'steps', 'seed'] });
    expect(result.error.message).toContain('generate_image, steps, seed');
  });

  it('names fields whose values are unusable', () => {
    const result = rejected(
      parseReply('Here.\n---\n{"prompt": 42, "generate_image": "maybe", "steps": "many", "cfg": 7, "seed": "soon"}'),
    );
    expect(result.error).toMatchObject({ code: 'MissingFields', fields: ['prompt', 'generate_image', 'steps', 'seed'] });
    expect(result.error.message).toContain('"many"');
  });

  it('says when the reply was cut by the length limit', () => {
    const cut = rejected(parseReply('Here.\n---\n{"prompt": "a tab', { doneReason: 'length' }));
    expect(cut.error.message).toMatch(/length limit/);
    const stopped = rejected(parseReply('Here.\n---\n{"prompt": "a tab', { doneReason: 'stop' }));
    expect(stopped.error.message).not.toMatch(/length limit/);
  });
});

describe('parseReply: lossless repairs', () => {
  it('missing-delimiter: metadata on a bare { line', () => {
    const value = accepted(parseReply(`Perfect!\n${JSON_LINE}`));
    expect(value.repairs).toEqual(['missing-delimiter']);
    expect(value.text).toBe('Perfect!');
    expect(value.metadata).toEqual(METADATA);
  });

  it('control-characters: NUL, ESC and other C0 controls leave the prompts; tab and newline stay; CRLF becomes LF', () => {
    const reply = 'Ok\n---\n{"prompt": "a\\u0000 cat\\u001b[31m\\tin\\r\\nred", "generate_image": true, "steps": 20, "cfg": 7, "seed": -1, "negative_prompt": "blur\\u0007"}';
    const value = accepted(parseReply(reply));
    expect(value.metadata.prompt).toBe('a cat[31m\tin\nred');
    expect(value.metadata.negative_prompt).toBe('blur');
    expect(value.repairs).toEqual(['control-characters']);
  });

  it('a prompt with only tab and newline is not repaired', () => {
    const value = accepted(parseReply('Ok\n---\n{"prompt": "a\\tcat\\nhere", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}'));
    expect(value.metadata.prompt).toBe('a\tcat\nhere');
    expect(value.repairs).toEqual([]);
  });

  it('code-fence: fences around the JSON after the delimiter', () => {
    const value = accepted(parseReply(`Perfect!\n---\n\`\`\`json\n${JSON_LINE}\n\`\`\``));
    expect(value.repairs).toEqual(['code-fence']);
    expect(value.metadata).toEqual(METADATA);
  });

  it('missing-delimiter and code-fence: a fenced block without the delimiter', () => {
    const value = accepted(parseReply(`Perfect!\n\`\`\`\n${JSON_LINE}\n\`\`\`\n`));
    expect(value.repairs).toEqual(['missing-delimiter', 'code-fence']);
    expect(value.metadata).toEqual(METADATA);
  });

  it('trailing-text: text after the JSON object, with braces inside strings', () => {
    const reply = 'Ok\n---\n{"prompt": "a {curly} cat \\"}\\"", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}\nEnjoy! {"x": 1}';
    const value = accepted(parseReply(reply));
    expect(value.repairs).toEqual(['trailing-text']);
    expect(value.metadata.prompt).toBe('a {curly} cat "}"');
  });

  it('json-syntax: single quotes, Python literals, unquoted keys and trailing commas', () => {
    const reply = "Ok\n---\n{'prompt': 'a cat', generate_image: True, steps: 20, cfg: 7.5, seed: -1,}";
    const value = accepted(parseReply(reply));
    expect(value.repairs).toEqual(['json-syntax']);
    expect(value.metadata).toEqual({ prompt: 'a cat', generate_image: true, steps: 20, cfg: 7.5, seed: -1 });
  });

  it('coerced-types: numbers and booleans written as strings', () => {
    const reply = 'Ok\n---\n{"prompt": "a cat", "generate_image": "true", "steps": "4", "cfg": "7.5", "seed": "20.0"}';
    const value = accepted(parseReply(reply));
    expect(value.repairs).toEqual(['coerced-types']);
    expect(value.metadata).toEqual({ prompt: 'a cat', generate_image: true, steps: 4, cfg: 7.5, seed: 20 });
    expect(value.notices).toEqual([]);
  });

  it('clamped: out-of-range numbers, with a notice each', () => {
    const reply = 'Ok\n---\n{"prompt": "a cat", "generate_image": false, "steps": 400, "cfg": -2, "seed": 99999999999}';
    const value = accepted(parseReply(reply));
    expect(value.repairs).toEqual(['clamped']);
    expect(value.metadata).toMatchObject({ steps: 150, cfg: 0, seed: 4_294_967_295 });
    expect(value.notices).toEqual([
      'Steps 400 is above the maximum 150, so 150 is used.',
      'CFG -2 is below the minimum 0, so 0 is used.',
      'Seed 99999999999 is above the maximum 4294967295, so 4294967295 is used.',
    ]);
  });

  it('clamped: fractional steps and seed are rounded', () => {
    const value = accepted(parseReply('Ok\n---\n{"prompt": "a", "generate_image": false, "steps": 20.6, "cfg": 7, "seed": 12.2}'));
    expect(value.repairs).toEqual(['clamped']);
    expect(value.metadata).toMatchObject({ steps: 21, seed: 12 });
    expect(value.notices).toEqual([
      'Steps 20.6 is not a whole number, so 21 is used.',
      'Seed 12.2 is not a whole number, so 12 is used.',
    ]);
  });

  it('clamped: a prompt over 2000 characters is cut', () => {
    const long = 'a'.repeat(2500);
    const value = accepted(parseReply(`Ok\n---\n{"prompt": "${long}", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}`));
    expect(value.repairs).toEqual(['clamped']);
    expect(value.metadata.prompt).toHaveLength(2000);
    expect(value.notices).toEqual([
      'The prompt is 2500 characters long, above the maximum 2000, so only the first 2000 characters are used.',
    ]);
  });

  it('records several repairs in the order they were applied', () => {
    const reply = "Sure\n```json\n{'prompt': 'a cat', 'generate_image': 'false', 'steps': 999, 'cfg': 7, 'seed': -1}\n```\nAnything else?";
    const value = accepted(parseReply(reply));
    expect(value.repairs).toEqual(['missing-delimiter', 'code-fence', 'trailing-text', 'json-syntax', 'coerced-types', 'clamped']);
    expect(value.text).toBe('Sure');
  });
});

describe('parseReply: fences', () => {
  it('reads a one-line fence after the delimiter and ignores the language tag', () => {
    const value = accepted(parseReply(`Ok\n---\n\`\`\`${'{"prompt": "a", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}'}\`\`\``));
    expect(value.repairs).toEqual(['code-fence']);
    expect(value.metadata.prompt).toBe('a');
    const tagged = accepted(parseReply('Ok\n---\n```javascript\n{"prompt": "b", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}\n```'));
    expect(tagged.metadata.prompt).toBe('b');
  });
});

describe('parseReply: more drift, repaired without asking the model again', () => {
  const REST = '"steps": 20, "cfg": 7, "seed": -1';

  it.each([
    ['Prompt', `{"Prompt": "a cat", "GENERATE_IMAGE": true, "Steps": 20, "CFG": 7, "Seed": -1}`],
    ['camelCase', `{"prompt": "a cat", "generateImage": true, ${REST}}`],
    ['kebab-case', `{"prompt": "a cat", "generate-image": true, ${REST}}`],
    ['words', `{"PROMPT": "a cat", "Generate Image": true, ${REST}}`],
    ['unquoted', `{Prompt: "a cat", generateImage: true, STEPS: 20, Cfg: 7, SEED: -1}`],
  ])('key-names: %s', (_name, json) => {
    const value = accepted(parseReply(`Ok\n---\n${json}`));
    expect(value.metadata).toEqual({ prompt: 'a cat', generate_image: true, steps: 20, cfg: 7, seed: -1 });
    expect(value.repairs).toEqual(json.startsWith('{Prompt:') ? ['json-syntax', 'key-names'] : ['key-names']);
  });

  it('key-names: negativePrompt and Negative_Prompt become negative_prompt', () => {
    for (const key of ['negativePrompt', 'Negative_Prompt', 'NEGATIVE-PROMPT']) {
      const value = accepted(parseReply(`Ok\n---\n{"prompt": "a", "generate_image": false, ${REST}, "${key}": "blurry"}`));
      expect(value.metadata.negative_prompt).toBe('blurry');
      expect(value.repairs).toEqual(['key-names']);
    }
  });

  it('key-names: the exact key wins over a variant, wherever it is written; of two variants the first wins', () => {
    const before = accepted(parseReply(`Ok\n---\n{"Prompt": "theirs", "prompt": "exact", "generate_image": false, ${REST}}`));
    expect(before.metadata.prompt).toBe('exact');
    expect(before.repairs).toEqual([]);
    const after = accepted(parseReply(`Ok\n---\n{"prompt": "exact", "PROMPT": "theirs", "generate_image": false, ${REST}}`));
    expect(after.metadata.prompt).toBe('exact');
    const variants = accepted(parseReply(`Ok\n---\n{"Prompt": "first", "PROMPT": "second", "generate_image": false, ${REST}}`));
    expect(variants.metadata.prompt).toBe('first');
    expect(variants.repairs).toEqual(['key-names']);
  });

  it.each([
    ['"yes"', true],
    ['"Yes"', true],
    ['"no"', false],
    ['"NO"', false],
    ['"True"', true],
    ['"FALSE"', false],
    ['" true "', true],
    ['1', true],
    ['0', false],
    ['"1"', true],
    ['"0"', false],
  ])('coerced-types: generate_image %s', (written, expected) => {
    const value = accepted(parseReply(`Ok\n---\n{"prompt": "a", "generate_image": ${written}, ${REST}}`));
    expect(value.metadata.generate_image).toBe(expected);
    expect(value.repairs).toEqual(['coerced-types']);
  });

  it.each(['2', '"maybe"', '-1', 'null', '"sure"'])('refuses generate_image %s', (written) => {
    const result = rejected(parseReply(`Ok\n---\n{"prompt": "a", "generate_image": ${written}, ${REST}}`));
    expect(result.error).toMatchObject({ code: 'MissingFields', fields: ['generate_image'] });
  });

  it.each(['"random"', '"Random"', '"any"', '"none"', 'null', '"NULL"', '"auto"', '""'])('random-seed: %s → -1', (written) => {
    const value = accepted(parseReply(`Ok\n---\n{"prompt": "a", "generate_image": false, "steps": 20, "cfg": 7, "seed": ${written}}`));
    expect(value.metadata.seed).toBe(-1);
    expect(value.repairs).toEqual(['random-seed']);
  });

  it('coerced-types: a seed written "-1" is a number in a string', () => {
    const value = accepted(parseReply('Ok\n---\n{"prompt": "a", "generate_image": false, "steps": 20, "cfg": 7, "seed": "-1"}'));
    expect(value.metadata.seed).toBe(-1);
    expect(value.repairs).toEqual(['coerced-types']);
  });

  it('random-seed only for the seed: steps or cfg written "random" are unusable', () => {
    const result = rejected(parseReply('Ok\n---\n{"prompt": "a", "generate_image": false, "steps": "random", "cfg": null, "seed": 1}'));
    expect(result.error).toMatchObject({ code: 'MissingFields', fields: ['steps', 'cfg'] });
  });

  it.each([
    ['"20 steps"', '"7.5 cfg"', '"seed 42"', { steps: 20, cfg: 7.5, seed: 42 }],
    ['"steps: 30"', '"CFG 6"', '"42"', { steps: 30, cfg: 6, seed: 42 }],
    ['"25 sampling steps."', '"7 CFG scale"', '-1', { steps: 25, cfg: 7, seed: -1 }],
  ])('number-units: steps %s, cfg %s, seed %s', (steps, cfg, seed, expected) => {
    const value = accepted(parseReply(`Ok\n---\n{"prompt": "a", "generate_image": false, "steps": ${steps}, "cfg": ${cfg}, "seed": ${seed}}`));
    expect(value.metadata).toMatchObject(expected);
    expect(value.repairs).toContain('number-units');
    expect(value.repairs.filter((code) => code !== 'coerced-types')).toEqual(['number-units']);
  });

  it.each(['"20 or 30"', '"20-30 steps"', '"about twenty"', '"steps"', `"${'a'.repeat(40)} 20"`])('refuses steps %s', (steps) => {
    const result = rejected(parseReply(`Ok\n---\n{"prompt": "a", "generate_image": false, "steps": ${steps}, "cfg": 7, "seed": -1}`));
    expect(result.error).toMatchObject({ code: 'MissingFields', fields: ['steps'] });
  });

  it.each([
    ['***', '***'],
    ['___', '___'],
    ['===', '==='],
    ['em dash', '—'],
    ['spaced dashes', '- - -'],
    ['spaced stars', '* * *'],
    ['four dashes', '----'],
  ])('markdown-rule: %s used as the delimiter', (_name, rule) => {
    const value = accepted(parseReply(`Perfect! Generating now.\n${rule}\n${JSON_LINE}`));
    expect(value).toEqual({ text: 'Perfect! Generating now.', metadata: METADATA, repairs: ['markdown-rule'], notices: [] });
  });

  it('markdown-rule: with a fence, and with the JSON on the rule line', () => {
    expect(accepted(parseReply(`Ok\n***\n\`\`\`json\n${JSON_LINE}\n\`\`\``)).repairs).toEqual(['markdown-rule', 'code-fence']);
    expect(accepted(parseReply(`Ok\n— ${JSON_LINE}`)).repairs).toEqual(['markdown-rule']);
  });

  it('a rule followed by prose stays in the text', () => {
    const value = accepted(parseReply(`Intro\n***\nMore.\n---\n${JSON_LINE}`));
    expect(value.text).toBe('Intro\n***\nMore.');
    expect(value.repairs).toEqual([]);
  });

  it('inline-json: the metadata at the end of a prose line', () => {
    const value = accepted(parseReply(`Perfect, here you go! ${JSON_LINE}`));
    expect(value).toEqual({ text: 'Perfect, here you go!', metadata: METADATA, repairs: ['missing-delimiter', 'inline-json'], notices: [] });
  });

  it('inline-json: prose braces before it stay in the text', () => {
    const value = accepted(parseReply(`A set {1,2} and {curly} words. ${JSON_LINE}`));
    expect(value.text).toBe('A set {1,2} and {curly} words.');
    expect(value.metadata).toEqual(METADATA);
  });

  it('repeated-metadata: the metadata written twice, the first copy wins', () => {
    const second = JSON_LINE.replace('"seed": -1', '"seed": 99');
    const value = accepted(parseReply(`Ok\n---\n${JSON_LINE}\n---\n${second}`));
    expect(value.metadata).toEqual(METADATA);
    expect(value.repairs).toEqual(['trailing-text', 'repeated-metadata']);
    expect(value.text).toBe('Ok');
  });

  it('repeated-metadata: a first copy that cannot be used gives way to the next usable one', () => {
    const cases = [
      `Ok\n---\n{"prompt": "a tabby", "cfg": 7}\n${JSON_LINE}`,
      `Ok\n---\n{"prompt": "a tabby" @@ "steps"}\n---\n${JSON_LINE}`,
      `Ok\n---\n{"prompt": "a tabby", "generate_image": "perhaps", ${REST}} oops ${JSON_LINE}`,
      `Ok {"prompt": "a tabby"} and again: ${JSON_LINE}`,
    ];
    for (const reply of cases) {
      const value = accepted(parseReply(reply));
      expect(value.metadata).toEqual(METADATA);
      expect(value.repairs).toContain('repeated-metadata');
      expect(value.text).toBe('Ok');
    }
  });

  it('repeated-metadata: when no copy can be used, the first copy\'s error is reported', () => {
    const result = rejected(parseReply('Ok\n---\n{"prompt": "a", "cfg": 7}\n---\n{"prompt": "b" @@}'));
    expect(result.error).toMatchObject({ code: 'MissingFields', fields: ['generate_image', 'steps', 'seed'] });
  });

  it('trailing-text: JSON followed by more chatter', () => {
    const value = accepted(parseReply(`Here you go! ${JSON_LINE} Let me know what you think {smile}.`));
    expect(value.text).toBe('Here you go!');
    expect(value.repairs).toEqual(['missing-delimiter', 'inline-json', 'trailing-text']);
  });

  it('records every new repair together, in the documented order', () => {
    const reply = `Sure! {'Prompt': 'a cat', 'generateImage': 'Yes', 'Steps': '20 steps', 'CFG': 99, 'Seed': 'random',} Enjoy!\n${JSON_LINE}`;
    const value = accepted(parseReply(reply));
    expect(value.metadata).toEqual({ prompt: 'a cat', generate_image: true, steps: 20, cfg: 30, seed: -1 });
    expect(value.repairs).toEqual([
      'missing-delimiter',
      'inline-json',
      'trailing-text',
      'repeated-metadata',
      'json-syntax',
      'key-names',
      'coerced-types',
      'random-seed',
      'number-units',
      'clamped',
    ]);
  });
});

describe('parseMetadataReply: the answer of the metadata-only step', () => {
  it('reads the object alone, reporting no missing delimiter', () => {
    expect(accepted(parseMetadataReply(`  ${JSON_LINE}\n`))).toEqual({ text: '', metadata: METADATA, repairs: [], notices: [] });
  });

  it('repairs like any reply', () => {
    const value = accepted(parseMetadataReply('{"Prompt": "a fox", "generate_image": "yes", "steps": 20, "cfg": 99, "seed": "random"}'));
    expect(value.metadata).toEqual({ prompt: 'a fox', generate_image: true, steps: 20, cfg: 30, seed: -1 });
    expect(value.repairs).toEqual(['key-names', 'coerced-types', 'random-seed', 'clamped']);
  });

  it('fails on anything but a usable object, saying when the cap cut it', () => {
    expect(rejected(parseMetadataReply('Sure! Here it is.')).error.code).toBe('InvalidJson');
    expect(rejected(parseMetadataReply('{"prompt": "a fox"}')).error).toMatchObject({ code: 'MissingFields' });
    expect(rejected(parseMetadataReply('{"prompt": "a fox, highly', { doneReason: 'length' })).error.message).toMatch(/num_predict/);
  });
});
