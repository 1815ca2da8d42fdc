// The vocabulary of the reply format `text\n---\n{JSON}`, shared by the streaming withholder and
// the parser so both recognise exactly the same markers.

export const DELIMITER = '---';

/** Keys that identify a bare `{…}` (no delimiter) as our metadata rather than ordinary text. */
export const METADATA_FIRST_KEYS = ['prompt', 'generate_image'] as const;

/** Language tags accepted on a fence line (```` ```json ````) that may hold the metadata. */
export const FENCE_LANGUAGES = ['', 'json', 'jsonc', 'json5'] as const;

/**
 * A marker candidate that has grown this long without being decided is released as text, so a
 * malformed reply can never hold back display indefinitely.
 */
export const MAX_CANDIDATE_CHARS = 64;

export function isWhitespace(ch: string): boolean {
  return ch === ' ' || ch === '\n' || ch === '\t' || ch === '\r' || ch === '\f' || ch === '\v';
}

/** Whitespace allowed around `---` on its own line: spaces, tabs and the `\r` of `\r\n`. */
export function isLineSpace(ch: string): boolean {
  return ch === ' ' || ch === '\t' || ch === '\r';
}

export function isKeyChar(ch: string): boolean {
  return /^[A-Za-z0-9_]$/.test(ch);
}

export function isMetadataKeyPrefix(key: string): boolean {
  return METADATA_FIRST_KEYS.some((candidate) => candidate.startsWith(key));
}

export function isMetadataKey(key: string): boolean {
  return (METADATA_FIRST_KEYS as readonly string[]).includes(key);
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
  while (start < end && isWhitespace(text.charAt(start))) start += 1;
  while (end > start && isWhitespace(text.charAt(end - 1))) end -= 1;
  return text.slice(start, end);
}
