// Everything we say to the model. Kept short and example-driven: mistral:7b follows examples better
// than rules, so each rule that matters is shown once in a concrete reply.

import type { FamilyStyle } from './families.ts';
import { formatMetadataJson } from './metadata.ts';
import type { Metadata } from './metadata.ts';
import { changedPhrases, diffPrompts } from './prompt-diff.ts';

const EXAMPLE_SETTINGS = { steps: 20, cfg: 7, seed: -1 } as const;

const ASKING_EXAMPLE = `A cat in a hat! Let me ask a few questions:
- What kind of cat?
- What style of hat?
---
${formatMetadataJson({ prompt: '', generate_image: false, ...EXAMPLE_SETTINGS })}`;

function formatReadyExample(prompt: string): string {
  return `Perfect! Generating your image now.
---
${formatMetadataJson({ prompt, generate_image: true, ...EXAMPLE_SETTINGS })}`;
}

/**
 * How the family's text encoder wants the prompt written, in a few lines the model can follow: tags for CLIP
 * families (within its 75 tokens), booru tags after the quality tags for Pony and Illustrious, sentences for T5.
 * `settings: false` leaves out the line on CFG, for a model that writes no settings (the vision prompts).
 */
export function describeFamily(style: FamilyStyle, { settings = true }: { settings?: boolean } = {}): string {
  const lines = [`THE IMAGE MODEL is ${style.label}. Write the prompt the way it reads prompts:`];
  if (style.promptStyle === 'tags') {
    lines.push('- Comma-separated tags and short phrases, the subject first, then details, style, lighting. No full sentences.');
  } else if (style.promptStyle === 'booru') {
    lines.push(`- Start with the quality tags ${JSON.stringify(style.qualityTags)}, then Danbooru-style tags (e.g. 1girl, solo, cat ears, outdoors), comma-separated. No sentences.`);
  } else {
    lines.push('- One to three plain, descriptive sentences in natural English: subject, setting, light, style. No tag lists, no weights like (word:1.2).');
  }
  lines.push(
    style.encoder === 'clip'
      ? `- Keep it within about ${style.tokenBudget} tokens (roughly 40 words): the text encoder reads no further.`
      : `- Detail helps: it reads up to about ${style.tokenBudget} tokens.`,
  );
  if (!style.negativePrompt) lines.push('- It ignores negative prompts: say what you want instead of what to avoid.');
  if (settings && !style.cfgMatters) lines.push(`- It ignores classic CFG: keep cfg at ${style.cfg}.`);
  return lines.join('\n');
}

/** How long the prompt may be, as every message to the model says it: a family's encoder decides. */
export function describePromptLength(style: FamilyStyle | undefined, clip = `within about ${style?.tokenBudget ?? 75} tokens`): string {
  if (style === undefined) return 'under 200 characters';
  return style.encoder === 'clip' ? clip : 'a few sentences';
}

/** The system prompt; with the family of the checkpoint that paints, the prompt style it needs and an example in it. */
export function buildSystemPrompt(style?: FamilyStyle): string {
  const ready = formatReadyExample(style?.example ?? 'a tabby cat wearing a blue wizard hat');
  const length = describePromptLength(style, 'within the token budget below');
  return `You are Easel, a friendly assistant who helps the user write a prompt for an image generator. Chat briefly: ask a few short questions when the request is vague, then write the image prompt.

FORMAT. End EVERY message with ---\\n{JSON}:
1. Write your conversational text first. It goes BEFORE the delimiter.
2. Then a line containing only ---
3. Then the JSON on one line: {"prompt": string, "generate_image": boolean, "steps": integer, "cfg": number, "seed": integer}
Nothing comes after the JSON. ALWAYS include the delimiter and JSON, even if just asking questions.

JSON fields:
- prompt: the image prompt, ${length}; "" while you are still asking questions.
- generate_image: true only when the prompt is ready and the user wants the image now; otherwise false.
- steps, cfg, seed (-1 means random): keep the current values unless the user asks to change them.
${style === undefined ? '' : `\n${describeFamily(style)}\n`}
Example, asking questions:
${ASKING_EXAMPLE}

Example, ready:
${ready}

Do NOT (wrong examples):
- JSON without the delimiter. Wrong: Here it is! {"prompt": "a red fox", ...}
- No JSON at all. Wrong: What colour should the fox be?
- JSON in the middle. Wrong: ---\\n{"prompt": "a red fox", ...}\\nDo you like it?

The user's edits:
- A user message may start with [The user edited the prompt to: "..."]. The user rewrote the prompt by hand: build on that prompt, not on your previous one, and keep their changes.
- A user message may start with [Current settings: ...]. Use those values in the JSON unless the user asks to change them.`;
}

/** The system prompt when nothing is known of the image model. */
export const SYSTEM_PROMPT = buildSystemPrompt();

/** The format reminder sent (as a system message) after a reply that could not be parsed. */
export function buildReminder(): string {
  const example = `A tabby cat in a wizard hat, got it! Should the hat be blue or purple?
---
${formatMetadataJson({ prompt: 'a tabby cat wearing a wizard hat', generate_image: false, ...EXAMPLE_SETTINGS })}`;
  return `Please end your response with \`---\` followed by JSON using this format:

${example}

Write your reply again in this format: your text, then a line with only ---, then the JSON with all five fields.`;
}

export interface MetadataReminderInput {
  /** The current image prompt ('' when there is none yet), possibly edited by the user. */
  prompt: string;
  settings: GenerationSettings;
  /** The family of the checkpoint that paints, when known: the prompt's length is said as the system prompt says it. */
  style?: FamilyStyle;
}

/**
 * The metadata-only request's last message, sent as the user's turn: Ollama's Mistral template renders
 * the system prompt only into a final user turn, so the request must end with one. The call's `format`
 * (the metadata JSON Schema) makes the model write nothing but the JSON.
 */
export function buildMetadataReminder({ prompt, settings, style }: MetadataReminderInput): string {
  const example: Metadata = { prompt, generate_image: false, ...pickSettings(settings) };
  return [
    'Your reply above is missing its JSON. Do not write your reply again: write ONLY the JSON object for it, on one line, with all five fields.',
    `Current prompt: ${prompt === '' ? '(none yet)' : JSON.stringify(prompt)}`,
    `Current settings: ${describeSettings(settings)} (keep them unless the user asked to change them)`,
    `prompt: the image prompt (${describePromptLength(style)}) from what the user wants and your reply, or "" while you are still asking questions. generate_image: true only when the prompt is ready and the user wants the image now.`,
    `For example: ${formatMetadataJson(example)}`,
  ].join('\n');
}

export interface GenerationSettings {
  steps: number;
  cfg: number;
  seed: number;
}

export interface CompactionInput {
  /** Every user message of the conversation, oldest first, verbatim. */
  userWords: string[];
  /** The current image prompt ('' when there is none yet). */
  prompt: string;
  settings: GenerationSettings;
  /** As MetadataReminderInput's. */
  style?: FamilyStyle;
}

/**
 * The compacted context: deterministic extraction, no LLM summary. Seed 003: a summary can drop
 * facts, while the user's own words, the prompt and the settings are the skeleton to keep.
 */
export function buildCompactionMessage({ userWords, prompt, settings, style }: CompactionInput): string {
  const words = userWords.length > 0 ? userWords.map((words) => `- ${JSON.stringify(words)}`).join('\n') : '- (nothing yet)';
  const example: Metadata = { prompt, generate_image: false, ...pickSettings(settings) };
  return [
    'User wants:',
    words,
    `Current prompt: ${prompt === '' ? '(none yet)' : JSON.stringify(prompt)}`,
    `Current settings: ${describeSettings(settings)}`,
    `Write the image prompt (${describePromptLength(style)}) from what the user wants, keeping the details of the current prompt.`,
    `Respond with ONLY JSON (no conversational text): ${formatMetadataJson(example)}`,
  ].join('\n');
}

export interface UserNoteInput {
  /** The prompt as the user edited it by hand since the last reply. */
  editedPrompt?: string;
  settings?: GenerationSettings & { width?: number; height?: number; negativePrompt?: string };
  /** Two versions of the prompt made on the same seeds, and the one the user picked ("This one"). */
  compared?: { chosen: string; over: string };
}

/** The bracketed lines put before a user message so the model builds on the user's own edits. */
export function formatUserNote({ editedPrompt, settings, compared }: UserNoteInput): string | undefined {
  const lines: string[] = [];
  if (compared !== undefined) lines.push(formatComparedNote(compared.chosen, compared.over));
  // The comparison's note names the prompt chosen: said once.
  if (editedPrompt !== undefined && editedPrompt !== compared?.chosen) lines.push(`[The user edited the prompt to: ${JSON.stringify(editedPrompt)}]`);
  if (settings !== undefined) {
    const parts = [describeSettings(settings)];
    if (settings.width !== undefined && settings.height !== undefined) parts.push(`size ${settings.width}x${settings.height}`);
    if (settings.negativePrompt !== undefined && settings.negativePrompt !== '') {
      parts.push(`negative prompt ${JSON.stringify(settings.negativePrompt)}`);
    }
    lines.push(`[Current settings: ${parts.join(', ')}]`);
  }
  return lines.length > 0 ? lines.join('\n') : undefined;
}

/** Which of two prompts made on the same seeds the user chose, and the words that differed. */
function formatComparedNote(chosen: string, over: string): string {
  const diff = diffPrompts(chosen, over);
  const quote = (phrases: string[]) => phrases.map((phrase) => JSON.stringify(phrase)).join(', ');
  const mine = changedPhrases(diff.a);
  const theirs = changedPhrases(diff.b);
  const parts = [...(mine.length > 0 ? [`the chosen one has ${quote(mine)}`] : []), ...(theirs.length > 0 ? [`the other had ${quote(theirs)}`] : [])];
  const difference = parts.length > 0 ? parts.join('; ') : 'only spacing';
  return `[The user compared two prompts on the same seeds and chose: ${JSON.stringify(chosen)} over ${JSON.stringify(over)} (the difference: ${difference})]`;
}

export const RESET_MESSAGE = "I'm having trouble understanding the format. Let's start fresh.";

/** Shown when an accepted compaction reply has no text and the failed attempts showed none either. */
export const NEUTRAL_FALLBACK_TEXT = 'Here is the prompt so far.';

function describeSettings(settings: GenerationSettings): string {
  return `steps ${settings.steps}, cfg ${settings.cfg}, seed ${settings.seed}`;
}

function pickSettings(settings: GenerationSettings): GenerationSettings {
  return { steps: settings.steps, cfg: settings.cfg, seed: settings.seed };
}
