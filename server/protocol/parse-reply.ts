// Parsing a complete reply: split it with the streaming withholder (the one delimiter rule), then
// read the JSON object and repair it only where the repair cannot change what the model meant.
// Anything else is a failure value that sends the turn up the recovery ladder.

import { jsonrepair } from 'jsonrepair';
import { DELIMITER, isWhitespace } from './delimiter.ts';
import { LIMITS } from './limits.ts';
import { metadataSchema, REQUIRED_METADATA_FIELDS } from './metadata.ts';
import type { Metadata, MetadataField } from './metadata.ts';
import { createWithholder } from './withhold.ts';
import type { MarkerKind } from './withhold.ts';

/** Stable codes of the lossless repairs, reported with an accepted reply. */
export type RepairCode =
  | 'missing-delimiter' // metadata found without `---` (bare `{` line or fence)
  | 'code-fence' // ``` fences around the JSON
  | 'trailing-text' // text after the JSON object
  | 'json-syntax' // trailing commas, single quotes, True/None, unquoted keys… fixed by jsonrepair
  | 'coerced-types' // "4" → 4, "true" → true
  | 'clamped'; // out-of-range or fractional numbers, over-long prompts

export type ParseErrorCode = 'MissingDelimiter' | 'InvalidJson' | 'MissingFields';

export interface ParseError {
  code: ParseErrorCode;
  message: string;
  /** For MissingFields: the fields that are absent or unusable. */
  fields?: string[];
}

export interface ParsedReply {
  /** The conversational text, exactly what the withholder showed. */
  text: string;
  metadata: Metadata;
  repairs: RepairCode[];
  /** Sentences for the user, e.g. a value clamped into range. */
  notices: string[];
}

export type ParseResult = { ok: true; value: ParsedReply } | { ok: false; error: ParseError; text: string };

export interface ParseReplyOptions {
  /** Ollama's done_reason; 'length' means the reply was cut by num_predict. */
  doneReason?: string;
}

export function parseReply(raw: string, options: ParseReplyOptions = {}): ParseResult {
  const withholder = createWithholder();
  withholder.push(raw);
  const { shown: text, tail, marker } = withholder.finish();
  const repairs: RepairCode[] = [];
  const addRepair = (code: RepairCode): void => {
    if (!repairs.includes(code)) repairs.push(code);
  };
  const fail = (error: ParseError): ParseResult => ({
    ok: false,
    error: options.doneReason === 'length' ? { ...error, message: `${error.message} ${LENGTH_NOTE}` } : error,
    text,
  });

  if (tail === null || marker === null) {
    return fail({
      code: 'MissingDelimiter',
      message: `The reply has no \`${DELIMITER}\` line followed by the JSON metadata, so no prompt or settings could be read. Remind the model of the format and ask again.`,
    });
  }
  if (marker !== 'delimiter') addRepair('missing-delimiter');

  const extracted = extractObjectText(tail, marker);
  if (extracted.fenced) addRepair('code-fence');
  if (!extracted.ok) return fail({ code: 'InvalidJson', message: extracted.message });
  if (extracted.trailingText) addRepair('trailing-text');

  const parsed = parseJsonObject(extracted.objectText);
  if (!parsed.ok) return fail({ code: 'InvalidJson', message: parsed.message });
  if (parsed.repaired) addRepair('json-syntax');

  const normalised = normaliseMetadata(parsed.value);
  if (!normalised.ok) {
    const details = normalised.problems.length > 0 ? ` (${normalised.problems.join('; ')})` : '';
    return fail({
      code: 'MissingFields',
      message: `The metadata lacks usable values for ${normalised.fields.join(', ')}${details}. Ask the model to send all of prompt, generate_image, steps, cfg and seed.`,
      fields: normalised.fields,
    });
  }
  for (const code of normalised.repairs) addRepair(code);
  return { ok: true, value: { text, metadata: normalised.metadata, repairs, notices: normalised.notices } };
}

const LENGTH_NOTE =
  'The reply was cut off by the length limit (done_reason "length") before it was complete; allow more tokens (num_predict) or ask for a shorter reply.';

type Extracted =
  | { ok: true; objectText: string; fenced: boolean; trailingText: boolean }
  | { ok: false; message: string; fenced: boolean };

/** Finds the JSON object inside the withheld tail, removing the delimiter and any fences. */
function extractObjectText(tail: string, marker: MarkerKind): Extracted {
  let body = marker === 'delimiter' ? tail.slice(DELIMITER.length) : tail;
  body = skipWhitespace(body);
  const fenced = body.startsWith('```');
  // The opening fence and its language tag; the object may also follow on the same line.
  if (fenced) body = skipWhitespace(body.replace(/^```[^\n{]*/, ''));
  if (!body.startsWith('{')) {
    return {
      ok: false,
      fenced,
      message: `The reply has a \`${DELIMITER}\` line but no JSON object after it. Ask the model to end with \`${DELIMITER}\` and the JSON object.`,
    };
  }
  const end = findObjectEnd(body);
  if (end === -1) {
    return {
      ok: false,
      fenced,
      message:
        'The JSON metadata is not closed (no matching `}`), so it was probably cut short. Ask the model to send the complete JSON object.',
    };
  }
  let rest = skipWhitespace(body.slice(end + 1));
  if (fenced && rest.startsWith('```')) rest = skipWhitespace(rest.slice(3));
  return { ok: true, objectText: body.slice(0, end + 1), fenced, trailingText: rest !== '' };
}

function skipWhitespace(text: string): string {
  let start = 0;
  while (start < text.length && isWhitespace(text.charAt(start))) start += 1;
  return text.slice(start);
}

/**
 * Index of the `}` closing the object that opens at index 0, or −1. Braces inside strings do not
 * count. Single-quoted strings are honoured first (Python-style output); if that leaves the object
 * open (an apostrophe in unquoted text), double quotes alone are tried.
 */
function findObjectEnd(text: string): number {
  const withSingleQuotes = scanObject(text, `"'`);
  return withSingleQuotes !== -1 ? withSingleQuotes : scanObject(text, '"');
}

function scanObject(text: string, quotes: string): number {
  let depth = 0;
  let quote = '';
  for (let index = 0; index < text.length; index += 1) {
    const ch = text.charAt(index);
    if (quote !== '') {
      if (ch === '\\') index += 1;
      else if (ch === quote) quote = '';
    } else if (quotes.includes(ch)) {
      quote = ch;
    } else if (ch === '{') {
      depth += 1;
    } else if (ch === '}') {
      depth -= 1;
      if (depth === 0) return index;
    }
  }
  return -1;
}

type ParsedJson = { ok: true; value: object; repaired: boolean } | { ok: false; message: string };

function parseJsonObject(objectText: string): ParsedJson {
  let value: unknown;
  let repaired = false;
  try {
    value = JSON.parse(objectText);
  } catch {
    try {
      value = JSON.parse(jsonrepair(objectText));
      repaired = true;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return {
        ok: false,
        message: `The JSON metadata cannot be read, even after repair (${reason}). Ask the model to resend it as valid JSON.`,
      };
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, message: 'The metadata is not a JSON object. Ask the model to end with a JSON object.' };
  }
  return { ok: true, value, repaired };
}

type Normalised =
  | { ok: true; metadata: Metadata; repairs: RepairCode[]; notices: string[] }
  | { ok: false; fields: string[]; problems: string[] };

const NUMERIC_STRING = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** Coerces and clamps the parsed object into Metadata, recording each repair. */
function normaliseMetadata(object: object): Normalised {
  const input = object as Record<string, unknown>;
  const repairs = new Set<RepairCode>();
  const notices: string[] = [];
  const fields: string[] = [];
  const problems: string[] = [];

  const unusable = (field: MetadataField, expected: string): void => {
    fields.push(field);
    if (input[field] !== undefined) problems.push(`${field}: ${describe(input[field])} is not ${expected}`);
  };

  const readText = (field: 'prompt' | 'negative_prompt', label: string): string | undefined => {
    const value = input[field];
    if (typeof value !== 'string') return undefined;
    if (value.length <= LIMITS.promptMaxChars) return value;
    repairs.add('clamped');
    notices.push(
      `${label} is ${value.length} characters long, above the maximum ${LIMITS.promptMaxChars}, so only the first ${LIMITS.promptMaxChars} characters are used.`,
    );
    return value.slice(0, LIMITS.promptMaxChars);
  };

  const readNumber = (
    field: 'steps' | 'cfg' | 'seed',
    label: string,
    range: { min: number; max: number },
    integer: boolean,
  ): number | undefined => {
    let value = input[field];
    if (typeof value === 'string' && NUMERIC_STRING.test(value.trim())) {
      value = Number(value.trim());
      repairs.add('coerced-types');
    }
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      unusable(field, 'a number');
      return undefined;
    }
    const rounded = integer ? Math.round(value) || 0 : value;
    const clamped = Math.min(range.max, Math.max(range.min, rounded));
    if (value > range.max) notices.push(`${label} ${value} is above the maximum ${range.max}, so ${clamped} is used.`);
    else if (value < range.min) notices.push(`${label} ${value} is below the minimum ${range.min}, so ${clamped} is used.`);
    else if (rounded !== value) notices.push(`${label} ${value} is not a whole number, so ${clamped} is used.`);
    if (clamped !== value) repairs.add('clamped');
    return clamped;
  };

  const prompt = readText('prompt', 'The prompt');
  if (prompt === undefined) unusable('prompt', 'a string');

  let generateImage = input.generate_image;
  if (typeof generateImage === 'string' && /^(true|false)$/i.test(generateImage.trim())) {
    generateImage = generateImage.trim().toLowerCase() === 'true';
    repairs.add('coerced-types');
  }
  if (typeof generateImage !== 'boolean') unusable('generate_image', 'true or false');

  const steps = readNumber('steps', 'Steps', LIMITS.steps, true);
  const cfg = readNumber('cfg', 'CFG', LIMITS.cfg, false);
  const seed = readNumber('seed', 'Seed', LIMITS.seed, true);

  let negativePrompt: string | undefined;
  if (input.negative_prompt !== undefined && input.negative_prompt !== null) {
    negativePrompt = readText('negative_prompt', 'The negative prompt');
    if (negativePrompt === undefined) unusable('negative_prompt', 'a string');
  }

  if (fields.length > 0) return { ok: false, fields: orderFields(fields), problems };

  const candidate = {
    prompt,
    generate_image: generateImage,
    steps,
    cfg,
    seed,
    ...(negativePrompt !== undefined ? { negative_prompt: negativePrompt } : {}),
  };
  const checked = metadataSchema.safeParse(candidate);
  if (!checked.success) {
    const bad = [...new Set(checked.error.issues.map((issue) => String(issue.path[0] ?? 'metadata')))];
    return { ok: false, fields: bad, problems: checked.error.issues.map((issue) => issue.message) };
  }
  return { ok: true, metadata: checked.data, repairs: [...repairs], notices };
}

function orderFields(fields: string[]): string[] {
  const order: readonly string[] = [...REQUIRED_METADATA_FIELDS, 'negative_prompt'];
  return [...new Set(fields)].sort((a, b) => order.indexOf(a) - order.indexOf(b));
}

function describe(value: unknown): string {
  const json = JSON.stringify(value);
  return json.length > 40 ? `${json.slice(0, 40)}…` : json;
}
