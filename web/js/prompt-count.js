// The prompt's length and an estimate of its tokens, under the prompt: CLIP's or T5's, as the family's encoder
// reads it (the server says which, in data-encoder, and how many it reads, in data-token-limit).
import { byId, find } from './dom.js';
// The server's own estimate (server/protocol/families.ts), served as this module (page/assets.ts): one rule for the
// counter and for the report card.
import { estimateEncoderTokens } from './token-estimate.js';

/** The encoders the server names, with their estimate and the name a person knows them by. */
const ENCODERS = {
  clip: { name: 'CLIP', estimate: (/** @type {string} */ text) => estimateEncoderTokens(text, 'clip') },
  t5: { name: 'T5', estimate: (/** @type {string} */ text) => estimateEncoderTokens(text, 't5') },
};

/**
 * Longer than a prompt can be (the server refuses it whole): it is not saved, and Generate waits.
 * @param {HTMLTextAreaElement} prompt
 */
export const isPromptTooLong = (prompt) => prompt.value.length > Number(prompt.dataset.maxChars);

/**
 * A prompt too long is said once, beside the field where every refusal of the prompt is said (#prompt-error, which
 * also marks it invalid), in the words the server would use; the count under it says only the count. The message
 * stays the same while the typing goes on, so a screen reader hears it once.
 * @param {HTMLTextAreaElement} prompt
 */
function showTooLong(prompt) {
  const error = byId('prompt-error');
  if (!error) return;
  const words = `A prompt can hold at most ${Number(prompt.dataset.maxChars).toLocaleString()} characters: shorten it to save it or to generate.`;
  if (isPromptTooLong(prompt)) {
    if (error.textContent !== words) error.textContent = words;
  } else if (error.textContent === words) {
    // Only this message goes: a refusal of something else stays until the server says otherwise.
    error.textContent = '';
  }
}

export function updatePromptCount() {
  const prompt = find('prompt', HTMLTextAreaElement);
  const count = byId('prompt-count');
  if (!prompt || !count) return;
  showTooLong(prompt);
  const chars = prompt.value.length;
  const maxChars = Number(prompt.dataset.maxChars);
  const limit = Number(count.dataset.tokenLimit);
  const encoder = count.dataset.encoder === 't5' ? ENCODERS.t5 : ENCODERS.clip;
  const tokens = encoder.estimate(prompt.value);
  const characters = `${chars.toLocaleString()} ${chars === 1 ? 'character' : 'characters'}`;
  count.classList.toggle('over', tokens > limit);
  count.classList.toggle('too-long', chars > maxChars);
  if (chars > maxChars) {
    count.textContent = `${chars.toLocaleString()} of at most ${maxChars.toLocaleString()} characters`;
  } else if (tokens > limit) {
    count.textContent = `${characters} · about ${tokens} ${encoder.name} tokens: the ${encoder.name} encoder reads about ${limit}, the words after that may be ignored.`;
  } else {
    count.textContent = `${characters} · about ${tokens} of ${limit} ${encoder.name} tokens`;
  }
}
