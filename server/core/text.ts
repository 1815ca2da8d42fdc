import { z } from 'zod';
import { LIMITS } from '../protocol/limits.ts';
import { CONTROL_CHARACTER, ONE_LINE_FORBIDDEN } from '../protocol/text-rules.ts';

// What no text may hold, typed or written by a model: server/protocol/text-rules.ts.
// Every way Unicode breaks a line, NEL (U+0085) aside: it is a C1 control and said as one.
const LINE_BREAK = /[\n\r\u2028\u2029]/;

const BIDI_NAMES: Readonly<Record<number, string>> = {
  0x061c: 'an Arabic letter mark',
  0x200e: 'a left-to-right mark',
  0x200f: 'a right-to-left mark',
  0x202a: 'a left-to-right embedding',
  0x202b: 'a right-to-left embedding',
  0x202c: 'a pop directional formatting',
  0x202d: 'a left-to-right override',
  0x202e: 'a right-to-left override',
  0x2066: 'a left-to-right isolate',
  0x2067: 'a right-to-left isolate',
  0x2068: 'a first strong isolate',
  0x2069: 'a pop directional isolate',
};

export const MAX_MESSAGE_CHARS = 8000;
export const MAX_TITLE_CHARS = 120;

/**
 * The one rule for text a person typed (messages, prompts, the negative prompt), shared by the page, the
 * API and imports: control characters are refused with a message naming the field; CRLF and a lone CR
 * become LF (a browser's form sends CRLF for each line break in a textarea, and the model should see one kind).
 */
export function typedText(schema: z.ZodString, label: string): z.ZodString {
  return schema
    .refine((value) => !CONTROL_CHARACTER.test(value), {
      error: (issue) => describeForbidden(label, String(issue.input), CONTROL_CHARACTER),
      abort: true,
    })
    .overwrite((value) => value.replace(/\r\n?/g, '\n'));
}

/** The rule for one line of text (a title): as typedText, and no line break, C1 control or bidirectional control either. */
export function oneLineText(schema: z.ZodString, label: string): z.ZodString {
  return schema
    .refine((value) => !LINE_BREAK.test(value), { error: `${label} is one line.`, abort: true })
    .refine((value) => !ONE_LINE_FORBIDDEN.test(value), {
      error: (issue) => describeForbidden(label, String(issue.input), ONE_LINE_FORBIDDEN),
      abort: true,
    });
}

/** A message sent to the model. */
export const messageSchema = typedText(z.string({ error: 'text must be a string' }), 'The message')
  .trim()
  .min(1, 'Type a message first: it is empty.')
  .max(MAX_MESSAGE_CHARS, `A message can hold at most ${MAX_MESSAGE_CHARS} characters; shorten it.`);

/** The image prompt (the pane, a version of it, the prompt an image was made from). */
export const promptSchema = typedText(z.string({ error: 'prompt must be a string' }), 'The prompt').max(
  LIMITS.promptMaxChars,
  `A prompt can hold at most ${LIMITS.promptMaxChars} characters.`,
);

/** A conversation's title; '' means "derive it from the first message again". */
export const titleSchema = oneLineText(z.string({ error: 'title must be a string' }).trim(), 'A title').max(
  MAX_TITLE_CHARS,
  `A title can hold at most ${MAX_TITLE_CHARS} characters.`,
);

/**
 * The different words of a search, split where SQLite's FTS5 tokenizer splits: anything but letters and digits.
 * One separator at a time: a run of them gives empty words, which the filter drops.
 */
export function toSearchWords(query: string): string[] {
  return [...new Set(query.split(/[^\p{L}\p{N}]/u).filter((word) => word !== ''))];
}

/** Text made into one line for showing (a title or preview derived from a message): what the one-line rule refuses is left out. */
export function toOneLine(text: string): string {
  return text.replace(new RegExp(LINE_BREAK.source, 'g'), ' ').replace(new RegExp(ONE_LINE_FORBIDDEN.source, 'gu'), '');
}

function describeForbidden(label: string, value: string, pattern: RegExp): string {
  const match = pattern.exec(value);
  const index = match?.index ?? 0;
  const point = value.codePointAt(index) ?? 0;
  const code = `U+${point.toString(16).toUpperCase().padStart(4, '0')}`;
  const what = BIDI_NAMES[point]
    ? `${BIDI_NAMES[point]} character (${code})`
    : point >= 0xd800 && point <= 0xdfff
      ? `half of a character (a lone surrogate, ${code})`
      : `an invisible control character (${code})`;
  return `${label} contains ${what} at character ${index + 1}; remove it and try again.`;
}
