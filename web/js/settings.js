// The settings form: it saves itself on every change (hx-trigger="change"). Only the fields the user
// changed are sent as changed, and the server pins those: a stale value never overwrites the model's.
import { byId, find, formBody, isField, isNewConversation, need } from './dom.js';

/** @type {Set<string>} Fields the user changed that the server has not stored yet, by name. */
const dirty = new Set();
/** A change made before the conversation existed: saved once it does. */
let waiting = false;
/** @type {WeakMap<import('htmx.org').HtmxRequestCtx, string[]>} What each save in flight sent as changed. */
const sent = new WeakMap();

/** @type {Map<string, string>} The model choices of the last pane shown, so a choice not listed here is asked about once. */
const choicesSeen = new Map();

export function resetSettings() {
  waiting = false;
  dirty.clear();
  choicesSeen.clear();
}

const settingsForm = () => need('settings-form', HTMLFormElement);

/**
 * A setting's field: `setting-steps`, `setting-seed`, …
 * @param {string} name
 */
const settingField = (name) => {
  const field = byId(`setting-${name}`);
  return field instanceof HTMLInputElement || field instanceof HTMLTextAreaElement ? field : null;
};

/** Saves the settings form, as a change of one of its fields would. */
export function saveSettings() {
  settingsForm().dispatchEvent(new Event('change', { bubbles: true }));
}

/**
 * Before its first message the conversation does not exist: the settings wait, and go with it.
 * Otherwise the save names the fields changed by hand.
 * @param {CustomEvent<{ ctx: import('htmx.org').HtmxRequestCtx }>} event
 */
export function onSettingsConfigRequest(event) {
  const ctx = event.detail.ctx;
  if (ctx.sourceElement !== byId('settings-form')) return;
  if (isNewConversation()) {
    event.preventDefault();
    waiting = true;
    return;
  }
  formBody(ctx).set('changed', [...dirty].join(','));
  // Still the user's until stored: a pane update meanwhile (another tab's, a reply's) does not replace them.
  sent.set(ctx, [...dirty]);
}

/**
 * Stored: those fields hold the stored values now. Not stored: they still hold the user's change, sent again
 * with the next one.
 * @param {import('htmx.org').HtmxRequestCtx} ctx
 */
export function onSettingsAfterRequest(ctx) {
  if (ctx.sourceElement !== byId('settings-form') || ctx.response?.status !== 200) return;
  for (const name of sent.get(ctx) ?? []) dirty.delete(name);
}

/**
 * The first message of a new conversation carries every setting (the conversation is created with them).
 * @param {FormData} body
 */
export function sendSettingsWith(body) {
  for (const [name, value] of new FormData(settingsForm())) body.set(name, value);
  waiting = false;
  dirty.clear();
}

/** The conversation now exists: the change that waited for it is saved. */
export function saveWaitingSettings() {
  if (!waiting) return;
  waiting = false;
  saveSettings();
}

/**
 * A field of the settings form: one it owns (the pull's name sits among the models but belongs to #pull-form).
 * @param {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} field
 */
const isSetting = (field) => field.form?.id === 'settings-form';

/** @param {Event} event */
export function onSettingsInput(event) {
  const target = event.target;
  if (!isField(target)) return;
  if (isSetting(target) && target.name && target.name !== 'sizePreset') dirty.add(target.name);
  if (target.id === 'setting-width' || target.id === 'setting-height') matchPreset();
}

/**
 * A checkbox or a select changes without an input event in some browsers: a change marks its field too.
 * A size preset marks the width and height.
 * @param {Event} event
 */
export function markChangedSetting(event) {
  const target = event.target;
  if (!isField(target) || !isSetting(target) || !target.name) return;
  if (target.name === 'sizePreset') {
    dirty.add('width');
    dirty.add('height');
  } else {
    dirty.add(target.name);
  }
}

/**
 * A size preset chosen: its width and height go into their fields, before the form saves them.
 * @param {Event} event
 */
export function applySizePreset(event) {
  const target = event.target;
  if (!(target instanceof HTMLSelectElement) || target.id !== 'size-preset') return;
  const [w, h] = target.value.split('x');
  if (!w || !h) return;
  need('setting-width', HTMLInputElement).value = w;
  need('setting-height', HTMLInputElement).value = h;
}

/** The size preset that matches the width and height, or none. */
export function matchPreset() {
  const preset = need('size-preset', HTMLSelectElement);
  const value = `${need('setting-width', HTMLInputElement).value}x${need('setting-height', HTMLInputElement).value}`;
  preset.value = [...preset.options].some((option) => option.value === value) ? value : '';
}

/** @param {Element} target */
export function onSettingsClick(target) {
  if (target.closest('#random-seed')) randomSeed();
}

/** Random seed: -1, saved as a change by hand. */
function randomSeed() {
  const seed = need('setting-seed', HTMLInputElement);
  seed.value = '-1';
  dirty.add('seed');
  seed.dispatchEvent(new Event('change', { bubbles: true }));
}

/**
 * Like the user typing into the field: the change event saves it, set by hand.
 * @param {string} name
 * @param {string | undefined} value
 */
export function setSetting(name, value) {
  const field = settingField(name);
  if (value === undefined || !field) return;
  field.value = value;
  dirty.add(field.name);
  const error = byId(`error-${field.name}`);
  if (error) error.textContent = '';
}

/** The pane's fields the server sends back, by their name in the pane's data (a new family moves the size). */
const PANE_FIELDS = ['steps', 'cfg', 'seed', 'negativePrompt', 'width', 'height'];

/** Settings → Models' selects, by their name in the pane's data ('' is the default). */
const CHOICE_FIELDS = ['chatModel', 'checkpoint', 'sampler', 'scheduler', 'family', 'visionModel'];

/**
 * Shows the settings the server stored; a field the user changed and the server has not stored keeps it.
 * @param {DOMStringMap} values
 */
export function showStoredSettings(values) {
  for (const key of PANE_FIELDS) {
    const field = settingField(key);
    const value = values[key];
    if (!field || value === undefined || dirty.has(field.name)) continue;
    if (field.value !== value) field.value = value;
    const error = byId(`error-${field.name}`);
    if (error) error.textContent = '';
  }
  if (showStoredChoices(values)) htmx.trigger(document.body, 'easel:models');
  if (find('size-preset', HTMLSelectElement)) matchPreset();
}

/**
 * The model choices stored (another tab's): selected where the page has the option. True when one is not listed on
 * this page yet (a checkpoint picked elsewhere, a sampler select the page does not show): the lists are asked for
 * again, with the new value selected meanwhile.
 * @param {DOMStringMap} values
 */
function showStoredChoices(values) {
  let unlisted = false;
  for (const key of CHOICE_FIELDS) {
    const value = values[key];
    if (value === undefined || dirty.has(key)) continue;
    const seen = choicesSeen.get(key);
    choicesSeen.set(key, value);
    const select = find(`setting-${key}`, HTMLSelectElement);
    if (!select) {
      // No select for it (the server lists none, or cannot be asked): asked again only when the choice changed.
      unlisted ||= value !== '' && value !== seen;
      continue;
    }
    if (select.value === value) continue;
    if (![...select.options].some((option) => option.value === value)) {
      select.append(new Option(value, value));
      unlisted = true;
    }
    select.value = value;
    const error = byId(`error-${key}`);
    if (error) error.textContent = '';
  }
  return unlisted;
}
