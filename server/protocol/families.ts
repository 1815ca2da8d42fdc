// The family of the checkpoint that paints: how its text encoder reads a prompt, and the settings it was
// trained for. The system prompt, the metadata repairs, the prompt counter and the family defaults all read
// this one table.
import { z } from 'zod';
import type { Metadata } from './metadata.ts';

export const IMAGE_FAMILIES = ['sd15', 'sd2', 'sdxl', 'pony', 'illustrious', 'flux', 'sd3'] as const;
export const imageFamilySchema = z.enum(IMAGE_FAMILIES, { error: `family must be one of ${IMAGE_FAMILIES.join(', ')} (or null to detect it).` });
export type ImageFamily = z.infer<typeof imageFamilySchema>;

/** When nothing tells the family: the defaults Easel always had (512×512, 20 steps, CFG 7) are SD 1.5's. */
export const FALLBACK_FAMILY: ImageFamily = 'sd15';

export interface ImageSize {
  width: number;
  height: number;
}

export interface FamilyStyle {
  id: ImageFamily;
  /** As people name it. */
  label: string;
  /** `tags`: comma-separated phrases; `booru`: Danbooru-style tags after quality tags; `sentences`: plain prose. */
  promptStyle: 'tags' | 'booru' | 'sentences';
  /** What reads the prompt: CLIP (75 usable tokens a chunk) or T5 (about 512). */
  encoder: 'clip' | 't5';
  /** The tokens the encoder reads before it truncates or chunks. */
  tokenBudget: number;
  /** Put first in every prompt by the model (Pony's score tags, Illustrious' quality tags); '' for none. */
  qualityTags: string;
  /** Whether a negative prompt changes anything (Flux ignores it). */
  negativePrompt: boolean;
  /** Whether classic CFG means anything (Flux is guidance-distilled: CFG 1). */
  cfgMatters: boolean;
  steps: number;
  cfg: number;
  /** The trained resolutions, the square first: the size defaults and the aspect presets. */
  buckets: readonly ImageSize[];
  /** One ready prompt in the family's style, for the system prompt's example. */
  example: string;
}

const SD15_BUCKETS: readonly ImageSize[] = [
  { width: 512, height: 512 },
  { width: 512, height: 768 },
  { width: 768, height: 512 },
  { width: 576, height: 768 },
  { width: 768, height: 576 },
];

// SDXL's training buckets near one megapixel (Stability's SDXL report, appendix I).
const XL_BUCKETS: readonly ImageSize[] = [
  { width: 1024, height: 1024 },
  { width: 832, height: 1216 },
  { width: 1216, height: 832 },
  { width: 896, height: 1152 },
  { width: 1152, height: 896 },
  { width: 768, height: 1344 },
  { width: 1344, height: 768 },
];

const TAGS_EXAMPLE = 'tabby cat, blue wizard hat, sitting on a stack of old books, candlelight, cozy library, detailed fur, soft focus background';

export const FAMILY_STYLES: Record<ImageFamily, FamilyStyle> = {
  sd15: {
    id: 'sd15', label: 'SD 1.5', promptStyle: 'tags', encoder: 'clip', tokenBudget: 75, qualityTags: '', negativePrompt: true, cfgMatters: true,
    steps: 25, cfg: 7, buckets: SD15_BUCKETS, example: TAGS_EXAMPLE,
  },
  sd2: {
    id: 'sd2', label: 'SD 2.x', promptStyle: 'tags', encoder: 'clip', tokenBudget: 75, qualityTags: '', negativePrompt: true, cfgMatters: true,
    steps: 25, cfg: 7, buckets: [{ width: 768, height: 768 }, { width: 640, height: 896 }, { width: 896, height: 640 }], example: TAGS_EXAMPLE,
  },
  sdxl: {
    id: 'sdxl', label: 'SDXL', promptStyle: 'tags', encoder: 'clip', tokenBudget: 75, qualityTags: '', negativePrompt: true, cfgMatters: true,
    steps: 30, cfg: 6, buckets: XL_BUCKETS, example: TAGS_EXAMPLE,
  },
  pony: {
    id: 'pony', label: 'Pony Diffusion', promptStyle: 'booru', encoder: 'clip', tokenBudget: 75, qualityTags: 'score_9, score_8_up, score_7_up', negativePrompt: true, cfgMatters: true,
    steps: 25, cfg: 7, buckets: XL_BUCKETS, example: 'score_9, score_8_up, score_7_up, cat, wizard hat, blue headwear, sitting, book stack, candlelight, indoors, library',
  },
  illustrious: {
    id: 'illustrious', label: 'Illustrious / NoobAI', promptStyle: 'booru', encoder: 'clip', tokenBudget: 75, qualityTags: 'masterpiece, best quality', negativePrompt: true, cfgMatters: true,
    steps: 28, cfg: 5.5, buckets: XL_BUCKETS, example: 'masterpiece, best quality, no humans, cat, wizard hat, blue headwear, sitting, book stack, candlelight, indoors, library',
  },
  flux: {
    id: 'flux', label: 'Flux', promptStyle: 'sentences', encoder: 't5', tokenBudget: 512, qualityTags: '', negativePrompt: false, cfgMatters: false,
    steps: 20, cfg: 1, buckets: XL_BUCKETS,
    example: 'A tabby cat in a blue wizard hat sits on a stack of old books in a cozy library, lit by warm candlelight, with shelves softly out of focus behind it.',
  },
  sd3: {
    id: 'sd3', label: 'SD 3.x', promptStyle: 'sentences', encoder: 't5', tokenBudget: 256, qualityTags: '', negativePrompt: true, cfgMatters: true,
    steps: 28, cfg: 4.5, buckets: XL_BUCKETS,
    example: 'A tabby cat in a blue wizard hat sits on a stack of old books in a cozy library, lit by warm candlelight.',
  },
};

// Checked in this order: a Pony or Illustrious checkpoint is also SDXL, and many names say both.
const NAME_RULES: ReadonlyArray<[RegExp, ImageFamily]> = [
  [/flux/i, 'flux'],
  [/(?:^|[^a-z])(?:sd[-_ ]?3(?:[._]5)?|stable[-_ ]?diffusion[-_ ]?3)(?:[^0-9]|$)/i, 'sd3'],
  [/pony|pdxl/i, 'pony'],
  [/illustrious|noob|(?:^|[^a-z])ilxl|(?:^|[^a-z])il[-_ ]?xl/i, 'illustrious'],
  // "XL" as a word or before a version ("animagineXLV31"), not inside one.
  [/sdxl|sd[-_ ]xl|xl(?:[^a-z]|v\d|$)|(?:^|[^a-z])xl/i, 'sdxl'],
  // Stability's own SD 2 files ("v2-1_768-ema-pruned", "768-v-ema", "512-base-ema") or a name that says SD 2: a
  // fine-tune's own "v20" or "v21" is its version, not the base model's.
  [/(?:^|[^a-z0-9])v2[-_][01][-_](?:512|768)|768-v-ema|512-base-ema|(?:^|[^a-z])sd[-_ ]?2(?:[._][01])?(?:[^0-9]|$)|stable[-_ ]?diffusion[-_ ]?2/i, 'sd2'],
  [/v1[-_.]?[45]|sd[-_ ]?1[-_.]?5|sd15/i, 'sd15'],
];

/** The family a checkpoint's name says (file name, title or path), or null when it says none. */
export function detectFamily(checkpoint: string | null | undefined): ImageFamily | null {
  if (!checkpoint) return null;
  // The folder names checkpoints are kept in ("SDXL/juggernaut.safetensors") count as much as the file's.
  return NAME_RULES.find(([rule]) => rule.test(checkpoint))?.[1] ?? null;
}

export interface ResolvedFamily {
  style: FamilyStyle;
  /** `setting`: the user chose it; `checkpoint`: read from its name; `fallback`: nothing said, SD 1.5 assumed. */
  source: 'setting' | 'checkpoint' | 'fallback';
}

/** The user's choice wins, then what the checkpoint's name says, then SD 1.5. */
export function resolveFamily(chosen: ImageFamily | null, checkpoint: string | null | undefined): ResolvedFamily {
  if (chosen !== null) return { style: FAMILY_STYLES[chosen], source: 'setting' };
  const detected = detectFamily(checkpoint);
  return detected === null ? { style: FAMILY_STYLES[FALLBACK_FAMILY], source: 'fallback' } : { style: FAMILY_STYLES[detected], source: 'checkpoint' };
}

/**
 * The model's metadata made right for the family, the repairs a 7B model needs most: the quality tags it
 * forgot put first, a sentence's full stop dropped from a tag list, and for a family that ignores them, no
 * negative prompt and CFG at the family's value (a Flux image at CFG 7 burns).
 */
export function fitMetadataToFamily(metadata: Metadata, style: FamilyStyle): Metadata {
  const fitted: Metadata = { ...metadata };
  fitted.prompt = fitPromptToFamily(metadata.prompt, style);
  if (!style.cfgMatters) fitted.cfg = style.cfg;
  if (!style.negativePrompt) delete fitted.negative_prompt;
  return fitted;
}

/**
 * A prompt made right for the family (the chat model's, the vision model's): the quality tags it forgot put first,
 * a sentence's full stop dropped from a tag list.
 */
export function fitPromptToFamily(text: string, style: FamilyStyle): string {
  let prompt = text.trim();
  if (prompt !== '' && style.promptStyle !== 'sentences') prompt = prompt.replace(/[.。]+$/u, '').trim();
  if (prompt !== '' && style.qualityTags !== '' && !startsWithTags(prompt, style.qualityTags)) prompt = `${style.qualityTags}, ${prompt}`;
  return prompt;
}

function startsWithTags(prompt: string, tags: string): boolean {
  const first = tags.split(',').map((tag) => tag.trim().toLowerCase());
  const head = prompt.split(',').slice(0, first.length + 2).map((tag) => tag.trim().toLowerCase());
  return first.every((tag) => head.includes(tag));
}

/** The bucket of the family closest in aspect ratio to a size: a portrait stays a portrait when the family changes. */
export function fitSizeToFamily(size: ImageSize, style: FamilyStyle): ImageSize {
  const ratio = Math.log(size.width / size.height);
  let best = style.buckets[0] as ImageSize;
  for (const bucket of style.buckets) {
    if (Math.abs(Math.log(bucket.width / bucket.height) - ratio) < Math.abs(Math.log(best.width / best.height) - ratio)) best = bucket;
  }
  return { ...best };
}

/**
 * About how many tokens the family's text encoder reads a prompt as, counted as the page's counter counts them
 * (web/js/prompt-count.js, the same two rules). CLIP: one per word of up to 10 letters (one more per 10 further
 * letters), one per digit and per punctuation mark. T5's sentencepiece: about 1.3 per word, one per punctuation mark.
 */
export function estimateEncoderTokens(text: string, encoder: FamilyStyle['encoder']): number {
  if (encoder === 't5') {
    let words = 0;
    let marks = 0;
    for (const [part] of text.matchAll(/[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu)) {
      if (/^[\p{L}\p{N}]/u.test(part)) words++;
      else marks++;
    }
    return Math.round(words * 1.3) + marks;
  }
  let tokens = 0;
  for (const [part] of text.matchAll(/\p{L}+|\p{N}|[^\s\p{L}\p{N}]/gu)) tokens += /^\p{L}/u.test(part) ? Math.ceil(part.length / 10) : 1;
  return tokens;
}

/**
 * Whether a prompt is written the way the family reads prompts: a tag list (several comma-separated parts, none a
 * long sentence) for CLIP families, prose (a sentence of eight words or more, not a bare tag list) for T5 ones.
 */
export function isInFamilyStyle(prompt: string, style: FamilyStyle): boolean {
  const parts = prompt.split(',').map((part) => part.trim()).filter((part) => part !== '');
  const words = (text: string) => text.split(/\s+/).filter((word) => word !== '').length;
  if (style.promptStyle === 'sentences') return words(prompt) >= 8 && parts.some((part) => words(part) >= 6);
  return parts.length >= 3 && parts.every((part) => words(part) <= 8) && !/[.!?]\s+\p{Lu}/u.test(prompt);
}
