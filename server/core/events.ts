import type { TurnErrorCode } from './error-codes.ts';
// The typed events of one turn. Two thin renderers turn them into JSON (API) and HTML (page).
import type { ImageSkipReason, PaneView } from './pane.ts';

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
export interface ImageEvent {
  type: 'image';
  id: string;
  url: string;
  width: number;
  height: number;
  prompt: string;
  /** Always set by the core ('' when none was used). */
  negativePrompt?: string;
  seed?: number;
  steps?: number;
  cfg?: number;
  sampler?: string;
  model?: string;
  /** The prompt version it was made from, when its prompt was one. */
  promptVersion?: number;
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
  | { type: 'started'; conversationId: string; turnId: number; userTurnId: number | null }
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
  | { type: 'generation'; id: string; queued?: boolean }
  | { type: 'progress'; id: string; fraction?: number; step?: number; steps?: number; etaSeconds?: number }
  | ImageEvent
  | { type: 'error'; code: TurnErrorCode; message: string }
  | DoneEvent;

export type TurnEventType = TurnEvent['type'];
