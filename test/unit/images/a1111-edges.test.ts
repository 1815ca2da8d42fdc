// AUTOMATIC1111 edge cases: what /sdapi/v1/progress says before our job samples, and after.
import { afterEach, describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import type { FakeA1111, FakeA1111Options } from '../../fakes/fake-a1111.ts';
import { REQUEST, recordProgress } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function startFake(options: FakeA1111Options): Promise<FakeA1111> {
  const fake = await createFakeA1111({ stepDelayMs: 10, ...options });
  cleanups.push(() => fake.close());
  return fake;
}

describe('progress before our job starts', () => {
  it("never reports the previous job's steps from a poll with job_count 0", async () => {
    // The previous job ran 30 steps; ours waits 150 ms for the queue lock, then runs 4.
    const fake = await startFake({ previousJob: { steps: 30 }, startDelayMs: 150 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate({ ...REQUEST, steps: 4 }, { signal: new AbortController().signal, onProgress });

    // The stale state was there to be read: several polls saw job_count 0 and 30 steps.
    const polls = fake.requests.filter((request) => request.path === '/sdapi/v1/progress');
    expect(polls.length).toBeGreaterThanOrEqual(5);
    expect(events.length).toBeGreaterThanOrEqual(1);
    for (const event of events) expect(event).toMatchObject({ steps: 4 });
  });
});

describe('progress at the start and the end of our job', () => {
  it('never says "step 0 of N" or 100 % while the job starts (job_count −1, the last job\'s sampling_steps) or finishes (1.0 while saving)', async () => {
    // The last job ran 30 steps; ours spends 150 ms in State.begin() before sampling and 150 ms saving after it.
    const fake = await startFake({ previousJob: { steps: 30 }, setupDelayMs: 150, finishDelayMs: 150, stepDelayMs: 30 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate({ ...REQUEST, steps: 5 }, { signal: new AbortController().signal, onProgress });

    expect(events.length).toBeGreaterThanOrEqual(2);
    for (const event of events) {
      expect(event.steps).toBe(5);
      expect(event.step).toBeGreaterThanOrEqual(1);
      expect(event.fraction).toBeLessThan(1);
    }
  });

  it("shows A1111's eta_relative as the seconds left, once the job samples", async () => {
    const fake = await startFake({ stepDelayMs: 60 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate({ ...REQUEST, steps: 6 }, { signal: new AbortController().signal, onProgress });

    const etas = events.map((event) => event.etaSeconds);
    expect(etas.length).toBeGreaterThanOrEqual(2);
    // Each is an eta_relative A1111 answered (elapsed/progress − elapsed), in whole seconds up: never a guess
    // of our own. (A bound in seconds would be a timing assumption a busy machine breaks.)
    const served = new Set(fake.progressAnswers.filter((answer) => answer.progress > 0).map((answer) => Math.ceil(answer.eta_relative)));
    for (const eta of etas) {
      expect(eta).toEqual(expect.any(Number));
      expect(eta).toBeGreaterThanOrEqual(0);
      expect(served).toContain(eta);
    }
  });
});
