// Rename: the conversation's title becomes a field in place; Escape or Cancel closes it. The form itself
// is htmx's (it posts the new title).
import { find, need } from './dom.js';

function openRename() {
  const input = need('rename-title', HTMLInputElement);
  const title = need('conversation-title', HTMLElement);
  input.value = title.textContent ?? '';
  need('rename-form', HTMLFormElement).hidden = false;
  title.hidden = true;
  need('rename-button', HTMLButtonElement).setAttribute('aria-expanded', 'true');
  input.focus();
  input.select();
}

export function closeRename() {
  const form = find('rename-form', HTMLFormElement);
  if (!form || form.hidden) return;
  form.hidden = true;
  need('conversation-title', HTMLElement).hidden = false;
  const button = need('rename-button', HTMLButtonElement);
  button.setAttribute('aria-expanded', 'false');
  need('rename-error', HTMLElement).textContent = '';
  button.focus();
}

/** @param {Element} target */
export function onRenameClick(target) {
  if (target.closest('#rename-button')) openRename();
  else if (target.closest('#rename-cancel')) closeRename();
}
