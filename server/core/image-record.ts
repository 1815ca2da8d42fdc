import { z } from 'zod';
import { LIMITS } from '../protocol/index.ts';
import { oneLineText, typedText } from './text.ts';

/**
 * What a picture was made with, as the backend really used it: the one list of an image's settings, read by
 * the store's rows, the archive's manifest, the API's JSON and the page. null: the backend ignored that value
 * and did not say what it used, so Easel claims nothing. A new setting is added here (and to the migration).
 */
export const imageMadeWithSchema = z.object({
  prompt: typedText(z.string().max(LIMITS.promptMaxChars), 'The prompt'),
  negativePrompt: typedText(z.string().max(LIMITS.promptMaxChars), 'The negative prompt'),
  steps: z.int().min(LIMITS.steps.min).max(LIMITS.steps.max).nullable(),
  cfg: z.number().min(LIMITS.cfg.min).max(LIMITS.cfg.max).nullable(),
  seed: z.int().min(0).max(LIMITS.seed.max).nullable(),
  sampler: oneLineText(z.string().max(200), 'The sampler').nullable(),
  /** A1111's "Schedule type" (e.g. "Karras"), ComfyUI's KSampler scheduler, sd-server's; null when the server did not say. */
  scheduler: oneLineText(z.string().max(200), 'The scheduler').nullable(),
  width: z.int().min(1),
  height: z.int().min(1),
  model: oneLineText(z.string().max(500), 'The model name').nullable(),
});
export type ImageMadeWith = z.infer<typeof imageMadeWithSchema>;
export const IMAGE_MADE_WITH_FIELDS = imageMadeWithSchema.keyof().options;

/** How much of a starting image a variation may change: A1111's denoising_strength, at least a little, at most all. */
export const VARY_STRENGTH = { min: 0.05, max: 1 } as const;

/**
 * Where a picture came from when it was made from another one ("Vary", image-to-image): that image's id (in this
 * conversation or any other; it may have been deleted since) and the strength it was changed with. Not part of
 * what it was made with (imageMadeWithSchema): a record of its origin, kept beside it.
 */
export const imageSourceSchema = z
  .object({
    imageId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be the id of an image'),
    strength: z.number().min(VARY_STRENGTH.min).max(VARY_STRENGTH.max),
  })
  .strict();
export type ImageSource = z.infer<typeof imageSourceSchema>;

/** The two sides of a comparison (Compare): `a` the first prompt version, `b` the second. */
export const COMPARE_SIDES = ['a', 'b'] as const;
export const compareSideSchema = z.enum(COMPARE_SIDES);
export type CompareSide = z.infer<typeof compareSideSchema>;

/** A picture Easel keeps: where it is, which turn and prompt version it belongs to, and what it was made with. */
export interface ImageRecord extends ImageMadeWith {
  id: string;
  conversationId: string;
  turnId: number | null;
  file: string;
  url: string;
  /** The prompt version it was made from; null when its prompt was no version (an API override). */
  promptVersion: number | null;
  /** The image it was made from (Vary), or null: made from the prompt alone. */
  source: ImageSource | null;
  /** One of a comparison (Compare): its side, `a` the first version and `b` the second; null otherwise. */
  compareSide: CompareSide | null;
  createdAt: string;
}

/** Only what the picture was made with, field by field from the one list. */
export function pickMadeWith(image: ImageMadeWith): ImageMadeWith {
  return Object.fromEntries(IMAGE_MADE_WITH_FIELDS.map((field) => [field, image[field]])) as ImageMadeWith;
}
