// A conversation being deleted (the deletion waiting for its image to stop) has left the gallery already: its
// pictures are not listed, not offered as a filter, their thumbnails are 404 and they cannot be deleted one by one;
// the other conversations' pictures are untouched.
import { describe, expect, it } from 'vitest';
import { makePng } from '../fakes/png-bytes.ts';
import { useEasel, type TestEasel } from '../helpers/easel.ts';
import { find, read } from '../helpers/html.ts';

// txt2img never answers and its interrupt takes 2 s: the deletion waits that long for the image to stop.
const { easel, a1111 } = useEasel('each test', { a1111: { stepDelayMs: 1, hang: true, interruptDelayMs: 2000 } });

/** A reference picture stored in the conversation (no image server needed): its image id. */
async function addPicture(server: TestEasel, conversationId: string): Promise<string> {
  const response = await server.post(`/api/conversations/${conversationId}/references`, undefined, { headers: { 'content-type': 'image/png' }, body: makePng(32, 32) as BodyInit });
  expect(response.status).toBe(201);
  return ((await response.json()) as { id: string }).id;
}

const listed = async (query = '') => ((await (await easel.get(`/api/images${query}`)).json()) as { images: Array<{ id: string }> }).images.map((image) => image.id);

/** The conversations the gallery page offers to narrow it to (its select, "All conversations" left out). */
async function offeredConversations(): Promise<string[]> {
  const page = read(await (await easel.get('/gallery')).text());
  return find(page, '#gallery-conversation')
    .querySelectorAll('option')
    .map((option) => option.getAttribute('value') ?? '')
    .filter((value) => value !== '');
}

describe('the gallery while a conversation is being deleted', () => {
  it('leaves its pictures out of the list, the filters, the thumbnails and the image deletes at once', async () => {
    const going = await easel.newConversation();
    const staying = await easel.newConversation();
    const goingPicture = await addPicture(easel, going);
    const stayingPicture = await addPicture(easel, staying);
    expect(await offeredConversations()).toEqual(expect.arrayContaining([going, staying]));

    // An image being made holds the deletion until its interrupt is answered.
    const hangup = new AbortController();
    const making = easel.post(`/api/conversations/${going}/generations`, { prompt: 'a fox', settings: { steps: 1, width: 64, height: 64 } }, { signal: hangup.signal });
    await expect.poll(() => a1111.requests.some((request) => request.path === '/sdapi/v1/txt2img')).toBe(true);
    let deleted = false;
    const deleting = fetch(`${easel.url}/api/conversations/${going}`, { method: 'DELETE' }).finally(() => (deleted = true));
    await expect.poll(async () => (await easel.get(`/api/conversations/${going}`)).status).toBe(404);

    expect(await listed()).toEqual([stayingPicture]);
    expect(await listed(`?conversationId=${going}`)).toEqual([]);
    expect(await offeredConversations()).toEqual([staying]);
    expect((await easel.get(`/images/thumbs/${goingPicture}.webp`)).status).toBe(404);
    expect((await easel.get(`/images/thumbs/${stayingPicture}.webp`)).status).toBe(200);
    expect((await fetch(`${easel.url}/api/images/${goingPicture}`, { method: 'DELETE' })).status).toBe(404);

    // Still waiting: all of the above was seen inside the deletion, not after it.
    expect(deleted).toBe(false);
    expect((await deleting).status).toBe(204);
    hangup.abort();
    await making.then((response) => response.body?.cancel()).catch(() => {});
    expect(await listed()).toEqual([stayingPicture]);
  });
});
