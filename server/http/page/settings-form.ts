import type { SettingsPatch } from '../../core/index.ts';

const NUMBER_FIELDS = ['steps', 'cfg', 'seed', 'width', 'height'] as const;

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
  // An unchecked box is simply absent from a form post.
  patch.autoGenerate = form.autoGenerate === 'on' || form.autoGenerate === 'true';
  return patch as Record<keyof SettingsPatch, unknown>;
}

function toNumber(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  const text = raw.trim();
  if (text === '') return raw;
  const value = Number(text);
  return Number.isFinite(value) ? value : raw;
}
