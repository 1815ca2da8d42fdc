// The gallery's large view (a native <dialog>): the picture clicked in the grid, Previous and Next (the buttons and
// the arrow keys, "More" fetched when the grid ends), and what can be done with it: open its conversation, Remix,
// Use prompt, Download, Delete. Every value is set with textContent or a checked URL: a prompt stays text.
import { byId, find, need } from './dom.js';
import { newSendKey } from './send-key.js';

/** The grid's button of the picture shown; focus goes back to it when the view closes. */
let current = /** @type {HTMLElement | null} */ (null);
/** Next was pressed at the end of the grid: once "More" brought the next pictures, the view moves on. */
let stepAfterMore = false;

const dialog = () => need('gallery-dialog', HTMLDialogElement);

/** @param {string} url */
const isOwnImageUrl = (url) => /^\/images\/[A-Za-z0-9._-]+$/.test(url) && !url.includes('..');
/** @param {string} path */
const isConversationPath = (path) => /^\/c\/[A-Za-z0-9%._~-]+$/.test(path);

/** The grid's pictures, in its order (newest first). */
function items() {
  return [...document.querySelectorAll('#gallery-grid [data-gallery-image]')].filter((item) => item instanceof HTMLElement);
}

/** @param {string} text */
function say(text) {
  need('gallery-dialog-status', HTMLElement).textContent = text;
}

/** While an action runs, the others wait. @param {boolean} busy */
function setBusy(busy) {
  for (const id of ['gallery-remix', 'gallery-vary-subtle', 'gallery-vary-strong', 'gallery-use-prompt', 'gallery-delete']) need(id, HTMLButtonElement).disabled = busy;
}

/** @param {HTMLElement} item a grid button with the picture's data */
function show(item) {
  const data = item.dataset;
  const url = data.url ?? '';
  const path = data.conversationPath ?? '';
  if (!isOwnImageUrl(url) || !isConversationPath(path)) return;
  current = item;
  const image = need('gallery-dialog-img', HTMLImageElement);
  image.src = url;
  image.alt = `Image: ${data.prompt ?? ''}`;
  if (data.width && data.height) {
    image.width = Number(data.width);
    image.height = Number(data.height);
  }
  need('gallery-dialog-link', HTMLAnchorElement).href = url;
  const download = need('gallery-download', HTMLAnchorElement);
  download.href = url;
  download.download = data.download ?? '';
  /**
   * @param {string} id
   * @param {string | undefined} value
   */
  const fill = (id, value) => {
    need(`gallery-dialog-${id}`, HTMLElement).textContent = value === undefined || value === '' ? '—' : value;
  };
  fill('prompt', data.prompt);
  fill('seed', data.seed);
  fill('sampler', data.sampler);
  fill('model', data.model);
  fill('size', data.width && data.height ? `${data.width} × ${data.height}` : undefined);
  fill('source', data.sourceStrength ? `Varied from another picture, strength ${data.sourceStrength}` : undefined);
  const conversation = need('gallery-dialog-conversation-link', HTMLAnchorElement);
  conversation.href = path;
  conversation.textContent = data.conversationTitle ?? 'Open it';
  need('gallery-open', HTMLAnchorElement).href = path;
  const list = items();
  const index = list.indexOf(item);
  const more = find('gallery-more-button', HTMLButtonElement) !== null;
  need('gallery-dialog-position', HTMLElement).textContent = `${index + 1} of ${list.length}${more ? '+' : ''}`;
  need('gallery-prev', HTMLButtonElement).disabled = index <= 0;
  need('gallery-next', HTMLButtonElement).disabled = index >= list.length - 1 && !more;
  say('');
  setBusy(false);
  if (!dialog().open) dialog().showModal();
}

/** The picture before (-1) or after (+1) the one shown; past the grid's end, "More" first. @param {-1 | 1} direction */
function step(direction) {
  const list = items();
  const next = current ? list[list.indexOf(current) + direction] : undefined;
  if (next) {
    show(next);
    return;
  }
  const more = find('gallery-more-button', HTMLButtonElement);
  if (direction === 1 && more && !more.disabled) {
    stepAfterMore = true;
    say('Loading more pictures…');
    more.click();
  }
}

/**
 * A refusal's words: the page's routes answer HTML (its text is the message), the API JSON `{ error }`.
 * @param {Response} response
 */
async function readRefusal(response) {
  const text = await response.text().catch(() => '');
  if ((response.headers.get('content-type') ?? '').includes('json')) {
    try {
      const body = JSON.parse(text);
      if (typeof body?.error === 'string') return body.error;
    } catch {
      // not JSON after all: its text below
    }
  }
  const words = new DOMParser().parseFromString(text, 'text/html').body.textContent?.trim();
  return words || `Easel refused it (${response.status}).`;
}

const UNREACHABLE = 'Easel could not be reached: check that it is still running, then try again.';

/**
 * Remix: a new picture in its conversation from this one's prompt and settings, a new random seed; then the
 * conversation. With `strength`, Vary: the same, starting from this picture (the server says if it cannot).
 * @param {number} [strength]
 */
async function remix(strength) {
  if (!current) return;
  const data = current.dataset;
  const path = data.conversationPath ?? '';
  if (!isConversationPath(path)) return;
  // `origin`: the conversation's own prompt stays as it is (this picture's prompt is only this image's).
  const form = new URLSearchParams({ sendKey: newSendKey(), origin: 'gallery', prompt: data.prompt ?? '', seed: '-1', negativePrompt: data.negativePrompt ?? '' });
  if (strength !== undefined) form.set('from', `${data.id ?? ''}:${strength}`);
  for (const name of /** @type {const} */ (['steps', 'cfg', 'width', 'height', 'sampler', 'scheduler'])) {
    const value = data[name];
    if (value !== undefined) form.set(name, value);
  }
  setBusy(true);
  say('Starting the new picture…');
  try {
    const response = await fetch(`${path}/generations`, { method: 'POST', body: form });
    if (!response.ok) {
      say(await readRefusal(response));
      setBusy(false);
      return;
    }
    // The picture is Easel's from here (it goes on without this page): its stream has begun, the conversation shows it.
    await response.body?.getReader().read();
    location.assign(path);
  } catch {
    say(UNREACHABLE);
    setBusy(false);
  }
}

/** Use prompt: this prompt becomes its conversation's (a new version, Undo brings the old one back); then the conversation. */
async function usePrompt() {
  if (!current) return;
  const path = current.dataset.conversationPath ?? '';
  if (!isConversationPath(path)) return;
  setBusy(true);
  try {
    const response = await fetch(`${path}/prompt`, { method: 'PUT', body: new URLSearchParams({ prompt: current.dataset.prompt ?? '' }) });
    if (!response.ok) {
      say(await readRefusal(response));
      setBusy(false);
      return;
    }
    location.assign(path);
  } catch {
    say(UNREACHABLE);
    setBusy(false);
  }
}

/** Delete, once confirmed: the picture, its file and its thumbnail go; the grid drops it and the view moves on. */
async function deleteShown() {
  const item = current;
  const id = item?.dataset.id ?? '';
  if (!item || !/^[a-f0-9]{32}$/.test(id)) return;
  if (!confirm('Delete this picture? Its file goes too, and this cannot be undone.')) return;
  setBusy(true);
  try {
    const response = await fetch(`/api/images/${id}`, { method: 'DELETE' });
    // 404: it was deleted already (another tab): it goes from this grid too.
    if (!response.ok && response.status !== 404) {
      say(await readRefusal(response));
      setBusy(false);
      return;
    }
  } catch {
    say(UNREACHABLE);
    setBusy(false);
    return;
  }
  const list = items();
  const index = list.indexOf(item);
  const neighbour = list[index + 1] ?? list[index - 1];
  item.closest('li')?.remove();
  if (neighbour) {
    show(neighbour);
    say('Deleted.');
    return;
  }
  current = null;
  dialog().close();
  if (items().length === 0) need('gallery-status', HTMLElement).textContent = 'No pictures left here.';
}

/** The grid's clicks, the view's buttons and keys: the gallery page's own, wired once (web/easel.js). */
export function startGallery() {
  const box = dialog();
  document.addEventListener('click', (event) => {
    const target = event.target instanceof Element ? event.target : null;
    const item = target?.closest('[data-gallery-image]');
    if (item instanceof HTMLElement) show(item);
  });
  document.addEventListener('keydown', (event) => {
    if (!box.open || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (event.key !== 'ArrowLeft' && event.key !== 'ArrowRight') return;
    event.preventDefault();
    step(event.key === 'ArrowLeft' ? -1 : 1);
  });
  // "More" brought the next pictures: a Next pressed at the end moves on to the first of them.
  document.addEventListener('htmx:after:swap', () => {
    if (!stepAfterMore) return;
    stepAfterMore = false;
    if (box.open) step(1);
  });
  need('gallery-dialog-close', HTMLButtonElement).addEventListener('click', () => box.close());
  // A click on the backdrop (the dialog box itself, outside its inner wrapper) closes it too.
  box.addEventListener('click', (event) => {
    if (event.target === box) box.close();
  });
  box.addEventListener('close', () => {
    stepAfterMore = false;
    const target = current?.isConnected ? current : byId('gallery-search');
    if (target instanceof HTMLElement) target.focus();
  });
  need('gallery-prev', HTMLButtonElement).addEventListener('click', () => step(-1));
  need('gallery-next', HTMLButtonElement).addEventListener('click', () => step(1));
  need('gallery-remix', HTMLButtonElement).addEventListener('click', () => void remix());
  for (const button of [need('gallery-vary-subtle', HTMLButtonElement), need('gallery-vary-strong', HTMLButtonElement)]) {
    button.addEventListener('click', () => void remix(Number(button.dataset.strength)));
  }
  need('gallery-use-prompt', HTMLButtonElement).addEventListener('click', () => void usePrompt());
  need('gallery-delete', HTMLButtonElement).addEventListener('click', () => void deleteShown());
}
