import type { z } from 'zod';

// C0 control characters except tab (09), newline (0A) and carriage return (0D). No keyboard types
// them; a NUL or an escape sequence only breaks what comes later (an image backend, a terminal, a log).
const CONTROL_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]/;

/**
 * The one rule for text a person typed (messages, prompts, the negative prompt), shared by the page and
 * the API: control characters are refused with a message naming the field; CRLF and a lone CR become LF
 * (a browser's form sends CRLF for each line break in a textarea, and the model should see one kind).
 */
export function typedText(schema: z.ZodString, label: string): z.ZodString {
  return schema
    .refine((value) => !CONTROL_CHARACTER.test(value), {
      error: (issue) => describeControlCharacter(label, String(issue.input)),
      abort: true,
    })
    .overwrite((value) => value.replace(/\r\n?/g, '\n'));
}

function describeControlCharacter(label: string, value: string): string {
  const match = CONTROL_CHARACTER.exec(value);
  const index = match?.index ?? 0;
  const code = `U+${value.charCodeAt(index).toString(16).toUpperCase().padStart(4, '0')}`;
  return `${label} contains an invisible control character (${code}) at character ${index + 1}; remove it and try again.`;
}
