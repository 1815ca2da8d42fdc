// Describe: a picture dropped or pasted on the prompt pane, or chosen with "Describe a picture…", goes into
// #describe-form's file input and is submitted (htmx, multipart, POST /c/:id/describe, with the prompt on screen,
// saved first). The answer streams: "Describing the picture…", then its description as the prompt, one undo away.
// Dropped anywhere else, a picture stays a reference image (reference.js).
import { find, IMAGE_TYPE, submitFile } from './dom.js';

/**
 * Whether an event happened on the prompt pane of a page that can describe.
 * @param {EventTarget | null} target
 */
export const isOnPromptPane = (target) => target instanceof Element && target.closest('.prompt-pane') !== null && find('describe-form', HTMLFormElement) !== null;

/**
 * Sends one file to be described.
 * @param {File} file
 */
const submitDescribe = (file) => submitFile('describe-form', 'describe-file', file);

/**
 * A file chosen with "Describe a picture…" is sent at once.
 * @param {Event} event
 */
export function onDescribeChange(event) {
  const target = event.target;
  if (!(target instanceof HTMLInputElement) || target.id !== 'describe-file' || !target.files?.length) return;
  find('describe-form', HTMLFormElement)?.requestSubmit();
}

/**
 * The description ended (or was refused): the field is ready for another file.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onDescribeFinished(ctx) {
  const elt = ctx.sourceElement;
  if (!(elt instanceof Element) || elt.id !== 'describe-form') return;
  const input = find('describe-file', HTMLInputElement);
  if (input) input.value = '';
  const status = find('describe-status', HTMLElement);
  if (ctx.response?.status === undefined && status && status.textContent === 'Describing the picture…') status.textContent = 'Could not reach Easel. Is it still running?';
}

/**
 * A file dropped on the prompt pane: its first picture is described.
 * @param {DragEvent} event
 */
export function onDescribeDrop(event) {
  if (!isOnPromptPane(event.target) || event.dataTransfer?.types.includes('Files') !== true) return;
  event.preventDefault();
  const files = Array.from(event.dataTransfer.files);
  const file = files.find((item) => IMAGE_TYPE.test(item.type)) ?? files[0];
  if (file) submitDescribe(file);
}

/**
 * A picture pasted on the prompt pane (in the prompt itself too, where a picture has no place as text) is described;
 * text pasted there stays text.
 * @param {ClipboardEvent} event
 */
export function onDescribePaste(event) {
  if (!isOnPromptPane(event.target) || event.clipboardData?.types.includes('text/plain')) return;
  const file = Array.from(event.clipboardData?.files ?? []).find((item) => IMAGE_TYPE.test(item.type));
  if (!file) return;
  event.preventDefault();
  submitDescribe(file);
}
