// The buttons on the messages: Copy, Regenerate (and Retry on an error), "Send again". Edit is edit.js's.
import { need } from './dom.js';

/**
 * Copies text with the clipboard API, or else by selecting it in a hidden field beside `button`.
 * @param {string} text
 * @param {Element} button
 */
async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'visually-hidden';
    button.after(area);
    area.select();
    const copied = document.execCommand('copy');
    area.remove();
    return copied;
  }
}

/** @param {Element} target */
export function onMessageClick(target) {
  const copy = target.closest('.copy-message');
  if (copy) {
    const shown = copy.closest('.msg')?.querySelector('.text');
    // A reply is rendered Markdown: copy what it reads as (paragraphs and list items on their own lines).
    const text = (shown instanceof HTMLElement && shown.classList.contains('md') ? shown.innerText : shown?.textContent) ?? '';
    // The button's name says which message it copies ("Copy this reply"): the result replaces it too while it
    // shows, then it comes back (kept in data-name, so a second click before then does not lose it).
    const name = copy.getAttribute('data-name') ?? copy.getAttribute('aria-label');
    if (name) copy.setAttribute('data-name', name);
    void copyText(text, copy).then((copied) => {
      const said = copied ? 'Copied' : 'Select the text and press Ctrl+C';
      copy.textContent = said;
      if (name) copy.setAttribute('aria-label', said);
      setTimeout(() => {
        copy.textContent = 'Copy';
        if (name) copy.setAttribute('aria-label', name);
      }, 1500);
    });
    return;
  }
  // Sent only while Send is usable: one reply at a time.
  if (target.closest('.regenerate-button, .retry-button')) {
    if (!need('send', HTMLButtonElement).disabled) need('regenerate-form', HTMLFormElement).requestSubmit();
    return;
  }
  const sendAgain = target.closest('.send-again-button');
  if (sendAgain instanceof HTMLElement) {
    if (need('send', HTMLButtonElement).disabled) return;
    need('resend-text', HTMLInputElement).value = sendAgain.dataset.text ?? '';
    need('resend-form', HTMLFormElement).requestSubmit();
  }
}
