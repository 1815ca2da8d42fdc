// The image queue made visible: each waiting image knows its place in line, and each has its own Cancel.
import { describe, expect, it } from 'vitest';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { closeAfterEachTest, type TestEasel } from '../helpers/easel.ts';
import { iterateSse, type SseEvent } from '../helpers/sse.ts';

const { track, startEasel } = closeAfterEachTest();

async function withA1111() {
  const a1111 = await track(createFakeA1111({ stepDelayMs: 30 }));
  return { a1111, easel: await startEasel(['--image-backend', 'a1111', '--image-url', a1111.url]) };
}

/** A Generate's stream, read event by event; `rest()` reads it to its end. */
async function start(easel: TestEasel, id: string, prompt: string) {
  const stream = iterateSse((await easel.post(`/api/conversations/${id}/generations`, { prompt, settings: { steps: 20 } })).body!);
  const seen: SseEvent[] = [];
  return {
    seen,
    async until(type: string): Promise<SseEvent> {
      for (let next = await stream.next(); !next.done; next = await stream.next()) {
        seen.push(next.value);
        if (next.value.type === type) return next.value;
      }
      throw new Error(`the stream ended before a ${type} event`);
    },
    async rest(): Promise<SseEvent[]> {
      for await (const event of stream) seen.push(event);
      return seen;
    },
  };
}

const cancel = (easel: TestEasel, id: string, imageId: string) => easel.post(`/api/conversations/${id}/generations/${imageId}/cancel`);

describe('the image queue', () => {
  it('tells each waiting image its place, moves it up, and cancels one image alone', async () => {
    const { a1111, easel } = await withA1111();
    const id = await easel.newConversation();

    const first = await start(easel, id, 'the first');
    await first.until('progress');
    const second = await start(easel, id, 'the second');
    const secondStart = await second.until('generation');
    expect(secondStart.data).toMatchObject({ queued: true, place: 1 });
    const third = await start(easel, id, 'the third');
    const thirdStart = await third.until('generation');
    expect(thirdStart.data).toMatchObject({ queued: true, place: 2 });
    const secondId = (secondStart.data as { id: string }).id;
    const thirdId = (thirdStart.data as { id: string }).id;

    // The page draws each waiting image with its place and its own Cancel.
    const page = await (await easel.get(`/c/${id}`)).text();
    expect(page).toContain('Waiting — 1st in line');
    expect(page).toContain('Waiting — 2nd in line');
    expect(page).toContain(`hx-post="/c/${id}/images/${thirdId}/cancel"`);

    const answer = await cancel(easel, id, secondId);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ cancelled: true });

    // The third moves up to first in line, said on its stream and in the conversation.
    expect((await third.until('progress')).data).toEqual({ id: thirdId, place: 1 });
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { imagesInProgress: Array<{ id: string; queued: boolean; place?: number }> };
    expect(conversation.imagesInProgress.find((image) => image.id === thirdId)).toMatchObject({ queued: true, place: 1 });

    const secondEvents = await second.rest();
    expect(secondEvents.filter((event) => event.type === 'error').map((event) => event.data)).toMatchObject([{ code: 'image_cancelled' }]);
    expect(secondEvents.some((event) => event.type === 'image')).toBe(false);
    expect((await first.rest()).filter((event) => event.type === 'image')).toHaveLength(1);
    expect((await third.rest()).filter((event) => event.type === 'image')).toHaveLength(1);

    // The cancelled one never reached the backend; the other two did, one at a time.
    const prompts = a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img').map((r) => (r.body as { prompt: string }).prompt);
    expect(prompts).toEqual(['the first', 'the third']);
    expect(a1111.maxConcurrentTxt2Img).toBe(1);

    // Ended or unknown: false; an unknown conversation: 404.
    expect(await (await cancel(easel, id, secondId)).json()).toEqual({ cancelled: false });
    expect(await (await cancel(easel, id, 'no-such-image')).json()).toEqual({ cancelled: false });
    expect((await cancel(easel, 'nope', secondId)).status).toBe(404);
  });

  it("the page's Cancel of one image leaves the others of the conversation running", async () => {
    const { easel } = await withA1111();
    const id = await easel.newConversation();
    const first = await start(easel, id, 'the first');
    const firstId = ((await first.until('progress')).data as { id: string }).id;
    const second = await start(easel, id, 'the second');
    await second.until('generation');

    const answer = await easel.post(`/c/${id}/images/${firstId}/cancel`, '', { headers: { 'content-type': 'application/x-www-form-urlencoded', 'HX-Request': 'true' } });
    expect(answer.status).toBe(204);
    expect((await first.rest()).find((event) => event.type === 'error')?.data).toMatchObject({ code: 'image_cancelled' });
    expect((await second.rest()).filter((event) => event.type === 'image')).toHaveLength(1);
  });
});
