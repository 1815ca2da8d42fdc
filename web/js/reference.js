// A reference image: a picture the user brings as a starting point for Vary. Dropped anywhere on the conversation's
// page but the prompt pane (there it is described: describe.js), pasted (Ctrl+V outside a text field), or chosen
// with "Add a reference image…": each puts the file in #reference-form's file input and submits it (htmx,
// multipart, POST /c/:id/references). The answer's partials put it in the chat with its Vary buttons, or say why
// not in the image error slot (#image-error).
import { isOnPromptPane } from './describe.js';
import { find, IMAGE_TYPE, submitFile } from './dom.js';
import { updateVaryState } from './vary.js';

/**
 * Sends one file as a reference image.
 * @param {File} file
 */
const submitReference = (file) => submitFile('reference-form', 'reference-file', file);

/**
 * A file chosen with "Add a reference image…" is sent at once.
 * @param {Event} event
 */
export function onReferenceChange(event) {
  const target = event.target;
  if (!(target instanceof HTMLInputElement) || target.id !== 'reference-file' || !target.files?.length) return;
  find('reference-form', HTMLFormElement)?.requestSubmit();
}

/**
 * The upload ended: the field is ready for another file, and the new Vary buttons follow the page's state.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onReferenceFinished(ctx) {
  const elt = ctx.sourceElement;
  if (!(elt instanceof Element) || elt.id !== 'reference-form') return;
  const input = find('reference-file', HTMLInputElement);
  if (input) input.value = '';
  updateVaryState();
}

/**
 * Whether a drag carries files (not text or a link dragged within the page).
 * @param {DragEvent} event
 */
const carriesFiles = (event) => event.dataTransfer?.types.includes('Files') === true;

/**
 * The hint says what a drop does where the picture is: on the prompt pane it is described, elsewhere it is a
 * reference image (the pane is marked while it is the one).
 * @param {boolean} shown
 * @param {boolean} [describe]
 */
function showDropHint(shown, describe = false) {
  const hint = find('drop-hint', HTMLElement);
  if (hint) {
    hint.hidden = !shown;
    const words = describe ? hint.dataset.describe : hint.dataset.reference;
    if (words && hint.textContent !== words) hint.textContent = words;
  }
  document.querySelector('.prompt-pane')?.classList.toggle('drop-target', shown && describe);
}

/**
 * A file dragged over the page: it may be dropped (the default would open it in the tab), and the hint says so.
 * @param {DragEvent} event
 */
export function onDragOver(event) {
  if (!find('reference-form', HTMLFormElement) || !carriesFiles(event)) return;
  event.preventDefault();
  if (event.dataTransfer) event.dataTransfer.dropEffect = 'copy';
  showDropHint(true, isOnPromptPane(event.target));
}

/**
 * The drag left the window (no element it went to) or ended: the hint goes.
 * @param {DragEvent} event
 */
export function onDragLeave(event) {
  if (event.type === 'dragleave' && event.relatedTarget !== null) return;
  showDropHint(false);
}

/**
 * A file dropped on the page: the first picture becomes a reference image.
 * @param {DragEvent} event
 */
export function onDrop(event) {
  if (!find('reference-form', HTMLFormElement) || !carriesFiles(event)) return;
  event.preventDefault();
  showDropHint(false);
  // On the prompt pane it is described instead (describe.js took it).
  if (isOnPromptPane(event.target)) return;
  const file = event.dataTransfer?.files[0];
  if (file) submitReference(file);
}

/**
 * Ctrl+V of a picture outside a text field (where pasting stays the field's own) adds it as a reference image.
 * @param {ClipboardEvent} event
 */
export function onPaste(event) {
  // Pasted on the prompt pane, a picture is described (describe.js took it).
  if (!find('reference-form', HTMLFormElement) || event.defaultPrevented) return;
  const target = event.target;
  if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || (target instanceof HTMLElement && target.isContentEditable)) return;
  const file = Array.from(event.clipboardData?.files ?? []).find((item) => IMAGE_TYPE.test(item.type));
  if (!file) return;
  event.preventDefault();
  submitReference(file);
}
