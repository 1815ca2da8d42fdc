// A message next to a field (a setting refused, the prompt too long) also marks the field invalid for
// assistive technology: aria-invalid follows the message the server put there.
import { byId, need } from './dom.js';

export function watchFieldErrors() {
  const markInvalid = () => {
    for (const slot of document.querySelectorAll('.field-error[id^="error-"]')) {
      const field = byId(`setting-${slot.id.slice('error-'.length)}`);
      if (field) field.setAttribute('aria-invalid', slot.textContent?.trim() ? 'true' : 'false');
    }
    need('prompt', HTMLTextAreaElement).setAttribute('aria-invalid', need('prompt-error', HTMLElement).textContent?.trim() ? 'true' : 'false');
  };
  const observer = new MutationObserver(markInvalid);
  for (const region of [need('settings-form', HTMLFormElement), need('prompt-error', HTMLElement)]) {
    observer.observe(region, { childList: true, subtree: true, characterData: true });
  }
  return observer;
}
