// Finding the page's elements, what the page shows, and what the device is. Elements are looked up when a handler runs, never
// kept: switching conversations swaps #conversation in place, and a kept element would be the old one.

/**
 * The element with this id, if the page has one.
 * @param {string} id
 * @returns {HTMLElement | null}
 */
export const byId = (id) => document.getElementById(id);

/**
 * The element with this id when the page has one of this type; else null.
 * @template {Element} T
 * @param {string} id
 * @param {{ new (): T; prototype: T }} type
 * @returns {T | null}
 */
export function find(id, type) {
  const element = document.getElementById(id);
  return element instanceof type ? element : null;
}

/**
 * The element with this id, which a conversation page always has: a missing one is a broken page, and
 * fails here, by name.
 * @template {Element} T
 * @param {string} id
 * @param {{ new (): T; prototype: T }} type
 * @returns {T}
 */
export function need(id, type) {
  const element = find(id, type);
  if (!element) throw new Error(`Easel: the page has no ${type.name} #${id}`);
  return element;
}

/** The picture types the server takes; another is still sent, and refused in the server's words. */
export const IMAGE_TYPE = /^image\//;

/**
 * Puts one file into a form's file input and submits the form (htmx sends it as multipart): a picture dropped,
 * pasted or chosen, for a reference image or a description.
 * @param {string} formId
 * @param {string} inputId
 * @param {File} file
 */
export function submitFile(formId, inputId, file) {
  const form = find(formId, HTMLFormElement);
  const input = find(inputId, HTMLInputElement);
  if (!form || !input) return;
  const files = new DataTransfer();
  files.items.add(file);
  input.files = files.files;
  form.requestSubmit();
}

/** A conversation that does not exist yet: its first message (or Generate) creates it. */
export const isNewConversation = () => byId('start-new') !== null;

/** The id of the conversation shown. */
export const conversationId = () => byId('conversation')?.dataset.conversationId ?? '';

/** A phone or tablet: Enter makes a new line there (the Send button sends). */
export const isTouch = () => matchMedia('(pointer: coarse)').matches;

/** The narrow layout: the page itself is the one scrolling region, the chat log has no scrollbar of its own. */
export const isNarrow = () => matchMedia('(max-width: 880px)').matches;

/**
 * The form fields of a settings form or a prompt pane: what an input or change event can come from.
 * @param {EventTarget | null} target
 * @returns {target is HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement}
 */
export const isField = (target) => target instanceof HTMLInputElement || target instanceof HTMLSelectElement || target instanceof HTMLTextAreaElement;

/**
 * The request's form data: htmx 4 holds the body as FormData while `htmx:config:request` runs.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 * @returns {FormData}
 */
export function formBody(ctx) {
  const body = ctx.request.body;
  if (!(body instanceof FormData)) throw new Error('Easel: an htmx request body that is not FormData');
  return body;
}
