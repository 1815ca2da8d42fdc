// A batch caught between its images, for the tests of a follower or a page that opens mid-batch.
import { createFakeLocalAi } from '../fakes/fake-localai.ts';
import type { StartedInTest, TestEasel } from './easel.ts';
import { iterateSse } from './sse.ts';

/** The batch: three images of a fox, each on its own seed from 42. */
export const BATCH_BODY = { prompt: 'a red fox', count: 3, settings: { steps: 4, cfg: 7, seed: 42, width: 64, height: 64 } };

/**
 * A batch of three on a slow LocalAI (300 ms an image), read on to its end (hanging up would cancel the Generate)
 * once its first image has come: its Easel, conversation, generation id, and the reading that ends with it.
 */
export async function startBatchToFirstImage(started: StartedInTest): Promise<{ easel: TestEasel; id: string; generation: string; reading: Promise<void> }> {
  const localai = await started.track(createFakeLocalAi({ delayMs: 300 }));
  const easel = await started.startEasel(['--image-backend', 'localai', '--image-url', localai.url]);
  const id = await easel.newConversation();
  const response = await easel.post(`/api/conversations/${id}/generations`, BATCH_BODY);
  let generation = '';
  let firstImage!: () => void;
  const imageSeen = new Promise<void>((resolve) => (firstImage = resolve));
  const reading = (async () => {
    for await (const event of iterateSse(response.body!)) {
      if (event.type === 'generation') generation = String(event.data['id']);
      if (event.type === 'image') firstImage();
    }
  })();
  await imageSeen;
  return { easel, id, generation, reading };
}
