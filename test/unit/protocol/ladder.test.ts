import { describe, expect, it } from 'vitest';
import { canKeepText, MAX_ATTEMPTS, MAX_COMPACTIONS, MAX_REMINDERS, planRecovery } from '../../../server/protocol/index.ts';

describe('planRecovery', () => {
  it('has two reminders, one compaction and four attempts in all', () => {
    expect([MAX_REMINDERS, MAX_COMPACTIONS, MAX_ATTEMPTS]).toEqual([2, 1, 4]);
  });

  it.each([
    [1, { level: 'reminder', attempt: 2 }],
    [2, { level: 'reminder', attempt: 3 }],
    [3, { level: 'compaction', attempt: 4 }],
    [4, { level: 'reset' }],
    [5, { level: 'reset' }],
  ])('after %i failed attempt(s) plans %o', (failed, plan) => {
    expect(planRecovery(failed)).toEqual(plan);
  });

  it('never plans an attempt beyond MAX_ATTEMPTS', () => {
    for (let failed = 1; failed <= 10; failed += 1) {
      const plan = planRecovery(failed);
      if (plan.level !== 'reset') expect(plan.attempt).toBeLessThanOrEqual(MAX_ATTEMPTS);
    }
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses %s failed attempts', (failed) => {
    expect(() => planRecovery(failed)).toThrow(RangeError);
  });
});

describe('the metadata-only step', () => {
  const fine = { text: 'A cat in a hat! What colour?', doneReason: 'stop' };

  it('is the first reminder when the failed reply has text worth keeping, and the ladder goes on unchanged after it', () => {
    expect([1, 2, 3, 4].map((failed) => planRecovery(failed, fine))).toEqual([
      { level: 'metadata', attempt: 2 },
      { level: 'reminder', attempt: 3 },
      { level: 'compaction', attempt: 4 },
      { level: 'reset' },
    ]);
  });

  it('is skipped when the text cannot be kept: no words, or cut by the length limit', () => {
    expect(planRecovery(1, { text: ' \n ', doneReason: 'stop' })).toEqual({ level: 'reminder', attempt: 2 });
    expect(planRecovery(1, { text: 'Sure, a long', doneReason: 'length' })).toEqual({ level: 'reminder', attempt: 2 });
    expect(planRecovery(1)).toEqual({ level: 'reminder', attempt: 2 });
  });

  it('keeps text with words that was not cut', () => {
    expect(canKeepText(fine)).toBe(true);
    expect(canKeepText({ text: '', doneReason: 'stop' })).toBe(false);
    expect(canKeepText({ ...fine, doneReason: 'length' })).toBe(false);
  });
});
