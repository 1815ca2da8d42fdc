// AUTOMATIC1111 edge cases: what /sdapi/v1/progress says before our job has started.
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
