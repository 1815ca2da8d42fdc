import { z } from 'zod';
import { LIMITS } from '../protocol/limits.ts';
import { typedText } from './text.ts';

/** The ranges the settings accept (the same ones the model's metadata is clamped to). */
export const SETTING_LIMITS = LIMITS;

const wholeNumber = (name: string, min: number, max: number) =>
  z.int({ error: `${name} must be a whole number from ${min} to ${max}.` }).min(min, `${name} must be at least ${min}.`).max(max, `${name} must be at most ${max}.`);

const size = (name: string) =>
  wholeNumber(name, LIMITS.size.min, LIMITS.size.max).multipleOf(LIMITS.size.multipleOf, `${name} must be a multiple of ${LIMITS.size.multipleOf}.`);

export const settingsSchema = z.object({
  steps: wholeNumber('Steps', LIMITS.steps.min, LIMITS.steps.max),
  cfg: z
    .number({ error: `CFG must be a number from ${LIMITS.cfg.min} to ${LIMITS.cfg.max}.` })
    .min(LIMITS.cfg.min, `CFG must be at least ${LIMITS.cfg.min}.`)
    .max(LIMITS.cfg.max, `CFG must be at most ${LIMITS.cfg.max}.`),
  seed: z.int({ error: `Seed must be -1 (random) or a whole number from 0 to ${LIMITS.seed.max}.` }).min(LIMITS.seed.min, `Seed must be -1 (random) or a whole number from 0 to ${LIMITS.seed.max}.`).max(LIMITS.seed.max, `Seed must be at most ${LIMITS.seed.max}.`),
  width: size('Width'),
  height: size('Height'),
  negativePrompt: typedText(z.string({ error: 'Negative prompt must be text.' }), 'The negative prompt').max(LIMITS.promptMaxChars, `Negative prompt can hold at most ${LIMITS.promptMaxChars} characters.`),
  autoGenerate: z.boolean({ error: 'autoGenerate must be true or false.' }),
});

export type Settings = z.infer<typeof settingsSchema>;

/** A partial update from the user; unknown keys are refused so typos are not silently ignored. */
export const settingsPatchSchema = settingsSchema.partial().strict();

export type SettingsPatch = z.infer<typeof settingsPatchSchema>;

export const DEFAULT_SETTINGS: Settings = {
  steps: 20,
  cfg: 7,
  seed: -1,
  width: 512,
  height: 512,
  negativePrompt: '',
  autoGenerate: true,
};
