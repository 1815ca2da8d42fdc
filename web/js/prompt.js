// The prompt in the pane: the server stores each edit as a version (hx-put on #prompt); typing it has not
// stored yet is kept, and travels with the next message so the model hears of it in that turn.
import { byId, formBody, isNewConversation, need } from './dom.js';
import { updateGenerateState } from './generate.js';
import { isPromptTooLong, updatePromptCount } from './prompt-count.js';
import { cuePromptChange } from './prompt-cue.js';

/**
 * Typing the server has not stored yet; the text of the save in flight; and whether the text was last set by
 * Easel (a reply's rewrite, another tab, undo), not typed: the box's own undo history does not hold that change.
 * @type {{ unsaved: boolean, sending: string | null, scripted: boolean, replacing: boolean }}
 */
const state = { unsaved: false, sending: null, scripted: false, replacing: false };

export function resetPrompt() {
  state.unsaved = false;
  state.sending = null;
  state.scripted = false;
  state.replacing = false;
}

/**
 * Ctrl+Z in the prompt box right after Easel changed its text: the browser's own undo would mix the change
 * with older typing, so the prompt's versions answer it instead (web/js/keys.js).
 * @returns {boolean}
 */
export function isPromptSetByEasel() {
  return state.scripted;
}

/**
 * The prompt another tab (or a reply this page did not ask for) just stored, while this page holds typing of its
 * own that differs: the typing stays, and the user is told that saving it replaces the other.
 * @param {string | undefined} value
 */
export function tellPromptChangedElsewhere(value) {
  if (value === undefined || !state.unsaved || promptField().value === value) return;
  state.replacing = true;
  need('prompt-saved', HTMLElement).textContent = 'Changed in another tab: yours is kept here, and saving it replaces that one (Undo brings it back).';
}

const promptField = () => need('prompt', HTMLTextAreaElement);

/**
 * Said to screen readers: the prompt pane changed without the user typing in it.
 * @param {string} text
 */
export function announcePrompt(text) {
  const region = byId('prompt-announce');
  if (!region) return;
  region.textContent = '';
  // A new text node, a moment later: the same sentence twice in a row is announced twice.
  setTimeout(() => (region.textContent = text), 50);
}

/**
 * Follows the prompt however it changes: typing, or a script setting its value (the model's prompt, a
 * suggestion taken, "Use these settings", undo). Setting a textarea's value fires no event, so the
 * element's own `value` setter is wrapped.
 */
export function watchPrompt() {
  const prompt = promptField();
  const own = /** @type {{ get(this: HTMLTextAreaElement): string, set(this: HTMLTextAreaElement, value: string): void }} */ (
    Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value')
  );
  const changed = () => {
    updatePromptCount();
    updateGenerateState();
  };
  Object.defineProperty(prompt, 'value', {
    configurable: true,
    get() {
      return own.get.call(this);
    },
    /** @param {string} value */
    set(value) {
      const before = own.get.call(this);
      own.set.call(this, value);
      if (before === own.get.call(this)) return;
      changed();
      announcePrompt('The prompt was updated.');
    },
  });
  prompt.addEventListener('input', changed);
  changed();
}

/**
 * Before its first message the conversation does not exist: the prompt's save waits, and goes with it.
 * @param {CustomEvent<{ ctx: import('htmx.org').HtmxRequestCtx }>} event
 */
export function onPromptConfigRequest(event) {
  const ctx = event.detail.ctx;
  if (ctx.sourceElement !== byId('prompt')) return;
  // Too long to be saved (said beside it, prompt-count.js): nothing is sent until it is shorter, and it stays unsaved.
  if (isNewConversation() || isPromptTooLong(promptField())) {
    event.preventDefault();
    state.unsaved = true;
    return;
  }
  state.sending = String(formBody(ctx).get('prompt') ?? '');
}

/**
 * Stored: the typing is saved, unless more came while the save was on its way.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onPromptAfterRequest(ctx) {
  const prompt = byId('prompt');
  if (!(prompt instanceof HTMLTextAreaElement) || ctx.sourceElement !== prompt || ctx.response?.status !== 200) return;
  if (prompt.value === state.sending) state.unsaved = false;
  // Said in place of the answer's "Saved." (swapped in after this event, hence the task after it): this save
  // replaced a prompt another tab had stored meanwhile.
  if (state.replacing) {
    setTimeout(() => {
      const saved = byId('prompt-saved');
      if (saved) saved.textContent = 'Saved. It replaced a prompt changed in another tab: Undo brings that one back.';
    });
  }
  state.replacing = false;
}

/** @param {Event} event */
export function onPromptInput(event) {
  if (!(event.target instanceof Element) || event.target.id !== 'prompt') return;
  state.unsaved = true;
  state.scripted = false;
  need('prompt-saved', HTMLElement).textContent = '';
}

/**
 * An edit not saved yet travels with the message (or `always`, the first message of a new conversation).
 * @param {FormData} body
 * @param {boolean} always
 */
export function sendPromptWith(body, always) {
  if (!state.unsaved && !always) return;
  body.set('prompt', promptField().value);
  state.unsaved = false;
}

/** The conversation now exists: the edit that waited for it is saved. */
export function saveWaitingPrompt() {
  if (state.unsaved) htmx.trigger(promptField(), 'easel:save');
}

/**
 * Shows the prompt the server stored. Typing not saved yet is kept (its save follows and becomes the newest
 * version), unless the user asked for this change (`force`: undo, redo, Use suggestion).
 * @param {string | undefined} value
 * @param {string | undefined} version
 * @param {boolean} force
 */
export function showStoredPrompt(value, version, force) {
  const prompt = promptField();
  if (value !== undefined && (force || !state.unsaved)) {
    if (prompt.value !== value) {
      prompt.value = value;
      state.scripted = true;
      // Not the user's own doing (a reply, another tab): cued near the composer when the prompt is out of view.
      if (!force) cuePromptChange();
    }
    state.unsaved = false;
    need('prompt-error', HTMLElement).textContent = '';
  }
  prompt.dataset.version = version ?? '';
}

/**
 * The user chose this prompt (an image's "Use these settings"): a version of its own, saved at once.
 * @param {string} value
 */
export function usePrompt(value) {
  const prompt = promptField();
  prompt.value = value;
  need('prompt-saved', HTMLElement).textContent = '';
  state.unsaved = true;
  htmx.trigger(prompt, 'easel:save');
}

/** @param {Element} target */
export function onPromptClick(target) {
  if (target.closest('#copy-prompt')) void copyPrompt();
}

async function copyPrompt() {
  const prompt = promptField();
  const saved = need('prompt-saved', HTMLElement);
  try {
    await navigator.clipboard.writeText(prompt.value);
    saved.textContent = 'Copied.';
  } catch {
    prompt.select();
    saved.textContent = document.execCommand('copy') ? 'Copied.' : 'Select the prompt and press Ctrl+C to copy it.';
  }
}
