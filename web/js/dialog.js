// The large view of an image (a native <dialog>): its settings, "Use these settings", "Reuse seed" and Vary.
// Every value is set with textContent or a checked URL: a prompt stays text, whatever it holds.
import { need } from './dom.js';
import { usePrompt } from './prompt.js';
import { matchPreset, saveSettings, setSetting } from './settings.js';
import { setDialogVary } from './vary.js';

/** The thumbnail or image that opened the view: focus goes back to it. */
let opener = /** @type {HTMLElement | null} */ (null);
/** The data of the image shown. */
let shown = /** @type {DOMStringMap | null} */ (null);

const dialog = () => need('image-dialog', HTMLDialogElement);

/** @param {string} url */
const isOwnImageUrl = (url) => /^\/images\/[A-Za-z0-9._-]+$/.test(url) && !url.includes('..');

/** @param {HTMLElement} trigger an element with data-image-view and the image's data */
function showImage(trigger) {
  const data = trigger.dataset;
  const url = data.url ?? '';
  if (!isOwnImageUrl(url)) return;
  shown = data;
  const image = need('image-dialog-img', HTMLImageElement);
  image.src = url;
  image.alt = `Image: ${data.prompt ?? ''}`;
  need('image-dialog-link', HTMLAnchorElement).href = url;
  const download = need('image-dialog-download', HTMLAnchorElement);
  download.href = url;
  download.download = data.download ?? '';
  /**
   * @param {string} id
   * @param {string | undefined} value
   */
  const fill = (id, value) => {
    need(`image-dialog-${id}`, HTMLElement).textContent = value === undefined || value === '' ? '—' : value;
  };
  fill('prompt', data.prompt);
  fill('negative-prompt', data.negativePrompt);
  fill('steps', data.steps);
  fill('cfg', data.cfg);
  fill('seed', data.seed);
  fill('size', data.width && data.height ? `${data.width} × ${data.height}` : undefined);
  fill('model', data.model);
  // A setting the backend ignored is not recorded; only what is known can be reused.
  need('use-settings', HTMLButtonElement).disabled = data.steps === undefined;
  need('reuse-seed', HTMLButtonElement).disabled = data.seed === undefined;
  setDialogVary(data.imageId);
  opener = trigger;
  dialog().showModal();
}

/**
 * A thumbnail or the image: the large view, instead of following the link.
 * @param {Element} target
 * @param {Event} event
 */
export function onImageClick(target, event) {
  const view = target.closest('[data-image-view]');
  if (!(view instanceof HTMLElement)) return;
  event.preventDefault();
  showImage(view);
}

/** The dialog's own buttons; it lives outside #conversation, so once for the page. */
export function wireImageDialog() {
  const box = dialog();
  need('image-dialog-close', HTMLButtonElement).addEventListener('click', () => box.close());
  // A click on the backdrop (the dialog box itself, outside its inner wrapper) closes it too.
  box.addEventListener('click', (event) => {
    if (event.target === box) box.close();
  });
  box.addEventListener('close', () => {
    // A thumbnail replaced while the dialog was open falls back to the big image.
    const target = opener?.isConnected ? opener : document.querySelector('#image-frame [data-image-view]');
    opener = null;
    if (target instanceof HTMLElement) target.focus();
  });

  need('use-settings', HTMLButtonElement).addEventListener('click', () => {
    if (!shown) return;
    usePrompt(shown.prompt ?? '');
    setSetting('steps', shown.steps);
    setSetting('cfg', shown.cfg);
    setSetting('seed', shown.seed);
    setSetting('width', shown.width);
    setSetting('height', shown.height);
    setSetting('negativePrompt', shown.negativePrompt ?? '');
    matchPreset();
    saveSettings();
    box.close();
  });

  // Vary submits the prompt pane's Generate form (the button's own form attribute): the view closes as it goes,
  // after the click, so the submission still has its button.
  for (const id of ['dialog-vary-subtle', 'dialog-vary-strong']) {
    need(id, HTMLButtonElement).addEventListener('click', () => queueMicrotask(() => box.close()));
  }

  need('reuse-seed', HTMLButtonElement).addEventListener('click', () => {
    if (!shown) return;
    setSetting('seed', shown.seed);
    need('setting-seed', HTMLInputElement).dispatchEvent(new Event('change', { bubbles: true }));
    box.close();
  });
}
