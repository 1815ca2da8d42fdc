import type { ContextEntry, Metadata } from '../protocol/index.ts';
import type { Settings } from './settings.ts';

// Two separate records: the transcript (what the user saw) and the working context (what the
// model sees). A reset clears the second and never touches the first.

export type TurnStatus = 'ok' | 'error' | 'stopped' | 'reset';

export interface ImageRecord {
  id: string;
  conversationId: string;
  turnId: number | null;
  file: string;
  url: string;
  prompt: string;
  negativePrompt: string;
  /** What the backend really used; null when it ignored the value and did not report it. */
  steps: number | null;
  cfg: number | null;
  seed: number | null;
  sampler: string | null;
  width: number;
  height: number;
  model: string | null;
  createdAt: string;
}

export interface TranscriptTurn {
  id: number;
  role: 'user' | 'assistant';
  text: string;
  metadata?: Metadata;
  status: TurnStatus;
  error?: { code: string; message: string };
  images: ImageRecord[];
  createdAt: string;
}

export interface NewTurn {
  role: 'user' | 'assistant';
  text: string;
  metadata?: Metadata;
  status?: TurnStatus;
  error?: { code: string; message: string };
}

/** What the user changed since the model last heard of it; told in the next user message. */
export interface PendingNotes {
  promptEdited: boolean;
  settingsChanged: boolean;
}

export interface ConversationRecord {
  id: string;
  createdAt: string;
  updatedAt: string;
  prompt: string;
  settings: Settings;
  pending: PendingNotes;
  context: ContextEntry[];
}

export interface ConversationStore {
  createConversation(input: { id: string; createdAt: string; settings: Settings }): ConversationRecord;
  getConversation(id: string): ConversationRecord | undefined;
  listTurns(conversationId: string): TranscriptTurn[];
  /** Appends the user's message and takes (clears) the pending notes, in one transaction. */
  beginTurn(conversationId: string, turn: NewTurn, at: string): { turn: TranscriptTurn; conversation: ConversationRecord };
  /**
   * Records the outcome of a turn in one transaction. `prompt` and `settings` are written only when
   * the user did not change them while the reply was streaming (their edit wins).
   */
  finishTurn(
    conversationId: string,
    outcome: { turn: NewTurn; context: ContextEntry[]; prompt?: string; settings?: Settings },
    at: string,
  ): TranscriptTurn;
  setPrompt(conversationId: string, prompt: string, at: string): void;
  setSettings(conversationId: string, settings: Settings, at: string): void;
  addImage(image: ImageRecord): void;
  /** Every image of the conversation, oldest first (also those made by the Generate button, turnId null). */
  listImages(conversationId: string): ImageRecord[];
  close(): void;
}
