// The prompt pane as the server decided it: a carrier (.pane-values) arrives in #pane-inbox, and its
// values go into the fields that hold no unsaved typing. A suggestion beside the prompt is announced, and the
// prompt's counter follows the family's encoder.
import { byId, need } from './dom.js';
import { takeRevision } from './live.js';
import { announcePrompt, showStoredPrompt, tellPromptChangedElsewhere } from './prompt.js';
import { updatePromptCount } from './prompt-count.js';
import { showStoredSettings } from './settings.js';

/** The suggestion last announced: a suggestion offered beside the user's own prompt is said once. */
let announcedSuggestion = '';

export function watchPaneInbox() {
  const inbox = need('pane-inbox', HTMLElement);
  const observer = new MutationObserver(() => {
    const carrier = inbox.querySelector('.pane-values');
    if (!(carrier instanceof HTMLElement)) return;
    inbox.replaceChildren();
    const values = carrier.dataset;
    if (!takeRevision(values.revision)) return;
    if (values.live === 'yes') tellPromptChangedElsewhere(values.prompt);
    showStoredPrompt(values.prompt, values.version, values.force === 'yes');
    showStoredSettings(values);
    showEncoder(values);
    announceSuggestion();
  });
  observer.observe(inbox, { childList: true });
  return observer;
}

/**
 * Another checkpoint or family may read prompts with another encoder, and so many tokens: the counter says so.
 * @param {DOMStringMap} values
 */
function showEncoder(values) {
  const count = byId('prompt-count');
  if (!count || values.tokenLimit === undefined || values.encoder === undefined) return;
  if (count.dataset.tokenLimit === values.tokenLimit && count.dataset.encoder === values.encoder) return;
  count.dataset.tokenLimit = values.tokenLimit;
  count.dataset.encoder = values.encoder;
  updatePromptCount();
}

/** The server replaces #suggestion whole: a new text in it is a new suggestion, the assistant's or the vision model's. */
function announceSuggestion() {
  const suggestion = byId('suggestion');
  const text = suggestion && !suggestion.hidden ? (need('suggestion-text', HTMLElement).textContent ?? '') : '';
  const who = suggestion?.dataset.from === 'vision' ? 'The vision model checked the picture and suggests' : 'The assistant suggests';
  if (text && text !== announcedSuggestion) announcePrompt(`${who} another prompt, shown below yours.`);
  announcedSuggestion = text;
}
