// Generate: usable with a backend (the server says, in data-backend-ready) and a prompt it can take.
import { find, need } from './dom.js';
import { isPromptTooLong } from './prompt-count.js';
import { updateVaryState } from './vary.js';

/**
 * Disables Generate while the prompt is empty (and says why) or too long (said beside the prompt); a request in
 * flight is left to htmx.
 */
export function updateGenerateState() {
  const button = find('generate', HTMLButtonElement);
  const prompt = find('prompt', HTMLTextAreaElement);
  if (!button || !prompt || button.closest('form')?.classList.contains('htmx-request')) return;
  const empty = prompt.value.trim() === '';
  button.disabled = button.dataset.backendReady !== 'yes' || empty || isPromptTooLong(prompt);
  need('generate-empty', HTMLElement).hidden = !empty;
  // Vary follows the same prompt, and the server's word on whether it can.
  updateVaryState();
}

/**
 * Generate from elsewhere (the Generate of an image note submits the same form) is held back too while the
 * prompt is too long: its message is already beside the prompt, which gets the focus.
 * @param {CustomEvent<{ ctx: import('htmx.org').HtmxRequestCtx }>} event
 */
export function onGenerateConfigRequest(event) {
  const elt = event.detail.ctx.sourceElement;
  const prompt = find('prompt', HTMLTextAreaElement);
  if (!(elt instanceof Element) || elt.id !== 'generate-form' || !prompt || !isPromptTooLong(prompt)) return;
  event.preventDefault();
  prompt.focus();
}

/**
 * A generation ended. A failed image may mean the backend went away: the status line says so at once.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onGenerateFinished(ctx) {
  if (!(ctx.sourceElement instanceof Element) || ctx.sourceElement.id !== 'generate-form') return;
  htmx.trigger(document.body, 'easel:status');
  // htmx enables the button again right after this event: the empty-prompt rule is applied after it.
  queueMicrotask(updateGenerateState);
}
