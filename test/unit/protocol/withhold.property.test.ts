// Whatever the chunking, the displayed text is the same, is what parseReply reports, and never
// contains the delimiter line or any part of the JSON (seed 002: withhold before you display).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createWithholder, formatCanonicalReply, parseReply, parseWithheld } from '../../../server/protocol/index.ts';
import { MAX_HELD_CHARS, MAX_KEY_CHARS, MAX_RULE_CHARS } from '../../../server/protocol/delimiter.ts';
import type { Metadata, ParseResult, WithheldReply } from '../../../server/protocol/index.ts';

function textOf(result: ParseResult): string {
  return result.ok ? result.value.text : result.text;
}

interface Fixture {
  name: string;
  raw: string;
  shown: string;
  /** Strings the displayed text must never contain. */
  forbidden?: string[];
}

const JSON_LINE = '{"prompt": "a tabby cat wearing a blue wizard hat", "generate_image": true, "steps": 20, "cfg": 7, "seed": -1}';
const DEFAULT_FORBIDDEN = ['"prompt"', 'generate_image', '{"', '\n---\n{', '"seed"'];

// Short enough (≤ 14 characters) to try every one of the 2^(n-1) ways to split them.
const SHORT_FIXTURES: Fixture[] = [
  { name: 'clean', raw: 'Hi\n---\n{"a":1}', shown: 'Hi' },
  { name: 'crlf', raw: 'A\r\n---\r\n{x}', shown: 'A', forbidden: ['-', '{', 'x}'] },
  { name: 'delimiter first', raw: '---\n{"p":1}', shown: '' },
  { name: 'bare json', raw: 'Ok\n{"prompt"', shown: 'Ok' },
  { name: 'fenced unquoted', raw: 'a\n```\n{prompt:', shown: 'a', forbidden: ['`', 'prompt'] },
  { name: 'rule then prose', raw: 'x\n---\ny\n---\n{', shown: 'x\n---\ny', forbidden: ['{'] },
  { name: 'four dashes', raw: 'a\n----\nb', shown: 'a\n----\nb', forbidden: [] },
  { name: 'dashes and words', raw: 'a\n--- yes', shown: 'a\n--- yes', forbidden: [] },
  { name: 'other key', raw: '{"name":1}\nok', shown: '{"name":1}\nok', forbidden: [] },
  { name: 'spaces before', raw: 'T \n\n---\n{}', shown: 'T', forbidden: [' ', '-', '{'] },
  { name: 'code fence', raw: 'x\n```\ncode\n```', shown: 'x\n```\ncode\n```', forbidden: [] },
  { name: 'short dashes', raw: '-\n--\n---\n{}', shown: '-\n--', forbidden: ['---', '{'] },
  { name: 'same line', raw: 'Go\n--- {"a"}', shown: 'Go', forbidden: ['-', '{'] },
  // Another Markdown rule as the delimiter: withheld only when metadata follows.
  { name: 'star rule', raw: 'a\n***\n{prompt:', shown: 'a', forbidden: ['*', '{', 'p'] },
  { name: 'em dash rule', raw: 'a\n—\n{"prompt":', shown: 'a', forbidden: ['—', '{', 'p'] },
  { name: 'spaced rule', raw: '- - -\n{prompt:', shown: '', forbidden: ['-', '{', 'p'] },
  { name: 'four dashes, JSON', raw: '----\n{Prompt:', shown: '', forbidden: ['-', '{', 'P'] },
  { name: 'equals, same line', raw: 'x\n==={prompt:', shown: 'x', forbidden: ['=', '{', 'p'] },
  { name: 'star rule, prose', raw: 'a\n***\nb', shown: 'a\n***\nb', forbidden: [] },
  { name: 'rule, other JSON', raw: 'a\n___\n{"b":1}', shown: 'a\n___\n{"b":1}', forbidden: [] },
  { name: 'rule at the end', raw: 'a\n* * *', shown: 'a\n* * *', forbidden: [] },
  // Metadata at the end of a prose line, and braces in prose.
  { name: 'inline json', raw: 'Hi {"prompt":', shown: 'Hi', forbidden: ['{', 'p'] },
  { name: 'inline key style', raw: 'Ok!{GENERATE_', shown: 'Ok!', forbidden: ['{', 'G'] },
  { name: 'prose braces', raw: 'a {b} {1} {p}', shown: 'a {b} {1} {p}', forbidden: [] },
  { name: 'key named only', raw: '{prompt} x', shown: '{prompt} x', forbidden: [] },
  { name: 'key, no colon', raw: 'a {"prompt" b', shown: 'a {"prompt" b', forbidden: [] },
];

const LONG_REPLY_BODY = Array.from(
  { length: 12 },
  (_, index) =>
    `Paragraph ${index}: a fox in a {misty} forest -- calm, quiet.\n- a list item\n-- not a rule\n\`inline\` code and a {"name": ${index}} aside.\n`,
).join('\n');

const LONG_FIXTURES: Fixture[] = [
  {
    name: 'clean question',
    raw: `A cat in a hat! Let me ask a few questions:\n- What kind of cat?\n- What style of hat?\n---\n${JSON_LINE}`,
    shown: 'A cat in a hat! Let me ask a few questions:\n- What kind of cat?\n- What style of hat?',
  },
  {
    name: 'crlf',
    raw: `Perfect!\r\nGenerating your image now.\r\n---\r\n${JSON_LINE}\r\n`,
    shown: 'Perfect!\r\nGenerating your image now.',
  },
  {
    name: 'bare json',
    raw: `Perfect! Generating your image now.\n${JSON_LINE}`,
    shown: 'Perfect! Generating your image now.',
  },
  {
    name: 'bare json, key on next line, single quotes',
    raw: "Here is the prompt.\n{\n  'prompt': 'a red fox',\n  'generate_image': False,\n  'steps': 20, 'cfg': 7, 'seed': -1,\n}",
    shown: 'Here is the prompt.',
    forbidden: ["'prompt'", 'generate_image', '{'],
  },
  {
    name: 'fenced json',
    raw: `Here it is:\n\n\`\`\`json\n{\n  "prompt": "a fox",\n  "generate_image": false,\n  "steps": 20,\n  "cfg": 7,\n  "seed": -1\n}\n\`\`\`\n`,
    shown: 'Here it is:',
    forbidden: [...DEFAULT_FORBIDDEN, '`'],
  },
  { name: 'delimiter first', raw: `---\n${JSON_LINE}`, shown: '' },
  {
    name: 'markdown rule then prose',
    raw: `Some intro.\n\n---\n\nMore details about the *style*.\n\n---\n${JSON_LINE}`,
    shown: 'Some intro.\n\n---\n\nMore details about the *style*.',
  },
  {
    name: 'dash lines that are text',
    raw: `Options:\n----\n--- yes, really\n-- maybe\n---\n\n${JSON_LINE}`,
    shown: 'Options:\n----\n--- yes, really\n-- maybe',
  },
  {
    name: '{ lines that are not metadata',
    raw: `Use this config:\n{"name": "demo"}\n{ width: 512 }\n  {promptly}\n\`\`\`json\n{"size": 3}\n\`\`\`\nThen:\n---\n${JSON_LINE}`,
    shown: 'Use this config:\n{"name": "demo"}\n{ width: 512 }\n  {promptly}\n```json\n{"size": 3}\n```\nThen:',
    forbidden: ['"prompt"', 'generate_image', '"seed"', '\n---\n'],
  },
  {
    name: 'trailing text after the JSON',
    raw: `Done.\n---\n${JSON_LINE} Hope you like it!\n`,
    shown: 'Done.',
    forbidden: [...DEFAULT_FORBIDDEN, 'Hope'],
  },
  {
    name: 'long reply',
    raw: `${LONG_REPLY_BODY}\n---\n${JSON_LINE}`,
    shown: LONG_REPLY_BODY.trimEnd(),
    forbidden: ['"prompt"', 'generate_image', '"seed"', '\n---\n'],
  },
  ...['***', '___', '===', '—', '- - -', '* * *', '----', '-----------'].map(
    (rule): Fixture => ({
      name: `${rule} as the delimiter`,
      raw: `Perfect! Generating your image now.\n${rule}\n${JSON_LINE}\n`,
      shown: 'Perfect! Generating your image now.',
      forbidden: [...DEFAULT_FORBIDDEN, rule, rule.charAt(0)],
    }),
  ),
  {
    name: 'rules followed by prose, then a rule followed by metadata',
    raw: `Intro.\n***\nMore.\n___\n\nAnd more.\n===\n— a quote\n- - -\n\n\`\`\`json\n${JSON_LINE}\n\`\`\``,
    shown: 'Intro.\n***\nMore.\n___\n\nAnd more.\n===\n— a quote',
    forbidden: [...DEFAULT_FORBIDDEN, '- - -', '`'],
  },
  {
    name: 'metadata at the end of a prose line',
    raw: `Perfect, here you go! ${JSON_LINE}`,
    shown: 'Perfect, here you go!',
    forbidden: [...DEFAULT_FORBIDDEN, '{'],
  },
  {
    name: 'braces in prose, then metadata in another key style at the end of a line',
    raw: 'Use {curly} braces, a set {1,2}, the {prompt} field, {"prompt" alone}. Done: {"Prompt": "a fox", "generateImage": "yes", "Steps": "20 steps", "CFG": 7, "Seed": "random"}',
    shown: 'Use {curly} braces, a set {1,2}, the {prompt} field, {"prompt" alone}. Done:',
    forbidden: ['"Prompt"', 'generateImage', '"Seed"', 'a fox'],
  },
  {
    name: 'metadata right after a word',
    raw: `Here it is:${JSON_LINE}\n`,
    shown: 'Here it is:',
    forbidden: [...DEFAULT_FORBIDDEN, '{'],
  },
  {
    name: 'metadata written twice',
    raw: `Here it is.\n---\n${JSON_LINE}\n---\n${JSON_LINE}\n`,
    shown: 'Here it is.',
  },
  {
    name: 'JSON followed by more chatter',
    raw: `Here it is! ${JSON_LINE} Hope you like it! {"prompt": "again"}\nBye.`,
    shown: 'Here it is!',
    forbidden: [...DEFAULT_FORBIDDEN, 'Hope', 'Bye'],
  },
];

function displayChunks(chunks: string[]) {
  const withholder = createWithholder();
  const outputs = chunks.map((chunk) => withholder.push(chunk));
  const result = withholder.finish();
  return { displayed: outputs.join('') + result.flushed, result };
}

function splitAt(text: string, cuts: number[]): string[] {
  const chunks: string[] = [];
  let start = 0;
  for (const cut of cuts) {
    chunks.push(text.slice(start, cut));
    start = cut;
  }
  chunks.push(text.slice(start));
  return chunks;
}

/** Every way to split `text` into non-empty chunks: one per subset of the n−1 gaps. */
function* allSplits(text: string): Generator<string[]> {
  const gaps = text.length - 1;
  for (let mask = 0; mask < 2 ** gaps; mask += 1) {
    const cuts: number[] = [];
    for (let gap = 0; gap < gaps; gap += 1) if (mask & (2 ** gap)) cuts.push(gap + 1);
    yield splitAt(text, cuts);
  }
}

/**
 * Random splits with a random density, from one big chunk to one character per chunk. The cuts come
 * from a seeded generator (cheap for long replies); a failure reports the density and seed.
 */
function splitsOf(text: string): fc.Arbitrary<string[]> {
  return fc.tuple(fc.integer({ min: 0, max: 100 }), fc.integer()).map(([density, seed]) => {
    const random = mulberry32(seed);
    const cuts: number[] = [];
    for (let gap = 1; gap < text.length; gap += 1) if (random() * 100 < density) cuts.push(gap);
    return splitAt(text, cuts);
  });
}

function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function trimSpace(text: string): string {
  return text.replace(/^[ \t\r\n\f\v]+|[ \t\r\n\f\v]+$/g, '');
}

/** Why `chunks` display unsafely, or null. Plain checks: this runs for tens of thousands of splits. */
function findUnsafeDisplay(fixture: Fixture, chunks: string[], reference: WithheldReply): string | null {
  const { displayed, result } = displayChunks(chunks);
  if (chunks.join('') !== fixture.raw) return 'the chunks do not rebuild the reply';
  if (displayed !== fixture.shown) return `displayed ${JSON.stringify(displayed)}`;
  if (result.shown !== fixture.shown) return `shown ${JSON.stringify(result.shown)}`;
  if (result.marker !== reference.marker || result.tail !== reference.tail) return `tail ${JSON.stringify(result.tail)}`;
  const leaked = (fixture.forbidden ?? DEFAULT_FORBIDDEN).find((fragment) => displayed.includes(fragment));
  return leaked === undefined ? null : `displayed ${JSON.stringify(leaked)}`;
}

function describeFailure(chunks: string[], problem: string | null): string | null {
  return problem === null ? null : `${problem} for chunks ${JSON.stringify(chunks)}`;
}

describe('withholder property: every chunking displays the same safe text', () => {
  it.each(SHORT_FIXTURES)('all splits of a short fixture: $name', (fixture) => {
    expect(fixture.raw.length).toBeLessThanOrEqual(14);
    const reference = displayChunks([fixture.raw]).result;
    expect(reference.shown).toBe(fixture.shown);
    expect(textOf(parseReply(fixture.raw))).toBe(fixture.shown);
    let splits = 0;
    let firstFailure: string | null = null;
    for (const chunks of allSplits(fixture.raw)) {
      firstFailure ??= describeFailure(chunks, findUnsafeDisplay(fixture, chunks, reference));
      splits += 1;
    }
    expect(firstFailure).toBeNull();
    expect(splits).toBe(2 ** (fixture.raw.length - 1));
  });

  it.each(LONG_FIXTURES)('random splits of a long fixture: $name', (fixture) => {
    const reference = displayChunks([fixture.raw]).result;
    expect(reference.shown).toBe(fixture.shown);
    expect(textOf(parseReply(fixture.raw))).toBe(fixture.shown);
    expect(findUnsafeDisplay(fixture, [...fixture.raw], reference)).toBeNull();
    fc.assert(
      fc.property(splitsOf(fixture.raw), (chunks) => findUnsafeDisplay(fixture, chunks, reference) === null),
      { numRuns: 500 },
    );
  });
});

// Replies assembled from the pieces that make the rule hard: rules, fences, braces, keys in any
// style, line ends.
const TRICKY_PIECES = [
  '-', '--', '---', '\n', '\r\n', ' ', '\t', '{', '}', '`', '```', 'json', '"', "'", 'prompt', 'generate_image', ':', 'a', 'yes', '.',
  '*', '***', '_', '___', '===', '—', '- - -', 'Prompt', 'GENERATE_IMAGE', 'generateImage', 'generate-image', ' {', ',', '1',
];
const trickyReply = fc.array(fc.constantFrom(...TRICKY_PIECES), { maxLength: 40 }).map((pieces) => pieces.join(''));

// The longest candidates: rules and keys around and beyond their maximum lengths, fences, quotes.
const longCandidateReply = fc
  .tuple(
    fc.constantFrom('', 'Ok\n', 'Ok '),
    fc.constantFrom('-', '*', '_', '=', '—'),
    fc.integer({ min: 1, max: MAX_RULE_CHARS + 8 }),
    fc.constantFrom('', ' '),
    fc.constantFrom('\n', ' ', '', '\n\n', '\n```jsonc\n', '\n```\n'),
    fc.constantFrom('"', "'", ''),
    fc.constantFrom('prompt', 'generate_image', 'GenerateImage', 'PROMPT'),
    fc.integer({ min: 0, max: MAX_KEY_CHARS }),
    fc.constantFrom('"', "'", ''),
    fc.constantFrom(':', ' x', '', '\n---\n{}', ' :1}'),
  )
  .map(([before, ruleChar, ruleLength, spacing, between, open, key, padding, close, after]) =>
    [before, Array(ruleLength).fill(ruleChar).join(spacing), between, '{', open, key + '_'.repeat(padding), close, after].join(''),
  );
const replyArb = fc.oneof(trickyReply, longCandidateReply);

describe('withholder property: arbitrary replies', () => {
  it('gives the same result for every chunking, shows exactly the text before the marker, trimmed', () => {
    fc.assert(
      fc.property(
        replyArb.chain((raw) => fc.tuple(fc.constant(raw), splitsOf(raw))),
        ([raw, chunks]) => {
          const reference = displayChunks([raw]).result;
          const { displayed, result } = displayChunks(chunks);
          expect(displayed).toBe(reference.shown);
          expect([result.marker, result.tail]).toEqual([reference.marker, reference.tail]);
          const beforeMarker = reference.tail === null ? raw : raw.slice(0, raw.length - reference.tail.length);
          expect(raw.endsWith(reference.tail ?? '')).toBe(true);
          expect(reference.shown).toBe(trimSpace(beforeMarker));
          expect(textOf(parseReply(raw))).toBe(reference.shown);
          // The server parses the split it streamed: the same result as parsing the whole text again.
          expect(parseWithheld(result)).toEqual(parseReply(raw));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('holds back at most MAX_HELD_CHARS visible characters before the marker, whatever the chunking', () => {
    let mostHeld = 0;
    fc.assert(
      fc.property(
        replyArb.chain((raw) => fc.tuple(fc.constant(raw), splitsOf(raw))),
        ([raw, chunks]) => {
          const { tail } = displayChunks([raw]).result;
          const markerStart = tail === null ? raw.length : raw.length - tail.length;
          const leading = raw.length - raw.replace(/^[ \t\r\n\f\v]+/, '').length;
          const withholder = createWithholder();
          let rawSoFar = '';
          let displayedSoFar = '';
          for (const chunk of chunks) {
            rawSoFar += chunk;
            displayedSoFar += withholder.push(chunk);
            expect(rawSoFar.slice(leading).startsWith(displayedSoFar)).toBe(true);
            // What waits: after the displayed text, before the marker (the marker itself is withheld for good).
            const waiting = raw.slice(leading + displayedSoFar.length, Math.max(leading + displayedSoFar.length, Math.min(rawSoFar.length, markerStart)));
            const heldVisible = waiting.replace(/[ \t\r\n\f\v]/g, '').length;
            mostHeld = Math.max(mostHeld, heldVisible);
            expect(heldVisible).toBeLessThanOrEqual(MAX_HELD_CHARS);
          }
        },
      ),
      { numRuns: 2000 },
    );
    // The generator reaches close to the bound, so a candidate that grew past it would be caught.
    expect(mostHeld).toBeGreaterThanOrEqual(MAX_RULE_CHARS + MAX_KEY_CHARS);
  });

  const metadataArb: fc.Arbitrary<Metadata> = fc.record(
    {
      prompt: fc.string({ maxLength: 60 }),
      generate_image: fc.boolean(),
      steps: fc.integer({ min: 1, max: 150 }),
      cfg: fc.integer({ min: 0, max: 300 }).map((tenths) => tenths / 10),
      seed: fc.integer({ min: -1, max: 4_294_967_295 }),
      negative_prompt: fc.string({ minLength: 1, maxLength: 30 }),
    },
    { requiredKeys: ['prompt', 'generate_image', 'steps', 'cfg', 'seed'] },
  );

  it('round-trips any displayed text and metadata through the canonical form', () => {
    fc.assert(
      fc.property(trickyReply, metadataArb, (raw, metadata) => {
        const text = displayChunks([raw]).result.shown;
        const parsed = parseReply(formatCanonicalReply(text, metadata));
        expect(parsed).toEqual({ ok: true, value: { text, metadata, repairs: [], notices: [] } });
      }),
      { numRuns: 1000 },
    );
  });
});
