// Settings → Models: what chats (an Ollama model) and what paints (a checkpoint, its sampler and scheduler, its
// family), and a pull of a new chat model with its progress. The lists come from the servers, which may be slow or
// down: the page is drawn with the current values as a placeholder, and GET /c/:id/models fills the real options.
// Every name a server sent (models, checkpoints, samplers, Ollama's words) is untrusted: it goes through `html`.
import { describeFamily, FAMILY_STYLES, IMAGE_FAMILIES, type FamilyView, type InstalledChatModel, type ModelsView, type PullEvent, type Settings } from '../../core/index.ts';
import { conversationPath } from './bubbles.ts';
import { EMPTY, html, joinHtml, renderMessage, renderPartial, type Html } from './markup.ts';
import type { ChoiceField } from './settings-form.ts';

/** The model choices a section shows selected: the screen's (a reload keeps what the user picked), else the stored ones. */
export type ModelChoices = Pick<Settings, ChoiceField>;

/**
 * The section, inside #settings-form: its selects save with the form. Drawn at once with the current values and
 * filled from the servers on load, on focus (at most every 15 s), and after a pull (`easel:models`). Its GET sends
 * the selects' values (a fieldset's own fields), so the choices on screen stay selected.
 */
export function renderModelsSection(conversationId: string, settings: ModelChoices, family: FamilyView): Html {
  return html`<fieldset id="models" class="models" hx-get="${conversationPath(conversationId, '/models')}" hx-trigger="load, focusin throttle:15s, easel:models from:body" hx-swap="none">
<legend>Models</legend>
<div id="models-chat" class="models-group">${renderChatModelField(settings.chatModel, undefined)}</div>
<div id="models-vision" class="models-group">${renderVisionModelField(settings.visionModel, undefined)}</div>
${renderPullControls()}
<div id="models-image" class="models-group">${renderImageModelFields(settings, detectedFamily(settings, family), undefined)}</div>
</fieldset>`;
}

/** The pull's own form: outside #settings-form (forms do not nest); its name field and buttons sit in the section with form="pull-form". */
export function renderPullForm(conversationId: string): Html {
  return html`<form id="pull-form" class="pull-form" hx-post="${conversationPath(conversationId, '/models/pull')}" hx-swap="none" hx-disable="#pull-submit, #pull-name" novalidate></form>`;
}

/** GET /c/:id/models: both groups with the servers' options, the choices given selected. */
export function renderModelsUpdate(choices: ModelChoices, view: ModelsView): Html {
  const detected = describeFamily({ family: null, checkpoint: choices.checkpoint }, view.image.current);
  return joinHtml([
    renderPartial('#models-chat', 'innerMorph', renderChatModelField(choices.chatModel, view.chat)),
    renderPartial('#models-vision', 'innerMorph', renderVisionModelField(choices.visionModel, view.chat)),
    renderPartial('#models-image', 'innerMorph', renderImageModelFields(choices, detected, view.image)),
  ]);
}

/** The family "Detect" would find, when the page can tell: the pane's own when no family is chosen, else the checkpoint's name's. */
export function detectedFamily(settings: Pick<Settings, 'checkpoint' | 'family'>, family: FamilyView): FamilyView | undefined {
  if (family.source !== 'setting') return family;
  // The server's current checkpoint is known only to a listing (GET /c/:id/models says it then).
  return settings.checkpoint === null ? undefined : describeFamily({ family: null, checkpoint: settings.checkpoint }, null);
}

/** The words of the family select's first option: what "Detect" finds now. */
export function describeDetected(detected: FamilyView | undefined): string {
  if (detected === undefined) return 'Detect from the checkpoint';
  return detected.source === 'fallback' ? `Detect (${detected.label}: the checkpoint's name does not say)` : `Detect (${detected.label}, from the checkpoint)`;
}

function field(name: ChoiceField, label: string, control: Html, note: Html = EMPTY): Html {
  // The error slot keeps a refusal across a refresh of the lists (hx-morph-skip); the next save clears it.
  return html`<div class="field field-${name}"><label for="setting-${name}">${label}</label><div class="control">${control}</div>${note}<p id="error-${name}" class="field-error" hx-morph-skip></p></div>`;
}

/** A server that could not be asked: its sentence stands where the select would be. */
function problemField(name: ChoiceField, label: string, problem: string): Html {
  return html`<div class="field field-${name}"><span class="field-label" id="label-${name}">${label}</span><p class="models-problem" role="note" aria-labelledby="label-${name}">${problem}</p><p id="error-${name}" class="field-error" hx-morph-skip></p></div>`;
}

function option(value: string, label: string, selected: boolean, extra: Html = EMPTY): Html {
  return html`<option value="${value}"${selected ? html` selected` : EMPTY}${extra}>${label}</option>`;
}

/** A disabled line at the end of a placeholder select: the list is on its way. */
function asking(who: string): Html {
  return html`<option value="" disabled>Asking ${who}…</option>`;
}

const sameModel = (a: string, b: string) => a === b || `${a}:latest` === b || a === `${b}:latest`;

function renderChatModelField(selected: string | null, chat: ModelsView['chat'] | undefined): Html {
  if (chat?.problem) return problemField('chatModel', 'Chat model', chat.problem);
  const installed = chat?.installed ?? [];
  const defaultInstalled = chat === undefined || installed.some((model) => sameModel(model.name, chat.default));
  const defaultLabel = chat === undefined ? 'Default' : `Default (${chat.default}${defaultInstalled ? '' : ', not pulled'})`;
  const listed = selected === null || installed.some((model) => model.name === selected);
  const options = [
    option('', defaultLabel, selected === null),
    ...installed.map((model) => option(model.name, describeInstalled(model), model.name === selected, canChat(model) ? EMPTY : html` disabled`)),
    // A choice the server does not list (removed since, or not asked yet) stays shown as it is.
    ...(listed || selected === null ? [] : [option(selected, chat === undefined ? selected : `${selected} (not installed)`, true)]),
    ...(chat === undefined ? [asking('Ollama')] : []),
  ];
  const select = html`<select id="setting-chatModel" name="chatModel" aria-describedby="error-chatModel models-chat-note">${options}</select>`;
  const note = html`<p id="models-chat-note" class="hint">What this conversation chats with. “Default” follows Easel's --model.</p>`;
  return field('chatModel', 'Chat model', select, note);
}

/**
 * What looks at the pictures (Check, Describe): an installed model with the `vision` capability (the others are
 * listed, disabled: Ollama says they cannot see). "Default" is --vision-model, or "None" without one; with no model
 * that can see, the hint says what to pull.
 */
function renderVisionModelField(selected: string | null, chat: ModelsView['chat'] | undefined): Html {
  if (chat?.problem) return problemField('visionModel', 'Vision model', chat.problem);
  const installed = chat?.installed ?? [];
  const defaultLabel = chat === undefined ? 'Default' : chat.visionDefault === null ? 'None' : `Default (${chat.visionDefault})`;
  const listed = selected === null || installed.some((model) => model.name === selected);
  const options = [
    option('', defaultLabel, selected === null),
    ...installed.map((model) => option(model.name, describeInstalled(model), model.name === selected, canSee(model) ? EMPTY : html` disabled`)),
    ...(listed || selected === null ? [] : [option(selected, chat === undefined ? selected : `${selected} (not installed)`, true)]),
    ...(chat === undefined ? [asking('Ollama')] : []),
  ];
  const select = html`<select id="setting-visionModel" name="visionModel" aria-describedby="error-visionModel models-vision-note">${options}</select>`;
  const blind = chat !== undefined && !installed.some(canSee);
  const words = blind
    ? 'None of your models can see pictures: pull one (`ollama pull gemma3`, or Pull below).'
    : "What checks the pictures and describes them. “Default” follows Easel's --vision-model.";
  const note = html`<p id="models-vision-note" class="hint">${renderMessage(words)}</p>`;
  return field('visionModel', 'Vision model', select, note);
}

/** Ollama says which models see pictures (/api/show `capabilities`); unknown capabilities see nothing. */
function canSee(model: InstalledChatModel): boolean {
  return model.capabilities.includes('vision');
}

/** An embedding model cannot write a reply. Unknown capabilities ([]) are given the benefit of the doubt. */
function canChat(model: InstalledChatModel): boolean {
  return model.capabilities.length === 0 || model.capabilities.includes('completion') || !model.capabilities.includes('embedding');
}

/** "llava:7b · 4.7 GB · 7B · vision": its size, its parameters and what it can do beyond text. */
export function describeInstalled(model: InstalledChatModel): string {
  const extras = model.capabilities.filter((capability) => capability !== 'completion');
  const parts = [model.name, formatBytes(model.sizeBytes), model.parameterSize, ...(canChat(model) ? extras : ['embedding only: cannot chat'])];
  return parts.filter((part): part is string => typeof part === 'string' && part !== '').join(' · ');
}

function renderImageModelFields(choices: ModelChoices, detected: FamilyView | undefined, image: ModelsView['image'] | undefined): Html {
  const parts: Html[] = [];
  if (image?.problem) {
    parts.push(problemField('checkpoint', 'Checkpoint', image.problem));
  } else if (image === undefined || image.backend !== 'none') {
    parts.push(renderCheckpointField(choices.checkpoint, image));
    parts.push(renderListField('sampler', 'Sampler', choices.sampler, image?.samplers));
    parts.push(renderListField('scheduler', 'Scheduler', choices.scheduler, image?.schedulers));
  }
  parts.push(renderFamilyField(choices.family, detected));
  return joinHtml(parts);
}

function renderCheckpointField(selected: string | null, image: ModelsView['image'] | undefined): Html {
  const checkpoints = image?.checkpoints ?? [];
  const current = image?.current;
  const listed = selected === null || checkpoints.some((checkpoint) => checkpoint.name === selected);
  const options = [
    option('', current ? `Server's current (${current})` : "Server's current", selected === null),
    ...checkpoints.map((checkpoint) => option(checkpoint.name, checkpoint.family === null ? checkpoint.name : `${checkpoint.name} · ${FAMILY_STYLES[checkpoint.family].label}`, checkpoint.name === selected)),
    ...(listed || selected === null ? [] : [option(selected, image === undefined ? selected : `${selected} (not listed)`, true)]),
    ...(image === undefined ? [asking('the image server')] : []),
  ];
  return field('checkpoint', 'Checkpoint', html`<select id="setting-checkpoint" name="checkpoint" aria-describedby="error-checkpoint">${options}</select>`);
}

/** A sampler or a scheduler: only when the server lists some (or one is chosen already). */
function renderListField(name: 'sampler' | 'scheduler', label: string, selected: string | null, names: string[] | undefined): Html {
  if ((names === undefined || names.length === 0) && selected === null) return EMPTY;
  const listed = selected === null || (names ?? []).includes(selected);
  const options = [
    option('', 'Server default', selected === null),
    ...(names ?? []).map((entry) => option(entry, entry, entry === selected)),
    ...(listed || selected === null ? [] : [option(selected, names === undefined ? selected : `${selected} (not listed)`, true)]),
  ];
  return field(name, label, html`<select id="setting-${name}" name="${name}" aria-describedby="error-${name}">${options}</select>`);
}

function renderFamilyField(selected: string | null, detected: FamilyView | undefined): Html {
  const options = [
    html`<option id="family-detect" value=""${selected === null ? html` selected` : EMPTY}>${describeDetected(detected)}</option>`,
    ...IMAGE_FAMILIES.map((id) => option(id, FAMILY_STYLES[id].label, id === selected)),
  ];
  const note = html`<p id="models-family-note" class="hint">How prompts are written, and the sizes, steps and CFG it was trained for.</p>`;
  return field('family', 'Family', html`<select id="setting-family" name="family" aria-describedby="error-family models-family-note">${options}</select>`, note);
}

/** The "Pull a model" controls beside the chat model: their form is #pull-form (renderPullForm). */
function renderPullControls(): Html {
  return html`<div id="pull" class="pull">
<label for="pull-name">Pull a model from Ollama's library</label>
<div class="control"><input id="pull-name" name="name" form="pull-form" placeholder="e.g. llava:7b" autocomplete="off" autocapitalize="off" spellcheck="false" aria-describedby="pull-result"><button type="submit" id="pull-submit" form="pull-form">Pull</button><button type="button" id="pull-cancel" class="quiet" hidden>Cancel</button></div>
<div id="pull-progress" class="pull-progress"></div>
<p id="pull-result" class="pull-result" aria-live="polite"></p>
</div>`;
}

/** 4.1 GB, 380 MB, 12 KB: sizes as Ollama says them (powers of 1000). */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '';
  if (bytes >= 1e9) return `${(bytes / 1e9).toFixed(1)} GB`;
  if (bytes >= 1e6) return `${Math.round(bytes / 1e6)} MB`;
  if (bytes >= 1e3) return `${Math.round(bytes / 1e3)} KB`;
  return `${bytes} B`;
}

/** The first message of a pull's stream: its bar, empty, and no word from an earlier pull. */
export function renderPullStarted(name: string): Html {
  return joinHtml([
    renderPartial('#pull-result', 'innerHTML'),
    renderPartial('#pull-progress', 'innerHTML', renderPullBar(name, 'starting', undefined, undefined)),
  ]);
}

/** One event of a pull: the bar moves (the current layer's words, and what is left of it), or the end is said. */
export function renderPullEvent(name: string, event: PullEvent): Html {
  if (event.type === 'progress') {
    return renderPartial('#pull-progress', 'innerMorph', renderPullBar(name, event.status, event.completed, event.total));
  }
  if (event.type === 'done') {
    return joinHtml([
      renderPartial('#pull-progress', 'innerHTML'),
      renderPartial('#pull-result', 'innerHTML', html`<span class="pull-done">Pulled ${event.name}. Pick it as the chat model above.</span>`),
    ]);
  }
  // Ollama's own words, which name the model already.
  return joinHtml([renderPartial('#pull-progress', 'innerHTML'), renderPullRefused(event.message)]);
}

/** A pull refused or failed, in the server's own words. */
export function renderPullRefused(message: string): Html {
  return renderPartial('#pull-result', 'innerHTML', html`<span class="pull-error" role="alert">${message}</span>`);
}

function renderPullBar(name: string, status: string, completed: number | undefined, total: number | undefined): Html {
  const known = total !== undefined && total > 0;
  const done = known ? Math.min(Math.max(completed ?? 0, 0), total) : 0;
  const bar = known
    ? html`<progress id="pull-bar" max="${total}" value="${done}" aria-label="Pulling ${name}"></progress>`
    : html`<progress id="pull-bar" aria-label="Pulling ${name}"></progress>`;
  const left = known ? html`<span class="pull-left">${formatBytes(total - done)} of ${formatBytes(total)} left</span>` : EMPTY;
  return html`<p class="pull-layer">Pulling ${name}: <span class="pull-status">${status}</span></p><div class="pull-row">${bar}${left}</div>`;
}

/**
 * The parts of the settings that follow the family, drawn with the page and with every pane update: the size
 * presets (its trained buckets), and a hint under a field the family ignores.
 */
export function renderSizePresetOptions(family: FamilyView, width: number, height: number): Html {
  // Custom is first, so shown when no preset is the size.
  return joinHtml([
    option('', 'Custom', false),
    ...family.buckets.map((bucket) => option(`${bucket.width}x${bucket.height}`, describeBucket(bucket), bucket.width === width && bucket.height === height)),
  ]);
}

/** "Portrait 832 × 1216". */
export function describeBucket(size: { width: number; height: number }): string {
  const shape = size.width === size.height ? 'Square' : size.width > size.height ? 'Landscape' : 'Portrait';
  return `${shape} ${size.width} × ${size.height}`;
}

/** Under the negative prompt or CFG: said when the family ignores it, empty otherwise. */
export function renderFamilyHint(field: 'negativePrompt' | 'cfg', family: FamilyView): Html {
  const ignored = field === 'negativePrompt' ? !family.negativePrompt : !family.cfgMatters;
  const words = field === 'negativePrompt' ? `${family.label} ignores the negative prompt.` : `${family.label} ignores CFG.`;
  return html`<p id="family-hint-${field}" class="hint family-hint">${ignored ? words : ''}</p>`;
}
