// What a finished turn shows and offers: one decision, made here, that the page renders the same way live (as
// the reply ends) and after a reload. The page draws the buttons; whether they are there is decided here.
import type { TurnStatus } from './conversation.ts';
import type { DoneEvent } from './events.ts';

/** The quiet line under a reply that did not end normally. */
export const TURN_NOTICES: Partial<Record<TurnStatus, string>> = {
  stopped: 'Stopped.',
  interrupted: 'Interrupted: Easel stopped before this reply was finished. Regenerate asks again.',
};

export interface TurnOffers {
  notice: string | undefined;
  /** Retry asks the stored message again: offered on the last reply that failed. */
  retry: boolean;
  /** Regenerate asks again for a reply that ended: not for one still written, failed or reset. */
  regenerate: boolean;
  /** After a reset, "Send again" sends the message once more into the fresh start. */
  sendAgain: boolean;
  /**
   * Edit on the message this reply answers: once the reply is no longer written, however it ended (a failed,
   * stopped or reset reply's message can be reworded too), and only for a stored message. After a Regenerate too.
   */
  edit: boolean;
}

/**
 * `last`: the conversation's last exchange (not replaced); `stored`: its message is stored (a message that was
 * not stored goes back into the composer instead of being retried).
 */
export function decideTurnOffers(status: TurnStatus, where: { last: boolean; stored: boolean }): TurnOffers {
  const last = where.last && status !== 'replaced';
  // Read from the status alone: live (the `done` event's level) and stored (the turn's row) agree on it.
  const failed = status === 'error';
  return {
    notice: TURN_NOTICES[status],
    retry: failed && last && where.stored,
    regenerate: last && where.stored && status !== 'running' && !failed && status !== 'reset',
    sendAgain: status === 'reset' && last,
    edit: last && where.stored && status !== 'running',
  };
}

/** How a reply that just ended is stored, from its `done` event's level. */
export function statusOfDone(level: DoneEvent['level']): TurnStatus {
  if (level === 'stopped' || level === 'error' || level === 'reset') return level;
  return 'ok';
}
