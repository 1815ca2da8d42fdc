// The page's markup read as a tree (node-html-parser), for tests that check ids, attributes and words
// rather than a copy of the HTML.
import { parse, type HTMLElement } from 'node-html-parser';

export type { HTMLElement };

export const read = (markup: unknown): HTMLElement => parse(String(markup));

/** The element matching `selector`, failing the test (with the start of the markup) when there is none. */
export function find(root: HTMLElement, selector: string): HTMLElement {
  const element = root.querySelector(selector);
  if (!element) throw new Error(`no ${selector} in ${root.toString().slice(0, 3000)}`);
  return element;
}

/** The text of every element matching `selector`, in order. */
export const texts = (root: HTMLElement, selector: string) => root.querySelectorAll(selector).map((element) => element.text);

/** Each `<hx-partial>` as htmx reads it: its target, its swap and the text inside, in order. */
export const partials = (markup: unknown) =>
  read(markup)
    .querySelectorAll('hx-partial')
    .map((partial) => ({ target: partial.getAttribute('hx-target'), swap: partial.getAttribute('hx-swap'), text: partial.text }));

/** Each partial's target and swap as one string (`#log beforeend`), in order. */
export const targets = (markup: unknown) => partials(markup).map((partial) => `${partial.target} ${partial.swap}`);
