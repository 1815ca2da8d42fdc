// The conversation shown, at load and each time the library swaps #conversation in place: what belonged
// to the one before is forgotten, and the observers of the one shown are attached.
import { byId, conversationId, isNarrow, isNewConversation, isTouch, need } from './dom.js';
import { resetComposer } from './composer.js';
import { resetEdit } from './edit.js';
import { resetExchange } from './exchange.js';
import { watchFieldErrors } from './field-errors.js';
import { updateGenerateState } from './generate.js';
import { closeLibrary } from './library.js';
import { followLog, scrollToEnd, watchReplies } from './log.js';
import { watchPaneInbox } from './pane.js';
import { resetPrompt, saveWaitingPrompt, watchPrompt } from './prompt.js';
import { watchPromptCue } from './prompt-cue.js';
import { resetSettings, saveWaitingSettings } from './settings.js';
import { showConversationTitle, watchImageFrame } from './tab-title.js';
import { formatTimes } from './times.js';

/** @type {Array<MutationObserver | IntersectionObserver>} */
let observers = [];

/** Mounts the conversation shown unless it is mounted already (its log is marked). */
export function showConversation() {
  const log = byId('log');
  if (!log || log.dataset.mounted === 'yes') return;
  log.dataset.mounted = 'yes';
  mount();
  closeLibrary();
}

function mount() {
  for (const observer of observers) observer.disconnect();
  resetPrompt();
  resetSettings();
  resetComposer();
  resetEdit();
  resetExchange();
  const log = need('log', HTMLElement);
  // Created in this order: observers of the same node are called in the order they were created.
  observers = [followLog(log), watchCreated(), watchFieldErrors(), watchReplies(log), watchImageFrame()];
  watchPrompt();
  updateGenerateState();
  if (isTouch()) need('message', HTMLTextAreaElement).placeholder = 'Describe the picture you want…';
  observers.push(watchPaneInbox(), watchPromptCue());
  formatTimes(need('conversation', HTMLElement));
  scrollToEnd();
  // A phone opens the page at its top; a desktop at the composer, ready to type.
  if (!isNarrow() && !isTouch()) need('message', HTMLTextAreaElement).focus({ preventScroll: true });
}

/**
 * A message was stored, the conversation exists: its address, its title, its unsaved changes saved.
 * The head is a child of the chat (replaced whole); #start-new a child of the composer.
 */
function watchCreated() {
  const chat = document.querySelector('#conversation .chat');
  if (!chat) throw new Error('Easel: the page has no #conversation .chat');
  const observer = new MutationObserver(() => {
    showConversationTitle();
    if (isNewConversation() || location.pathname !== '/') return;
    history.replaceState({ htmx: true }, '', `/c/${encodeURIComponent(conversationId())}`);
    saveWaitingPrompt();
    saveWaitingSettings();
  });
  observer.observe(chat, { childList: true });
  observer.observe(need('composer', HTMLFormElement), { childList: true });
  return observer;
}
