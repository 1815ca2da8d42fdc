// A streamed reply's Markdown, rendered block by block, is exactly the whole reply rendered at once,
// whatever the chunking; the block in progress is shown as its own source; and the work stays linear.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMarkdownRenderer, createMarkdownStream, renderMarkdown, type MarkdownRenderer } from '../../../server/http/page/markdown.ts';

interface Streamed {
  html: string;
  /** What the bubble showed after each chunk: the finished blocks' HTML and the block in progress as text. */
  states: Array<{ html: string; live: string }>;
}

/** Plays a chunking the way the page does: finished blocks go before the block in progress. */
function stream(chunks: readonly string[], renderer?: MarkdownRenderer): Streamed {
  const markdown = createMarkdownStream(renderer);
  let html = '';
  let live = '';
  const states: Streamed['states'] = [];
  for (const chunk of chunks) {
    const step = markdown.push(chunk);
    if (step.kind === 'blocks') {
      html += step.html;
      live = step.text;
    } else {
      live += step.text;
    }
    states.push({ html, live });
  }
  return { html: html + markdown.flush(), states };
}

function split(text: string, cuts: readonly number[]): string[] {
  const points = [...new Set(cuts.map((cut) => cut % (text.length + 1)))].sort((a, b) => a - b);
  const chunks: string[] = [];
  let from = 0;
  for (const point of points) {
    chunks.push(text.slice(from, point));
    from = point;
  }
  chunks.push(text.slice(from));
  return chunks;
}

/** Every way to cut `text` into pieces (2^(n-1) of them). */
function* everyChunking(text: string): Generator<string[]> {
  const gaps = text.length - 1;
  for (let mask = 0; mask < 2 ** gaps; mask++) {
    const chunks: string[] = [];
    let from = 0;
    for (let gap = 0; gap < gaps; gap++) {
      if (mask & (1 << gap)) {
        chunks.push(text.slice(from, gap + 1));
        from = gap + 1;
      }
    }
    chunks.push(text.slice(from));
    yield chunks;
  }
}

const whole = (text: string) => String(renderMarkdown(text));
const normalised = (text: string) => text.replace(/\r\n?/g, '\n');

// Short enough to try every chunking: each is a place where a naive split at blank lines goes wrong.
const SHORT = [
  'a\n\nb',
  '- a\n\n- b',
  '1. a\n\n2. b',
  '- a\n\n  b\n\nc',
  '```\na\n\nb\n```\n\nc',
  '~~~\n\nx\n\ny',
  '> a\n\n> b\n\nc',
  '    a\n\n    b\nc',
  'a\r\n\r\nb\rc',
  '# h\n\n---\n\nx',
  'a\n===\n\nb',
  '- ```\n\nx\n```',
];

// Longer replies, tried with many random chunkings.
const LONG = [
  'Here are a few ideas:\n\n1. **A lighthouse** at dusk\n2. *A harbour* in fog\n\n3. A `quiet` beach\n\nWhich one?',
  'Some code:\n\n```python\ndef f():\n    return 1\n\n\nclass X:\n    pass\n```\n\nAnd after it, a paragraph.\n\nAnother one.',
  '- item\n  ```\n  code\n\nfoo\n```\n\nbar\n\n```\n\nbaz\n```\n\nend',
  '> quoted\n> more\n\nplain [link](https://example.com) and <script>alert(1)</script>\n\n| a | b |\n|--:|:-|\n| 1 | 2 |\n\nafter',
  'Line one\nline two  \nline three\\\n\n* * *\n\nSetext\n---\n\n    indented\n\n    code\n\nend',
  '[ref]: https://example.com\n\nUse [ref] here. ![alt](http://x/y.png)\n\n[x](javascript:alert(1))',
  '~~~~\n```\n\ninside\n~~~~\n\nout\n\n```js\nconsole.log("<b>")\n```',
  '1. one\n\n   para in item\n\n2. two\n\nText.\n\n- a\n- b\n\n+ c\n\nEnd.',
];

// Pieces of replies, including every construct whose blocks depend on their neighbours.
const LINE = fc.constantFrom(
  '',
  '',
  '',
  'Plain text with **bold** and *italics*.',
  'a `code` span and [a link](https://example.com)',
  '<b>raw</b> & <script>x</script>',
  '- item',
  '* star item',
  '1. first',
  '2) second',
  '  continued in an item',
  '    indented code',
  '> quote',
  '> ```',
  '```',
  '```js',
  '~~~',
  '  ```',
  '    ```',
  '- ```',
  '# Heading',
  '===',
  '---',
  '***',
  '| a | b |',
  '|---|:-:|',
  '[r]: https://example.com',
  'see [r]',
  'hard break  ',
  'back\\',
  'x\r',
);

const DOCUMENT = fc.array(LINE, { minLength: 1, maxLength: 16 }).map((lines) => lines.join('\n'));

describe('the streamed Markdown of a reply', () => {
  it.each(SHORT)('is the whole render for every chunking of %j', (text) => {
    const expected = whole(text);
    for (const chunks of everyChunking(text)) expect(stream(chunks).html).toBe(expected);
  });

  it.each(LONG)('is the whole render for random chunkings of %j', (text) => {
    const expected = whole(text);
    expect(stream([text]).html).toBe(expected);
    expect(stream([...text]).html).toBe(expected);
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 40 }), (cuts) => {
        expect(stream(split(text, cuts)).html).toBe(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('is the whole render for random replies and chunkings', () => {
    fc.assert(
      fc.property(DOCUMENT, fc.array(fc.nat(), { maxLength: 30 }), (text, cuts) => {
        expect(stream(split(text, cuts)).html).toBe(whole(text));
      }),
      { numRuns: 3000 },
    );
  });

  it('finishes blocks while the reply streams, and shows the block in progress as its own source', () => {
    fc.assert(
      fc.property(DOCUMENT, fc.array(fc.nat(), { maxLength: 30 }), (text, cuts) => {
        const chunks = split(text, cuts);
        const { states } = stream(chunks);
        let sent = '';
        chunks.forEach((chunk, index) => {
          sent += chunk;
          const { html, live } = states[index]!;
          // The shown text is what arrived so far, minus the blocks already rendered (a held \r aside).
          const source = normalised(sent.endsWith('\r') ? sent.slice(0, -1) : sent);
          expect(source.endsWith(live)).toBe(true);
          // The finished blocks are what the whole render shows of them with more text after them (a reply's
          // end drops its unfinished markers, which a block with text after it keeps: they were not the end).
          const finished = source.slice(0, source.length - live.length);
          expect(html).toBe(finished === '' ? '' : whole(`${finished}x`).replace(/<p>x<\/p>$/, ''));
        });
      }),
      { numRuns: 1000 },
    );
  });

  it('renders a paragraph as soon as the next block starts, before the reply ends', () => {
    const { states } = stream(['First **bold** para.\n', '\n', 'Second', ' para.']);
    expect(states.map((state) => state.html)).toEqual(['', '', '<p>First <strong>bold</strong> para.</p>', '<p>First <strong>bold</strong> para.</p>']);
    expect(states.at(-1)!.live).toBe('Second para.');
    // A line that may still become a list item waits for the characters that tell.
    expect(stream(['a\n\n1', '2']).states.map((state) => state.html)).toEqual(['', '']);
    expect(stream(['a\n\n1', '2', 'x']).states.map((state) => state.html)).toEqual(['', '', '<p>a</p>']);
  });

  it('finishes every block a single chunk completes, not only the first', () => {
    const { states } = stream(['A longer first paragraph.\n\nb\n\nc\n\nd', ' end']);
    expect(states[0]!.html).toBe('<p>A longer first paragraph.</p><p>b</p><p>c</p>');
    expect(states[0]!.live).toBe('d');
  });

  it('waits while a code fence is open, whatever blank lines and lines at the margin it holds', () => {
    const { states, html } = stream(['```\n', 'a\n', '\n', 'b\n', '\n', 'c\n', '```\n', '\n', 'after\n']);
    expect(states.slice(0, 8).every((state) => state.html === '')).toBe(true);
    expect(states.at(-1)!.html).toBe('<pre><code>a\n\nb\n\nc\n</code></pre>');
    expect(html).toBe(whole('```\na\n\nb\n\nc\n```\n\nafter\n'));
  });
});

describe('a reply rendered as Markdown', () => {
  it('renders paragraphs, line breaks, lists, emphasis, code and links', () => {
    expect(whole('a **b** *c* `d`\ne\n\n- x\n- y\n\n```\n<i>\n```')).toBe(
      '<p>a <strong>b</strong> <em>c</em> <code>d</code><br>\ne</p><ul><li>x</li><li>y</li></ul><pre><code>&lt;i&gt;\n</code></pre>',
    );
    expect(whole('[site](https://example.com) <a@b.c>')).toBe(
      '<p><a href="https://example.com" target="_blank" rel="noopener noreferrer">site</a> <a href="mailto:a@b.c" target="_blank" rel="noopener noreferrer">a@b.c</a></p>',
    );
  });

  it('a reply cut off mid-way shows no unfinished marker at its end: the words stay, the opener goes, streamed or whole', () => {
    const cut = {
      'Nice idea! I imagine **slo': '<p>Nice idea! I imagine slo</p>',
      'I imagine *slo': '<p>I imagine slo</p>',
      'I imagine _slo': '<p>I imagine slo</p>',
      'I imagine ~~slo': '<p>I imagine slo</p>',
      'Try `--ar 16': '<p>Try --ar 16</p>',
      'Try ``a b': '<p>Try a b</p>',
      '“*Slo': '<p>“Slo</p>',
      'I imagine **': '<p>I imagine </p>',
      'I imagine *': '<p>I imagine </p>',
      'I imagine `': '<p>I imagine </p>',
      '**A lighthouse** at *dusk': '<p><strong>A lighthouse</strong> at dusk</p>',
      '- one\n- **Lighting': '<ul><li>one</li><li>Lighting</li></ul>',
      '## **Mood': '<h4>Mood</h4>',
      '[a **lamp](https://example.com) in *fog': '<p><a href="https://example.com" target="_blank" rel="noopener noreferrer">a lamp</a> in fog</p>',
    };
    for (const [text, html] of Object.entries(cut)) {
      expect(whole(text), text).toBe(html);
      // Live, the last block is rendered at the reply's end: the same HTML.
      expect(stream([...text]).html, text).toBe(html);
    }
    // Only the end: an earlier block with a stray marker was the model's and is shown as written.
    expect(whole('A *stray one\n\nThe end **cut')).toBe('<p>A *stray one</p><p>The end cut</p>');
    // What closes, what cannot open and what sits inside a word is unchanged.
    expect(whole('**bold**, snake_case, file_name_, 2 * 3 and `code`')).toBe(
      '<p><strong>bold</strong>, snake_case, file_name_, 2 * 3 and <code>code</code></p>',
    );
    expect(whole('Set window.__ran, press the ` key, a*b')).toBe('<p>Set window.__ran, press the ` key, a*b</p>');
    // A reply ending in a code block, or a rule, has no unfinished emphasis at its end.
    expect(whole('Here *it is:\n\n```\n**x')).toBe('<p>Here *it is:</p><pre><code>**x</code></pre>');
    expect(whole('Here *it is\n\n---')).toBe('<p>Here *it is</p><hr>');
  });

  it("ranks a reply's headings below the page's own h1 and h2: # is an h3, h6 at most", () => {
    expect(whole('# One\n\n## Two\n\n### Three\n\n#### Four\n\n###### Six\n\nSetext\n===')).toBe(
      '<h3>One</h3><h4>Two</h4><h5>Three</h5><h6>Four</h6><h6>Six</h6><h3>Setext</h3>',
    );
    expect(stream(['# One\n\n', 'text\n\n## Two']).html).toBe('<h3>One</h3><p>text</p><h4>Two</h4>');
  });

  it('never renders the raw HTML a model writes', () => {
    expect(whole('<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>')).toBe(
      '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p><p>&lt;img src=x onerror=alert(2)&gt;</p>',
    );
  });

  it('links only http(s) and mailto, and loads no image', () => {
    for (const url of ['javascript:alert(1)', 'JAVASCRIPT:alert(1)', 'data:text/html,x', 'vbscript:x', 'file:///etc/passwd', '/c/x', '#top']) {
      expect(whole(`[x](${url})`)).not.toContain('<a');
    }
    expect(whole('![cat](https://example.com/cat.png)')).toBe(
      '<p>!<a href="https://example.com/cat.png" target="_blank" rel="noopener noreferrer">cat</a></p>',
    );
  });

  it('makes no link of a bare address, and none of a URL that only holds http(s) somewhere inside', () => {
    expect(whole('see https://example.com or www.example.com')).toBe('<p>see https://example.com or www.example.com</p>');
    expect(whole('[x](javascript:alert(1)//https://x)')).not.toContain('<a');
    expect(whole('[plain](http://example.com)')).toBe('<p><a href="http://example.com" target="_blank" rel="noopener noreferrer">plain</a></p>');
  });

  it('aligns table cells with a class, never a style attribute (the CSP refuses inline styles)', () => {
    const table = whole('| a | b |\n|--:|:-|\n| 1 | 2 |');
    expect(table).toContain('<th class="align-right">a</th>');
    expect(table).not.toContain('style');
  });
});

describe('the cost of streaming Markdown', () => {
  /** Counts the characters markdown-it parses while `text` streams in `size`-character chunks. */
  function parsedChars(text: string, size: number): number {
    const renderer = createMarkdownRenderer();
    let total = 0;
    const counting: MarkdownRenderer = {
      parse: (...args: Parameters<MarkdownRenderer['parse']>) => {
        total += args[0].length;
        return renderer.parse(...args);
      },
      render: (...args: Parameters<MarkdownRenderer['render']>) => {
        total += args[0].length;
        return renderer.render(...args);
      },
      renderer: renderer.renderer,
      options: renderer.options,
    };
    const chunks = Array.from({ length: Math.ceil(text.length / size) }, (_, index) => text.slice(index * size, (index + 1) * size));
    expect(stream(chunks, counting).html).toBe(whole(text));
    return total;
  }

  it('parses each part of a long reply a bounded number of times', () => {
    const paragraphs = Array.from({ length: 400 }, (_, index) => `Paragraph ${index} with **bold** words and a [link](https://example.com/${index}).`).join('\n\n');
    const code = `\`\`\`python\n${Array.from({ length: 400 }, (_, index) => `def f${index}():\n    return ${index}\n\n`).join('')}\`\`\`\n\nafter`;
    // A fence inside a list item that the line scanner misreads: markdown-it refuses the splits it proposes.
    const misread = `- item\n  \`\`\`\n  code\n\n\`\`\`\n${Array.from({ length: 400 }, (_, index) => `line ${index}\n\ntext ${index}`).join('\n')}\n\`\`\`\n\nend`;
    for (const text of [paragraphs, code, misread]) expect(parsedChars(text, 4)).toBeLessThanOrEqual(4 * text.length);
  });
});

describe('the stream\'s own rules, one at a time', () => {
  /** A renderer that counts markdown-it's parses: a split the stream's own rules refuse is never even tried. */
  function countingRenderer(): { renderer: MarkdownRenderer; parses: () => number } {
    const renderer = createMarkdownRenderer();
    let parses = 0;
    return {
      renderer: { ...renderer, parse: (...args: Parameters<MarkdownRenderer['parse']>) => (parses++, renderer.parse(...args)), render: renderer.render.bind(renderer) },
      parses: () => parses,
    };
  }

  it('inside a code fence no split is tried, whatever looks like a fence\'s end but is not one', () => {
    for (const [open, inside] of [
      ['```', ['x ```', '```js', '~~~']],
      ['~~~', ['~', '~~']],
      ['````', ['```']],
      // A tilde fence may hold backticks in its info string (only a backtick fence may not).
      ['~~~ a`b', ['x']],
    ] as const) {
      const { renderer, parses } = countingRenderer();
      const markdown = createMarkdownStream(renderer);
      markdown.push(`${open}\n`);
      for (const line of inside) expect(markdown.push(`${line}\n\nmargin\n\n`)).toMatchObject({ kind: 'append' });
      expect(parses()).toBe(0);
      // The fence's real end: the next block after it finishes the fence.
      expect(markdown.push(`${open.split(' ')[0]}\n\nafter\n`).kind).toBe('blocks');
    }
  });

  it('a backtick fence whose info string holds a backtick is no fence: the lines after it split as usual', () => {
    expect(stream(['```a`b\n\nnext\n']).states[0]!.html).toBe('<p>```a`b</p>');
  });

  it('each chunk that completes a block renders it, after earlier splits too', () => {
    const { states } = stream(['a\n\nb', '\n\nc', '\n\nd']);
    expect(states.map((state) => state.html)).toEqual(['<p>a</p>', '<p>a</p><p>b</p>', '<p>a</p><p>b</p><p>c</p>']);
  });

  it('a block that starts a chunk splits at the right place after a split in the chunk before', () => {
    expect(stream(['x\n\ny\n\n', 'z\n']).states.map((state) => state.html)).toEqual(['<p>x</p>', '<p>x</p><p>y</p>']);
  });

  it('a line of spaces is a blank line; a complete line of digits is a paragraph, not a list item waiting', () => {
    expect(stream(['a\n \nb\n']).states[0]!.html).toBe('<p>a</p>');
    expect(stream(['a\n\n12\nmore']).states[0]!.html).toBe('<p>a</p>');
  });

  it('a lone carriage return ends a line as a newline does', () => {
    expect(stream(['a\r\rb\r']).states[0]!.html).toBe('<p>a</p>');
  });

  it('an empty reply flushes to nothing', () => {
    expect(createMarkdownStream().flush()).toBe('');
  });

  it('a list that starts at another number keeps no stray newline after its tag', () => {
    expect(whole('3. a\n4. b')).toBe('<ol start="3"><li>a</li><li>b</li></ol>');
  });
});
