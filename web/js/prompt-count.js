// The prompt's length and an estimate of its CLIP tokens, under the prompt.
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

export function updatePromptCount() {
  const prompt = find('prompt', HTMLTextAreaElement);
  const count = byId('prompt-count');
  if (!prompt || !count) return;
  const chars = prompt.value.length;
  const maxChars = Number(prompt.dataset.maxChars);
  const limit = Number(count.dataset.tokenLimit);
  const tokens = estimateClipTokens(prompt.value);
  const characters = `${chars.toLocaleString()} ${chars === 1 ? 'character' : 'characters'}`;
  count.classList.toggle('over', tokens > limit);
  count.classList.toggle('too-long', chars > maxChars);
  if (chars > maxChars) {
    count.textContent = `${characters}: a prompt can hold at most ${maxChars.toLocaleString()}; it is not saved until it is shorter.`;
  } else if (tokens > limit) {
    count.textContent = `${characters} · about ${tokens} tokens: image models read about ${limit}, the words after that may be ignored.`;
  } else {
    count.textContent = `${characters} · about ${tokens} of ${limit} tokens`;
  }
}
