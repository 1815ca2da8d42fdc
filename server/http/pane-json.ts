import type { PaneView } from '../core/index.ts';

/** The prompt pane and settings as stored: the same fields in the API's answers, the `pane` event and a stale refusal. */
export function toPaneJson(pane: PaneView) {
  const { paneRevision, prompt, promptVersion, canUndo, canRedo, suggestion, settings, pinned, settingSuggestions, family } = pane;
  return { paneRevision, prompt, promptVersion, canUndo, canRedo, suggestion, settings, pinned, settingSuggestions, family };
}
