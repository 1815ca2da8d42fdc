import type { SettingsPatch } from '../../core/index.ts';

const NUMBER_FIELDS = ['steps', 'cfg', 'seed', 'width', 'height', 'autoRefine'] as const;

/** The settings that name what chats and what paints (Settings → Models): '' on the page is null, "the default". */
export const CHOICE_FIELDS = ['chatModel', 'checkpoint', 'sampler', 'scheduler', 'family', 'visionModel'] as const;
export type ChoiceField = (typeof CHOICE_FIELDS)[number];

/**
 * Turns the settings form (all strings) into the patch the service validates with the shared Zod
 * schema. Text that is not a number is passed on unchanged so the schema's own message names it.
 */
export function readSettingsForm(form: Record<string, unknown>): Record<keyof SettingsPatch, unknown> {
  const patch: Record<string, unknown> = {};
  for (const name of NUMBER_FIELDS) {
    if (!(name in form)) continue;
    patch[name] = toNumber(form[name]);
  }
  if ('negativePrompt' in form) patch.negativePrompt = form.negativePrompt;
  // A select of Settings → Models is sent only once it is on the page; its '' option is the default (null).
  for (const name of CHOICE_FIELDS) {
    if (!(name in form)) continue;
    patch[name] = form[name] === '' ? null : form[name];
  }
  // An unchecked box is simply absent from a form post.
  patch.autoGenerate = form.autoGenerate === 'on' || form.autoGenerate === 'true';
  patch.autoCheck = form.autoCheck === 'on' || form.autoCheck === 'true';
  return patch as Record<keyof SettingsPatch, unknown>;
}

/**
 * The patch without the model choices that are not a change: a form sends every select, and a name the
 * servers are asked about only when it changes (an Ollama that is down must not refuse a change of steps).
 * `only`: the fields the user changed, when the page says so.
 */
export function withoutUnchangedChoices<P extends Record<string, unknown>>(patch: P, stored: Partial<Record<ChoiceField, unknown>> | undefined, only?: readonly string[]): P {
  const kept: Record<string, unknown> = { ...patch };
  for (const name of CHOICE_FIELDS) {
    if (!(name in kept)) continue;
    if ((only !== undefined && !only.includes(name)) || (stored !== undefined && stored[name] === kept[name])) delete kept[name];
  }
  return kept as P;
}

function toNumber(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  const text = raw.trim();
  if (text === '') return raw;
  const value = Number(text);
  return Number.isFinite(value) ? value : raw;
}
