import type { ContextEntry, Metadata } from '../protocol/index.ts';
import type { ContextChange } from './conversation.ts';

/**
 * The change that turns the stored working context `before` into `after`: the entries `after` kept from
 * `before` (the same objects, in one run) plus what it appended, so the store writes only the new rows.
 * When `after` is not built that way (a reset, a compaction, a copy), it is written whole: never wrong, only slower.
 */
export function describeContextChange(before: readonly ContextEntry[], after: readonly ContextEntry[]): ContextChange {
  // Stryker disable next-line ConditionalExpression,BlockStatement: indexOf(undefined) is −1, and the next branch gives the same two answers
  if (after.length === 0) {
    return before.length === 0 ? { kind: 'edit', dropFront: 0, dropBack: 0, append: [] } : { kind: 'replace', entries: [] };
  }
  const start = before.indexOf(after[0] as ContextEntry);
  if (start === -1) {
    // Nothing kept from the front: only appended, if every entry of `before` went away and none was kept.
    return before.length === 0 ? { kind: 'edit', dropFront: 0, dropBack: 0, append: [...after] } : { kind: 'replace', entries: [...after] };
  }
  let kept = 0;
  // Stryker disable next-line ConditionalExpression,EqualityOperator,LogicalOperator: past either end one side is undefined, which equals no entry: the run stops at the same place
  while (start + kept < before.length && kept < after.length && before[start + kept] === after[kept]) kept++;
  return { kind: 'edit', dropFront: start, dropBack: before.length - start - kept, append: after.slice(kept) };
}

/**
 * The working context before the user's last message, for Edit (that message is replaced): the entries up
 * to the last user entry with this text when only replies follow it, with that entry's note (the user's
 * prompt or settings changes it told, which must reach the model with the edited message). Otherwise (a
 * compaction or reset since) the context without its trailing replies, and no note.
 */
export function rewindToBefore(context: readonly ContextEntry[], userText: string): { context: ContextEntry[]; note: string | undefined } {
  const withoutReplies = dropTrailingReplies(context);
  const last = withoutReplies.at(-1);
  if (last?.kind === 'user' && last.text === userText) return { context: withoutReplies.slice(0, -1), note: last.note };
  return { context: withoutReplies, note: undefined };
}

/** The working context without the replies after its last user message: what Regenerate asks again. */
export function dropTrailingReplies(context: readonly ContextEntry[]): ContextEntry[] {
  let end = context.length;
  // Stryker disable next-line ConditionalExpression,EqualityOperator: context[-1] is undefined, not a reply
  while (end > 0 && context[end - 1]?.kind === 'assistant') end--;
  return context.slice(0, end);
}

/** A Retry re-sends the unanswered last message: reuse it instead of asking twice. */
export function appendUserEntry(context: ContextEntry[], entry: Extract<ContextEntry, { kind: 'user' }>): ContextEntry[] {
  const last = context.at(-1);
  if (last?.kind === 'user' && last.text === entry.text) {
    const note = [last.note, entry.note].filter(Boolean).join('\n') || undefined;
    return [...context.slice(0, -1), { kind: 'user', text: entry.text, ...(note ? { note } : {}) }];
  }
  return [...context, entry];
}

/** Metadata as zod reads it, `negative_prompt?: string | undefined`: the record has the key or not. */
export function toMetadata(read: Omit<Metadata, 'negative_prompt'> & { negative_prompt?: string | undefined }): Metadata {
  const { negative_prompt, ...metadata } = read;
  return { ...metadata, ...(negative_prompt !== undefined ? { negative_prompt } : {}) };
}

/** A context entry as zod reads it (an import, a stored row): a key holding undefined is left out. */
export function toContextEntry(
  read:
    | { kind: 'user'; text: string; note?: string | undefined }
    | { kind: 'assistant'; text: string; metadata: Parameters<typeof toMetadata>[0] }
    | { kind: 'summary'; userWords: string[]; text: string },
): ContextEntry {
  if (read.kind === 'user') return { kind: 'user', text: read.text, ...(read.note !== undefined ? { note: read.note } : {}) };
  // Stryker disable next-line ConditionalExpression: zod leaves an absent optional key out, so the entry already has its final shape
  if (read.kind === 'assistant') return { kind: 'assistant', text: read.text, metadata: toMetadata(read.metadata) };
  return read;
}
