// Settings → Models: the pull of a chat model (its form is #pull-form; its name field sits among the models, inside
// #settings-form's markup), its Cancel, and the status line's "pull it" and "Pick an installed model". The section's
// lists load themselves (hx-trigger on #models); the server draws the pull's progress as it streams.
import { byId, find, isField, need } from './dom.js';

/** The user pressed Cancel: the stream's end is said as a cancel, not as a failure. */
let cancelled = false;

/** @param {unknown} elt */
const isPullForm = (elt) => elt instanceof Element && elt.id === 'pull-form';

/**
 * The pull's name field is in #settings-form's markup: its change must not reach that form, which saves on change.
 * @param {Event} event
 */
export function onModelsChange(event) {
  const target = event.target;
  if (isField(target) && target.form?.id === 'pull-form') event.stopPropagation();
}

/**
 * A pull begins: Cancel shows (Pull and the name wait, hx-disable), and the last pull's words go.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onPullBeforeRequest(ctx) {
  if (!isPullForm(ctx.sourceElement)) return;
  cancelled = false;
  need('pull-result', HTMLElement).textContent = '';
  need('pull-cancel', HTMLButtonElement).hidden = false;
}

/**
 * The pull's stream ended (done, failed, or closed by Cancel): Cancel goes, and the status line looks again (a pulled
 * default model makes Ollama ready).
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onPullFinished(ctx) {
  if (!isPullForm(ctx.sourceElement)) return;
  const cancel = find('pull-cancel', HTMLButtonElement);
  if (cancel) cancel.hidden = true;
  const result = find('pull-result', HTMLElement);
  if (cancelled) {
    byId('pull-progress')?.replaceChildren();
    if (result) result.textContent = 'Pull cancelled.';
    find('pull-name', HTMLInputElement)?.focus();
  } else if (ctx.response?.status === undefined && result && result.textContent === '') {
    byId('pull-progress')?.replaceChildren();
    result.textContent = 'Could not reach Easel. Is it still running?';
  }
  cancelled = false;
  htmx.trigger(document.body, 'easel:status');
}

/**
 * @param {Element} target
 * @param {Event} event
 */
export function onModelsClick(target, event) {
  if (target.closest('#pull-cancel')) {
    cancelled = true;
    // Closing the stream is the cancel: the server hangs up on Ollama, which stops the download.
    htmx.trigger(need('pull-form', HTMLFormElement), 'htmx:abort');
    return;
  }
  const pull = target.closest('button.pull-missing');
  if (pull instanceof HTMLElement && pull.dataset.pull) {
    startPull(pull.dataset.pull);
    return;
  }
  // "Pick an installed model" (the status line), "Open Settings → Models" (no vision model): the field it names.
  const pick = target.closest('a.pick-model');
  if (pick instanceof HTMLElement) {
    event.preventDefault();
    const named = pick.dataset.field ? find(pick.dataset.field, HTMLSelectElement) : null;
    showModels(named ?? find('setting-chatModel', HTMLSelectElement) ?? find('pull-name', HTMLInputElement));
  }
}

/**
 * The status line's "pull it": the same pull as the section's, its progress shown there.
 * @param {string} name
 */
function startPull(name) {
  const input = find('pull-name', HTMLInputElement);
  const form = find('pull-form', HTMLFormElement);
  if (!input || !form) return;
  input.value = name;
  showModels(input);
  form.requestSubmit();
}

/**
 * Opens the settings and brings a field of Settings → Models into view, focused.
 * @param {HTMLElement | null} field
 */
function showModels(field) {
  if (!field) return;
  const details = field.closest('details');
  if (details) details.open = true;
  field.focus({ preventScroll: true });
  field.scrollIntoView({ block: 'center' });
}
