// The library of conversations: on a narrow window it opens over the page behind a button; its times are
// shown in the reader's zone; choosing a file to import sends it.
import { need } from './dom.js';
import { formatTimes } from './times.js';

export function closeLibrary() {
  if (!document.body.classList.contains('library-open')) return;
  document.body.classList.remove('library-open');
  need('library-toggle', HTMLButtonElement).setAttribute('aria-expanded', 'false');
}

/**
 * The toggle opens and closes it; open over the page, a click beside it or on a conversation closes it.
 * @param {Element} target
 */
export function onLibraryClick(target) {
  if (document.body.classList.contains('library-open') && !target.closest('#library-toggle')) {
    if (!target.closest('#library') || target.closest('a')) closeLibrary();
  }
  if (target.closest('#library-toggle')) {
    const open = document.body.classList.toggle('library-open');
    need('library-toggle', HTMLButtonElement).setAttribute('aria-expanded', String(open));
    if (open) need('conversation-search', HTMLInputElement).focus();
  }
}

/** Formats the library's times, and again whenever a refresh morphs its items (new text, the marker gone). */
export function watchLibraryTimes() {
  const list = () => need('conversation-list', HTMLElement);
  new MutationObserver(() => formatTimes(list())).observe(list(), {
    childList: true,
    subtree: true,
    characterData: true,
    attributes: true,
    attributeFilter: ['datetime', 'data-local'],
  });
  formatTimes(need('library', HTMLElement));
}

/**
 * Import: choosing the file sends it.
 * @param {Event} event
 */
export function onImportChange(event) {
  const target = event.target;
  if (!(target instanceof HTMLInputElement) || target.id !== 'import-file' || !target.files?.length) return;
  need('import-status', HTMLElement).textContent = 'Importing…';
  need('import-form', HTMLFormElement).requestSubmit();
}

/**
 * The import ended: its answer has said how it went; the field is ready for another file.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onImportFinished(ctx) {
  const elt = ctx.sourceElement;
  if (!(elt instanceof Element) || elt.id !== 'import-form') return;
  const status = need('import-status', HTMLElement);
  if (status.textContent === 'Importing…') status.textContent = '';
  need('import-file', HTMLInputElement).value = '';
}
