import { z } from 'zod';
import { LIMITS } from '../protocol/limits.ts';
import { imageFamilySchema } from '../protocol/families.ts';
import { typedText } from './text.ts';

/** The ranges the settings accept (the same ones the model's metadata is clamped to). */
export const SETTING_LIMITS = LIMITS;

const wholeNumber = (name: string, min: number, max: number) =>
  z.int({ error: `${name} must be a whole number from ${min} to ${max}.` }).min(min, `${name} must be at least ${min}.`).max(max, `${name} must be at most ${max}.`);

const size = (name: string) =>
  wholeNumber(name, LIMITS.size.min, LIMITS.size.max).multipleOf(LIMITS.size.multipleOf, `${name} must be a multiple of ${LIMITS.size.multipleOf}.`);

/** A name a server gave (a model, a checkpoint, a sampler): one line of printable text. null: the default. */
const choiceName = (name: string) =>
  z
    .string({ error: `${name} must be a name or null (the default).` })
    .min(1, `${name} must not be empty; send null for the default.`)
    .max(MAX_CHOICE_CHARS, `${name} can be at most ${MAX_CHOICE_CHARS} characters.`)
    .regex(/^[^\u0000-\u001f\u007f]+$/u, `${name} must be one line of text.`)
    .nullable();

/** How Ollama names a model (`mistral:7b`, `hf.co/user/repo:Q4_K_M`): --model, a conversation's chatModel and a pull. */
export const OLLAMA_MODEL_NAME = /^[\w.\-/:]+$/;

/** The most corrected pictures one picture's check leads to (autoRefine). */
export const MAX_REFINE_ROUNDS = 3;

/** Longer than any checkpoint path a server lists (A1111 titles hold a folder, a file name and a hash). */
const MAX_CHOICE_CHARS = 500;

/** What paints and what chats: each null until the user picks, meaning "the server's own" (or --model). */
export const modelChoiceSchema = z.object({
  /** The Ollama model this conversation talks to; null: the --model default. */
  chatModel: choiceName('chatModel').refine((name) => name === null || OLLAMA_MODEL_NAME.test(name), 'chatModel must be an Ollama model name such as mistral:7b.'),
  /** The checkpoint as the image server names it; null: the server's current one. */
  checkpoint: choiceName('checkpoint'),
  sampler: choiceName('sampler'),
  scheduler: choiceName('scheduler'),
  /** The checkpoint's family as the user says it; null: read from the checkpoint's name. */
  family: imageFamilySchema.nullable(),
  /** The Ollama model that looks at the pictures (Check, Describe); null: --vision-model, or none. */
  visionModel: choiceName('visionModel').refine((name) => name === null || OLLAMA_MODEL_NAME.test(name), 'visionModel must be an Ollama model name such as gemma3:4b.'),
});

export type ModelChoice = z.infer<typeof modelChoiceSchema>;

export const DEFAULT_MODEL_CHOICE: ModelChoice = { chatModel: null, checkpoint: null, sampler: null, scheduler: null, family: null, visionModel: null };

export const MODEL_CHOICE_FIELDS = Object.keys(DEFAULT_MODEL_CHOICE) as (keyof ModelChoice)[];

/** Only the model choices of a settings patch. */
export function pickChoices(patch: Partial<ModelChoice>): Partial<ModelChoice> {
  return Object.fromEntries(MODEL_CHOICE_FIELDS.filter((field) => field in patch).map((field) => [field, patch[field]]));
}

export const settingsSchema = z.object({
  ...modelChoiceSchema.shape,
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
  /** Check every new picture with the vision model (off by default: it costs a second model's time). */
  autoCheck: z.boolean({ error: 'autoCheck must be true or false.' }),
  /** After a check with misses, make the corrected picture (same seed) up to this many times; needs autoCheck. */
  autoRefine: wholeNumber('autoRefine', 0, MAX_REFINE_ROUNDS),
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
  autoCheck: false,
  autoRefine: 0,
  ...DEFAULT_MODEL_CHOICE,
};
