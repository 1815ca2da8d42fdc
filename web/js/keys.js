// The keyboard: Enter sends and Shift+Enter is a new line (not on a touch screen, whose Enter makes a new
// line), Escape closes what is open, Ctrl+Z / Ctrl+Y outside a text field undo the prompt's versions.
import { find, isTouch, need } from './dom.js';
import { cancelEdit, isEditing } from './edit.js';
import { closeLibrary } from './library.js';
import { isPromptSetByEasel } from './prompt.js';
import { closeRename } from './rename.js';

/**
 * Ctrl+Z, Ctrl+Shift+Z, Ctrl+Y (⌘ on a Mac).
 * @param {KeyboardEvent} event
 */
function isUndoKey(event) {
  const key = event.key.toLowerCase();
  return (event.ctrlKey || event.metaKey) && !event.altKey && (key === 'z' || (key === 'y' && !event.shiftKey));
}

/**
 * Where Ctrl+Z belongs to the field's own undo.
 * @param {Element | null} target
 */
function isTextField(target) {
  if (!target) return false;
  if (target instanceof HTMLElement && target.isContentEditable) return true;
  if (target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement) return true;
  return target instanceof HTMLInputElement && !['checkbox', 'radio', 'button', 'submit', 'range', 'color', 'file'].includes(target.type);
}

/** @param {KeyboardEvent} event */
export function onKeyDown(event) {
  const target = event.target instanceof Element ? event.target : null;
  if (event.key === 'Escape') {
    if (target?.id === 'rename-title') closeRename();
    else if (isEditing() && target?.id === 'message') cancelEdit();
    else closeLibrary();
    return;
  }
  // Outside a text field, or in the prompt box whose text Easel just set (its own undo would not hold that).
  if (isUndoKey(event) && (!isTextField(target) || (target?.id === 'prompt' && isPromptSetByEasel()))) {
    const button = find(event.shiftKey || event.key.toLowerCase() === 'y' ? 'prompt-redo' : 'prompt-undo', HTMLButtonElement);
    if (button) {
      event.preventDefault();
      if (!button.disabled) button.click();
    }
    return;
  }
  if (target?.id !== 'message') return;
  if (event.key !== 'Enter' || event.shiftKey || event.isComposing || event.altKey || event.ctrlKey || event.metaKey) return;
  if (isTouch()) return;
  event.preventDefault();
  if (need('send', HTMLButtonElement).disabled) return;
  need('composer', HTMLFormElement).requestSubmit();
}

/**
 * Chromium keeps one undo history for the whole page: Ctrl+Z in a field with nothing left to undo reaches back
 * into another field's typing (the prompt's, say). The browser's undo may change only the field being typed in.
 * @param {InputEvent} event
 */
export function onBeforeInput(event) {
  if ((event.inputType === 'historyUndo' || event.inputType === 'historyRedo') && event.target !== document.activeElement) event.preventDefault();
}
