// The JSON object every model reply ends with, after the `---` line.

import { z } from 'zod';
import { LIMITS } from './limits.ts';
import { DELIMITER, trimWhitespace } from './delimiter.ts';

/** Unknown keys are stripped: a model that adds `confidence` should not fail the turn. */
export const metadataSchema = z.object({
  /** The image prompt; empty while the model is still asking questions. */
  prompt: z.string().max(LIMITS.promptMaxChars),
  generate_image: z.boolean(),
  steps: z.int().min(LIMITS.steps.min).max(LIMITS.steps.max),
  cfg: z.number().min(LIMITS.cfg.min).max(LIMITS.cfg.max),
  /** −1 asks for a random seed. */
  seed: z.int().min(LIMITS.seed.min).max(LIMITS.seed.max),
  negative_prompt: z.string().max(LIMITS.promptMaxChars).optional(),
});

export type Metadata = z.infer<typeof metadataSchema>;

export const REQUIRED_METADATA_FIELDS = ['prompt', 'generate_image', 'steps', 'cfg', 'seed'] as const;

export type MetadataField = keyof Metadata;

// Ollama turns `format` into a llama.cpp grammar (json-schema-to-grammar.cpp). It enforces the structure
// (`type`, `properties` in order, `required`, `enum`, an array's `items`, no other keys) and an integer's `minimum`/`maximum`,
// but reads those bounds as a 32-bit int: LIMITS.seed.max (4294967295) would become -1 and the grammar
// would allow no seed but -1. So integer bounds are sent only when they fit; the seed keeps only its
// minimum (-1) and our own parser clamps the rest. Number ranges are not enforced by the grammar, and a
// `maxLength` of 2000 would expand into 2000 nested grammar rules (an array's `maxItems` likewise), so none is
// sent: our parsers check lengths and cap lists.
const STRUCTURAL_KEYWORDS = new Set(['type', 'properties', 'required', 'enum', 'items']);
const INTEGER_BOUNDS = new Set(['minimum', 'maximum']);
const INT32 = { min: -2_147_483_648, max: 2_147_483_647 } as const;

function isInt32(value: unknown): boolean {
  return Number.isInteger(value) && (value as number) >= INT32.min && (value as number) <= INT32.max;
}

/** A JSON Schema (as z.toJSONSchema writes it) limited to what Ollama's grammar enforces correctly, nested objects and arrays' items included. */
export function restrictToOllamaGrammar(schema: unknown): unknown {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return schema;
  const isInteger = (schema as Record<string, unknown>).type === 'integer';
  const restricted: Record<string, unknown> = {};
  for (const [keyword, value] of Object.entries(schema)) {
    if (INTEGER_BOUNDS.has(keyword)) {
      if (isInteger && isInt32(value)) restricted[keyword] = value;
      continue;
    }
    if (!STRUCTURAL_KEYWORDS.has(keyword)) continue;
    if (keyword === 'properties' && typeof value === 'object' && value !== null) {
      restricted[keyword] = Object.fromEntries(
        Object.entries(value).map(([name, property]) => [name, restrictToOllamaGrammar(property)]),
      );
    } else if (keyword === 'items') {
      restricted[keyword] = restrictToOllamaGrammar(value);
    } else if (keyword === 'required' && Array.isArray(value)) {
      // Only names the object itself describes (zod lists exactly those; the grammar has no rule for any other).
      const properties = (schema as Record<string, unknown>).properties;
      restricted[keyword] = value.filter((name) => typeof name === 'string' && typeof properties === 'object' && properties !== null && Object.hasOwn(properties, name));
    } else {
      restricted[keyword] = value;
    }
  }
  return restricted;
}

/** For Ollama's `format` parameter: the schema above, limited to what Ollama's grammar enforces correctly. */
export const metadataJsonSchema: Record<string, unknown> = restrictToOllamaGrammar(
  z.toJSONSchema(metadataSchema),
) as Record<string, unknown>;

/** Metadata as one line of JSON with the keys in the documented order (as in the prompt examples). */
export function formatMetadataJson(metadata: Metadata): string {
  const ordered: [string, unknown][] = [
    ['prompt', metadata.prompt],
    ['generate_image', metadata.generate_image],
    ['steps', metadata.steps],
    ['cfg', metadata.cfg],
    ['seed', metadata.seed],
  ];
  if (metadata.negative_prompt !== undefined && metadata.negative_prompt !== '') {
    ordered.push(['negative_prompt', metadata.negative_prompt]);
  }
  return `{${ordered.map(([key, value]) => `${JSON.stringify(key)}: ${JSON.stringify(value)}`).join(', ')}}`;
}

/**
 * A reply in the exact format the model is asked for. Assistant turns are replayed to the model in
 * this form, so the history it sees always demonstrates the format, whatever the original looked
 * like. `text` is trimmed, as the withholder never shows surrounding whitespace.
 */
export function formatCanonicalReply(text: string, metadata: Metadata): string {
  const body = trimWhitespace(text);
  const machine = `${DELIMITER}\n${formatMetadataJson(metadata)}`;
  return body === '' ? machine : `${body}\n${machine}`;
}
