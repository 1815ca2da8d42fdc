import { describe, expect, it } from 'vitest';
import { parseReply } from '../../../server/protocol/index.ts';
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
      parseReply('Here.\n---\n{"prompt": 42, "generate_image": "maybe", "steps": "many", "cfg": 7, "seed": null}'),
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
