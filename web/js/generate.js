// Generate: usable with a backend (the server says, in data-backend-ready) and a prompt.
import { find, need } from './dom.js';

/** Disables Generate while the prompt is empty, and says why; a request in flight is left to htmx. */
export function updateGenerateState() {
  const button = find('generate', HTMLButtonElement);
  const prompt = find('prompt', HTMLTextAreaElement);
  if (!button || !prompt || button.closest('form')?.classList.contains('htmx-request')) return;
  const empty = prompt.value.trim() === '';
  button.disabled = button.dataset.backendReady !== 'yes' || empty;
  need('generate-empty', HTMLElement).hidden = !empty;
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
