import { describe, expect, it } from 'vitest';
import { createWithholder } from '../../../server/protocol/index.ts';

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
    expect(feedChars('well --- {"prompt": 1}').result.shown).toBe('well --- {"prompt": 1}');
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
    const reply = 'Example:\n```python\nprint({"prompt": 1})\n```';
    expect(feedChars(reply).result).toMatchObject({ shown: reply, marker: null });
    const plain = 'Example:\n```\nls -la\n```';
    expect(feedChars(plain).result).toMatchObject({ shown: plain, marker: null });
    const other = 'Example:\n```json\n{"name": 1}\n```';
    expect(feedChars(other).result).toMatchObject({ shown: other, marker: null });
  });

  it('withholds an object cut off mid-key at the end of the stream', () => {
    const { displayed, result } = feedChars('Sure\n{"pro');
    expect(displayed).toBe('Sure');
    expect(result).toMatchObject({ marker: 'bare-json', tail: '{"pro' });
  });

  it('does not treat a { in the middle of a line as a marker', () => {
    const reply = 'Try {"prompt": "x"} maybe';
    expect(feedChars(reply).result).toMatchObject({ shown: reply, marker: null });
  });
});

describe('createWithholder: holding back', () => {
  it('returns text as soon as it cannot be a marker', () => {
    const withholder = createWithholder();
    expect(withholder.push('Hello\n-')).toBe('Hello');
    expect(withholder.push('-')).toBe('');
    expect(withholder.push('x')).toBe('\n--x');
    expect(withholder.push(' and {')).toBe(' and {');
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

  it('bounds how long a candidate is held', () => {
    const withholder = createWithholder();
    expect(withholder.push(`\`\`\`${' '.repeat(100)}`)).toBe('```');
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
