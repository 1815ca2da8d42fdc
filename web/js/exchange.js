// The last exchange, dimmed as "Replaced" the moment a Regenerate or an Edit is sent, and shown as before if
// the send did not start. It is read from the bubbles the page shows: the last message not replaced, and
// the replies after it.

/** @typedef {{ bubble: Element, label: HTMLElement }} Marked */

/** @type {Marked[]} */
let marked = [];

/** Forgets the marks of another conversation. */
export function resetExchange() {
  marked = [];
}

/**
 * The last message (with the replies after it), or only the replies after it.
 * @param {boolean} withMessage
 * @returns {Element[]}
 */
export function lastExchange(withMessage) {
  const shown = [...document.querySelectorAll('#log .msg.user:not(.replaced), #log .msg.assistant:not(.replaced)')];
  /** @type {Element[]} */
  const replies = [];
  for (let index = shown.length - 1; index >= 0; index--) {
    const bubble = shown[index];
    if (!bubble) continue;
    if (bubble.classList.contains('user')) {
      if (withMessage) replies.unshift(bubble);
      break;
    }
    replies.unshift(bubble);
  }
  return replies;
}

/** @param {Element[]} bubbles */
export function markReplaced(bubbles) {
  for (const bubble of bubbles) {
    bubble.classList.add('replaced');
    const label = document.createElement('p');
    label.className = 'replaced-label';
    label.textContent = 'Replaced';
    bubble.querySelector('.text')?.before(label);
    marked.push({ bubble, label });
  }
}

/** The send started: the marks stay. */
export function keepReplaced() {
  marked = [];
}

/** The send did not start: the bubbles are shown as before. */
export function unmarkReplaced() {
  for (const { bubble, label } of marked) {
    bubble.classList.remove('replaced');
    label.remove();
  }
  marked = [];
}
