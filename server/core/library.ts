// The library's rules: how a conversation is titled and previewed, and what a person is told when the
// store cannot save something.
import type { ConversationListing } from './conversation.ts';
import type { StorageError } from './errors.ts';
import type { TurnErrorCode } from './error-codes.ts';
import { toOneLine } from './text.ts';

export interface ConversationSummary {
  id: string;
  title: string;
  createdAt: string;
  /** The time of the last message or image. */
  updatedAt: string;
  /** The start of the last message shown, or '' for a conversation without messages. */
  preview: string;
}

const DERIVED_TITLE_CHARS = 60;
const PREVIEW_CHARS = 140;
export const UNTITLED = 'New conversation';

/** A given title wins; else the first message's first line, else the prompt (a Generate-first conversation). */
export function describeConversation(listing: ConversationListing): ConversationSummary {
  const title = listing.title ?? (shorten(listing.firstMessage ?? '', DERIVED_TITLE_CHARS) || shorten(listing.prompt, DERIVED_TITLE_CHARS) || UNTITLED);
  return {
    id: listing.id,
    title,
    createdAt: listing.createdAt,
    updatedAt: listing.updatedAt,
    preview: shorten(listing.lastMessage ?? '', PREVIEW_CHARS, false),
  };
}

/** One line, whitespace collapsed, cut at a word boundary with an ellipsis. */
export function shorten(text: string, max: number, firstLineOnly = true): string {
  // Stryker disable next-line StringLiteral: split always gives a first element, so the ?? text is never read
  const source = firstLineOnly ? (text.trim().split('\n')[0] ?? '') : text;
  // A title or preview taken from a message obeys what a typed title does: no controls that change how it reads.
  const line = toOneLine(source).replace(/\s+/g, ' ').trim();
  if (line.length <= max) return line;
  const cut = line.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  // Stryker disable next-line MethodExpression: whitespace is collapsed and trimmed first, so a cut ends with a space only under a bound of 5
  return `${(space > max / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** What the user was doing when the store failed: it decides what they are told to do next. */
export type StorageAction = 'message' | 'reply' | 'change' | 'import' | 'delete' | 'read' | 'image';

const STORAGE_CODES: Record<StorageError['code'], TurnErrorCode> = {
  full: 'storage_full',
  read_only: 'storage_read_only',
  gone: 'storage_failed',
  corrupt: 'storage_failed',
  failed: 'storage_failed',
};

/**
 * The `error` event (and the HTTP message) for a failed write: what happened, where, and what to do.
 * The transaction was rolled back, so the message can say exactly what was and was not kept.
 */
export function describeStorageFailure(error: StorageError, action: StorageAction): { code: TurnErrorCode; message: string } {
  const where = error.location;
  const causes: Record<StorageError['code'], string> = {
    full: `the disk holding ${where} is full`,
    read_only: `${where} cannot be written (a read-only disk, or Easel may not write there)`,
    gone: `the database file ${where} was ${error.replaced ? 'replaced by another file' : 'deleted'} while Easel was running, so Easel stopped writing to it`,
    corrupt: `the database ${where} is damaged (the details are in the server log)`,
    failed: `the database ${where} reported an error (the details are in the server log)`,
  };
  const fixes: Record<StorageError['code'], string> = {
    full: 'Free some disk space',
    read_only: 'Check that Easel may write to its data folder (--data-dir)',
    gone:
      error.recoveredTo === undefined
        ? 'Put the file back where it was, or stop Easel and start it again to begin a new library there'
        : error.replaced
          ? `Stop Easel and start it again to use the file now at ${where}; to keep what Easel had instead, move ${error.recoveredTo} (a copy of everything it had) there first`
          : `Stop Easel, move ${error.recoveredTo} (a copy of everything it had) to ${where} and start Easel again`,
    corrupt: `Stop Easel, move ${where} aside or restore it from a backup, and start Easel again`,
    failed: 'Check the server log and the disk',
  };
  const fix = fixes[error.code];
  const outcome: Record<StorageAction, string> = {
    message: `Nothing was saved, and your message is back in the box: ${lower(fix)}, then send it again.`,
    reply: `The reply above was shown but may be incomplete after a reload; your message is kept. ${fix}, then press Regenerate.`,
    change: `Nothing was changed. ${fix}, then try again.`,
    import: `Nothing was imported. ${fix}, then import the file again.`,
    delete: `Nothing was deleted. ${fix}, then try again.`,
    read: `Nothing was changed. ${fix}.`,
    image: `The image was made but not kept; the prompt is kept. ${fix}, then press Generate again.`,
  };
  const failed: Record<StorageAction, string> = {
    message: 'save your message',
    reply: 'save the reply',
    change: 'save the change',
    import: 'store the imported conversation',
    delete: 'delete the conversation',
    read: 'read its library',
    image: 'record the image',
  };
  return { code: STORAGE_CODES[error.code], message: `Easel could not ${failed[action]}: ${causes[error.code]}. ${outcome[action]}` };
}

function lower(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}
