// Send keys: each send carries a fresh key; the server refuses a key it has seen, so no reply or image
// runs twice (a double click, a resent form).
import { formBody, isNewConversation } from './dom.js';

/** 18 random bytes as hex. */
export function newSendKey() {
  const bytes = new Uint8Array(18);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * A one-shot form (Generate) gets its key here; the chat's stream forms get theirs in composer.js, once
 * the message is known to go. A one-shot form on a new conversation creates it.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function keyOneShot(ctx) {
  const elt = ctx.sourceElement;
  if (!(elt instanceof Element) || !elt.matches('[data-one-shot]')) return;
  const body = formBody(ctx);
  body.set('sendKey', newSendKey());
  if (isNewConversation()) body.set('startNew', '1');
}
