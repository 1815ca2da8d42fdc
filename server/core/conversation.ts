import { z } from 'zod';
import type { ContextEntry, Metadata } from '../protocol/index.ts';
import type { TurnErrorCode } from './error-codes.ts';
import type { ImageSkipReason, PaneState, PinnableField, PromptSource, PromptSuggestion, PromptVersion, SettingsChange, SettingSuggestions } from './pane.ts';
import type { ImageCheck } from './image-check.ts';
import type { ImageRecord } from './image-record.ts';
import type { Settings } from './settings.ts';

// Two separate records: the transcript (what the user saw) and the working context (what the
// model sees). A reset clears the second and never touches the first.

/**
 * `running`: the reply is being written (its text is saved as it streams); `interrupted`: Easel stopped
 * before it ended (a crash, a power cut); `replaced`: Regenerate or Edit asked again, and the user saw this one.
 */
export const TURN_STATUSES = ['ok', 'error', 'stopped', 'reset', 'running', 'interrupted', 'replaced'] as const;
export const turnStatusSchema = z.enum(TURN_STATUSES);
export type TurnStatus = z.infer<typeof turnStatusSchema>;

/** A reply said its prompt was ready and no image was made: why, kept with the turn. */
export interface ImageNote {
  reason: ImageSkipReason;
  message: string;
}

export interface TranscriptTurn {
  id: number;
  role: 'user' | 'assistant';
  text: string;
  metadata?: Metadata;
  status: TurnStatus;
  error?: { code: TurnErrorCode; message: string };
  /** What the user was told about this reply (a value clamped into range, a reply cut short), shown again after a reload. */
  notices?: string[];
  images: ImageRecord[];
  imageNote?: ImageNote;
  createdAt: string;
}

export interface NewTurn {
  role: 'user' | 'assistant';
  text: string;
  metadata?: Metadata;
  status?: TurnStatus;
  error?: { code: TurnErrorCode; message: string };
  notices?: string[];
}

/** What the user changed since the model last heard of it; told in the next user message. */
export interface PendingNotes {
  promptEdited: boolean;
  settingsChanged: boolean;
  /** "This one" under a comparison: the prompt the user chose and the one it was compared with. */
  compared?: { chosen: string; over: string };
}

/** A conversation as stored: its pane (prompt, version, suggestion, settings, pins) and what else it keeps. */
export interface ConversationRecord extends PaneState {
  id: string;
  /** The title the user gave it; null means "from the first message". */
  title: string | null;
  createdAt: string;
  /** The time of the last message or image (not of prompt or settings edits). */
  updatedAt: string;
  pending: PendingNotes;
}

/** One row of the library, as the store reads it; the service derives the title and preview. */
export interface ConversationListing {
  id: string;
  title: string | null;
  /** The first user message (the title when none was given), or null. */
  firstMessage: string | null;
  /** The last message shown (user or assistant, not replaced), or null. */
  lastMessage: string | null;
  prompt: string;
  createdAt: string;
  updatedAt: string;
}

/**
 * How the working context changes: `edit` keeps the entries between `dropFront` and `dropBack` and appends
 * `append` (one row each, the common case); `replace` rewrites it whole (reset, compaction, import).
 */
export type ContextChange =
  | { kind: 'edit'; dropFront: number; dropBack: number; append: ContextEntry[] }
  | { kind: 'replace'; entries: ContextEntry[] };

export interface BeginTurnInput {
  /** Creates the conversation in the same transaction: this is its first message. */
  create?: { createdAt: string; settings: Settings; prompt: string; pinned: PinnableField[] };
  /** The user's message; absent for Regenerate (the same message is asked again). */
  user?: { text: string };
  /** Turns the new one replaces (Regenerate, Edit): marked `replaced`, kept in the transcript. */
  replaces: number[];
  context: ContextChange;
}

export interface StartedTurn {
  userTurnId: number | null;
  /** The assistant turn, stored as `running` until finishTurn. */
  turnId: number;
  /** The prompt version current as the message was sent: the one the model hears of. */
  promptVersion: number | null;
}

/** How a reply's end changes the pane (decided by core/pane.ts). */
export interface FinishPane {
  /** The model's prompt becomes the current version. */
  version?: { prompt: string };
  /** undefined leaves the pending suggestion as it is. */
  suggestion?: PromptSuggestion | null;
  settings: Settings;
  settingSuggestions: SettingSuggestions;
}

/** A whole conversation to store at once (an import): new ids everywhere. */
export interface ConversationImport {
  id: string;
  title: string | null;
  createdAt: string;
  updatedAt: string;
  prompt: string;
  settings: Settings;
  turns: Array<NewTurn & { createdAt: string; imageNote?: ImageNote }>;
  context: ContextEntry[];
  /** `turn` is an index into `turns`, or null for an image of the Generate button; `promptVersion` an index into `pane.versions`. */
  images: Array<Omit<ImageRecord, 'conversationId' | 'turnId' | 'url'> & { turn: number | null }>;
  /**
   * The prompt's versions (`parent` and `turn` are indexes, a parent before its child), the current one, pins
   * and waiting suggestions. Absent (an older export): the prompt becomes the first version.
   */
  pane?: {
    versions: Array<{ parent: number | null; prompt: string; source: PromptSource; turn: number | null; createdAt: string }>;
    current: number | null;
    suggestion: { prompt: string; turn: number } | null;
    pinned: PinnableField[];
    settingSuggestions: SettingSuggestions;
  };
}

/**
 * Where a page of the gallery ends, in its order (newest first: the time it was made, then the order it was
 * stored in, `seq`): the next page starts after it. The service hands it out as an opaque cursor.
 */
export interface ImageCursor {
  createdAt: string;
  seq: number;
}

/** Which images the gallery shows: every conversation's, newest first, narrowed by what is given. */
export interface ImageListQuery {
  /** Each word must appear in the prompt, in any case (as a word or a part of one). Empty: no condition. */
  words: readonly string[];
  conversationId?: string;
  /** The checkpoint the image server said it used (the image's `model`). */
  model?: string;
  /** Only images after this one in the order (the next page). */
  before?: ImageCursor;
  limit: number;
}

export interface ImageList {
  images: ImageRecord[];
  /** Where the next page starts; null when this page is the last. */
  next: ImageCursor | null;
}

/** What the gallery can be narrowed to: the conversations that have images (newest activity first) and the checkpoints images were made with. */
export interface ImageFacets {
  conversations: ConversationListing[];
  models: string[];
}

export interface ConversationStore {
  /** Creates an empty conversation (POST /api/conversations, scripts); a prompt becomes its first version. */
  createConversation(input: { id: string; createdAt: string; settings: Settings; prompt?: string; pinned?: PinnableField[] }): ConversationRecord;
  /** Undefined when there is none, or when its row cannot be read (logged). */
  getConversation(id: string): ConversationRecord | undefined;
  /** Newest activity first; `query` (the user's words) searches messages, titles and prompts. Unreadable rows are skipped. */
  listConversations(options?: { query?: string; limit?: number }): ConversationListing[];
  /** One conversation as the list shows it (its first and last message chosen by the same rule); undefined as getConversation. */
  getListing(id: string): ConversationListing | undefined;
  /** Null clears the title (back to "from the first message"). False when there is no such conversation. */
  renameConversation(id: string, title: string | null): boolean;
  /** Deletes the conversation and every record of it in one transaction; returns its images' file names and ids. */
  deleteConversation(id: string): { files: string[]; imageIds: string[] } | undefined;
  listTurns(conversationId: string): TranscriptTurn[];
  /** The last user message that was not replaced, and every turn after it (not replaced), oldest first. */
  listLastExchange(conversationId: string): TranscriptTurn[];
  /** The working context (cached in memory, written through). Callers must not change the array. */
  readContext(conversationId: string): readonly ContextEntry[];
  /**
   * Starts a turn in ONE transaction: creates the conversation when asked, stores the user's message in
   * the transcript, applies the context change (the message enters the working context), marks replaced
   * turns, inserts the assistant turn as `running`, and takes (clears) the pending notes.
   */
  beginTurn(conversationId: string, input: BeginTurnInput, at: string): StartedTurn;
  /** Saves the text shown so far of a running reply (as it streams). */
  saveReplyText(turnId: number, text: string): void;
  /**
   * Ends a turn in one transaction: the assistant turn's final text and status, the context change, how the
   * reply changes the pane (a model version, a suggestion, settings) and why no image was made.
   */
  finishTurn(
    conversationId: string,
    outcome: { turnId: number; turn: NewTurn; context: ContextChange; pane?: FinishPane; imageNote?: ImageNote },
    at: string,
  ): TranscriptTurn;
  /**
   * The user's own prompt as a new current version (its parent the current one); the next message tells the model
   * of it. `vision`: one the vision model wrote at the user's asking (Describe). Returns its id.
   */
  addUserPromptVersion(conversationId: string, prompt: string, at: string, source?: 'user' | 'vision'): number;
  /** "Use suggestion": the model's waiting prompt becomes the current version and the suggestion is answered; the model wrote it, so nothing new is told. */
  takeSuggestion(conversationId: string, suggestion: PromptSuggestion, at: string): number;
  /**
   * "This one" under a comparison: the chosen prompt becomes a new current version (source `user`, its parent
   * the current one) unless it is the current text already; the next message tells the model of the choice.
   */
  pickComparedPrompt(conversationId: string, compared: { chosen: string; over: string }, at: string): void;
  /** Makes an existing version current again (undo, redo); the model hears of it with the next message. */
  selectPromptVersion(conversationId: string, versionId: number): void;
  getPromptVersion(conversationId: string, versionId: number): PromptVersion | undefined;
  /** The versions changed from this one, oldest first. */
  listPromptVersionChildren(conversationId: string, versionId: number): PromptVersion[];
  /** Every version, oldest first. */
  listPromptVersions(conversationId: string): PromptVersion[];
  setSuggestion(conversationId: string, suggestion: PromptSuggestion | null): void;
  /** Settings, pins and suggestions at once; `tellModel`: the next message says the current settings. */
  setSettings(conversationId: string, change: SettingsChange, options: { tellModel: boolean }): void;
  addImage(image: ImageRecord): void;
  /** Keeps what the vision model found in a picture; answers it with its id. */
  addImageCheck(check: Omit<ImageCheck, 'id'>): ImageCheck;
  /** Every check of the conversation's pictures, oldest first. */
  listImageChecks(conversationId: string): ImageCheck[];
  /** Every image of the conversation, oldest first (also those made by the Generate button, turnId null). */
  listImages(conversationId: string): ImageRecord[];
  /** One image by its id, whichever conversation holds it (the starting image of a Vary); undefined when there is none. */
  getImage(id: string): ImageRecord | undefined;
  /** Every conversation's images for the gallery, newest first (one read). */
  listAllImages(query: ImageListQuery): ImageList;
  /** The conversations and checkpoints the gallery can be narrowed to (one read). */
  listImageFacets(): ImageFacets;
  /** Deletes one image's record in one transaction; answers it (its file, its conversation), undefined when there was none. The file is the caller's. */
  deleteImage(id: string): ImageRecord | undefined;
  /** Stores a whole conversation in one transaction (an import). */
  importConversation(conversation: ConversationImport): void;
  close(): void;
}
