import type { TurnErrorCode } from './error-codes.ts';
// The typed events of one turn. Two thin renderers turn them into JSON (API) and HTML (page).
import type { ConversationSummary } from './library.ts';
import type { ImageSkipReason, PaneView } from './pane.ts';
import type { UsedImageSettings } from './ports.ts';

export type RecoveryLevel = 'reminder' | 'compaction';

export interface MetadataEvent {
  type: 'metadata';
  prompt: string;
  generate_image: boolean;
  steps: number;
  cfg: number;
  seed: number;
  negative_prompt?: string;
  /** Things the user should know, e.g. a value clamped into range. */
  notices: string[];
}

export interface DoneEvent {
  type: 'done';
  /** Model calls this turn (1–4). */
  attempts: number;
  /** Lossless repairs applied to the accepted reply, e.g. 'trailing-text', 'coerced-number'. */
  repairs: string[];
  /**
   * The recovery step that produced the accepted reply ('clean': the first reply, repaired or not;
   * 'metadata': the metadata-only step, the first reply's text kept), or how the turn ended otherwise.
   */
  level: 'clean' | 'metadata' | 'reminder' | 'compaction' | 'reset' | 'error' | 'stopped';
  evalCount: number;
  tokensPerSecond: number;
  firstTokenMs: number | null;
}

/**
 * A finished image and what the backend really made it with: the same values as its stored record and its
 * PNG's `parameters` text. A setting the backend ignored and did not report is absent.
 */
export interface ImageEvent extends UsedImageSettings {
  type: 'image';
  id: string;
  url: string;
  width: number;
  height: number;
  prompt: string;
  /** Always set by the core ('' when none was used). */
  negativePrompt?: string;
  /** The prompt version it was made from, when its prompt was one. */
  promptVersion?: number;
  /** The image it was made from (Vary) and the strength it was changed with; absent: made from the prompt alone. */
  source?: { imageId: string; strength: number };
  /**
   * One of a batch (`count` > 1 in POST …/generations): its place (0-based) and the batch's size. The batch's first
   * image has the `generation` event's id; each other its own. Absent for a single image.
   */
  batch?: { index: number; count: number };
  /**
   * One of a comparison (`promptVersions` in POST …/generations): its comparison (the `generation` event's id),
   * its side (`a` the first version, `b` the second) and its place on that side; each side has the same seeds.
   */
  compare?: { id: string; side: 'a' | 'b'; index: number };
}

/** One side of a comparison: the prompt version it is made from, and that version's prompt. */
export interface CompareVersion {
  promptVersion: number;
  prompt: string;
}

/** The prompt pane and settings as the reply left them, as stored: the page shows exactly this. */
export type PaneEvent = { type: 'pane' } & PaneView;

/** The reply said its prompt was ready and no image was made: why, and what to do (kept with the turn). */
export interface ImageNotMadeEvent {
  type: 'image_not_made';
  reason: ImageSkipReason;
  message: string;
}

export type TurnEvent =
  /**
   * The turn is stored and begins (the user's message is in the transcript and the model's context):
   * `turnId` is the reply's turn, `userTurnId` the message's (null for Regenerate, which asks the same one again).
   */
  | { type: 'started'; conversationId: string; turnId: number; userTurnId: number | null; replaces: number[] }
  | { type: 'delta'; text: string }
  /** Nothing arrived from the model for a while before its first words: what it is waiting for. */
  | { type: 'status'; message: string }
  | { type: 'retry'; attempt: number; level: RecoveryLevel }
  /**
   * The reply's text is fine but its metadata was missing or broken: Easel asks the model for the
   * metadata alone. The text shown so far is the reply's final text; no delta follows for this attempt.
   */
  | { type: 'metadata_retry'; attempt: number }
  | MetadataEvent
  | PaneEvent
  | ImageNotMadeEvent
  | { type: 'reset'; message: string }
  /** `place`: while `queued`, its place in the image backend's line (1: the next one to start). */
  /**
   * An image (or a batch, or a comparison) begins: its id, its place in line when it waits; a comparison names its
   * two prompt versions (`compare`), so every page draws the two columns before the first picture.
   */
  | { type: 'generation'; id: string; queued?: boolean; place?: number; compare?: { a: CompareVersion; b: CompareVersion } }
  /**
   * How far the image is; while it still waits, its new place in line (`place` alone: 1 is next) each time the
   * line moves.
   */
  | { type: 'progress'; id: string; place?: number; fraction?: number; step?: number; steps?: number; etaSeconds?: number }
  | ImageEvent
  /**
   * The vision model checked a picture (Check): what it shows of the request, what it misses and why, and the
   * prompt it proposes (kept with the picture as check `checkId`).
   */
  | { type: 'critique'; imageId: string; checkId: number; model: string; matches: string[]; misses: Array<{ element: string; evidence: string }>; revisedPrompt: string }
  /** The vision model described a picture (Describe): the prompt it wrote, and in one line what it saw. */
  | { type: 'description'; prompt: string; subject: string }
  | { type: 'error'; code: TurnErrorCode; message: string }
  | DoneEvent;

export type TurnEventType = TurnEvent['type'];

/**
 * The text a reply shows after `event`, from the text it showed before: a delta adds to it, a retry starts it
 * again, a reset shows its message. The one rule for what is saved as it streams and what a snapshot shows.
 */
export function applyShownText(shown: string, event: TurnEvent): string {
  if (event.type === 'delta') return shown + event.text;
  if (event.type === 'retry') return '';
  if (event.type === 'reset') return event.message;
  return shown;
}

/** Whether `event` changes the text a reply shows. */
export function isShownTextEvent(event: TurnEvent): boolean {
  if (event.type === 'delta') return true;
  // Stryker disable next-line ConditionalExpression,EqualityOperator: only the reply saver asks; it writes at most once per interval and finishTurn writes the shown words, so a retry's or reset's text is stored either way
  return event.type === 'retry' || event.type === 'reset';
}

/**
 * What a page following a conversation receives after its snapshot: a reply's events with its `turnId` (null
 * when it failed before its turn was stored), an image's events with its `imageId` (and the reply's `turnId`
 * that asked for it, null for Generate), `pane` after any change of the pane (a reply's carries its `turnId`),
 * `title`, and `deleted`, the last.
 */
export type LiveEvent =
  | (TurnEvent extends infer E ? (E extends { turnId: number } ? E : E & { turnId?: number | null; imageId?: string }) : never)
  | { type: 'title'; title: string }
  /** One of its images was deleted (from the gallery, or the API): pages drop it. */
  | { type: 'image_deleted'; imageId: string }
  /** A reference image was added (dropped, pasted, or sent to the API): pages show it; GET the conversation for it. */
  | { type: 'reference_added'; imageId: string }
  /** The vision model began to check a picture (asked for, or `autoCheck`): its `critique` or `check_failed` follows. */
  | { type: 'check_started'; imageId: string; model: string }
  /** A check could not be made or failed: why, in the words its own stream would say (`code` as its error's or refusal's). */
  | { type: 'check_failed'; imageId: string; code: string; message: string }
  | { type: 'deleted' };

/** What every page's library list receives: a conversation created, renamed, updated (a message, an image), or deleted. */
export type LibraryEvent =
  | { type: 'created' | 'renamed' | 'updated'; conversation: ConversationSummary }
  | { type: 'deleted'; id: string };
