import { html as honoHtml, raw } from 'hono/html';

/** Markup that is already safe to send: every interpolated string was escaped by `html`. */
export type Html = ReturnType<typeof raw>;

/**
 * hono's `html` tag, kept synchronous: strings and numbers are escaped, Html values and arrays of
 * them are inserted as they are, and null/undefined/booleans render as nothing.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  const out = honoHtml(strings, ...values);
  if (out instanceof Promise) throw new TypeError('page markup must be synchronous: do not interpolate promises.');
  return out;
}

export const EMPTY: Html = raw('');

/** Joins fragments without a separator (hono flattens arrays the same way). */
export function joinHtml(parts: readonly Html[]): Html {
  return raw(parts.join(''));
}

/** An htmx 4 `<hx-partial>`: a piece of a response swapped into its own target. */
export function renderPartial(target: string, swap: string, content: Html = EMPTY): Html {
  return html`<hx-partial hx-target="${target}" hx-swap="${swap}">${content}</hx-partial>`;
}

/**
 * A message of ours for a person, where `backticks` mark a command to type: the text is escaped, and
 * each backticked span becomes <code>. Unpaired backticks stay as they are.
 */
export function renderMessage(text: string): Html {
  const parts = text.split('`');
  if (parts.length % 2 === 0) return html`${text}`;
  return joinHtml(parts.map((part, index) => (index % 2 === 1 ? html`<code>${part}</code>` : html`${part}`)));
}
