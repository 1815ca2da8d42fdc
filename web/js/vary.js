// Vary (subtle, strong): an image as the starting point. Each button is a submit button of #generate-form whose
// `from` is `<imageId>:<strength>` (the thumbnails' are drawn so; the large view's take the shown image's id), so
// the image is made from the prompt and settings shown, starting from that image, on Generate's own stream.
import { find } from './dom.js';
import { isPromptTooLong } from './prompt-count.js';

/**
 * Enables the Vary buttons where an image can be made: the image server can vary (the server says, in the
 * Generate button's data-vary, refreshed with the status line) and the prompt is one Generate would take. A
 * disabled button is described by why: the server's own sentence (#vary-help), or the empty prompt.
 */
export function updateVaryState() {
  const generate = find('generate', HTMLButtonElement);
  const prompt = find('prompt', HTMLTextAreaElement);
  // A Generate or Vary on its way: htmx keeps them disabled until it ends (hx-disable).
  if (!generate || generate.closest('form')?.classList.contains('htmx-request')) return;
  const canVary = generate.dataset.backendReady === 'yes' && generate.dataset.vary === 'yes';
  const empty = !prompt || prompt.value.trim() === '';
  const usable = canVary && !empty && !(prompt && isPromptTooLong(prompt));
  const reason = !canVary ? 'vary-help' : empty ? 'generate-empty' : 'vary-help';
  const title = !canVary ? (find('vary-help', HTMLElement)?.textContent ?? '') : empty ? 'Vary needs a prompt: write one, or chat until the assistant suggests one.' : '';
  for (const button of document.querySelectorAll('button.vary')) {
    if (!(button instanceof HTMLButtonElement)) continue;
    button.disabled = !usable;
    button.setAttribute('aria-describedby', reason);
    if (usable) button.removeAttribute('title');
    else button.title = title;
  }
}

/**
 * The large view's Vary buttons take the shown image's id; without one (an image drawn before ids were on the
 * page) they are left out.
 * @param {string | undefined} imageId
 */
export function setDialogVary(imageId) {
  for (const id of ['dialog-vary-subtle', 'dialog-vary-strong']) {
    const button = find(id, HTMLButtonElement);
    if (!button) continue;
    button.hidden = imageId === undefined || imageId === '';
    button.value = button.hidden ? '' : `${imageId}:${button.dataset.strength ?? ''}`;
  }
  updateVaryState();
}
