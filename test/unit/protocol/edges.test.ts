// Edges of the protocol that the mutation run (npm run mutate) showed no test looked at: number
// spellings the parser coerces, its failure messages, markers that must stay text, whitespace,
// and the exact shape of what the model is sent.
import { describe, expect, it } from 'vitest';
import {
  buildCompactionMessage,
  buildMetadataReminder,
  buildReminder,
  buildReminderRequest,
  createWithholder,
  estimateTokens,
  formatCanonicalReply,
  formatUserNote,
  metadataJsonSchema,
  parseMetadataReply,
  parseReply,
  planRecovery,
  renderContext,
  SYSTEM_PROMPT,
  type ContextEntry,
  type Metadata,
} from '../../../server/protocol/index.ts';

const META: Metadata = { prompt: 'a cat', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const JSON_META = '{"prompt": "a cat", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}';

/** A reply whose JSON has these fields replaced (raw JSON text per field). */
function reply(fields: Record<string, string>): string {
  const all: Record<string, string> = { prompt: '"a cat"', generate_image: 'false', steps: '20', cfg: '7', seed: '-1', ...fields };
  const body = Object.entries(all)
    .map(([key, value]) => `"${key}": ${value}`)
    .join(', ');
  return `Here.\n---\n{${body}}`;
}

function parsed(raw: string) {
  const result = parseReply(raw);
  if (!result.ok) throw new Error(`expected a parse, got ${result.error.code}: ${result.error.message}`);
  return result.value;
}

function failure(raw: string) {
  const result = parseReply(raw);
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result.value.metadata)}`);
  return result.error;
}

/** What a reply shows when streamed one character at a time. */
function streamed(text: string): string {
  const withholder = createWithholder();
  let shown = '';
  for (const ch of text) shown += withholder.push(ch);
  return shown + withholder.finish().flushed;
}

describe('numbers written as strings', () => {
  const cases: Array<[string, Record<string, string>, Partial<Metadata>]> = [
    ['a decimal', { cfg: '"7.25"' }, { cfg: 7.25 }],
    ['a leading dot', { cfg: '".55"' }, { cfg: 0.55 }],
    ['a trailing dot', { cfg: '"7."' }, { cfg: 7 }],
    ['an exponent', { steps: '"2e1"' }, { steps: 20 }],
    ['a signed exponent with two digits', { steps: '"2e+01"' }, { steps: 20 }],
    ['a plus sign', { steps: '"+5"' }, { steps: 5 }],
    ['a minus sign', { seed: '"-1"' }, { seed: -1 }],
    ['spaces around', { steps: '" 20 "' }, { steps: 20 }],
  ];
  for (const [name, fields, expected] of cases) {
    it(`coerces ${name}`, () => {
      const value = parsed(reply(fields));
      expect(value.metadata).toMatchObject(expected);
      expect(value.repairs).toEqual(['coerced-types']);
    });
  }

  for (const text of ['"20abc"', '"abc20"', '"1e"', '"."']) {
    it(`refuses ${text} as a number, naming the field and the value`, () => {
      const error = failure(reply({ steps: text }));
      expect(error).toMatchObject({ code: 'MissingFields', fields: ['steps'] });
      expect(error.message).toContain(`(steps: ${text} is not a number)`);
    });
  }
});

describe('failure messages name what is wrong', () => {
  it('an absent field is listed without a value', () => {
    const error = failure('Here.\n---\n{"prompt": "a cat", "generate_image": false, "cfg": 7, "seed": -1}');
    expect(error.fields).toEqual(['steps']);
    expect(error.message).toBe(
      'The metadata lacks usable values for steps. Ask the model to send all of prompt, generate_image, steps, cfg and seed.',
    );
  });

  it('each unusable value says what was expected, fields in the documented order', () => {
    const error = failure(reply({ seed: '"x"', generate_image: '"maybe"', prompt: '5', negative_prompt: '7' }));
    expect(error.fields).toEqual(['prompt', 'generate_image', 'seed', 'negative_prompt']);
    expect(error.message).toContain(
      '(prompt: 5 is not a string; generate_image: "maybe" is not true or false; seed: "x" is not a number; negative_prompt: 7 is not a string)',
    );
  });

  it('a long value is cut at 40 characters in the message', () => {
    const long = `"${'x'.repeat(50)}"`;
    expect(failure(reply({ steps: long })).message).toContain(`steps: "${'x'.repeat(39)}… is not a number`);
    const fits = `"${'x'.repeat(38)}"`; // 40 characters with its quotes
    expect(failure(reply({ steps: fits })).message).toContain(`steps: ${fits} is not a number`);
  });

  it('true and false must be the whole word', () => {
    for (const text of ['"xtrue"', '"truex"']) expect(failure(reply({ generate_image: text })).fields).toEqual(['generate_image']);
  });

  it('a `---` line with nothing after it says the JSON is missing', () => {
    const error = failure('Here.\n---');
    expect(error.code).toBe('InvalidJson');
    expect(error.message).toBe('The reply has a `---` line but no JSON object after it. Ask the model to end with `---` and the JSON object.');
  });

  it('JSON that even jsonrepair cannot read says so, with the reason', () => {
    const error = failure('Here.\n---\n{"prompt": "\\u12", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}');
    expect(error.code).toBe('InvalidJson');
    expect(error.message).toMatch(/^The JSON metadata cannot be read, even after repair \(.*unicode.*\)\. Ask the model to resend it as valid JSON\.$/i);
  });
});

describe('reading the JSON object', () => {
  it("finds the end of an object whose strings hold an apostrophe and a brace", () => {
    const value = parsed(reply({ prompt: `"a cat's hat with a } sign"` }));
    expect(value.metadata.prompt).toBe("a cat's hat with a } sign");
    expect(value.repairs).toEqual([]);
  });

  it("Python-style quotes: a brace inside a single-quoted string does not end the object", () => {
    const value = parsed("Here.\n---\n{'prompt': 'a {cat', 'generate_image': False, 'steps': 20, 'cfg': 7, 'seed': -1}");
    expect(value.metadata.prompt).toBe('a {cat');
    expect(value.repairs).toEqual(['json-syntax']);
  });

  it("an apostrophe outside any string does not hide the object's end (double quotes are tried next)", () => {
    const error = failure('Here.\n---\n{"prompt": "a {cat", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1, "note": don\'t}');
    // The end was found, so the message is about reading the JSON, not about a missing `}`.
    expect(error.message).toMatch(/^The JSON metadata cannot be read, even after repair/);
  });

  it('a nested object does not end the metadata early', () => {
    const value = parsed(reply({ extra: '{"a": {"b": 1}}' }));
    expect(value.metadata).toEqual(META);
    expect(value.repairs).toEqual([]);
  });

  it('text after an unfenced object is trailing text, however short', () => {
    expect(parsed(`Here.\n---\n${JSON_META}\nok!`).repairs).toEqual(['trailing-text']);
  });

  it('a fence that is opened and not closed, then text, is trailing text too', () => {
    expect(parsed(`Here.\n---\n\`\`\`json\n${JSON_META}\nok!`).repairs).toEqual(['code-fence', 'trailing-text']);
  });

  it('negative_prompt null means none; a 2001-character one is cut and said so', () => {
    expect(parsed(reply({ negative_prompt: 'null' })).metadata).toEqual(META);
    const value = parsed(reply({ negative_prompt: `"${'n'.repeat(2001)}"` }));
    expect(value.metadata.negative_prompt).toHaveLength(2000);
    expect(value.notices).toEqual([
      'The negative prompt is 2001 characters long, above the maximum 2000, so only the first 2000 characters are used.',
    ]);
  });

  it('form feeds and vertical tabs are whitespace before the delimiter', () => {
    expect(parsed(`Here.\f\v\n---\n${JSON_META}`).text).toBe('Here.');
  });
});

describe('what stays text while streaming', () => {
  it('ordinary text is released at once, one character at a time', () => {
    const withholder = createWithholder();
    expect(withholder.push('H')).toBe('H');
    expect(withholder.push('i')).toBe('i');
  });

  it('leading form feeds and vertical tabs are not shown', () => {
    expect(streamed('\f\v Hello')).toBe('Hello');
  });

  const texts: Array<[string, string, string]> = [
    ['`---` followed by a word and a brace', 'Score:\n---a{b}', 'Score:\n---a{b}'],
    ['`---` then a line with inline code', 'Look:\n---\n`code` here', 'Look:\n---\n`code` here'],
    ['`---` then a backtick and a brace', 'Look:\n---\n`{x}`', 'Look:\n---\n`{x}`'],
    ['a `---` line then two backticks at the end', 'Look:\n---\n``', 'Look:\n---\n``'],
    ['a json fence left open at the end (its newline is trailing whitespace)', 'Example:\n```json\n', 'Example:\n```json'],
    // The object itself is still withheld (a bare `{"prompt"` line), but the fence line is text.
    ['the fence line of another language', 'Example:\n```python\n{"prompt": "x"}', 'Example:\n```python'],
    ['the fence line of a two-word info string', 'Example:\n```js on\n{"prompt": "x"}', 'Example:\n```js on'],
  ];
  for (const [name, text, shown] of texts) {
    it(`shows ${name}`, () => {
      expect(streamed(text)).toBe(shown);
    });
  }

  it('a fence with a blank line before the object still holds metadata', () => {
    const value = parsed(`Here.\n\`\`\`json\n\n  ${JSON_META}\n\`\`\``);
    expect(value.text).toBe('Here.');
    expect(value.repairs).toEqual(['missing-delimiter', 'code-fence']);
  });
});

describe('the canonical reply the model sees again', () => {
  it('trims whitespace around the text, of every kind', () => {
    expect(formatCanonicalReply(' \f\v Hello there. \n\t', META)).toBe(`Hello there.\n---\n${JSON_META}`);
  });

  it('an empty or blank text leaves only the delimiter and the JSON', () => {
    expect(formatCanonicalReply(' \n ', META)).toBe(`---\n${JSON_META}`);
  });
});

describe('the context sent to the model', () => {
  const user = (text: string, note?: string): ContextEntry => ({ kind: 'user', text, ...(note !== undefined ? { note } : {}) });
  const assistant = (text: string): ContextEntry => ({ kind: 'assistant', text, metadata: META });

  it('an empty note adds nothing before the text', () => {
    expect(renderContext([user('a cat', '')], { numCtx: 8192 })[1]).toEqual({ role: 'user', content: 'a cat' });
  });

  it('replies in a row become one, blank ones left out', () => {
    const messages = renderContext([user('a cat'), assistant('Hi.'), assistant(''), assistant('There.'), user('more')], { numCtx: 8192 });
    expect(messages[2]).toEqual({ role: 'assistant', content: `Hi.\n\nThere.\n---\n${JSON_META}` });
  });

  it('a summary lists the user words, then its text when it has one', () => {
    const withText = renderContext([{ kind: 'summary', userWords: ['a cat', 'blue'], text: 'Prompt then: a blue cat' }], { numCtx: 8192 });
    expect(withText[1]!.content).toBe('Summary of the earlier conversation. The user said:\n- "a cat"\n- "blue"\nPrompt then: a blue cat');
    const without = renderContext([{ kind: 'summary', userWords: ['a cat'], text: '' }], { numCtx: 8192 });
    expect(without[1]!.content).toBe('Summary of the earlier conversation. The user said:\n- "a cat"');
  });

  it('nothing is dropped at exactly the budget; one token over drops the oldest pair', () => {
    const entries = [user('first message'), assistant('First reply.'), user('second message')];
    const all = renderContext(entries, { numCtx: 100_000, reserveTokens: 0 });
    const total = all.reduce((sum, message) => sum + estimateTokens(message.content) + 4, 0);
    expect(renderContext(entries, { numCtx: total, reserveTokens: 0 })).toEqual(all);
    expect(renderContext(entries, { numCtx: total - 1, reserveTokens: 0 }).map((m) => m.content)).toEqual([SYSTEM_PROMPT, 'second message']);
  });

  it('a reminder request asks the last user message again, not the last message', () => {
    const context = [
      { role: 'system' as const, content: SYSTEM_PROMPT },
      { role: 'user' as const, content: 'a cat' },
      { role: 'assistant' as const, content: 'earlier' },
    ];
    expect(buildReminderRequest(context, 'no JSON').at(-1)).toEqual({ role: 'user', content: 'a cat' });
  });
});

describe('the exact words sent', () => {
  it("the JSON schema for Ollama's format holds only what its grammar understands", () => {
    expect(metadataJsonSchema).toEqual({
      type: 'object',
      properties: {
        prompt: { type: 'string' },
        generate_image: { type: 'boolean' },
        steps: { type: 'integer', minimum: 1, maximum: 150 },
        cfg: { type: 'number' },
        seed: { type: 'integer', minimum: -1 },
        negative_prompt: { type: 'string' },
      },
      required: ['prompt', 'generate_image', 'steps', 'cfg', 'seed'],
    });
  });

  it("the reminder's example is a reply that parses, still asking (no image yet)", () => {
    const example = buildReminder().split('\n\n')[1]!;
    const value = parsed(example);
    expect(value.metadata).toMatchObject({ prompt: 'a tabby cat wearing a wizard hat', generate_image: false });
    expect(value.text).toBe('A tabby cat in a wizard hat, got it! Should the hat be blue or purple?');
  });

  it('compaction without any user words says so, and asks for a short prompt', () => {
    const message = buildCompactionMessage({ userWords: [], prompt: '', settings: { steps: 20, cfg: 7, seed: -1 } });
    expect(message.split('\n').slice(0, 5)).toEqual([
      'User wants:',
      '- (nothing yet)',
      'Current prompt: (none yet)',
      'Current settings: steps 20, cfg 7, seed -1',
      'Write the image prompt (under 200 characters) from what the user wants, keeping the details of the current prompt.',
    ]);
  });

  it('the settings note names a size only with both sides, and a negative prompt only when there is one', () => {
    const base = { steps: 20, cfg: 7, seed: -1 };
    expect(formatUserNote({ settings: { ...base, width: 512 } })).toBe('[Current settings: steps 20, cfg 7, seed -1]');
    expect(formatUserNote({ settings: { ...base, height: 512 } })).toBe('[Current settings: steps 20, cfg 7, seed -1]');
    expect(formatUserNote({ settings: { ...base, width: 512, height: 768, negativePrompt: '' } })).toBe(
      '[Current settings: steps 20, cfg 7, seed -1, size 512x768]',
    );
    expect(formatUserNote({ settings: { ...base, negativePrompt: 'blurry' } })).toBe('[Current settings: steps 20, cfg 7, seed -1, negative prompt "blurry"]');
  });

  it('the recovery policy refuses a count below one, saying what it got', () => {
    expect(() => planRecovery(0)).toThrow('planRecovery needs the number of failed attempts (1 or more), got 0; call it only after a failure.');
  });
});

// Edges the second mutation run of server/protocol showed (after issue 12's fast paths).
describe('protocol edges, second run', () => {
  const JSON_OK = '{"prompt": "a fox", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}';
  const JSON_BAD = '{"prompt": "a fox", "generate_image": false, "steps": [1], "cfg": 7, "seed": -1}';
  const parse = (raw: string) => {
    const parsed = parseReply(raw);
    return parsed.ok ? { ok: true, text: parsed.value.text, metadata: parsed.value.metadata, repairs: parsed.value.repairs } : { ok: false, code: parsed.error.code };
  };

  it('releases text in the middle of a line at once, whole', () => {
    expect(createWithholder().push('Hello there, fox')).toBe('Hello there, fox');
    // Control characters below tab are not whitespace: nothing waits for them (the step-by-step path agrees).
    expect(createWithholder().push('Hello there\u0001')).toBe('Hello there\u0001');
    expect(createWithholder().push('H\u0001')).toBe('H\u0001');
  });

  it('a two-character rule line is text; a key that only starts like prompt is text', () => {
    const rule = createWithholder();
    rule.push(`Nice.\n**\n${JSON_OK}`);
    expect(rule.finish()).toMatchObject({ shown: 'Nice.\n**', marker: 'bare-json' });

    const key = createWithholder();
    expect(key.push('Use {"promp": 1} here')).toBe('Use {"promp": 1} here');
    expect(key.finish()).toMatchObject({ shown: 'Use {"promp": 1} here', marker: null, tail: null });
    const bare = createWithholder();
    bare.push('Use {promp: 1} here');
    expect(bare.finish()).toMatchObject({ shown: 'Use {promp: 1} here', marker: null });
  });

  it('fences: a language that only starts like json is text; a one-line fence is metadata; a rule opens one fence only', () => {
    const split = (raw: string) => {
      const withholder = createWithholder();
      withholder.push(raw);
      const { shown, marker, tail } = withholder.finish();
      return { shown, marker, tail: tail?.slice(0, 4) };
    };
    expect(split(`Here:\n\`\`\`js\n${JSON_OK}`)).toEqual({ shown: 'Here:\n```js', marker: 'bare-json', tail: '{"pr' });
    expect(split(`Here:\n\`\`\`${JSON_OK}\`\`\``)).toEqual({ shown: 'Here:', marker: 'fence', tail: '```{' });
    expect(split(`Text\n***\n\`\`\`\n\`\`\`\n${JSON_OK}`)).toEqual({ shown: 'Text\n***\n```', marker: 'fence', tail: '```\n' });
  });

  it('tries at most three copies of the metadata', () => {
    expect(parse(`A fox.\n---\n${JSON_BAD}\n${JSON_BAD}\n${JSON_OK}`)).toMatchObject({ ok: true, text: 'A fox.' });
    expect(parse(`A fox.\n---\n${JSON_BAD}\n${JSON_BAD}\n${JSON_BAD}\n${JSON_OK}`)).toEqual({ ok: false, code: 'MissingFields' });
  });

  it('reads a rule spaced with blanks or tabs before the JSON', () => {
    // One copy, read where the rule ends: a second look further on would add repeated-metadata.
    expect(parse(`A fox.\n- - -\n${JSON_OK}`)).toMatchObject({ ok: true, text: 'A fox.', metadata: { prompt: 'a fox' }, repairs: ['markdown-rule'] });
    expect(parse(`A fox.\n-\t-\t-\n${JSON_OK}`)).toMatchObject({ ok: true, text: 'A fox.', metadata: { prompt: 'a fox' }, repairs: ['markdown-rule'] });
  });

  it('a lone carriage return in the prompt is a line break; a seed word is read whatever its case and blanks', () => {
    expect(parse(`A fox.\n---\n${JSON_OK.replace('"a fox"', '"one\\rtwo"')}`)).toMatchObject({ metadata: { prompt: 'one\ntwo' } });
    expect(parse(`A fox.\n---\n${JSON_OK.replace('"seed": -1', '"seed": " Random "')}`)).toMatchObject({ ok: true, metadata: { seed: -1 } });
  });

  it('reads a number with words up to 40 characters long, and no longer', () => {
    const withSteps = (value: string) => parse(`A fox.\n---\n${JSON_OK.replace('"steps": 20', `"steps": ${JSON.stringify(value)}`)}`);
    expect(withSteps(`20 ${'x'.repeat(37)}`)).toMatchObject({ ok: true, metadata: { steps: 20 } });
    expect(withSteps(`20 ${'x'.repeat(38)}`)).toEqual({ ok: false, code: 'MissingFields' });
  });

  it('the metadata-only answer must be the JSON object itself; the length note only when it was cut', () => {
    const message = 'The answer to the request for the metadata alone holds no JSON object.';
    const prose = parseMetadataReply(`Sure: ${JSON_OK}`);
    expect(prose).toEqual({ ok: false, error: { code: 'InvalidJson', message }, text: '' });
    const cut = parseMetadataReply(`Sure: ${JSON_OK}`, { doneReason: 'length' });
    expect(cut.ok === false && cut.error.message.startsWith(`${message} The reply was cut off by the length limit`)).toBe(true);
    expect(parseMetadataReply(`  ${JSON_OK}`)).toMatchObject({ ok: true });
  });

  it('the metadata reminder is five lines, the fields explained in the fourth', () => {
    const lines = buildMetadataReminder({ prompt: '', settings: { steps: 20, cfg: 7, seed: -1 } }).split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[3]).toBe(
      'prompt: the image prompt (under 200 characters) from what the user wants and your reply, or "" while you are still asking questions. generate_image: true only when the prompt is ready and the user wants the image now.',
    );
  });
});
