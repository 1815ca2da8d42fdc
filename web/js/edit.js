// Editing the last message: Edit puts its text in the composer; sending replaces it and the reply after
// it (the composer's #replace-last goes with the form). Cancel puts back the draft that was there before.
import { find, need } from './dom.js';

/** While the last message is being edited: the draft that was in the composer before. */
let editing = /** @type {{ draft: string } | null} */ (null);

export function resetEdit() {
  editing = null;
}

export const isEditing = () => editing !== null;

/** @param {Element} bubble the last message */
function startEdit(bubble) {
  const message = need('message', HTMLTextAreaElement);
  editing = { draft: message.value };
  message.value = bubble.querySelector('.text')?.textContent ?? '';
  need('replace-last', HTMLInputElement).disabled = false;
  const status = need('composer-status', HTMLElement);
  status.textContent = 'Editing your last message: sending replaces it and the reply after it. ';
  const cancel = document.createElement('button');
  cancel.type = 'button';
  cancel.id = 'edit-cancel';
  cancel.className = 'quiet';
  cancel.textContent = 'Cancel';
  status.append(cancel);
  message.focus();
  message.setSelectionRange(message.value.length, message.value.length);
}

/** The edit was sent (or cancelled): the composer sends new messages again. */
export function endEdit() {
  editing = null;
  const replaceLast = find('replace-last', HTMLInputElement);
  if (replaceLast) replaceLast.disabled = true;
  find('edit-cancel', HTMLElement)?.remove();
}

export function cancelEdit() {
  const draft = editing?.draft ?? '';
  endEdit();
  need('message', HTMLTextAreaElement).value = draft;
  need('composer-status', HTMLElement).textContent = '';
}

/**
 * Edit on the last message, and Cancel beside the composer.
 * @param {Element} target
 */
export function onEditClick(target) {
  const edit = target.closest('.edit-message');
  const bubble = edit?.closest('.msg');
  if (edit) {
    if (bubble) startEdit(bubble);
    return;
  }
  if (target.closest('#edit-cancel')) cancelEdit();
}
