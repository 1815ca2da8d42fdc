// The page's side of the vision model, on a real port against the fake Ollama (a vision model answering by the
// schema) and the fake AUTOMATIC1111, without Chromium: Check streams "Checking…" and the critique under the
// picture's row (every other page draws it from its live view, and a reload from the stored check), Fix and
// regenerate is Generate with `fix`, a refusal says what to do in the image error slot, Describe saves the prompt on
// screen and makes the description the prompt, and Settings → Models offers the vision model and the loop's settings.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { makePng } from '../fakes/png-bytes.ts';
import { useEasel } from '../helpers/easel.ts';
import { find, partials, read, targets } from '../helpers/html.ts';
import { sendForm } from '../helpers/page-stage.ts';
import { makePictureOfACat } from '../helpers/vision.ts';
import { iterateSseFrames, readSse, readSseFrames } from '../helpers/sse.ts';

const VISION = { name: 'gemma3:4b', capabilities: ['completion', 'vision'] };
const { fake, easel } = useEasel('each test', {
  a1111: { stepDelayMs: 1 },
  flags: ['--vision-model', 'gemma3:4b'],
  ollama: { models: ['mistral:7b', VISION, { name: 'llava:7b', capabilities: ['completion', 'vision'] }] },
});

const CRITIQUE = {
  matches: ['a tabby cat', 'a stack of books'],
  misses: [{ element: 'a blue wizard hat', evidence: 'the cat wears <no> hat' }],
  revisedPrompt: 'a tabby cat wearing a blue wizard hat, sitting on a stack of old books',
};

const send = (method: string, path: string, fields?: Record<string, string> | FormData) => sendForm(easel, method, path, fields);

interface Stored {
  prompt: string;
  settings: Record<string, unknown>;
  promptVersions: Array<{ prompt: string; source: string }>;
  images: Array<{ id: string; prompt: string; seed: number | null; width: number; height: number }>;
}

async function stored(id: string): Promise<Stored> {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as Stored;
}

const pictureOfACat = () => makePictureOfACat(fake, easel);

const rowOf = (imageId: string) => `#log .thumbs:has([data-image-id="${imageId}"])`;

describe('Check on the page (POST /c/:id/images/:imageId/check)', () => {
  it('streams "Checking…" under the picture, then the critique with Fix and regenerate, and the vision model\'s suggestion', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue(JSON.stringify(CRITIQUE));
    const response = await send('POST', `/c/${id}/images/${imageId}/check`);
    expect(response.status, await response.clone().text()).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const frames = (await readSseFrames(response)).map((frame) => frame.data);

    // First: the image error slot cleared, and the line under the picture's row (replacing an earlier one).
    expect(targets(frames[0])).toEqual(['#image-error innerHTML', `#critique-status-${imageId} delete`, `${rowOf(imageId)} afterend`]);
    expect(find(read(frames[0]), `#critique-status-${imageId} .critique-status-text`).text).toBe('Checking the picture with gemma3:4b…');
    // Its Cancel ends the checks; the pictures being made go on.
    expect(find(read(frames[0]), `#critique-status-${imageId} button.cancel`).getAttribute('hx-post')).toBe(`/c/${id}/checks/cancel`);

    // The critique replaces the line and any earlier critique, under the same row.
    const critique = frames.find((frame) => frame.includes('class="critique"'));
    expect(critique).toBeDefined();
    expect(targets(critique)).toEqual([`#critique-status-${imageId} delete`, `#critique-${imageId} delete`, `${rowOf(imageId)} afterend`]);
    const block = find(read(critique), `section#critique-${imageId}`);
    expect(find(block, 'h3').text).toBe('Checked by gemma3:4b');
    expect(block.querySelectorAll('.critique-label').map((label) => label.text)).toEqual(['Shows:', 'Missing or wrong:']);
    expect(block.querySelectorAll('.critique-matches li').map((item) => item.text)).toEqual(['a tabby cat', 'a stack of books']);
    // The model's words are escaped.
    expect(block.querySelectorAll('.critique-misses li').map((item) => item.text)).toEqual(['a blue wizard hat — the cat wears <no> hat']);
    expect(critique).not.toContain('<no>');
    expect(find(block, 'button.fix-image').attributes).toMatchObject({ type: 'submit', form: 'generate-form', name: 'fix', value: imageId });
    expect(find(block, 'button.fix-image').text).toBe('Fix and regenerate');

    // The revised prompt waits beside the user's, said as the vision model's.
    const pane = frames.find((frame) => frame.includes('hx-target="#suggestion"'));
    expect(find(read(pane), '#suggestion-label').text).toBe('The vision model checked the picture and suggests:');
    expect(find(read(pane), '#suggestion-text').text).toBe(CRITIQUE.revisedPrompt);
    expect((await stored(id)).prompt).toBe('a tabby cat on a stack of books');
  });

  it('Fix and regenerate (Generate with fix) makes the picture again on its seed and size from the revised prompt', async () => {
    const { id, imageId } = await pictureOfACat();
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSseFrames(await send('POST', `/c/${id}/images/${imageId}/check`));
    const before = (await stored(id)).images[0]!;
    // The pane's form as the button submits it: the prompt on screen and the settings shown, and fix.
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a tabby cat on a stack of books', steps: '4', cfg: '7', seed: '-1', width: '512', height: '512', negativePrompt: '', fix: imageId, sendKey: randomUUID() });
    expect(response.status, await response.clone().text()).toBe(200);
    await readSseFrames(response);
    const after = await stored(id);
    expect(after.images).toHaveLength(2);
    expect(after.images[1]).toMatchObject({ prompt: CRITIQUE.revisedPrompt, seed: before.seed, width: 64, height: 64 });
    expect(after.prompt).toBe(CRITIQUE.revisedPrompt);
    expect(after.promptVersions.at(-1)).toMatchObject({ prompt: CRITIQUE.revisedPrompt, source: 'vision' });
  });

  it('a picture never checked: Fix and regenerate is refused in the image error slot, nothing made', async () => {
    const { id, imageId } = await pictureOfACat();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a tabby cat on a stack of books', fix: imageId, sendKey: randomUUID() });
    expect(response.status).toBe(409);
    expect(partials(await response.text()).find((partial) => partial.target === '#image-error')?.text).toContain('press Check first');
    expect((await stored(id)).images).toHaveLength(1);
  });

  it('a reference image is refused in the image error slot, in the core\'s words', async () => {
    const { id } = await pictureOfACat();
    const reference = (await (await easel.post(`/api/conversations/${id}/references`, undefined, { headers: { 'content-type': 'image/png' }, body: makePng(8, 8) as BodyInit })).json()) as { id: string };
    const before = fake.chatRequests().length;
    const response = await send('POST', `/c/${id}/images/${reference.id}/check`);
    expect(response.status).toBe(422);
    const said = partials(await response.text());
    expect(said.map((partial) => partial.target)).toEqual(['#image-error']);
    expect(said[0]?.text).toContain('Describe writes a prompt from it instead');
    expect(fake.chatRequests().length).toBe(before);
  });

  it('every other page draws the check live: "Checking…", then the critique, under the picture', async () => {
    const { id, imageId } = await pictureOfACat();
    const hangup = new AbortController();
    const live = await fetch(`${easel.url}/c/${id}/events?view=${'a'.repeat(16)}`, { signal: hangup.signal });
    const frames = iterateSseFrames(live.body as ReadableStream<Uint8Array>);
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSseFrames(await send('POST', `/c/${id}/images/${imageId}/check`));
    const seen: string[] = [];
    for await (const frame of frames) {
      seen.push(frame.data);
      if (frame.data.includes('class="critique"')) break;
    }
    hangup.abort();
    const started = seen.find((data) => data.includes('Checking the picture with'));
    expect(started).toBeDefined();
    expect(targets(started)).toEqual([`#critique-status-${imageId} delete`, `${rowOf(imageId)} afterend`]);
    expect(find(read(seen.at(-1)), `#critique-${imageId} h3`).text).toBe('Checked by gemma3:4b');
  });

  it('a reload shows each picture\'s latest critique under its row; Check is on generated pictures only', async () => {
    const { id, imageId } = await pictureOfACat();
    await easel.post(`/api/conversations/${id}/references`, undefined, { headers: { 'content-type': 'image/png' }, body: makePng(8, 8) as BodyInit });
    fake.enqueue(JSON.stringify({ matches: ['a cat'], misses: [], revisedPrompt: 'a tabby cat on a stack of books' }));
    await readSseFrames(await send('POST', `/c/${id}/images/${imageId}/check`));
    fake.enqueue(JSON.stringify(CRITIQUE));
    await readSseFrames(await send('POST', `/c/${id}/images/${imageId}/check`));
    const page = read(await (await fetch(`${easel.url}/c/${id}`)).text());
    const blocks = page.querySelectorAll('#log .critique');
    expect(blocks).toHaveLength(1);
    expect(blocks[0]?.querySelectorAll('.critique-misses li').map((item) => item.text)).toEqual(['a blue wizard hat — the cat wears <no> hat']);
    // Right under the row that holds the picture.
    const row = find(page, `#log [data-image-id="${imageId}"]`).closest('.thumbs');
    expect(row?.nextElementSibling?.id).toBe(`critique-${imageId}`);
    const checks = page.querySelectorAll('#log button.check-image');
    expect(checks.map((button) => button.getAttribute('hx-post'))).toEqual([`/c/${id}/images/${imageId}/check`]);
    expect(find(page, '#log .msg.reference').querySelector('button.check-image')).toBeNull();
  });
});

describe('without a vision model', () => {
  const bare = useEasel('each test', { a1111: { stepDelayMs: 1 } });

  it('Check says what to pull in the image error slot, with a link to Settings → Models', async () => {
    const id = await bare.easel.newConversation();
    const events = await readSse(await bare.easel.post(`/api/conversations/${id}/generations`, { prompt: 'a cat', settings: { steps: 2, width: 64, height: 64 } }));
    const imageId = String(events.find((event) => event.type === 'image')?.data['id']);
    const response = await sendForm(bare.easel, 'POST', `/c/${id}/images/${imageId}/check`);
    expect(response.status).toBe(503);
    const slot = find(read(await response.text()), 'hx-partial[hx-target="#image-error"] .image-error');
    expect(slot.text).toContain('ollama pull gemma3');
    expect(find(slot, 'a.pick-model').attributes).toMatchObject({ href: '#setting-visionModel', 'data-field': 'setting-visionModel' });
  });
});

describe('Describe on the page (POST /c/:id/describe)', () => {
  const picture = (fields: Record<string, string> = {}, file: Blob = new Blob([makePng(24, 16) as Uint8Array<ArrayBuffer>], { type: 'image/png' }), name = 'fox.png') => {
    const form = new FormData();
    form.append('file', file, name);
    for (const [key, value] of Object.entries(fields)) form.append(key, value);
    return form;
  };

  it('saves the prompt on screen first, says "Describing…", then makes the description the prompt shown, one undo away', async () => {
    const { id } = await pictureOfACat();
    fake.enqueue(JSON.stringify({ prompt: 'a red fox in deep snow', subject: 'a fox <in> the snow' }));
    const response = await send('POST', `/c/${id}/describe`, picture({ prompt: 'my own words, not saved yet' }));
    expect(response.status, await response.clone().text()).toBe(200);
    const frames = (await readSseFrames(response)).map((frame) => frame.data);
    expect(partials(frames[0])).toEqual([{ target: '#describe-status', swap: 'innerHTML', text: 'Describing the picture…' }]);
    const said = frames.flatMap((frame) => partials(frame)).filter((partial) => partial.target === '#describe-status');
    expect(said.at(-1)?.text).toBe('The prompt now describes the picture (a fox <in> the snow). Undo brings yours back.');
    // The description replaces the prompt shown (asked for), not only where nothing is typed.
    const values = find(read(frames.find((frame) => frame.includes('pane-values'))), '.pane-values');
    expect(values.attributes).toMatchObject({ 'data-prompt': 'a red fox in deep snow', 'data-force': 'yes' });
    const after = await stored(id);
    expect(after.promptVersions.slice(-2).map((version) => [version.prompt, version.source])).toEqual([
      ['my own words, not saved yet', 'user'],
      ['a red fox in deep snow', 'vision'],
    ]);
    expect((await send('POST', `/c/${id}/prompt/undo`)).status).toBe(200);
    expect((await stored(id)).prompt).toBe('my own words, not saved yet');
  });

  it('refuses what is not a picture (415) beside the prompt, asking nothing and starting no conversation', async () => {
    const id = await easel.newConversation();
    const text = await send('POST', `/c/${id}/describe`, picture({}, new Blob(['hello'], { type: 'text/plain' }), 'notes.txt'));
    expect(text.status).toBe(415);
    expect(partials(await text.text())[0]?.text).toContain('notes.txt is not a PNG, JPEG or WebP picture');
    const draft = randomUUID();
    const refused = await send('POST', `/c/${draft}/describe`, picture({ startNew: '1' }, new Blob(['hello'], { type: 'text/plain' }), 'notes.txt'));
    expect(refused.status).toBe(415);
    expect((await easel.get(`/api/conversations/${draft}`)).status).toBe(404);
    expect(fake.chatRequests()).toHaveLength(0);
  });

  it('on the empty page a picture starts the conversation with the prompt typed and the settings set, its description on top', async () => {
    const draft = randomUUID();
    fake.enqueue(JSON.stringify({ prompt: 'a red fox in deep snow', subject: 'a fox' }));
    // The settings form comes along (hx-include), its vision model chosen there: that model describes it.
    const settings = { steps: '12', cfg: '7', seed: '-1', width: '512', height: '512', negativePrompt: '', visionModel: 'llava:7b' };
    const response = await send('POST', `/c/${draft}/describe`, picture({ startNew: '1', prompt: 'my first words', ...settings }));
    expect(response.status).toBe(200);
    const html = (await readSseFrames(response)).map((frame) => frame.data).join('\n');
    expect(html).toContain('<hx-partial hx-target="#start-new" hx-swap="delete">');
    const stored = (await (await easel.get(`/api/conversations/${draft}`)).json()) as { prompt: string; settings: { steps: number; visionModel: string }; promptVersions: Array<{ prompt: string; source: string }> };
    expect(stored.prompt).toBe('a red fox in deep snow');
    // What was typed is one undo away.
    expect(stored.promptVersions.map((version) => [version.prompt, version.source])).toEqual([
      ['my first words', 'user'],
      ['a red fox in deep snow', 'vision'],
    ]);
    expect(stored.settings).toMatchObject({ steps: 12, visionModel: 'llava:7b' });
    expect((fake.requests.filter((request) => request.path === '/api/chat').at(-1)?.body as { model: string }).model).toBe('llava:7b');
  });
});

describe('Settings → Models and the loop', () => {
  it('the vision model select: the default named, models that see enabled, the others disabled', async () => {
    const id = await easel.newConversation();
    const response = await fetch(`${easel.url}/c/${id}/models`);
    const root = read(await response.text());
    const options = root.querySelectorAll('#setting-visionModel option').map((option) => `${option.getAttribute('value')}${option.hasAttribute('disabled') ? ' (disabled)' : ''}`);
    expect(options).toEqual(['', 'mistral:7b (disabled)', 'gemma3:4b', 'llava:7b']);
    expect(find(root, '#setting-visionModel option[value=""]').text).toBe('Default (gemma3:4b)');
    expect(find(root, '#models-vision-note').text).not.toContain('ollama pull');
  });

  it('the vision model, "Check each new picture" and "Correct it up to" are saved from the settings form', async () => {
    const id = await easel.newConversation();
    const response = await send('PUT', `/c/${id}/settings`, { visionModel: 'llava:7b', autoCheck: 'on', autoRefine: '2', changed: 'visionModel,autoCheck,autoRefine' });
    expect(response.status, await response.text()).toBe(200);
    expect((await stored(id)).settings).toMatchObject({ visionModel: 'llava:7b', autoCheck: true, autoRefine: 2 });
    const refused = await send('PUT', `/c/${id}/settings`, { visionModel: 'mistral:7b', changed: 'visionModel' });
    expect(refused.status).toBe(422);
    expect(partials(await refused.text()).find((partial) => partial.target === '#error-visionModel')?.text).toContain('cannot see images');
    const page = read(await (await fetch(`${easel.url}/c/${id}`)).text());
    expect(find(page, '#setting-autoCheck').hasAttribute('checked')).toBe(true);
    expect(find(page, '#setting-autoRefine option[selected]').text).toBe('twice');
  });
});
