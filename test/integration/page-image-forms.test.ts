// The page's picture forms read as the page sends them, on a real port with the fakes: Generate's count, fix, from,
// origin and size; a reference image and Describe (their refusals word for word, the empty page); the image
// follower's skip; and each open page's own work (its view id, the views remembered, its own saves, baseRevision).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { makePng } from '../fakes/png-bytes.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { startBatchToFirstImage } from '../helpers/batch.ts';
import { closeAfterEachTest, useEasel, type TestEasel } from '../helpers/easel.ts';
import { find, partials, read, targets } from '../helpers/html.ts';
import { sendForm } from '../helpers/page-stage.ts';
import { iterateSseFrames, readSse, readSseFrames } from '../helpers/sse.ts';
import { makePictureOfACat } from '../helpers/vision.ts';

const VISION = { name: 'gemma3:4b', capabilities: ['completion', 'vision'] };
const { fake, a1111, easel } = useEasel('each test', {
  a1111: { stepDelayMs: 1 },
  flags: ['--vision-model', 'gemma3:4b'],
  ollama: { models: ['mistral:7b', VISION] },
});

const READY = { prompt: 'a red fox in snow', generate_image: false, steps: 24, cfg: 6, seed: 5 };

const send = (method: string, path: string, fields?: Record<string, string> | FormData, on: TestEasel = easel) => sendForm(on, method, path, fields);

interface Stored {
  prompt: string;
  paneRevision: number;
  settings: Record<string, unknown>;
  promptVersions: Array<{ prompt: string; source: string }>;
  images: Array<{ id: string; prompt: string; seed: number | null; width: number; height: number }>;
}

async function stored(id: string): Promise<Stored> {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as Stored;
}

/** A conversation with one answered message (the model's prompt `READY.prompt`, not generated). */
async function conversationWithReply(): Promise<string> {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply('Here it is.', READY));
  await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'a fox', sendKey: randomUUID() }));
  return id;
}

const imageError = (markup: string) => partials(markup).find((partial) => partial.target === '#image-error');

/** A form holding one file, as the page's reference and Describe scripts send it. */
function withFile(file: Blob, name: string, fields: Record<string, string> = {}): FormData {
  const form = new FormData();
  form.append('file', file, name);
  for (const [key, value] of Object.entries(fields)) form.append(key, value);
  return form;
}

const png = (width = 16, height = 16) => new Blob([makePng(width, height) as Uint8Array<ArrayBuffer>], { type: 'image/png' });
const text = () => new Blob(['hello'], { type: 'text/plain' });

/**
 * A page's live view (GET /c/:id/events?view=…) read until `needle`: everything it drew until then. The caller
 * makes something happen that the view must draw (a rename, say) to end the reading.
 */
async function openLive(url: string) {
  const hangup = new AbortController();
  const response = await fetch(easel.url + url, { signal: hangup.signal });
  let seen = '';
  let ended = false;
  // Read as it comes: a live view not read falls behind.
  const reading = (async () => {
    for await (const frame of iterateSseFrames(response.body as ReadableStream<Uint8Array>)) seen += `${frame.data}\n`;
  })()
    .catch(() => {})
    .finally(() => (ended = true));
  return {
    async readUntil(needle: string): Promise<string> {
      await expect.poll(() => seen.includes(needle) || ended, { timeout: 5000 }).toBe(true);
      if (!seen.includes(needle)) throw new Error(`the live view ended before ${needle}: ${seen}`);
      return seen;
    },
    close: async () => {
      hangup.abort();
      await reading;
    },
  };
}

const rename = (id: string, title: string) => fetch(`${easel.url}/api/conversations/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title }) });

describe("Generate: the page's form", () => {
  it('empty count, fix and from fields are a plain Generate of one image', async () => {
    const id = await conversationWithReply();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a blue fox', count: '', fix: '', from: '', sendKey: randomUUID() });
    expect(response.status, await response.clone().text()).toBe(200);
    await readSseFrames(response);
    expect((await stored(id)).images.map((image) => image.prompt)).toEqual(['a blue fox']);
  });

  it('a count with spaces around it or a leading zero is that number', async () => {
    const id = await conversationWithReply();
    for (const count of [' 2', '2 ', '02']) {
      const response = await send('POST', `/c/${id}/generations`, { prompt: 'a blue fox', count, sendKey: randomUUID() });
      expect(response.status, `"${count}": ${await response.clone().text()}`).toBe(200);
      await readSseFrames(response);
    }
    expect((await stored(id)).images).toHaveLength(6);
  });

  it("a Generate's image has the width and height on screen", async () => {
    const id = await conversationWithReply();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a blue fox', steps: '4', cfg: '7', seed: '3', width: '64', height: '96', negativePrompt: '', sendKey: randomUUID() });
    expect(response.status).toBe(200);
    await readSseFrames(response);
    expect((await stored(id)).images.map((image) => [image.width, image.height])).toEqual([[64, 96]]);
  });

  it("the gallery's Remix makes its image from its prompt without making it the conversation's", async () => {
    const id = await conversationWithReply();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a gallery fox', origin: 'gallery', sendKey: randomUUID() });
    expect(response.status).toBe(200);
    await readSseFrames(response);
    const after = await stored(id);
    expect(after.images.map((image) => image.prompt)).toEqual(['a gallery fox']);
    expect(after.prompt).toBe(READY.prompt);
    // From the screen, the prompt shown is saved first.
    await readSseFrames(await send('POST', `/c/${id}/generations`, { prompt: 'a screen fox', sendKey: randomUUID() }));
    expect((await stored(id)).prompt).toBe('a screen fox');
  });

  it("a Generate's answer starts with the pane as stored, its prompt saved", async () => {
    const id = await conversationWithReply();
    const frames = await readSseFrames(await send('POST', `/c/${id}/generations`, { prompt: 'a blue fox', sendKey: randomUUID() }));
    const pane = find(read(frames[0]!.data), '.pane-values');
    expect(pane.getAttribute('data-prompt')).toBe('a blue fox');
    expect(pane.getAttribute('data-revision')).toBe(String((await stored(id)).paneRevision));
  });

  it('the image goes on when the page that asked for it closes', async () => {
    const id = await conversationWithReply();
    const hangup = new AbortController();
    const response = await fetch(`${easel.url}/c/${id}/generations`, {
      method: 'POST',
      headers: { 'sec-fetch-site': 'same-origin' },
      body: new URLSearchParams({ prompt: 'a blue fox', steps: '60', cfg: '7', seed: '3', width: '64', height: '64', negativePrompt: '', sendKey: randomUUID() }),
      signal: hangup.signal,
    });
    await iterateSseFrames(response.body as ReadableStream<Uint8Array>).next();
    await expect.poll(() => a1111.requests.some((request) => request.path === '/sdapi/v1/txt2img')).toBe(true);
    hangup.abort();
    await expect.poll(async () => (await stored(id)).images.length, { timeout: 4000 }).toBe(1);
    expect(a1111.interrupts).toBe(0);
  });

  it("a refused Generate leaves the page's live view drawing the next image made elsewhere", async () => {
    const id = await conversationWithReply();
    const viewId = 'c'.repeat(16);
    const live = await openLive(`/c/${id}/events?view=${viewId}`);
    const refused = await send('POST', `/c/${id}/generations`, { prompt: '', viewId, sendKey: randomUUID() });
    expect(refused.status).toBe(422);
    const made = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'an API fox', settings: { steps: 2, width: 64, height: 64 } }));
    const imageId = String(made.find((event) => event.type === 'image')?.data['id']);
    await rename(id, 'Drawn');
    const seen = await live.readUntil('Drawn');
    await live.close();
    expect(seen).toContain(`generation-${imageId}`);
  });

  it("a first Generate on the empty page: the live view it starts does not draw that image again", async () => {
    const id = randomUUID();
    const frames = await readSseFrames(await send('POST', `/c/${id}/generations`, { prompt: 'a blue fox', startNew: '1', steps: '4', width: '64', height: '64', sendKey: randomUUID() }));
    const url = find(read(frames[0]!.data), '#live').getAttribute('hx-sse:connect')!;
    const imageId = (await stored(id)).images[0]!.id;
    const live = await openLive(url);
    await rename(id, 'Drawn');
    const seen = await live.readUntil('Drawn');
    await live.close();
    expect(seen).not.toContain(`generation-${imageId}`);
    expect(seen).not.toContain('#image-frame');
  });
});

describe("Vary's from on the page", () => {
  it('a value without a colon is no Vary: refused as a from, never read as an image id', async () => {
    const id = await conversationWithReply();
    // "1e-1" would read as the image "1e-" at strength 0.1, if the colon were not required.
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a fox', from: '1e-1', sendKey: randomUUID() });
    expect(response.status).toBe(422);
    expect(imageError(await response.text())?.text).toMatch(/^from must be \{ "imageId"/);
  });
});

describe('a reference image from the page (POST /c/:id/references)', () => {
  it('no file, or an empty one: 422 in the image error slot, saying what to choose', async () => {
    const id = await easel.newConversation();
    for (const form of [withFile(new Blob([], { type: 'image/png' }), 'empty.png'), new FormData()]) {
      if (!form.has('file')) form.append('startNew', '1');
      const response = await send('POST', `/c/${id}/references`, form);
      expect(response.status).toBe(422);
      expect(partials(await response.text())).toEqual([{ target: '#image-error', swap: 'innerHTML', text: 'Choose a PNG, JPEG or WebP picture to add as a reference image.' }]);
    }
    expect((await stored(id)).images).toEqual([]);
  });

  it('a file of another type is refused (415) naming the file and its type', async () => {
    const id = await easel.newConversation();
    const named = await send('POST', `/c/${id}/references`, withFile(text(), 'notes.txt'));
    expect(named.status).toBe(415);
    expect(imageError(await named.text())?.text).toBe('notes.txt is not a PNG, JPEG or WebP picture (it is text/plain): add one of those as a reference image.');
  });

  it('to a conversation that does not exist, without the empty page\'s mark: 404, and nothing is created', async () => {
    const id = randomUUID();
    const response = await send('POST', `/c/${id}/references`, withFile(png(), 'fox.png'));
    expect(response.status).toBe(404);
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);
  });

  it('added to an open conversation: the entry and the error slot cleared, no head and no list refresh', async () => {
    const id = await conversationWithReply();
    for (const fields of [{}, { startNew: '1' }] as Array<Record<string, string>>) {
      const response = await send('POST', `/c/${id}/references`, withFile(png(), 'fox.png', fields));
      expect(response.status).toBe(201);
      expect(response.headers.get('hx-trigger')).toBeNull();
      const shown = targets(await response.text());
      expect(shown[0]).toBe('#image-error innerHTML');
      expect(shown).toContain('#log beforeend');
      expect(shown).not.toContain('#start-new delete');
      expect(shown).not.toContain('#live outerHTML');
    }
    expect((await stored(id)).images).toHaveLength(2);
  });

  it('on the empty page the new conversation tells the library to list it', async () => {
    const id = randomUUID();
    const response = await send('POST', `/c/${id}/references`, withFile(png(), 'fox.png', { startNew: '1' }));
    expect(response.status).toBe(201);
    expect(JSON.parse(response.headers.get('hx-trigger') ?? 'null')).toEqual({ 'easel:list': { target: 'body' } });
  });
});

describe('Check from the page', () => {
  it('a refusal replaces what the image error slot showed', async () => {
    const { id } = await makePictureOfACat(fake, easel);
    const response = await send('POST', `/c/${id}/images/${'f'.repeat(32)}/check`);
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(targets(await response.text())).toEqual(['#image-error innerHTML']);
  });

  it('closing the page ends the check: the vision model is hung up on', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    fake.enqueue({ chunks: [JSON.stringify({ matches: ['a cat'], misses: [], revisedPrompt: 'a cat' })], gate: new Promise<void>(() => {}) });
    const hangup = new AbortController();
    const response = await fetch(`${easel.url}/c/${id}/images/${imageId}/check`, { method: 'POST', headers: { 'sec-fetch-site': 'same-origin' }, body: new URLSearchParams(), signal: hangup.signal });
    await iterateSseFrames(response.body as ReadableStream<Uint8Array>).next();
    await fake.waitForRequests(2, '/api/chat');
    hangup.abort();
    await fake.waitForHangup(1);
  });
});

describe('Describe from the page (POST /c/:id/describe)', () => {
  const describeStatus = (markup: string) => partials(markup).find((partial) => partial.target === '#describe-status')?.text;

  it('no file, or an empty one: 422 beside the prompt, saying what to choose', async () => {
    const id = await easel.newConversation();
    for (const form of [withFile(new Blob([], { type: 'image/png' }), 'empty.png'), new FormData()]) {
      if (!form.has('file')) form.append('prompt', 'x');
      const response = await send('POST', `/c/${id}/describe`, form);
      expect(response.status).toBe(422);
      expect(describeStatus(await response.text())).toBe('Choose a PNG, JPEG or WebP picture to describe.');
    }
    expect(fake.chatRequests()).toHaveLength(0);
  });

  it('a file of another type is refused (415) naming the file and its type', async () => {
    const id = await easel.newConversation();
    const named = await send('POST', `/c/${id}/describe`, withFile(text(), 'notes.txt'));
    expect(named.status).toBe(415);
    expect(describeStatus(await named.text())).toBe('notes.txt is not a PNG, JPEG or WebP picture (it is text/plain): describe one of those.');
  });

  it('to a conversation that does not exist, without the empty page\'s mark: 404 in its words, nothing created or asked', async () => {
    const id = randomUUID();
    const response = await send('POST', `/c/${id}/describe`, withFile(png(), 'fox.png', { prompt: 'typed' }));
    expect(response.status).toBe(404);
    expect(describeStatus(await response.text())).toBe('This conversation no longer exists. Start a new one.');
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);
    expect(fake.chatRequests()).toHaveLength(0);
  });

  it('on an open conversation, even from a page that still says "new": no head, no list refresh', async () => {
    const id = await conversationWithReply();
    fake.enqueue(JSON.stringify({ prompt: 'a red fox in deep snow', subject: 'a fox' }));
    const frames = await readSseFrames(await send('POST', `/c/${id}/describe`, withFile(png(), 'fox.png', { prompt: 'typed here', startNew: '1' })));
    expect(frames.some((frame) => frame.event === 'easel:list')).toBe(false);
    expect(frames.flatMap((frame) => targets(frame.data))).not.toContain('#start-new delete');
    expect((await stored(id)).promptVersions.slice(-2).map((version) => [version.prompt, version.source])).toEqual([
      ['typed here', 'user'],
      ['a red fox in deep snow', 'vision'],
    ]);
  });

  it('without a prompt in the form, the picture is described all the same', async () => {
    const id = await conversationWithReply();
    fake.enqueue(JSON.stringify({ prompt: 'a red fox in deep snow', subject: 'a fox' }));
    const response = await send('POST', `/c/${id}/describe`, withFile(png(), 'fox.png'));
    expect(response.status, await response.clone().text()).toBe(200);
    await readSseFrames(response);
    expect((await stored(id)).prompt).toBe('a red fox in deep snow');
  });

  it('from a page older than the stored pane: 409 "Not described: …", the newer pane shown, nothing asked', async () => {
    const id = await conversationWithReply();
    const current = (await stored(id)).paneRevision;
    const response = await send('POST', `/c/${id}/describe`, withFile(png(), 'fox.png', { prompt: 'an old prompt', baseRevision: String(current - 1) }));
    expect(response.status).toBe(409);
    const body = await response.text();
    expect(describeStatus(body)).toMatch(/^Not described: The prompt or settings were changed elsewhere/);
    expect(find(read(body), '.pane-values').getAttribute('data-revision')).toBe(String(current));
    expect((await stored(id)).prompt).toBe(READY.prompt);
    expect(fake.chatRequests()).toHaveLength(1);
  });

  it('a prompt the pane cannot hold: 422 "Not described:" in the prompt field\'s words', async () => {
    const id = await conversationWithReply();
    const saved = await send('PUT', `/c/${id}/prompt`, { prompt: 'x'.repeat(2001) });
    const fieldWords = partials(await saved.text()).map((partial) => partial.text).find((words) => /2000/.test(words ?? ''));
    expect(fieldWords).toBeDefined();
    const response = await send('POST', `/c/${id}/describe`, withFile(png(), 'fox.png', { prompt: 'x'.repeat(2001) }));
    expect(response.status).toBe(422);
    expect(describeStatus(await response.text())).toBe(`Not described: ${fieldWords}`);
  });

  it('closing the page ends the description: the vision model is hung up on', async () => {
    const id = await conversationWithReply();
    fake.enqueue({ chunks: [JSON.stringify({ prompt: 'a red fox in deep snow', subject: 'a fox' })], gate: new Promise<void>(() => {}) });
    const hangup = new AbortController();
    const response = await fetch(`${easel.url}/c/${id}/describe`, { method: 'POST', headers: { 'sec-fetch-site': 'same-origin' }, body: withFile(png(), 'fox.png'), signal: hangup.signal });
    await iterateSseFrames(response.body as ReadableStream<Uint8Array>).next();
    await fake.waitForRequests(2, '/api/chat');
    hangup.abort();
    await fake.waitForHangup(1);
  });

  describe('without a vision model', () => {
    const bare = useEasel('each test', { a1111: { stepDelayMs: 1 } });

    it('the refusal is said beside the prompt as words with the link, not as an image error box', async () => {
      const id = await bare.easel.newConversation();
      const response = await send('POST', `/c/${id}/describe`, withFile(png(), 'fox.png'), bare.easel);
      expect(response.status).toBe(503);
      const slot = find(read(await response.text()), 'hx-partial[hx-target="#describe-status"]');
      expect(slot.querySelector('.image-error')).toBeNull();
      expect(slot.querySelector('a.pick-model')).not.toBeNull();
    });
  });
});

describe('the image follower (GET /c/:id/images/:imageId/events)', () => {
  const localStage = closeAfterEachTest();


  const shown = async (on: TestEasel, path: string) => (await readSseFrames(await fetch(on.url + path))).map((frame) => frame.data).join('\n');

  it('opened mid-batch without skip, it does not draw again the images stored already', async () => {
    const { easel: own, id, generation, reading } = await startBatchToFirstImage(localStage);
    const html = await shown(own, `/c/${id}/images/${generation}/events`);
    expect(html).not.toContain('Image 1 of 3 is ready.');
    expect(html).toContain('Image 2 of 3 is ready.');
    expect(html).toContain('Image 3 of 3 is ready.');
    await reading;
  });

  it('opened after the image ended, without skip, it replays every image', async () => {
    const { easel: own, id, generation, reading } = await startBatchToFirstImage(localStage);
    await reading;
    const html = await shown(own, `/c/${id}/images/${generation}/events`);
    expect(html).toContain('Image 1 of 3 is ready.');
    expect(html).toContain('Image 3 of 3 is ready.');
  });

  it('an ended image is replayed whole while another image of the conversation is being made', async () => {
    const id = await conversationWithReply();
    const first = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a fox', settings: { steps: 2, width: 64, height: 64 } }));
    const ended = String(first.find((event) => event.type === 'image')?.data['id']);
    const slow = easel.post(`/api/conversations/${id}/generations`, { prompt: 'a slow fox', settings: { steps: 150, width: 64, height: 64 } });
    await expect.poll(() => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length).toBe(2);
    const html = await shown(easel, `/c/${id}/images/${ended}/events`);
    expect(html).toContain('hx-target="#image-frame"');
    await easel.post(`/api/conversations/${id}/images/cancel`);
    await readSse(await slow);
  });

  it('skip names at most 1000 images: a name after those is not skipped', async () => {
    const id = await conversationWithReply();
    const made = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a fox', settings: { steps: 2, width: 64, height: 64 } }));
    const imageId = String(made.find((event) => event.type === 'image')?.data['id']);
    const skipped = await shown(easel, `/c/${id}/images/${imageId}/events?skip=${imageId}`);
    expect(skipped).not.toContain('hx-target="#image-frame"');
    const beyond = await shown(easel, `/c/${id}/images/${imageId}/events?skip=${Array.from({ length: 1000 }, () => 'x').join(',')},${imageId}`);
    expect(beyond).toContain('hx-target="#image-frame"');
  });
});

describe("each page's own work", () => {
  it('a view id that is not exactly 16 hex characters is not remembered: its live view draws its own message', async () => {
    for (const viewId of [`x${'a'.repeat(16)}`, `${'a'.repeat(16)}x`]) {
      const id = await conversationWithReply();
      const live = await openLive(`/c/${id}/events?view=${viewId}`);
      fake.enqueue(scriptReply('Mine.', READY));
      await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'from this page', sendKey: randomUUID(), viewId }));
      await rename(id, 'Drawn');
      const seen = await live.readUntil('Drawn');
      await live.close();
      expect(seen, viewId).toContain('from this page');
    }
  });

  it('a valid view id is remembered: its live view does not draw its own message', async () => {
    const id = await conversationWithReply();
    const viewId = 'b'.repeat(16);
    const live = await openLive(`/c/${id}/events?view=${viewId}`);
    fake.enqueue(scriptReply('Mine.', READY));
    await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'from this page', sendKey: randomUUID(), viewId }));
    await rename(id, 'Drawn');
    const seen = await live.readUntil('Drawn');
    await live.close();
    expect(seen).not.toContain('from this page');
  });

  it('the 1000 most recent views are remembered: the oldest is forgotten, and its live view draws its own message', async () => {
    const id = await conversationWithReply();
    const viewId = 'd'.repeat(16);
    const live = await openLive(`/c/${id}/events?view=${viewId}`);
    // A thousand other pages, each asking a conversation that is gone for an image.
    const gone = randomUUID();
    for (let page = 0; page < 1000; page++) await send('POST', `/c/${gone}/generations`, { prompt: 'x', sendKey: randomUUID(), viewId: page.toString(16).padStart(16, '0') });
    fake.enqueue(scriptReply('Mine.', READY));
    await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'from this page', sendKey: randomUUID(), viewId }));
    await rename(id, 'Drawn');
    const seen = await live.readUntil('Drawn');
    await live.close();
    expect(seen).toContain('from this page');
  });

  it('two saves a page sent from the same revision are not stale for each other; another page\'s is', async () => {
    const id = await conversationWithReply();
    const base = String((await stored(id)).paneRevision);
    const viewId = 'e'.repeat(16);
    expect((await send('PUT', `/c/${id}/prompt`, { prompt: 'one', baseRevision: base, viewId })).status).toBe(200);
    expect((await send('PUT', `/c/${id}/prompt`, { prompt: 'two', baseRevision: base, viewId })).status).toBe(200);
    expect((await stored(id)).prompt).toBe('two');
    expect((await send('PUT', `/c/${id}/prompt`, { prompt: 'three', baseRevision: base, viewId: 'f'.repeat(16) })).status).toBe(409);
  });

  it('an empty baseRevision is no check; a revision of two digits is read as its number', async () => {
    const id = await conversationWithReply();
    expect((await send('PUT', `/c/${id}/prompt`, { prompt: 'unchecked', baseRevision: '' })).status).toBe(200);
    for (let save = 0; (await stored(id)).paneRevision < 10; save++) await send('PUT', `/c/${id}/prompt`, { prompt: `save ${save}` });
    const current = String((await stored(id)).paneRevision);
    const response = await send('PUT', `/c/${id}/prompt`, { prompt: 'checked', baseRevision: current });
    expect(response.status, await response.clone().text()).toBe(200);
    expect((await stored(id)).prompt).toBe('checked');
  });
});
