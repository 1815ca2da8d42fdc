// What a finished turn shows and offers is one decision, rendered the same live and after a reload.
import { describe, expect, it } from 'vitest';
import { decideTurnOffers, statusOfDone, TURN_STATUSES } from '../../../server/core/index.ts';

describe('decideTurnOffers', () => {
  it('offers on the last, stored reply: Regenerate when it ended, Retry when it failed, Send again after a reset, Edit once it is not written', () => {
    const offers = (status: (typeof TURN_STATUSES)[number]) => decideTurnOffers(status, { last: true, stored: true });
    expect(offers('ok')).toEqual({ notice: undefined, retry: false, regenerate: true, sendAgain: false, edit: true });
    expect(offers('stopped')).toEqual({ notice: 'Stopped.', retry: false, regenerate: true, sendAgain: false, edit: true });
    expect(offers('interrupted')).toMatchObject({ notice: expect.stringMatching(/^Interrupted/), regenerate: true, edit: true });
    expect(offers('error')).toEqual({ notice: undefined, retry: true, regenerate: false, sendAgain: false, edit: true });
    expect(offers('reset')).toEqual({ notice: undefined, retry: false, regenerate: false, sendAgain: true, edit: true });
    // A reply being written goes on live in every page: no notice, nothing offered yet.
    expect(offers('running')).toEqual({ notice: undefined, retry: false, regenerate: false, sendAgain: false, edit: false });
    // A replaced reply offers nothing, wherever it stands.
    expect(offers('replaced')).toEqual({ notice: undefined, retry: false, regenerate: false, sendAgain: false, edit: false });
  });

  it('offers nothing on an earlier reply, and no Retry, Regenerate or Edit for a message that was not stored', () => {
    for (const status of TURN_STATUSES) {
      const earlier = decideTurnOffers(status, { last: false, stored: true });
      expect(earlier.retry || earlier.regenerate || earlier.sendAgain || earlier.edit, status).toBe(false);
    }
    expect(decideTurnOffers('error', { last: true, stored: false }).retry).toBe(false);
    expect(decideTurnOffers('ok', { last: true, stored: false }).regenerate).toBe(false);
    expect(decideTurnOffers('ok', { last: true, stored: false }).edit).toBe(false);
  });

  it('reads a reply that just ended as the status it is stored with', () => {
    expect(['clean', 'metadata', 'reminder', 'compaction', 'reset', 'error', 'stopped'].map((level) => statusOfDone(level as never))).toEqual([
      'ok',
      'ok',
      'ok',
      'ok',
      'reset',
      'error',
      'stopped',
    ]);
  });
});
