// The chat log: it follows new text while the reader is at its end, merges streamed tokens, and ends a
// reply's aria-busy with its typing dots.
import { isNarrow, need } from './dom.js';
import { formatTimes } from './times.js';

/** The log's height when last seen: what "at the bottom" is measured against. */
let knownHeight = 0;

/**
 * Follows new text only while the reader is at the bottom. Measured against the height before the change,
 * and read now rather than from a scroll event (those arrive a frame late): a reader who just scrolled up is
 * never pulled back down. New messages' times are shown in the reader's zone.
 * @param {HTMLElement} log
 */
export function followLog(log) {
  knownHeight = 0;
  const observer = new MutationObserver((mutations) => {
    const wasAtBottom = knownHeight - log.scrollTop - log.clientHeight < 40;
    if (wasAtBottom) log.scrollTop = log.scrollHeight;
    knownHeight = log.scrollHeight;
    for (const mutation of mutations) for (const node of mutation.addedNodes) if (node instanceof Element) formatTimes(node);
  });
  observer.observe(log, { childList: true, subtree: true, characterData: true });
  return observer;
}

/**
 * A streamed token is a text node added to the Markdown block in progress: merged into the one before,
 * so a block is one node, not one per token (up to 4 kB each, so a merge copies little). A reply's
 * aria-busy ends with its typing dots: screen readers then read the finished reply once.
 * @param {HTMLElement} log
 */
export function watchReplies(log) {
  let knownLogHeight = log.scrollHeight;
  const observer = new MutationObserver((mutations) => {
    for (const mutation of mutations) {
      const parent = mutation.target;
      if (!(parent instanceof Element)) continue;
      if (parent.classList.contains('md-live')) {
        for (const node of mutation.addedNodes) {
          const previous = node.previousSibling;
          if (!(node instanceof Text) || !(previous instanceof Text) || previous.length >= 4096 || !node.isConnected) continue;
          previous.appendData(node.data);
          node.remove();
        }
      }
      for (const node of mutation.removedNodes) {
        if (node instanceof Element && node.classList.contains('typing')) parent.closest('.msg')?.removeAttribute('aria-busy');
      }
    }
    // The narrow layout scrolls the page: a reader who sees the composer keeps seeing it as the reply grows.
    const grown = log.scrollHeight - knownLogHeight;
    knownLogHeight = log.scrollHeight;
    if (isNarrow() && grown > 0 && need('composer', HTMLFormElement).getBoundingClientRect().top - grown < innerHeight) scrollBy(0, grown);
  });
  observer.observe(log, { childList: true, subtree: true });
  return observer;
}

/** Shows the log's end, and counts the reader as being there. */
export function scrollToEnd() {
  const log = need('log', HTMLElement);
  log.scrollTop = log.scrollHeight;
  knownHeight = log.scrollHeight;
}
