// Sending to the chat: the composer, Regenerate and "Send again" post to a stream (data-stream) whose
// events render the reply. The user's text is never lost: a send that did not start puts it back.
import { find, formBody, isNewConversation, need } from './dom.js';
import { endEdit, isEditing } from './edit.js';
import { keepReplaced, lastExchange, markReplaced, unmarkReplaced } from './exchange.js';
import { scrollToEnd } from './log.js';
import { sendPromptWith } from './prompt.js';
import { newSendKey } from './send-key.js';
import { sendSettingsWith } from './settings.js';

/** The composer's text as it was sent, put back if the send did not start. */
let pendingText = '';

export function resetComposer() {
  pendingText = '';
}

/**
 * The forms whose answer is a stream of the reply: the composer, #regenerate-form, #resend-form.
 * @param {unknown} elt
 * @returns {elt is Element}
 */
const isStreamSource = (elt) => elt instanceof Element && elt.matches('[data-stream]');

/**
 * Checks a message before it goes, and adds what goes with it: its send key, and for a new conversation its
 * settings; an edit of the prompt not saved yet.
 * @param {CustomEvent<{ ctx: import('htmx.org').HtmxRequestCtx }>} event
 */
export function onSendConfigRequest(event) {
  const elt = event.detail.ctx.sourceElement;
  if (!isStreamSource(elt)) return;
  const body = formBody(event.detail.ctx);
  const status = need('composer-status', HTMLElement);
  const message = need('message', HTMLTextAreaElement);
  if (elt.id !== 'regenerate-form' && String(body.get('text') ?? '').trim() === '') {
    event.preventDefault();
    status.textContent = 'Type a message first.';
    message.focus();
    return;
  }
  // Refused whole rather than cut: the server would refuse it too, and nothing the user typed is lost.
  const length = String(body.get('text') ?? '').trim().length;
  const maxChars = Number(message.dataset.maxChars);
  if (elt.id === 'composer' && length > maxChars) {
    event.preventDefault();
    const over = (length - maxChars).toLocaleString();
    status.innerHTML = '';
    const notice = document.createElement('span');
    notice.className = 'composer-error';
    notice.textContent = `Not sent: your message has ${length.toLocaleString()} characters, ${over} more than the ${maxChars.toLocaleString()} a message can hold. Shorten it or split it in two; your text is kept.`;
    status.append(notice);
    message.focus();
    return;
  }
  body.set('sendKey', newSendKey());
  const first = elt.id === 'composer' && isNewConversation();
  if (first) sendSettingsWith(body);
  // An edit not saved yet travels with the message, so the model hears of it in this turn.
  sendPromptWith(body, first);
}

/**
 * The send goes: the composer empties (its text kept aside), and the exchange a Regenerate or an Edit
 * replaces is dimmed.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onSendBeforeRequest(ctx) {
  const elt = ctx.sourceElement;
  if (!isStreamSource(elt)) return;
  need('composer-status', HTMLElement).textContent = '';
  scrollToEnd();
  if (elt.id === 'composer') {
    const message = need('message', HTMLTextAreaElement);
    pendingText = message.value;
    message.value = '';
    if (isEditing()) markReplaced(lastExchange(true));
  }
  if (elt.id === 'regenerate-form') markReplaced(lastExchange(false));
}

/**
 * The stream ended, or never started: a send that did not start puts the text and the dimmed exchange back.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onSendFinished(ctx) {
  const elt = ctx.sourceElement;
  if (!isStreamSource(elt)) return;
  const status = ctx.response?.status;
  const message = find('message', HTMLTextAreaElement);
  if (elt.id === 'composer' && status !== 200 && message && message.value === '') message.value = pendingText;
  if (status === 200) {
    keepReplaced();
    if (elt.id === 'composer' && isEditing()) endEdit();
  } else {
    unmarkReplaced();
  }
  const composerStatus = find('composer-status', HTMLElement);
  if (status === undefined && composerStatus && composerStatus.textContent === '') {
    composerStatus.textContent = 'Could not reach Easel. Is it still running? Your text is kept.';
  }
  for (const dots of document.querySelectorAll('#log .typing')) dots.remove();
  htmx.trigger(document.body, 'easel:status');
}

/** A message that could not be stored comes back into the composer (the server says which). */
export function watchComposerInbox() {
  const inbox = need('composer-inbox', HTMLElement);
  const observer = new MutationObserver(() => {
    const carrier = inbox.querySelector('.restore-text');
    if (!(carrier instanceof HTMLElement)) return;
    const text = carrier.dataset.text ?? '';
    inbox.replaceChildren();
    const message = find('message', HTMLTextAreaElement);
    if (!message || message.value === text) return;
    message.value = message.value === '' ? text : `${text}\n\n${message.value}`;
    message.focus();
  });
  observer.observe(inbox, { childList: true });
  return observer;
}

/**
 * Stop hides itself as the reply ends: the keyboard goes back to the composer, not to the page's top.
 * @param {Element} target
 */
export function onComposerClick(target) {
  if (target.closest('#stop')) need('message', HTMLTextAreaElement).focus();
}
