// The prompt pane and the settings as the server decided them: undo and redo, the model's waiting prompt,
// pinned settings and the model's values for them. The full page and every update render the same parts,
// so what the page shows is always what is stored; web/easel.js only copies values into the fields.
import { PINNABLE_FIELDS, type PaneView, type PinnableField } from '../../core/index.ts';
import { conversationPath } from './bubbles.ts';
import { EMPTY, html, joinHtml, renderPartial, type Html } from './markup.ts';
import { describeDetected, detectedFamily, renderFamilyHint, renderSizePresetOptions } from './models-view.ts';

const FIELD_LABELS: Record<PinnableField, string> = { steps: 'Steps', cfg: 'CFG', seed: 'Seed', negativePrompt: 'Negative prompt' };
const SUGGESTION_PREVIEW_CHARS = 60;

/** Undo and Redo through the prompt's versions; Ctrl+Z and Ctrl+Shift+Z outside a text field press them. */
export function renderPromptHistory(conversationId: string, pane: Pick<PaneView, 'canUndo' | 'canRedo'>): Html {
  const button = (name: 'undo' | 'redo', label: string, keys: string, title: string, enabled: boolean) =>
    html`<button type="button" id="prompt-${name}" class="quiet" hx-post="${conversationPath(conversationId, `/prompt/${name}`)}" hx-include="#prompt" hx-swap="none" aria-keyshortcuts="${keys}" title="${title}"${enabled ? EMPTY : html` disabled`}>${label}</button>`;
  return html`<span id="prompt-history" class="prompt-history">${button('undo', 'Undo', 'Control+Z', 'Back to the previous version of the prompt (Ctrl+Z outside a text field)', pane.canUndo)}${button(
    'redo',
    'Redo',
    'Control+Shift+Z',
    'Forward to the next version of the prompt (Ctrl+Shift+Z outside a text field)',
    pane.canRedo,
  )}<button type="submit" id="prompt-compare" class="quiet" form="generate-form" name="compare" value="previous" title="Make the previous version and this one on the same seeds (Count images each), side by side"${pane.canUndo ? EMPTY : html` disabled`}>Compare with previous</button></span>`;
}

/**
 * A prompt waiting beside the user's: the assistant's (the user changed the prompt while it answered) or the vision
 * model's (a check of a picture found something missing). "Use suggestion" takes it, "Keep mine" lets it go.
 */
export function renderSuggestion(conversationId: string, pane: Pick<PaneView, 'suggestion'>): Html {
  const suggestion = pane.suggestion;
  const path = conversationPath(conversationId, '/suggestion');
  const fromCheck = suggestion?.imageId !== undefined;
  const label = fromCheck ? 'The vision model checked the picture and suggests:' : 'You changed the prompt while the assistant answered, so yours stays. The assistant suggests:';
  return html`<div id="suggestion" class="suggestion" role="group" aria-labelledby="suggestion-label" data-from="${fromCheck ? 'vision' : 'assistant'}"${suggestion ? EMPTY : html` hidden`}>
<p class="suggestion-label" id="suggestion-label">${label}</p>
<p id="suggestion-text" class="suggestion-text">${suggestion?.prompt ?? ''}</p>
<div class="row"><button type="button" id="use-suggestion" hx-post="${path}" hx-vals='{"accept": "1"}' hx-include="#prompt" hx-swap="none">Use suggestion</button><button type="button" id="dismiss-suggestion" class="quiet" hx-post="${path}" hx-vals='{"accept": "0"}' hx-swap="none">Keep mine</button></div>
</div>`;
}

function describeValue(field: PinnableField, value: number | string): string {
  if (field === 'seed' && value === -1) return '-1 (random)';
  if (typeof value === 'number') return String(value);
  const text = value.length > SUGGESTION_PREVIEW_CHARS ? `${value.slice(0, SUGGESTION_PREVIEW_CHARS)}…` : value;
  return `“${text}”`;
}

/** Beside a setting: that the user pinned it (a click unpins), and the model's different value (a click takes it). */
export function renderFieldMeta(conversationId: string, field: PinnableField, pane: Pick<PaneView, 'pinned' | 'settingSuggestions'>): Html {
  const pinned = pane.pinned.includes(field);
  const suggested = pane.settingSuggestions[field];
  const label = FIELD_LABELS[field];
  const unpin = pinned
    ? html`<button type="button" class="pin" hx-post="${conversationPath(conversationId, '/settings/unpin')}" hx-vals='{"field": "${field}"}' hx-swap="none" aria-label="${label} is set by you; let the assistant set it again" title="You set this: the assistant's values do not change it. Click to let the assistant set it again.">Set by you ✕</button>`
    : EMPTY;
  const suggestion =
    suggested === undefined
      ? EMPTY
      : html`<button type="button" class="setting-suggestion" hx-post="${conversationPath(conversationId, '/settings/suggestion')}" hx-vals='{"field": "${field}"}' hx-swap="none" title="${typeof suggested === 'string' ? suggested : String(suggested)}">Assistant suggests ${describeValue(field, suggested)}</button>`;
  return html`<div class="field-meta" id="meta-${field}">${unpin}${suggestion}</div>`;
}

/**
 * The values of the pane, for web/easel.js to copy into the fields that hold no unsaved typing. `force`: the
 * user asked for this change (undo, redo, use suggestion), so it replaces unsaved typing too. `live`: another
 * tab or a reply this page did not ask for made it, so a prompt being typed that differs is told so.
 * The model choices ('' for the default) and the size come too (a new checkpoint moves the size), and what the
 * family's encoder reads, for the prompt's counter.
 */
function renderPaneValues(pane: PaneView, force: boolean, live: boolean): Html {
  const { settings, family } = pane;
  const choice = (value: string | null) => value ?? '';
  return html`<div class="pane-values" data-revision="${pane.paneRevision}" data-prompt="${pane.prompt}" data-version="${pane.promptVersion ?? ''}" data-steps="${settings.steps}" data-cfg="${settings.cfg}" data-seed="${settings.seed}" data-negative-prompt="${settings.negativePrompt}" data-width="${settings.width}" data-height="${settings.height}" data-chat-model="${choice(settings.chatModel)}" data-checkpoint="${choice(settings.checkpoint)}" data-sampler="${choice(settings.sampler)}" data-scheduler="${choice(settings.scheduler)}" data-family="${choice(settings.family)}" data-vision-model="${choice(settings.visionModel)}" data-token-limit="${family.tokenBudget}" data-encoder="${family.encoder}"${force ? html` data-force="yes"` : EMPTY}${live ? html` data-live="yes"` : EMPTY}></div>`;
}

/** What follows the pane's family: the size presets, the hints under the fields it ignores, and what "Detect" finds. */
function renderFamilyParts(pane: PaneView): Html[] {
  const detected = detectedFamily(pane.settings, pane.family);
  return [
    renderPartial('#size-preset', 'innerMorph', renderSizePresetOptions(pane.family, pane.settings.width, pane.settings.height)),
    renderPartial('#family-hint-cfg', 'outerHTML', renderFamilyHint('cfg', pane.family)),
    renderPartial('#family-hint-negativePrompt', 'outerHTML', renderFamilyHint('negativePrompt', pane.family)),
    // Without a chosen checkpoint the server's current one decides, known only to a listing: left as it was drawn.
    ...(detected === undefined ? [] : [renderPartial('#family-detect', 'textContent', html`${describeDetected(detected)}`)]),
  ];
}

/** Every part of the pane the server decides, as htmx partials: after a reply, an edit, undo, redo. */
export function renderPaneUpdate(conversationId: string, pane: PaneView, options: { force?: boolean; live?: boolean } = {}): Html {
  // The values go last: when web/easel.js copies them into the fields, Undo/Redo and the suggestion are
  // already those of the same pane (a fast second Ctrl+Z must not meet the previous, disabled Undo).
  return joinHtml([
    renderPartial('#prompt-history', 'outerHTML', renderPromptHistory(conversationId, pane)),
    renderPartial('#suggestion', 'outerHTML', renderSuggestion(conversationId, pane)),
    ...PINNABLE_FIELDS.map((field) => renderPartial(`#meta-${field}`, 'outerHTML', renderFieldMeta(conversationId, field, pane))),
    ...renderFamilyParts(pane),
    renderPartial('#pane-inbox', 'innerHTML', renderPaneValues(pane, options.force === true, options.live === true)),
  ]);
}
