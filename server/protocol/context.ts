// What the model sees: the working context, built fresh for every request from the entries the
// core keeps (separate from the transcript the user sees, seed 003). Seed 000: exactly one system
// message, first. Seed 001: the history must be well-formed, so roles alternate user/assistant.

import type { ChatMessage, ChatOptions } from './messages.ts';
import { formatCanonicalReply } from './metadata.ts';
import type { Metadata } from './metadata.ts';
import { SYSTEM_PROMPT, buildCompactionMessage, buildReminder } from './prompts.ts';
import type { CompactionInput } from './prompts.ts';

export type ContextEntry =
  /** `note` is formatUserNote output, rendered before the text. */
  | { kind: 'user'; text: string; note?: string }
  /** Rendered in canonical form, so the history always demonstrates the reply format. */
  | { kind: 'assistant'; text: string; metadata: Metadata }
  /** Compacted history, rendered as a user message: the user's words, then `text` (e.g. the prompt then). */
  | { kind: 'summary'; userWords: string[]; text: string };

export interface RenderContextOptions {
  /** The model's context window in tokens (Ollama's num_ctx). */
  numCtx: number;
  /** Tokens left free for the reply. Default 1024. */
  reserveTokens?: number;
  /** The system prompt (buildSystemPrompt with the image model's family); default SYSTEM_PROMPT. */
  systemPrompt?: string;
}

export const DEFAULT_RESERVE_TOKENS = 1024;
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** A rough token count (≈ 3.5 characters per token): enough to keep inside num_ctx without a tokenizer. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 3.5);
}

function estimateMessageTokens(message: ChatMessage): number {
  return estimateTokens(message.content) + MESSAGE_OVERHEAD_TOKENS;
}

type Turn =
  | { role: 'user'; parts: string[] }
  | { role: 'assistant'; texts: string[]; metadata: Metadata };

export function renderContext(entries: ContextEntry[], options: RenderContextOptions): ChatMessage[] {
  const turns: Turn[] = [];
  for (const entry of entries) {
    const previous = turns.at(-1);
    if (entry.kind === 'assistant') {
      // Two replies in a row cannot alternate: they become one reply holding both texts and the
      // latest metadata (the current state).
      if (previous?.role === 'assistant') {
        previous.texts.push(entry.text);
        previous.metadata = entry.metadata;
      } else {
        turns.push({ role: 'assistant', texts: [entry.text], metadata: entry.metadata });
      }
      continue;
    }
    const part = entry.kind === 'user' ? renderUserEntry(entry.text, entry.note) : renderSummary(entry.userWords, entry.text);
    if (previous?.role === 'user') previous.parts.push(part);
    else turns.push({ role: 'user', parts: [part] });
  }
  // A chat must open with a user turn; a leading assistant message (nothing to answer) is dropped.
  while (turns[0]?.role === 'assistant') turns.shift();

  const system: ChatMessage = { role: 'system', content: options.systemPrompt ?? SYSTEM_PROMPT };
  const budget = options.numCtx - (options.reserveTokens ?? DEFAULT_RESERVE_TOKENS);
  // The latest user message and what follows it are never dropped; older turns go first, a
  // user+assistant pair at a time so the remaining history still alternates. Turns are rendered
  // newest first and the walk stops at the first pair that does not fit, so a long history is
  // trimmed before it is rendered, not after.
  const latestUser = turns.findLastIndex((turn) => turn.role === 'user');
  // Pairs start at even positions; the pair holding the latest user message (or any after it) stays.
  const lastDroppable = latestUser - 2;
  // Stryker disable next-line ArrayDeclaration: every kept position is written before it is read
  const messages: ChatMessage[] = new Array<ChatMessage>(turns.length);
  let total = estimateMessageTokens(system);
  let start = 0;
  for (let index = turns.length - 1; index >= 0; index -= 1) {
    const message = renderTurn(turns[index] as Turn);
    messages[index] = message;
    total += estimateMessageTokens(message);
    if (index % 2 === 0 && index <= lastDroppable && total > budget) {
      start = index + 2;
      break;
    }
  }
  return [system, ...messages.slice(start)];
}

function renderTurn(turn: Turn): ChatMessage {
  if (turn.role === 'user') return { role: 'user', content: turn.parts.join('\n\n') };
  // Stryker disable next-line MethodExpression: a reply's text has no outer whitespace (the withholder never shows it), so blank means empty
  const text = turn.texts.filter((part) => part.trim() !== '').join('\n\n');
  return { role: 'assistant', content: formatCanonicalReply(text, turn.metadata) };
}

function renderUserEntry(text: string, note: string | undefined): string {
  return note === undefined || note === '' ? text : `${note}\n\n${text}`;
}

function renderSummary(userWords: string[], text: string): string {
  const lines = ['Summary of the earlier conversation. The user said:', ...userWords.map((words) => `- ${JSON.stringify(words)}`)];
  if (text !== '') lines.push(text);
  return lines.join('\n');
}

/**
 * The retry after a reply that could not be parsed: the turn's context, the failed reply (so the
 * model sees what it wrote), one format reminder, then the user's last message asked again.
 * The reminder is request-scoped and never stored, so it can never pile up (seed 000); extra system
 * messages in the input are dropped. The question is repeated because Ollama's Mistral template
 * renders system text only into a final user turn: a request ending in the reminder would reach the
 * model with neither the system prompt nor the reminder (the fake Ollama renders that template).
 */
export function buildReminderRequest(contextMessages: ChatMessage[], failedReply: string): ChatMessage[] {
  const context = contextMessages.filter((message, index) => message.role !== 'system' || index === 0);
  const question = context.findLast((message) => message.role === 'user');
  return [
    ...context,
    { role: 'assistant', content: failedReply },
    { role: 'system', content: buildReminder() },
    ...(question ? [question] : []),
  ];
}

/**
 * The metadata-only step: the turn's context, the reply's text as the assistant's message (without
 * the broken metadata), then the request for the JSON alone as a final user message. The Mistral
 * template renders system text only into a final user turn, so the request ends with one; the call's
 * `format` keeps the answer to the JSON, so the question need not be repeated. Never stored.
 */
export function buildMetadataRequest(contextMessages: ChatMessage[], replyText: string, reminder: string): ChatMessage[] {
  const context = contextMessages.filter((message, index) => message.role !== 'system' || index === 0);
  return [...context, { role: 'assistant', content: replyText }, { role: 'user', content: reminder }];
}

/**
 * Deterministic and short: the JSON of five fields is about 40 tokens plus the prompt (asked to stay
 * under 200 characters, ≈ 60 tokens). A reply cut by this cap fails to parse and the ladder goes on.
 */
export const METADATA_OPTIONS = { temperature: 0, num_predict: 256 } as const satisfies ChatOptions;

export interface CompactionRequestInput extends CompactionInput {
  latestUserText: string;
  /** As renderContext's. */
  systemPrompt?: string;
}

/**
 * The last retry: the whole history replaced by the deterministic compaction message. The final
 * user message is needed because Ollama's Mistral template renders system text only into the
 * last user turn; without one the compaction message would never reach the model.
 */
export function buildCompactionRequest({ userWords, prompt, settings, latestUserText, systemPrompt, style }: CompactionRequestInput): ChatMessage[] {
  return [
    { role: 'system', content: systemPrompt ?? SYSTEM_PROMPT },
    { role: 'system', content: buildCompactionMessage({ userWords, prompt, settings, ...(style ? { style } : {}) }) },
    { role: 'user', content: latestUserText },
  ];
}

/** Deterministic and short: the compaction reply should be the JSON and nothing else. */
export const COMPACTION_OPTIONS = { temperature: 0, num_predict: 512 } as const satisfies ChatOptions;

/** Every user message in order, without the notes: the skeleton that compaction keeps. */
export function collectUserWords(entries: ContextEntry[]): string[] {
  return entries.flatMap((entry) => {
    if (entry.kind === 'user') return [entry.text];
    if (entry.kind === 'summary') return entry.userWords;
    return [];
  });
}
