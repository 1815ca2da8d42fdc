// The recovery ladder of story 010 as a pure policy, plus one step before it: when the reply's text is
// fine and only its metadata is missing or broken, ask for the metadata alone (a grammar-constrained
// call) and keep the text the user read. Then format reminders, one compaction, reset. The turn engine
// performs the steps; this only says which one comes next.

/**
 * Level 1: the model probably forgot the format, so remind it. The first reminder asks for the
 * metadata alone when the reply's text can be kept (see planRecovery), so that step counts as one of these.
 */
export const MAX_REMINDERS = 2;
/** Level 2: a long context probably confused it, so retry once with a compacted context. */
export const MAX_COMPACTIONS = 1;
/** The first attempt plus every retry: 4 model calls at most, whichever steps are taken. */
export const MAX_ATTEMPTS = 1 + MAX_REMINDERS + MAX_COMPACTIONS;

export type RecoveryPlan =
  /** Ask for the metadata alone and keep the reply's text: the first reminder, when the text can be kept. */
  | { level: 'metadata'; attempt: number }
  | { level: 'reminder'; attempt: number }
  | { level: 'compaction'; attempt: number }
  | { level: 'reset' };

export interface FailedReply {
  /** The text the user was shown (without any withheld part). */
  text: string;
  /** Ollama's done_reason: 'length' means the reply was cut short, text included. */
  doneReason: string;
}

/**
 * Whether a reply whose metadata failed still has text worth keeping: some words, and not cut off by
 * the length limit (then the text itself is unfinished and a full reminder asks for all of it again).
 */
export function canKeepText(reply: FailedReply): boolean {
  return reply.text.trim() !== '' && reply.doneReason !== 'length';
}

/**
 * What to do after `failedAttempts` unusable replies in this turn (the count is per turn). `firstReply`
 * is the first failed reply: when its text can be kept, the first reminder asks for the metadata alone.
 */
export function planRecovery(failedAttempts: number, firstReply?: FailedReply): RecoveryPlan {
  if (!Number.isInteger(failedAttempts) || failedAttempts < 1) {
    throw new RangeError(`planRecovery needs the number of failed attempts (1 or more), got ${failedAttempts}; call it only after a failure.`);
  }
  const attempt = failedAttempts + 1;
  if (failedAttempts === 1 && firstReply !== undefined && canKeepText(firstReply)) return { level: 'metadata', attempt };
  if (failedAttempts <= MAX_REMINDERS) return { level: 'reminder', attempt };
  if (failedAttempts <= MAX_REMINDERS + MAX_COMPACTIONS) return { level: 'compaction', attempt };
  return { level: 'reset' };
}
