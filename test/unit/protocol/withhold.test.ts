import { describe, expect, it } from 'vitest';
import { createWithholder } from '../../../server/protocol/index.ts';
import { MAX_HELD_CHARS, MAX_KEY_CHARS, MAX_RULE_CHARS } from '../../../server/protocol/delimiter.ts';

const JSON_LINE = '{"prompt": "a tabby cat", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}';

function feed(chunks: string[]) {
  const withholder = createWithholder();
  const outputs = chunks.map((chunk) => withholder.push(chunk));
  const result = withholder.finish();
  return { outputs, displayed: outputs.join('') + result.flushed, result };
}

function feedChars(text: string) {
  return feed([...text]);
}

describe('createWithholder: the delimiter', () => {
  it('stops displaying at the --- line', () => {
    const { outputs, result } = feed(['Hello', '!\n', '---', `\n${JSON_LINE}`]);
    expect(outputs).toEqual(['Hello', '!', '', '']);
    expect(result.shown).toBe('Hello!');
    expect(result.marker).toBe('delimiter');
    expect(result.tail).toBe(`---\n${JSON_LINE}`);
  });

  it('withholds every token after the delimiter', () => {
    const { outputs, result } = feed(['Sure.\n---\n', '{"prompt":', ' "a cat",', ' "generate_image": true}', ' and more words']);
    expect(outputs.slice(1)).toEqual(['', '', '', '']);
    expect(result.shown).toBe('Sure.');
    expect(result.tail).toBe('---\n{"prompt": "a cat", "generate_image": true} and more words');
  });

  it('handles the delimiter split in the middle of a token', () => {
    const { outputs, result } = feed(['Sure thing.\n--', '-\n{"pro', 'mpt": ""}']);
    expect(outputs).toEqual(['Sure thing.', '', '']);
    expect(result.shown).toBe('Sure thing.');
    expect(feed(['Ok\n-', '-', '-', '\n', '{', '"prompt": ""}']).outputs.join('')).toBe('Ok');
  });

  it('recognises --- at the very start of the reply', () => {
    const { displayed, result } = feedChars(`---\n${JSON_LINE}`);
    expect(displayed).toBe('');
    expect(result.marker).toBe('delimiter');
    expect(result.tail).toBe(`---\n${JSON_LINE}`);
  });

  it('accepts \\r\\n line ends and spaces around ---', () => {
    const { displayed, result } = feedChars(`Hi there\r\n  ---\t\r\n${JSON_LINE}\r\n`);
    expect(displayed).toBe('Hi there');
    expect(result.tail).toBe(`---\t\r\n${JSON_LINE}\r\n`);
  });

  it('treats --- followed by { on the same line as a delimiter', () => {
    const { displayed, result } = feedChars(`Done!\n--- ${JSON_LINE}`);
    expect(displayed).toBe('Done!');
    expect(result.marker).toBe('delimiter');
    expect(result.tail).toBe(`--- ${JSON_LINE}`);
  });

  it('treats a fence after the --- line as part of the metadata', () => {
    const { displayed, result } = feedChars(`Done!\n---\n\n\`\`\`json\n${JSON_LINE}\n\`\`\``);
    expect(displayed).toBe('Done!');
    expect(result.marker).toBe('delimiter');
  });

  it('treats a final --- line (JSON never came) as a delimiter', () => {
    const { displayed, result } = feedChars('Almost there\n---\n\n');
    expect(displayed).toBe('Almost there');
    expect(result.marker).toBe('delimiter');
    expect(result.tail).toBe('---\n\n');
  });

  it('shows ---- and --- followed by words as text', () => {
    expect(feedChars('a\n----\nb').result).toMatchObject({ shown: 'a\n----\nb', marker: null, tail: null });
    expect(feedChars('a\n--- yes\nb').result).toMatchObject({ shown: 'a\n--- yes\nb', marker: null });
    expect(feedChars('a\n-- b').result.shown).toBe('a\n-- b');
    // A --- inside a line is text; the metadata after it is the end-of-line kind.
    expect(feedChars('well --- {"prompt": 1}').result).toMatchObject({ shown: 'well ---', marker: 'inline-json' });
  });

  it('shows a Markdown rule followed by prose, and still finds the real delimiter later', () => {
    const reply = `Intro\n\n---\n\nMore prose here.\n---\n${JSON_LINE}`;
    const { outputs, result } = feedChars(reply);
    expect(result.shown).toBe('Intro\n\n---\n\nMore prose here.');
    expect(outputs.join('')).toBe('Intro\n\n---\n\nMore prose here.');
    expect(result.marker).toBe('delimiter');
  });

  it('finds a delimiter line right after a rejected Markdown rule', () => {
    const { result } = feedChars(`Text\n---\n---\n${JSON_LINE}`);
    expect(result.shown).toBe('Text\n---');
    expect(result.tail).toBe(`---\n${JSON_LINE}`);
  });
});

describe('createWithholder: metadata without the delimiter', () => {
  it.each([
    ['double-quoted prompt', '{"prompt": "a cat", "generate_image": false}'],
    ['single-quoted key', "{'prompt': 'a cat'}"],
    ['unquoted key', '{prompt: "a cat"}'],
    ['generate_image first', '{"generate_image": true, "prompt": "a cat"}'],
    ['key on the next line', '{\n  "prompt": "a cat"\n}'],
    ['indented brace', '   { "prompt": "a cat" }'],
  ])('withholds a bare JSON line (%s)', (_name, json) => {
    const { displayed, result } = feedChars(`Here you go!\n${json}`);
    expect(displayed).toBe('Here you go!');
    expect(result.marker).toBe('bare-json');
    expect(result.tail).toBe(json.trimStart());
  });

  it.each(['```json', '```', '```JSON', '``` json'])('withholds a fenced JSON block opened by %s', (fence) => {
    const { displayed, result } = feedChars(`Here you go!\n${fence}\n${JSON_LINE}\n\`\`\``);
    expect(displayed).toBe('Here you go!');
    expect(result.marker).toBe('fence');
    expect(result.tail).toBe(`${fence.trimStart()}\n${JSON_LINE}\n\`\`\``);
  });

  it('shows a { line whose first key is something else', () => {
    const reply = 'Settings file:\n{"name": "demo", "prompt": "x"}\nThat is all.';
    const { displayed, result } = feedChars(reply);
    expect(displayed).toBe(reply);
    expect(result.marker).toBeNull();
  });

  it('shows an unquoted { line that is prose or code', () => {
    expect(feedChars('code:\n{ promptly }\nend').result.shown).toBe('code:\n{ promptly }\nend');
    expect(feedChars('x\n{}\ny').result.shown).toBe('x\n{}\ny');
    expect(feedChars('x\n{Hello}').result.shown).toBe('x\n{Hello}');
  });

  it('shows code fences that do not hold metadata, including a closing fence at the end', () => {
    const reply = 'Example:\n```python\nprint({"prompt" if x else y})\n```';
    expect(feedChars(reply).result).toMatchObject({ shown: reply, marker: null });
    const plain = 'Example:\n```\nls -la\n```';
    expect(feedChars(plain).result).toMatchObject({ shown: plain, marker: null });
    const other = 'Example:\n```json\n{"name": 1}\n```';
    expect(feedChars(other).result).toMatchObject({ shown: other, marker: null });
  });

  it('finds a delimiter line right after a lone { line (a key never starts with - or _)', () => {
    expect(feedChars(`{\n---\n${JSON_LINE}`).result).toMatchObject({ shown: '{', marker: 'delimiter' });
    expect(feedChars(`{\n___\n${JSON_LINE}`).result).toMatchObject({ shown: '{', marker: 'rule' });
  });

  it('withholds an object cut off mid-key at the end of the stream', () => {
    const { displayed, result } = feedChars('Sure\n{"pro');
    expect(displayed).toBe('Sure');
    expect(result).toMatchObject({ marker: 'bare-json', tail: '{"pro' });
  });

});

describe('createWithholder: other Markdown rules as the delimiter', () => {
  it.each(['***', '___', '===', '—', '–', '- - -', '* * *', '----', '-----', '——', ' ***  ', '_ _ _'])(
    'withholds %j when metadata follows it, so the rule never shows',
    (rule) => {
      const { outputs, displayed, result } = feed(['Here you go!\n', rule, '\n', JSON_LINE]);
      expect(displayed).toBe('Here you go!');
      expect(outputs.join('')).toBe('Here you go!');
      expect(result.marker).toBe('rule');
      expect(result.tail).toBe(`${rule.trimStart()}\n${JSON_LINE}`);
    },
  );

  it('withholds a rule followed by blank lines, a fence, or the JSON on the same line', () => {
    expect(feedChars(`Ok\n***\n\n  ${JSON_LINE}`).result).toMatchObject({ shown: 'Ok', marker: 'rule' });
    expect(feedChars(`Ok\n___\n\`\`\`json\n${JSON_LINE}\n\`\`\``).result).toMatchObject({ shown: 'Ok', marker: 'rule' });
    expect(feedChars(`Ok\n=== ${JSON_LINE}`).result).toMatchObject({ shown: 'Ok', marker: 'rule', tail: `=== ${JSON_LINE}` });
    expect(feedChars(`Ok\n— {Prompt: "x"}`).result).toMatchObject({ shown: 'Ok', marker: 'rule' });
  });

  it('shows a rule followed by prose, as soon as the prose starts', () => {
    const withholder = createWithholder();
    expect(withholder.push('Intro\n***\n')).toBe('Intro');
    expect(withholder.push('\n')).toBe('');
    expect(withholder.push('M')).toBe('\n***\n\nM');
    expect(withholder.push('ore.')).toBe('ore.');
    expect(withholder.finish().shown).toBe('Intro\n***\n\nMore.');
  });

  it('shows a rule followed by other JSON, a rule at the end, and lines that only look like rules', () => {
    const other = 'a\n***\n{"name": 1}\nb';
    expect(feedChars(other).result).toMatchObject({ shown: other, marker: null });
    expect(feedChars('The end.\n***').result).toMatchObject({ shown: 'The end.\n***', marker: null });
    expect(feedChars('x\n* item\n**bold**\n_a_\n= b\n— said she\n-*-').result.shown).toBe(
      'x\n* item\n**bold**\n_a_\n= b\n— said she\n-*-',
    );
  });

  it('still treats a final --- line (and only ---) as a delimiter whose JSON never came', () => {
    expect(feedChars('x\n---').result.marker).toBe('delimiter');
    expect(feedChars('x\n----').result).toMatchObject({ shown: 'x\n----', marker: null });
  });

  it('finds the metadata line after a rule too long to be a delimiter', () => {
    const rule = '*'.repeat(MAX_RULE_CHARS + 1);
    const { outputs, result } = feed([`Ok\n${rule}\n`, JSON_LINE]);
    expect(outputs[0]).toBe(`Ok\n${rule}`);
    expect(result).toMatchObject({ shown: `Ok\n${rule}`, marker: 'bare-json', tail: JSON_LINE });
  });
});

describe('createWithholder: metadata at the end of a prose line', () => {
  it('withholds it from the { on, whatever the chunking', () => {
    const reply = `Perfect, here you go! ${JSON_LINE}`;
    const { outputs, result } = feed(['Perfect, here you go! {', '"prompt', '": "a', JSON_LINE.slice(13)]);
    expect(outputs).toEqual(['Perfect, here you go!', '', '', '']);
    expect(result).toMatchObject({ shown: 'Perfect, here you go!', marker: 'inline-json', tail: JSON_LINE });
    expect(feedChars(reply).displayed).toBe('Perfect, here you go!');
  });

  it.each([
    ['single-quoted', "{'prompt': 'x'}"],
    ['unquoted', '{prompt: "x"}'],
    ['another key style', '{"GENERATE_IMAGE": true, "Prompt": "x"}'],
    ['camel case', '{ "generateImage" : true }'],
    ['right after the punctuation', '{"prompt":"x"}'],
  ])('withholds it when the first key is %s', (_name, json) => {
    const { displayed, result } = feedChars(`Sure thing! ${json}`);
    expect(displayed).toBe('Sure thing!');
    expect(result).toMatchObject({ marker: 'inline-json', tail: json });
  });

  it('withholds it right after a word, in one chunk or many', () => {
    const reply = `Here it is:${JSON_LINE}`;
    expect(feed([reply]).result).toMatchObject({ shown: 'Here it is:', marker: 'inline-json', tail: JSON_LINE });
    expect(feed(['Here it', ` is:${JSON_LINE.slice(0, 5)}`, JSON_LINE.slice(5)]).outputs).toEqual(['Here it', ' is:', '']);
  });

  it('shows a { in ordinary prose as soon as it cannot be metadata', () => {
    const withholder = createWithholder();
    expect(withholder.push('use {')).toBe('use');
    expect(withholder.push('c')).toBe(' {c');
    expect(withholder.push('urly} braces, a set {1,2}, {prompt} as a word, {"prompt" is a key}')).toBe(
      'urly} braces, a set {1,2}, {prompt} as a word, {"prompt" is a key}',
    );
    expect(withholder.finish().marker).toBeNull();
  });

  it('shows an object whose first key is not ours', () => {
    const reply = 'Try {"name": "x", "prompt": "y"} maybe';
    expect(feedChars(reply).result).toMatchObject({ shown: reply, marker: null });
  });

  it('withholds a key that is cut off at the end of the stream', () => {
    expect(feedChars('Here: {"generate_im').result).toMatchObject({ shown: 'Here:', marker: 'inline-json' });
  });
});

describe('createWithholder: holding back', () => {
  it('returns text as soon as it cannot be a marker', () => {
    const withholder = createWithholder();
    expect(withholder.push('Hello\n-')).toBe('Hello');
    expect(withholder.push('-')).toBe('');
    expect(withholder.push('x')).toBe('\n--x');
    expect(withholder.push(' and {')).toBe(' and');
    expect(withholder.push('x')).toBe(' {x');
  });

  it('never shows trailing whitespace, and releases inner whitespace when text follows', () => {
    const withholder = createWithholder();
    expect(withholder.push('Hello!   \n')).toBe('Hello!');
    expect(withholder.push('\n')).toBe('');
    expect(withholder.push('Bye')).toBe('   \n\nBye');
    expect(withholder.push(' \t\n')).toBe('');
    const result = withholder.finish();
    expect(result.flushed).toBe('');
    expect(result.shown).toBe('Hello!   \n\nBye');
  });

  it('drops whitespace before a marker and at the start of the reply', () => {
    const { displayed, result } = feedChars(`  Hello!  \n\n---\n${JSON_LINE}`);
    expect(displayed).toBe('Hello!');
    expect(result.shown).toBe('Hello!');
  });

  it('releases an undecided candidate at finish as text', () => {
    const withholder = createWithholder();
    expect(withholder.push('Wait\n--')).toBe('Wait');
    const result = withholder.finish();
    expect(result.flushed).toBe('\n--');
    expect(result.shown).toBe('Wait\n--');
  });

  it('bounds how long a candidate is held: rules and keys have a maximum length', () => {
    expect(createWithholder().push('*'.repeat(100))).toBe('*'.repeat(100));
    const longKey = `{"${'prompt'.padEnd(MAX_KEY_CHARS + 1, '_')}`;
    expect(createWithholder().push(longKey)).toBe(longKey);
    // The longest candidate: a rule, a fence with its language, `{` and a quoted key of the maximum length.
    const longest = `${'*'.repeat(MAX_RULE_CHARS)}\n\`\`\`jsonc\n{"${'prompt'.padEnd(MAX_KEY_CHARS, '_')}"`;
    expect(longest.replace(/\s/g, '')).toHaveLength(MAX_HELD_CHARS);
    const withholder = createWithholder();
    expect(withholder.push(`x\n${longest}`)).toBe('x');
    expect(withholder.push(' x')).toBe(`\n${longest} x`);
  });

  it('keeps the raw reply and is idempotent at finish', () => {
    const withholder = createWithholder();
    withholder.push('a\n---\n');
    withholder.push('{"prompt": ""}');
    const first = withholder.finish();
    expect(first.raw).toBe('a\n---\n{"prompt": ""}');
    expect(withholder.finish()).toBe(first);
    expect(() => withholder.push('more')).toThrow(/after finish/);
  });
});
