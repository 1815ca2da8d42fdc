// The prompt's length and an estimate of its tokens, under the prompt: CLIP's or T5's, as the family's encoder
// reads it (the server says which, in data-encoder, and how many it reads, in data-token-limit).
import { byId, find } from './dom.js';

/**
 * About how many CLIP tokens a prompt takes. CLIP's tokenizer splits text into runs of letters, single
 * digits and runs of punctuation, then gives a common word one token and a long or rare word more. So:
 * one token per word of up to 10 letters (one more per 10 further letters), one per digit, one per
 * punctuation mark. Within a few tokens of CLIP on typical prompts; it errs high on long common words.
 * @param {string} text
 */
function estimateClipTokens(text) {
  let tokens = 0;
  for (const [part] of text.matchAll(/\p{L}+|\p{N}|[^\s\p{L}\p{N}]/gu)) tokens += /^\p{L}/u.test(part) ? Math.ceil(part.length / 10) : 1;
  return tokens;
}

/**
 * About how many T5 tokens a prompt takes. T5's sentencepiece vocabulary gives a common word one piece and a rarer
 * one two or three: about 1.3 pieces a word on typical prompts, and one per punctuation mark.
 * @param {string} text
 */
function estimateT5Tokens(text) {
  let words = 0;
  let marks = 0;
  for (const [part] of text.matchAll(/[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu)) {
    if (/^[\p{L}\p{N}]/u.test(part)) words++;
    else marks++;
  }
  return Math.round(words * 1.3) + marks;
}

/** The encoders the server names, with their estimate and the name a person knows them by. */
const ENCODERS = {
  clip: { name: 'CLIP', estimate: estimateClipTokens },
  t5: { name: 'T5', estimate: estimateT5Tokens },
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
