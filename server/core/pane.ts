// The one rule for the prompt pane and the settings: what the user typed is theirs, the model suggests.
// Pure decisions; the service reads the stored state, asks these, and stores the answer in one transaction.
import { z } from 'zod';
import { FAMILY_STYLES, fitSizeToFamily, resolveFamily, type FamilyStyle, type ImageFamily, type ImageSize, type Metadata } from '../protocol/index.ts';
import type { Settings, SettingsPatch } from './settings.ts';

/** The settings the model proposes in its metadata: these can be pinned by hand. */
export const PINNABLE_FIELDS = ['steps', 'cfg', 'seed', 'negativePrompt'] as const;
export type PinnableField = (typeof PINNABLE_FIELDS)[number];

export function isPinnableField(value: unknown): value is PinnableField {
  return typeof value === 'string' && (PINNABLE_FIELDS as readonly string[]).includes(value);
}

/** Values the model proposed for pinned fields, differing from the user's. */
export type SettingSuggestions = Partial<Pick<Settings, PinnableField>>;

/**
 * Who made a version: `user` (typed, Use these settings), `model` (a reply's prompt applied), `suggestion`
 * (the user took the model's waiting prompt), `earlier` (the prompt a conversation had before versions were
 * kept, or an imported one), `vision` (the vision model's: a check's revised prompt taken, or a description).
 */
export const PROMPT_SOURCES = ['user', 'model', 'suggestion', 'earlier', 'vision'] as const;
export const promptSourceSchema = z.enum(PROMPT_SOURCES);
export type PromptSource = z.infer<typeof promptSourceSchema>;

export interface PromptVersion {
  id: number;
  /** The version it was changed from: undo goes back to it. */
  parentId: number | null;
  prompt: string;
  source: PromptSource;
  /** The reply whose prompt it is (model, suggestion). */
  turnId: number | null;
  createdAt: string;
}

/**
 * A prompt waiting beside the user's: the model's, proposed while the user edited during its reply (`turnId`), or
 * the vision model's, revised after it checked a picture (`imageId`, no turn). Taken, it becomes a version of
 * source `suggestion` or `vision`; the user's prompt is never replaced without that.
 */
export type PromptSuggestion = { prompt: string; turnId: number; imageId?: undefined } | { prompt: string; turnId: null; imageId: string };

/** The source of the version a suggestion becomes when it is taken. */
export function sourceOfSuggestion(suggestion: PromptSuggestion): PromptSource {
  return suggestion.imageId === undefined ? 'suggestion' : 'vision';
}

/** The prompt pane and the settings as stored: the page shows exactly this, and images are made from it. */
export interface PaneState {
  /** Raised by every change of the pane, whoever made it: a change sent from an older revision is refused as stale. */
  paneRevision: number;
  prompt: string;
  /** The current version; null while the prompt was never set. */
  promptVersion: number | null;
  suggestion: PromptSuggestion | null;
  settings: Settings;
  /** Fields set by hand: the model's values never overwrite them. */
  pinned: PinnableField[];
  settingSuggestions: SettingSuggestions;
}

/** The family of the checkpoint that paints, as decided for the page and the API: what the prompt is written for. */
export interface FamilyView {
  id: ImageFamily;
  label: string;
  /** `setting`: chosen by the user; `checkpoint`: read from the checkpoint's name; `fallback`: nothing said, SD 1.5 assumed. */
  source: 'setting' | 'checkpoint' | 'fallback';
  promptStyle: FamilyStyle['promptStyle'];
  encoder: FamilyStyle['encoder'];
  /** What the prompt counter counts against. */
  tokenBudget: number;
  negativePrompt: boolean;
  cfgMatters: boolean;
  /** The aspect presets. */
  buckets: readonly ImageSize[];
}

/** The pane with what undo and redo would do: what the page and the API show. */
export interface PaneView extends PaneState {
  canUndo: boolean;
  canRedo: boolean;
  family: FamilyView;
}

/** The checkpoint that will paint: the one chosen, else the server's current one. */
export function describeFamily(settings: Pick<Settings, 'family' | 'checkpoint'>, serverCheckpoint: string | null): FamilyView {
  const { style, source } = resolveFamily(settings.family, settings.checkpoint ?? serverCheckpoint);
  const { id, label, promptStyle, encoder, tokenBudget, negativePrompt, cfgMatters, buckets } = style;
  return { id, label, source, promptStyle, encoder, tokenBudget, negativePrompt, cfgMatters, buckets };
}

/** How a reply changes the pane. */
export interface ReplyPaneChange {
  /** The model's prompt becomes the current version (its parent is the current one). */
  version?: { prompt: string };
  /** The pending suggestion after the reply; undefined leaves it as it is. */
  suggestion?: PromptSuggestion | null;
  settings: Settings;
  settingSuggestions: SettingSuggestions;
}

/**
 * The reply's metadata meets the pane. An edit the model saw (the version current when the message was sent,
 * `seenVersion`) is superseded by its prompt, which was asked to keep the user's edits; a change the user made
 * while the reply was written wins, and the model's prompt waits beside it as a suggestion. Unpinned settings
 * follow the model; a pinned one keeps the user's value and a different proposal becomes its suggestion.
 */
export function decideReplyPane(state: PaneState, metadata: Metadata, seenVersion: number | null, turnId: number): ReplyPaneChange {
  const change: ReplyPaneChange = { settings: { ...state.settings }, settingSuggestions: { ...state.settingSuggestions } };
  const proposed = metadata.prompt;
  if (proposed !== '') {
    if (proposed === state.prompt) change.suggestion = null;
    else if (state.promptVersion !== seenVersion) change.suggestion = { prompt: proposed, turnId };
    else {
      change.version = { prompt: proposed };
      change.suggestion = null;
    }
  }
  const proposals: SettingSuggestions = { steps: metadata.steps, cfg: metadata.cfg, seed: metadata.seed };
  // An empty or absent negative prompt proposes nothing: the model rarely writes one.
  if (metadata.negative_prompt) proposals.negativePrompt = metadata.negative_prompt;
  for (const field of PINNABLE_FIELDS) {
    const value = proposals[field];
    if (value === undefined) continue;
    if (!state.pinned.includes(field)) {
      (change.settings as Record<PinnableField, unknown>)[field] = value;
      delete change.settingSuggestions[field];
    } else if (value !== state.settings[field]) {
      (change.settingSuggestions as Record<PinnableField, unknown>)[field] = value;
    } else {
      delete change.settingSuggestions[field];
    }
  }
  return change;
}

/** The pane after a reply's change, as it will be stored. */
export function applyReplyPane(state: PaneState, change: ReplyPaneChange): Omit<PaneState, 'promptVersion' | 'paneRevision'> {
  return {
    prompt: change.version ? change.version.prompt : state.prompt,
    suggestion: change.suggestion === undefined ? state.suggestion : change.suggestion,
    settings: change.settings,
    pinned: state.pinned,
    settingSuggestions: change.settingSuggestions,
  };
}

/** Why a reply whose prompt was ready made no image. */
export const IMAGE_SKIP_REASONS = ['no_backend', 'suggestion_pending', 'auto_off'] as const;
export const imageSkipReasonSchema = z.enum(IMAGE_SKIP_REASONS);
export type ImageSkipReason = z.infer<typeof imageSkipReasonSchema>;

/** Whether pressing Generate helps after that reason: without a backend it cannot. */
export function isGenerateOffered(reason: ImageSkipReason): boolean {
  return reason !== 'no_backend';
}

export type ImageDecision = { kind: 'none' } | { kind: 'make' } | { kind: 'skip'; reason: ImageSkipReason; message: string };

const SKIP_MESSAGES: Record<ImageSkipReason, string> = {
  no_backend:
    'The assistant marked the prompt ready, but no image backend is configured, so no image was made. Start Easel with --image-url pointing at your image server to make pictures.',
  suggestion_pending:
    'The assistant marked its prompt ready, but you changed the prompt while it was answering: yours is kept and its version waits beside it, so no image was made. Choose “Use suggestion” or “Keep mine”, then press Generate.',
  auto_off: 'The prompt is ready. “Generate automatically” is off, so no image was made: press Generate to make it.',
};

/**
 * After a reply that says the prompt is ready (`generate_image`): make the image from the pane as it now
 * stands, or say why none is made. A reply that is not ready, or has no prompt, asks for nothing.
 */
export function decideReplyImage(metadata: Metadata, after: Omit<PaneState, 'promptVersion' | 'paneRevision'>, imagesConfigured: boolean): ImageDecision {
  if (!metadata.generate_image || metadata.prompt.trim() === '') return { kind: 'none' };
  const skip = (reason: ImageSkipReason): ImageDecision => ({ kind: 'skip', reason, message: SKIP_MESSAGES[reason] });
  if (!imagesConfigured) return skip('no_backend');
  if (after.suggestion !== null) return skip('suggestion_pending');
  if (!after.settings.autoGenerate) return skip('auto_off');
  if (after.prompt.trim() === '') return { kind: 'none' };
  return { kind: 'make' };
}

/** How the user's settings change the pane's settings, pins and suggestions. */
export interface SettingsChange {
  settings: Settings;
  pinned: PinnableField[];
  settingSuggestions: SettingSuggestions;
}

/**
 * Values set by hand are pinned and their suggestions dropped (the user decided). Unpinning a field lets it
 * follow the model again: it takes the model's waiting value at once.
 */
export function applyUserSettings(
  state: Pick<PaneState, 'settings' | 'pinned' | 'settingSuggestions'>,
  patch: SettingsPatch,
  unpin: readonly PinnableField[] = [],
  serverCheckpoint: string | null = null,
): SettingsChange {
  const settings: Settings = { ...state.settings, ...patch };
  applyFamilyDefaults(state, settings, patch, serverCheckpoint);
  const pinned = new Set(state.pinned);
  const settingSuggestions: SettingSuggestions = { ...state.settingSuggestions };
  for (const field of PINNABLE_FIELDS) {
    if (!(field in patch)) continue;
    pinned.add(field);
    delete settingSuggestions[field];
  }
  for (const field of unpin) {
    pinned.delete(field);
    const waiting = settingSuggestions[field];
    if (waiting !== undefined) (settings as Record<PinnableField, unknown>)[field] = waiting;
    delete settingSuggestions[field];
  }
  return { settings, pinned: PINNABLE_FIELDS.filter((field) => pinned.has(field)), settingSuggestions };
}

/**
 * A new family (another checkpoint, or the user's family choice) brings the settings it was trained for: its
 * steps and CFG where the user has not pinned them, and, when the size is one of the old family's own (not
 * one the user typed), its bucket nearest that aspect ratio; never what this very change sets.
 */
function applyFamilyDefaults(state: Pick<PaneState, 'settings' | 'pinned'>, settings: Settings, patch: SettingsPatch, serverCheckpoint: string | null): void {
  const before = describeFamily(state.settings, serverCheckpoint).id;
  const after = describeFamily(settings, serverCheckpoint).id;
  if (before === after) return;
  const style = FAMILY_STYLES[after];
  for (const field of ['steps', 'cfg'] as const) {
    if (!(field in patch) && !state.pinned.includes(field)) settings[field] = style[field];
  }
  const oldBuckets = FAMILY_STYLES[before].buckets;
  const isBucket = oldBuckets.some((bucket) => bucket.width === settings.width && bucket.height === settings.height);
  if (isBucket && !('width' in patch) && !('height' in patch)) Object.assign(settings, fitSizeToFamily(settings, style));
}

/** On the empty page every value the user changed from the defaults was set by hand. */
export function pinChangedFrom(defaults: Settings, settings: Settings): PinnableField[] {
  return PINNABLE_FIELDS.filter((field) => settings[field] !== defaults[field]);
}

/** Undo goes back to the version this one was changed from. */
export function findUndoVersion(current: PromptVersion | undefined): number | null {
  return current?.parentId ?? null;
}

/** Redo goes forward to the newest version changed from this one (the newest branch, as editors do). */
export function findRedoVersion(children: readonly PromptVersion[]): number | null {
  let newest: PromptVersion | undefined;
  // Stryker disable next-line EqualityOperator: version ids are unique
  for (const child of children) if (!newest || child.id > newest.id) newest = child;
  return newest?.id ?? null;
}
