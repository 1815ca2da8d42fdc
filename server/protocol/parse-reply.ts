// Parsing a complete reply: split it with the streaming withholder (the one delimiter rule), then
// read the JSON object and repair it only where the repair cannot change what the model meant.
// Anything else is a failure value that sends the turn up the recovery ladder.

import { jsonrepair } from 'jsonrepair';
import { DELIMITER, isRuleChar, isWhitespace, normaliseKeyName } from './delimiter.ts';
import { LIMITS, RANDOM_SEED } from './limits.ts';
import { metadataSchema, REQUIRED_METADATA_FIELDS } from './metadata.ts';
import type { Metadata, MetadataField } from './metadata.ts';
import { createWithholder } from './withhold.ts';
import type { MarkerKind, WithheldReply } from './withhold.ts';

/**
 * Stable codes of the lossless repairs, reported with an accepted reply in this order (the order
 * they are applied in). docs/DESIGN.md "Lossless repair" describes each.
 */
export const REPAIR_CODES = [
  'missing-delimiter', // metadata without a delimiter line: a bare `{` line, a fence, or the end of a prose line
  'markdown-rule', // another Markdown rule (`***`, `___`, `===`, `—`, `- - -`, `----`) used as the delimiter
  'inline-json', // the metadata at the end of a prose line (`here you go! {"prompt": …}`)
  'code-fence', // ``` fences around the JSON
  'trailing-text', // text after the JSON object
  'repeated-metadata', // the metadata written more than once: the first usable copy is used
  'json-syntax', // trailing commas, single quotes, True/None, unquoted keys… fixed by jsonrepair
  'key-names', // `Prompt`, `GENERATE_IMAGE`, `generateImage`, `generate-image`, `CFG` → the schema's keys
  'coerced-types', // "4" → 4; "true", "Yes", 1 → true; "no", "FALSE", 0 → false
  'random-seed', // a seed meaning random ("random", "any", "none", null) → −1
  'number-units', // a number with a word ("20 steps", "7.5 cfg", "CFG 7") → the number
  'control-characters', // NUL, ESC and the other C0 controls (not tab or newline) removed from a prompt; CRLF → LF
  'clamped', // out-of-range or fractional numbers, over-long prompts
] as const;

export type RepairCode = (typeof REPAIR_CODES)[number];

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

/** C0 control characters other than tab and newline: no image prompt means them. */
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000B-\u001F]/g;

/** How many copies of the metadata are tried before the first one's error is reported. */
const MAX_METADATA_COPIES = 3;

interface MetadataCopy {
  tail: string;
  marker: MarkerKind;
}

type CopyResult =
  | { ok: true; metadata: Metadata; repairs: RepairCode[]; notices: string[]; rest: string }
  | { ok: false; error: ParseError; rest: string };

export function parseReply(raw: string, options: ParseReplyOptions = {}): ParseResult {
  return parseWithheld(splitReply(raw), options);
}

/**
 * parseReply for a reply the withholder already split while it streamed (what `finish()` returned):
 * the same rule, without running it over the text a second time.
 */
export function parseWithheld(split: WithheldReply, options: ParseReplyOptions = {}): ParseResult {
  const { shown: text, tail, marker } = split;
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

  // The first usable copy wins; a broken first copy's error is what the ladder reports.
  let copy: MetadataCopy | null = { tail, marker };
  let firstError: ParseError | null = null;
  for (let index = 0; copy !== null && index < MAX_METADATA_COPIES; index += 1) {
    const result = readCopy(copy);
    if (result.ok) {
      const repeated = index > 0 || findMetadataCopy(result.rest) !== null;
      const repairs = orderRepairs(repeated ? [...result.repairs, 'repeated-metadata'] : result.repairs);
      return { ok: true, value: { text, metadata: result.metadata, repairs, notices: result.notices } };
    }
    firstError ??= result.error;
    copy = findMetadataCopy(result.rest);
  }
  return fail(firstError as ParseError);
}

/**
 * The answer of the metadata-only step, a call constrained to the metadata's JSON Schema: the whole
 * reply is the object, so no delimiter is expected (none is reported missing). Same repairs otherwise.
 */
export function parseMetadataReply(raw: string, options: ParseReplyOptions = {}): ParseResult {
  const fail = (error: ParseError): ParseResult => ({
    ok: false,
    error: options.doneReason === 'length' ? { ...error, message: `${error.message} ${LENGTH_NOTE}` } : error,
    text: '',
  });
  if (!skipWhitespace(raw).startsWith('{')) {
    return fail({ code: 'InvalidJson', message: 'The answer to the request for the metadata alone holds no JSON object.' });
  }
  const result = readCopy({ tail: raw, marker: 'bare-json' });
  if (!result.ok) return fail(result.error);
  const repairs = orderRepairs(result.repairs.filter((code) => code !== 'missing-delimiter'));
  return { ok: true, value: { text: '', metadata: result.metadata, repairs, notices: result.notices } };
}

/** The one delimiter rule, run over a whole text. */
function splitReply(raw: string) {
  const withholder = createWithholder();
  withholder.push(raw);
  return withholder.finish();
}

/** The next metadata marker in `text` (after a copy that could not be used), by the same rule. */
function findMetadataCopy(text: string): MetadataCopy | null {
  const { tail, marker } = splitReply(text);
  return tail !== null && marker !== null ? { tail, marker } : null;
}

function orderRepairs(repairs: RepairCode[]): RepairCode[] {
  return REPAIR_CODES.filter((code) => repairs.includes(code));
}

const MARKER_REPAIRS: Record<MarkerKind, RepairCode[]> = {
  delimiter: [],
  rule: ['markdown-rule'],
  'bare-json': ['missing-delimiter'],
  fence: ['missing-delimiter'],
  'inline-json': ['missing-delimiter', 'inline-json'],
};

function readCopy({ tail, marker }: MetadataCopy): CopyResult {
  const repairs: RepairCode[] = [...MARKER_REPAIRS[marker]];
  const extracted = extractObjectText(tail, marker);
  if (extracted.fenced) repairs.push('code-fence');
  if (!extracted.ok) return { ok: false, error: { code: 'InvalidJson', message: extracted.message }, rest: extracted.rest };
  if (extracted.trailingText) repairs.push('trailing-text');

  const parsed = parseJsonObject(extracted.objectText);
  if (!parsed.ok) return { ok: false, error: { code: 'InvalidJson', message: parsed.message }, rest: extracted.rest };
  if (parsed.repaired) repairs.push('json-syntax');

  const normalised = normaliseMetadata(parsed.value);
  if (!normalised.ok) {
    const details = normalised.problems.length > 0 ? ` (${normalised.problems.join('; ')})` : '';
    const error: ParseError = {
      code: 'MissingFields',
      message: `The metadata lacks usable values for ${normalised.fields.join(', ')}${details}. Ask the model to send all of prompt, generate_image, steps, cfg and seed.`,
      fields: normalised.fields,
    };
    return { ok: false, error, rest: extracted.rest };
  }
  return { ok: true, metadata: normalised.metadata, repairs: [...repairs, ...normalised.repairs], notices: normalised.notices, rest: extracted.rest };
}

const LENGTH_NOTE =
  'The reply was cut off by the length limit (done_reason "length") before it was complete; allow more tokens (num_predict) or ask for a shorter reply.';

type Extracted =
  | { ok: true; objectText: string; fenced: boolean; trailingText: boolean; rest: string }
  | { ok: false; message: string; fenced: boolean; rest: string };

/**
 * Finds the JSON object inside the withheld tail, removing the rule line and any fences. `rest` is
 * where another copy of the metadata may start: after the object, or after a broken object's `{`.
 */
function extractObjectText(tail: string, marker: MarkerKind): Extracted {
  // Stryker disable next-line ConditionalExpression: the other tails start with `{` or a backtick, which skipRuleLine leaves alone
  let body = marker === 'delimiter' || marker === 'rule' ? skipRuleLine(tail) : tail;
  body = skipWhitespace(body);
  const fenced = body.startsWith('```');
  // The opening fence and its language tag; the object may also follow on the same line.
  // Stryker disable next-line ConditionalExpression,Regex: an unfenced body starts with `{`, a fenced one with the fence
  if (fenced) body = skipWhitespace(body.replace(/^```[^\n{]*/, ''));
  if (!body.startsWith('{')) {
    return {
      ok: false,
      fenced,
      rest: body,
      message: `The reply has a \`${DELIMITER}\` line but no JSON object after it. Ask the model to end with \`${DELIMITER}\` and the JSON object.`,
    };
  }
  const end = findObjectEnd(body);
  if (end === -1) {
    return {
      ok: false,
      fenced,
      // Stryker disable next-line MethodExpression: the same broken copy is refused again until the three-copy bound: the same first error
      rest: body.slice(1),
      message:
        'The JSON metadata is not closed (no matching `}`), so it was probably cut short. Ask the model to send the complete JSON object.',
    };
  }
  const after = body.slice(end + 1);
  let rest = skipWhitespace(after);
  if (fenced && rest.startsWith('```')) rest = skipWhitespace(rest.slice(3));
  return { ok: true, objectText: body.slice(0, end + 1), fenced, trailingText: rest !== '', rest: after };
}

/** Drops the rule characters (`---`, `***`, `- - -`, `—`…) and the spaces between them. */
function skipRuleLine(tail: string): string {
  let start = 0;
  // Stryker disable next-line EqualityOperator,ConditionalExpression: charAt past the end is '', which stops the loop all the same
  while (start < tail.length && (isRuleChar(tail.charAt(start)) || tail.charAt(start) === ' ' || tail.charAt(start) === '\t')) start += 1;
  return tail.slice(start);
}

function skipWhitespace(text: string): string {
  let start = 0;
  // Stryker disable next-line EqualityOperator,ConditionalExpression: charAt past the end is '', which stops the loop all the same
  while (start < text.length && isWhitespace(text.charAt(start))) start += 1;
  return text.slice(start);
}

/**
 * Index of the `}` closing the object that opens at index 0, or −1. Braces inside strings do not
 * count. Single-quoted strings are honoured first (Python-style output); if that leaves the object
 * open (an apostrophe in unquoted text), double quotes alone are tried.
 */
export function findObjectEnd(text: string): number {
  const withSingleQuotes = scanObject(text, `"'`);
  return withSingleQuotes !== -1 ? withSingleQuotes : scanObject(text, '"');
}

function scanObject(text: string, quotes: string): number {
  let depth = 0;
  let quote = '';
  // Stryker disable next-line EqualityOperator: charAt past the end is '', which changes nothing
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

/**
 * JSON.parse, and jsonrepair only when it refuses the text (a trailing comma, single quotes): the one repair of a
 * model's JSON, the metadata's and the vision model's. `reason`: why even the repaired text could not be read.
 */
export function parseRepairingJson(text: string): { ok: true; value: unknown; repaired: boolean } | { ok: false; reason: string } {
  try {
    return { ok: true, value: JSON.parse(text), repaired: false };
  } catch {
    try {
      return { ok: true, value: JSON.parse(jsonrepair(text)), repaired: true };
    } catch (error) {
      return { ok: false, reason: error instanceof Error ? error.message : String(error) };
    }
  }
}

function parseJsonObject(objectText: string): ParsedJson {
  const parsed = parseRepairingJson(objectText);
  if (!parsed.ok) {
    return { ok: false, message: `The JSON metadata cannot be read, even after repair (${parsed.reason}). Ask the model to resend it as valid JSON.` };
  }
  const { value, repaired } = parsed;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    // Stryker disable next-line StringLiteral: unreachable: the extracted text starts with `{`, so it parses to an object
    return { ok: false, message: 'The metadata is not a JSON object. Ask the model to end with a JSON object.' };
  }
  return { ok: true, value, repaired };
}

type Normalised =
  | { ok: true; metadata: Metadata; repairs: RepairCode[]; notices: string[] }
  | { ok: false; fields: string[]; problems: string[] };

const NUMERIC_STRING = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
/** One number with words before or after it: "20 steps", "7.5 cfg", "CFG: 7", "seed 42". */
// Words and the number are apart (a space, `:` or `=`): `20 steps`, `CFG: 7`, `seed=42`; `20abc` or `1e` are not numbers.
const NUMBER_WITH_WORDS = /^(?:[A-Za-z][A-Za-z ]*?(?:\s+|\s*[:=]\s*))?([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:\s+[A-Za-z][A-Za-z .]*)?$/;
/** Short values only: a unit is a word or two, and the pattern must stay cheap on long strings. */
const MAX_NUMBER_WITH_WORDS_CHARS = 40;
const TRUE_WORDS = ['true', 'yes', 'on', '1'];
const FALSE_WORDS = ['false', 'no', 'off', '0'];
/** A seed written as a word meaning random; JSON null means the same. */
const RANDOM_SEED_WORDS = ['random', 'randomize', 'randomized', 'random seed', 'rand', 'any', 'none', 'null', 'auto', ''];

/** The schema's keys by their normalised name (`generateimage` → `generate_image`). */
const FIELDS_BY_NORMALISED_KEY = new Map(
  Object.keys(metadataSchema.shape).map((field) => [normaliseKeyName(field), field as MetadataField]),
);

/**
 * Maps keys written in another case or style to the schema's keys. The exact key wins over any
 * variant; of two variants, the first one written wins. Other keys are dropped, as the schema does.
 */
function canonicaliseKeys(object: object): { input: Partial<Record<MetadataField, unknown>>; renamed: boolean } {
  const input: Partial<Record<MetadataField, unknown>> = {};
  let renamed = false;
  for (const [key, value] of Object.entries(object)) {
    const field = FIELDS_BY_NORMALISED_KEY.get(normaliseKeyName(key));
    if (field === undefined) continue;
    if (key === field) {
      input[field] = value;
    } else if (!Object.hasOwn(object, field) && !Object.hasOwn(input, field)) {
      input[field] = value;
      renamed = true;
    }
  }
  return { input, renamed };
}

/** Coerces and clamps the parsed object into Metadata, recording each repair. */
function normaliseMetadata(object: object): Normalised {
  const { input, renamed } = canonicaliseKeys(object);
  const repairs = new Set<RepairCode>(renamed ? ['key-names'] : []);
  const notices: string[] = [];
  const fields: string[] = [];
  const problems: string[] = [];

  const unusable = (field: MetadataField, expected: string): void => {
    fields.push(field);
    if (input[field] !== undefined) problems.push(`${field}: ${describe(input[field])} is not ${expected}`);
  };

  const readText = (field: 'prompt' | 'negative_prompt', label: string): string | undefined => {
    const raw = input[field];
    if (typeof raw !== 'string') return undefined;
    // The model's prompt goes to the image backend and into the PNG: it obeys the rule typed text obeys.
    const value = raw.replace(/\r\n?/g, '\n').replace(CONTROL_CHARACTERS, '');
    if (value !== raw) repairs.add('control-characters');
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
    if (field === 'seed' && isRandomSeedWord(value)) {
      value = RANDOM_SEED;
      repairs.add('random-seed');
    } else if (typeof value === 'string') {
      const trimmed = value.trim();
      const withWords = trimmed.length <= MAX_NUMBER_WITH_WORDS_CHARS ? NUMBER_WITH_WORDS.exec(trimmed) : null;
      if (NUMERIC_STRING.test(trimmed)) {
        value = Number(trimmed);
        repairs.add('coerced-types');
      } else if (withWords?.[1] !== undefined) {
        value = Number(withWords[1]);
        repairs.add('number-units');
      }
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
  const asBoolean = readBooleanWord(generateImage);
  if (asBoolean !== undefined) {
    generateImage = asBoolean;
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
    // Stryker disable next-line LogicalOperator,StringLiteral: unreachable: every field is coerced and clamped before the schema check
    const bad = [...new Set(checked.error.issues.map((issue) => String(issue.path[0] ?? 'metadata')))];
    return { ok: false, fields: bad, problems: checked.error.issues.map((issue) => issue.message) };
  }
  return { ok: true, metadata: checked.data, repairs: [...repairs], notices };
}

/** "true", "Yes", "no", "FALSE", 1, 0 → a boolean; anything else (a real boolean included) → undefined. */
function readBooleanWord(value: unknown): boolean | undefined {
  const word = typeof value === 'string' ? value.trim().toLowerCase() : typeof value === 'number' ? String(value) : null;
  if (word === null) return undefined;
  if (TRUE_WORDS.includes(word)) return true;
  if (FALSE_WORDS.includes(word)) return false;
  return undefined;
}

function isRandomSeedWord(value: unknown): boolean {
  return value === null || (typeof value === 'string' && RANDOM_SEED_WORDS.includes(value.trim().toLowerCase()));
}

function orderFields(fields: string[]): string[] {
  // Stryker disable next-line ArrayDeclaration: fields are gathered in this order already; with no order the sort keeps them as they are
  const order: readonly string[] = [...REQUIRED_METADATA_FIELDS, 'negative_prompt'];
  // Stryker disable next-line MethodExpression,ArrowFunction: fields are gathered in this order already, and a sort leaves an ordered run in place
  return [...new Set(fields)].sort((a, b) => order.indexOf(a) - order.indexOf(b));
}

function describe(value: unknown): string {
  const json = JSON.stringify(value);
  return json.length > 40 ? `${json.slice(0, 40)}…` : json;
}
