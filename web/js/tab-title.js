// The tab's title: the conversation's, and "Image ready · " before it while a finished image has not been
// seen (the tab was in the background).
import { byId, need } from './dom.js';

const READY_TITLE = 'Image ready · ';

/** The conversation's title, once it has one (its first message names it). */
export function showConversationTitle() {
  document.title = `${byId('conversation-title')?.textContent ?? 'Easel'} · Easel`;
}

export function watchImageFrame() {
  const frame = () => need('image-frame', HTMLElement);
  const observer = new MutationObserver(() => {
    if (document.visibilityState !== 'hidden' || !frame().querySelector('img')) return;
    if (!document.title.startsWith(READY_TITLE)) document.title = READY_TITLE + document.title;
  });
  observer.observe(frame(), { childList: true });
  return observer;
}

/** The tab is seen: the image is. */
export function onVisibilityChange() {
  if (document.visibilityState === 'visible' && document.title.startsWith(READY_TITLE)) document.title = document.title.slice(READY_TITLE.length);
}
