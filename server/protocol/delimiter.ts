// The vocabulary of the reply format `text\n---\n{JSON}`, shared by the streaming withholder and
// the parser so both recognise exactly the same markers.

export const DELIMITER = '---';

/** Keys that identify a `{…}` without a delimiter as our metadata rather than ordinary text. */
export const METADATA_FIRST_KEYS = ['prompt', 'generate_image'] as const;

/** Language tags accepted on a fence line (```` ```json ````) that may hold the metadata. */
export const FENCE_LANGUAGES = ['', 'json', 'jsonc', 'json5'] as const;

/**
 * Characters that make a Markdown rule line when repeated (`***`, `___`, `===`, `- - -`, `----`):
 * three or more of one kind, spaces allowed between them.
 */
export const RULE_CHARS = ['-', '*', '_', '='] as const;

/** Dashes that make a rule line alone: the em dash `—` and the en dash `–`. */
export const DASH_RULE_CHARS = ['—', '–'] as const;

/** A rule line longer than this is text, even when metadata follows (a `{` line is still withheld). */
export const MAX_RULE_CHARS = 24;

/** A first key longer than this (as written, separators included) is not ours. */
export const MAX_KEY_CHARS = 20;

const MAX_FENCE_LANGUAGE_CHARS = Math.max(...FENCE_LANGUAGES.map((lang) => lang.length));

/**
 * The most visible (non-whitespace) characters the withholder ever holds back: the longest
 * candidate is a rule, a fence with its language, `{` and a quoted first key. Every state of the
 * candidate grammar is bounded by the limits above, so display can never be held back longer.
 */
export const MAX_HELD_CHARS = MAX_RULE_CHARS + 3 + MAX_FENCE_LANGUAGE_CHARS + 1 + (MAX_KEY_CHARS + 2);

export function isWhitespace(ch: string): boolean {
  return ch === ' ' || ch === '\n' || ch === '\t' || ch === '\r' || ch === '\f' || ch === '\v';
}

/** Whitespace allowed around `---` on its own line: spaces, tabs and the `\r` of `\r\n`. */
export function isLineSpace(ch: string): boolean {
  return ch === ' ' || ch === '\t' || ch === '\r';
}

export function isRuleChar(ch: string): boolean {
  return (RULE_CHARS as readonly string[]).includes(ch) || (DASH_RULE_CHARS as readonly string[]).includes(ch);
}

/** Whether `count` copies of `ch` (a rule character) make a rule line. */
export function isRuleLength(ch: string, count: number): boolean {
  // Stryker disable next-line ConditionalExpression: a rule candidate holds at least one character when asked
  return (DASH_RULE_CHARS as readonly string[]).includes(ch) ? count >= 1 : count >= 3;
}

/** Characters of an unquoted key (`{prompt: …}`, `{generate-image: …}`). */
export function isKeyChar(ch: string): boolean {
  // Stryker disable next-line Regex: only ever given one character, so the anchors change nothing
  return /^[A-Za-z0-9_-]$/.test(ch);
}

/**
 * An unquoted key starts with a letter. A `-` or `_` must stay free to start a rule line: the
 * withholder never re-reads a character it has accepted into a candidate.
 */
export function isKeyStartChar(ch: string): boolean {
  // Stryker disable next-line Regex: only ever given one character, so the anchors change nothing
  return /^[A-Za-z]$/.test(ch);
}

/**
 * The one key normaliser: `Prompt`, `GENERATE_IMAGE`, `generateImage`, `generate-image` and
 * `generate image` all become `prompt` / `generateimage`, compared against the schema's keys the
 * same way. The withholder feeds it one character at a time, so it works per character.
 */
export function normaliseKeyName(key: string): string {
  return key.replace(/[ _-]/g, '').toLowerCase();
}

const NORMALISED_FIRST_KEYS = METADATA_FIRST_KEYS.map(normaliseKeyName);

/** `key` is already normalised. */
export function isMetadataKeyPrefix(key: string): boolean {
  return NORMALISED_FIRST_KEYS.some((candidate) => candidate.startsWith(key));
}

/** `key` is already normalised. */
export function isMetadataKey(key: string): boolean {
  return NORMALISED_FIRST_KEYS.includes(key);
}

export function isFenceLanguagePrefix(lang: string): boolean {
  const lower = lang.toLowerCase();
  return FENCE_LANGUAGES.some((candidate) => candidate.startsWith(lower));
}

export function isFenceLanguage(lang: string): boolean {
  return (FENCE_LANGUAGES as readonly string[]).includes(lang.toLowerCase());
}

/** Removes leading and trailing whitespace as `isWhitespace` defines it (not Unicode spaces). */
export function trimWhitespace(text: string): string {
  let start = 0;
  let end = text.length;
  // Stryker disable next-line EqualityOperator,ConditionalExpression: charAt outside the string is '', not whitespace: the loop stops at the same place
  while (start < end && isWhitespace(text.charAt(start))) start += 1;
  // Stryker disable next-line EqualityOperator,ConditionalExpression: charAt outside the string is '', not whitespace: the loop stops at the same place
  while (end > start && isWhitespace(text.charAt(end - 1))) end -= 1;
  return text.slice(start, end);
}
