import { describe, expect, it } from 'vitest';
import {
  LIMITS,
  formatCanonicalReply,
  metadataJsonSchema,
  metadataSchema,
  parseReply,
} from '../../../server/protocol/index.ts';
import type { Metadata } from '../../../server/protocol/index.ts';

const METADATA: Metadata = { prompt: 'a red fox', generate_image: false, steps: 30, cfg: 6.5, seed: 1234 };

describe('metadataSchema', () => {
  it('accepts the five fields and strips unknown keys', () => {
    const parsed = metadataSchema.parse({ ...METADATA, confidence: 1 });
    expect(parsed).toEqual(METADATA);
  });

  it.each([
    ['steps below 1', { steps: 0 }],
    ['steps above 150', { steps: 151 }],
    ['fractional steps', { steps: 2.5 }],
    ['cfg above 30', { cfg: 30.5 }],
    ['seed below -1', { seed: -2 }],
    ['seed above the 32-bit range', { seed: 4_294_967_296 }],
    ['prompt too long', { prompt: 'x'.repeat(LIMITS.promptMaxChars + 1) }],
    ['generate_image as a string', { generate_image: 'true' }],
  ])('refuses %s', (_name, patch) => {
    expect(metadataSchema.safeParse({ ...METADATA, ...patch }).success).toBe(false);
  });

  it('accepts the range limits, including seed -1 (random)', () => {
    expect(metadataSchema.safeParse({ ...METADATA, steps: 150, cfg: 0, seed: -1 }).success).toBe(true);
    expect(metadataSchema.safeParse({ ...METADATA, steps: 1, cfg: 30, seed: 4_294_967_295 }).success).toBe(true);
  });
});

describe('metadataJsonSchema', () => {
  function collectKeywords(schema: unknown, into: Set<string>): Set<string> {
    if (typeof schema !== 'object' || schema === null) return into;
    for (const [keyword, value] of Object.entries(schema)) {
      into.add(keyword);
      if (keyword === 'properties') for (const property of Object.values(value as object)) collectKeywords(property, into);
    }
    return into;
  }

  it('uses only keywords that Ollama grammars enforce', () => {
    const keywords = collectKeywords(metadataJsonSchema, new Set());
    expect([...keywords].every((keyword) => ['type', 'properties', 'required', 'enum', 'minimum', 'maximum'].includes(keyword))).toBe(true);
    for (const dropped of ['$schema', 'additionalProperties', 'maxLength', 'pattern', 'format']) {
      expect(keywords.has(dropped)).toBe(false);
    }
  });

  it('sends integer bounds only within the 32-bit int that llama.cpp reads them as', () => {
    const bounds: number[] = [];
    const properties = metadataJsonSchema.properties as Record<string, Record<string, unknown>>;
    for (const property of Object.values(properties)) {
      for (const keyword of ['minimum', 'maximum']) {
        if (keyword in property) {
          expect(property.type, `a ${keyword} on a ${String(property.type)} is not enforced`).toBe('integer');
          bounds.push(property[keyword] as number);
        }
      }
    }
    expect(bounds.length).toBeGreaterThan(0);
    for (const bound of bounds) expect(bound | 0).toBe(bound);
    // 4294967295 would be read as -1: the seed keeps only its minimum.
    expect(properties.seed).toEqual({ type: 'integer', minimum: -1 });
  });

  it('describes the five required fields and the optional negative_prompt, with the enforceable bounds', () => {
    expect(metadataJsonSchema).toEqual({
      type: 'object',
      properties: {
        prompt: { type: 'string' },
        generate_image: { type: 'boolean' },
        steps: { type: 'integer', minimum: LIMITS.steps.min, maximum: LIMITS.steps.max },
        cfg: { type: 'number' },
        seed: { type: 'integer', minimum: -1 },
        negative_prompt: { type: 'string' },
      },
      required: ['prompt', 'generate_image', 'steps', 'cfg', 'seed'],
    });
  });
});

describe('formatCanonicalReply', () => {
  it('writes text, the --- line and the JSON with the keys in order', () => {
    expect(formatCanonicalReply('Here you go.', METADATA)).toBe(
      'Here you go.\n---\n{"prompt": "a red fox", "generate_image": false, "steps": 30, "cfg": 6.5, "seed": 1234}',
    );
  });

  it('writes only the delimiter and JSON when the text is empty', () => {
    expect(formatCanonicalReply('  ', METADATA)).toBe(
      '---\n{"prompt": "a red fox", "generate_image": false, "steps": 30, "cfg": 6.5, "seed": 1234}',
    );
  });

  it('adds negative_prompt last, only when it is not empty', () => {
    expect(formatCanonicalReply('Ok', { ...METADATA, negative_prompt: 'blurry' })).toMatch(/"seed": 1234, "negative_prompt": "blurry"\}$/);
    expect(formatCanonicalReply('Ok', { ...METADATA, negative_prompt: '' })).not.toContain('negative_prompt');
  });

  it('round-trips through parseReply, also with quotes, newlines and Markdown rules in the text', () => {
    const text = 'Line one\n\n---\n\nA "quoted" {word}\n----';
    const metadata: Metadata = { prompt: 'a "fox"\nin snow', generate_image: true, steps: 1, cfg: 0, seed: -1, negative_prompt: 'x' };
    expect(parseReply(formatCanonicalReply(text, metadata))).toEqual({
      ok: true,
      value: { text, metadata, repairs: [], notices: [] },
    });
  });
});
