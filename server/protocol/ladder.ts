// The recovery ladder of story 010 as a pure policy: format reminders, then one compaction, then
// reset. The turn engine performs the steps; this only says which one comes next.

/** Level 1: the model probably forgot the format, so remind it. */
export const MAX_REMINDERS = 2;
/** Level 2: a long context probably confused it, so retry once with a compacted context. */
export const MAX_COMPACTIONS = 1;
/** The first attempt plus every retry. */
export const MAX_ATTEMPTS = 1 + MAX_REMINDERS + MAX_COMPACTIONS;

export type RecoveryPlan =
  | { level: 'reminder'; attempt: number }
  | { level: 'compaction'; attempt: number }
  | { level: 'reset' };

/** What to do after `failedAttempts` unparsable replies in this turn (the count is per turn). */
export function planRecovery(failedAttempts: number): RecoveryPlan {
  if (!Number.isInteger(failedAttempts) || failedAttempts < 1) {
    throw new RangeError(`planRecovery needs the number of failed attempts (1 or more), got ${failedAttempts}; call it only after a failure.`);
  }
  const attempt = failedAttempts + 1;
  if (failedAttempts <= MAX_REMINDERS) return { level: 'reminder', attempt };
  if (failedAttempts <= MAX_REMINDERS + MAX_COMPACTIONS) return { level: 'compaction', attempt };
  return { level: 'reset' };
}
