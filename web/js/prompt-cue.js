// "Prompt updated ↑" beside the composer: a reply (or another tab) changed the prompt while the prompt was out
// of view (on a phone it sits far above the chat). One tap shows the prompt; the cue goes once the prompt is seen.
import { byId, find, need } from './dom.js';

/** Whether the prompt is in view now: at least half of it, inside the page and any panel that scrolls. */
let promptSeen = true;

/** Follows whether the prompt is in view; the cue goes as soon as it is. */
export function watchPromptCue() {
  promptSeen = true;
  hidePromptCue();
  const observer = new IntersectionObserver(
    (entries) => {
      const entry = entries.at(-1);
      if (!entry) return;
      promptSeen = entry.isIntersecting && entry.intersectionRatio >= 0.5;
      if (promptSeen) hidePromptCue();
    },
    { threshold: [0, 0.5, 1] },
  );
  observer.observe(need('prompt', HTMLTextAreaElement));
  return observer;
}

/** The prompt changed without the user typing in it: cued when they cannot see it. */
export function cuePromptChange() {
  const cue = find('prompt-cue', HTMLButtonElement);
  if (cue && !promptSeen) cue.hidden = false;
}

function hidePromptCue() {
  const cue = find('prompt-cue', HTMLButtonElement);
  if (cue) cue.hidden = true;
}

/**
 * The cue shows the prompt: scrolled into view, and the keyboard's focus on its heading (focusing the prompt
 * itself would open a phone's keyboard over it).
 * @param {Element} target
 */
export function onPromptCueClick(target) {
  if (!target.closest('#prompt-cue')) return;
  need('prompt', HTMLTextAreaElement).scrollIntoView({ block: 'center' });
  byId('prompt-heading')?.focus({ preventScroll: true });
  hidePromptCue();
}
