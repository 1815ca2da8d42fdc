// The gallery in a real browser, against the fake AUTOMATIC1111: the grid of thumbnails (newest first, sized before
// they load), the search and the filters, "More", the large view stepped through with the arrow keys, Delete (the
// grid drops it, and so does the conversation open in another tab), Remix, Vary and Use prompt.
import { afterEach, beforeAll, expect, it } from 'vitest';
import { readSse } from '../helpers/sse.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';

interface Made {
  id: string;
  conversationId: string;
  prompt: string;
  seed: number;
}

describeInBrowser('the gallery', () => {
  const { stage, open, page, a1111 } = useBrowserStage({ a1111: { stepDelayMs: 1 } });
  /** Every image made for the suite, oldest first. */
  const made: Made[] = [];
  let fox = '';
  let boat = '';

  async function makeImage(conversationId: string, prompt: string, seed: number): Promise<Made> {
    const response = await stage.easel.post(`/api/conversations/${conversationId}/generations`, { prompt, settings: { steps: 2, seed, width: 512, height: 384 } });
    const image = (await readSse(response)).find((event) => event.type === 'image');
    if (!image) throw new Error('no image was made');
    const entry = { id: String(image.data.id), conversationId, prompt, seed };
    made.push(entry);
    return entry;
  }

  beforeAll(async () => {
    fox = await stage.easel.newConversation();
    boat = await stage.easel.newConversation();
    for (const [id, title] of [[fox, 'Foxes'], [boat, 'Boats']] as const) {
      const renamed = await fetch(`${stage.easel.url}/api/conversations/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title }) });
      expect(renamed.status).toBe(200);
    }
    await makeImage(fox, 'a red fox in the snow', 101);
    await makeImage(boat, 'a paper boat on a pond', 102);
    await makeImage(fox, 'a red fox asleep under a tree', 103);
    await makeImage(boat, 'a paper boat in the rain', 104);
  });

  afterEach(async () => {
    // A clean page logs nothing: no CSP violation, no script error, no failed thumbnail.
    expect(open.problems).toEqual([]);
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  const grid = () => page.getByRole('list', { name: 'Pictures, newest first' });
  const thumbs = () => grid().locator('[data-gallery-image]');
  const shownIds = () => thumbs().evaluateAll((items) => items.map((item) => (item as HTMLElement).dataset.id ?? ''));
  const view = () => page.getByRole('dialog', { name: 'Picture' });
  const live = () => made.filter((image) => !deleted.has(image.id));
  const deleted = new Set<string>();

  async function openGallery(query = ''): Promise<void> {
    open.problems.length = 0;
    open.requests.length = 0;
    const response = await page.goto(`${stage.easel.url}/gallery${query}`);
    expect(response?.status()).toBe(200);
  }

  it('shows every picture as a thumbnail, newest first, sized before it loads; the sidebar leads there', async () => {
    await page.goto(`${stage.easel.url}/c/${fox}`);
    open.problems.length = 0;
    await page.getByRole('navigation', { name: 'Conversations' }).getByRole('link', { name: 'Gallery' }).click();
    await page.waitForURL(`${stage.easel.url}/gallery`);
    expect(await shownIds()).toEqual(live().map((image) => image.id).reverse());
    const first = thumbs().first().locator('img');
    const newest = live().at(-1);
    expect(await first.getAttribute('src')).toBe(`/images/thumbs/${newest?.id}.webp`);
    // 512×384 → 384×288: the space is kept before the picture arrives, and far ones wait until they come near.
    expect([await first.getAttribute('width'), await first.getAttribute('height'), await first.getAttribute('loading')]).toEqual(['384', '288', 'lazy']);
    expect(await first.getAttribute('alt')).toBe(`Image: ${newest?.prompt}`);
    await poll(() => first.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(384);
    expect(open.requests).toContain(`GET /images/thumbs/${newest?.id}.webp`);
    // The page's own heading and controls.
    await expect(page.getByRole('heading', { name: 'Gallery' }).isVisible()).resolves.toBe(true);
    expect(await page.getByRole('combobox', { name: 'Conversation' }).locator('option').allTextContents()).toEqual(['All conversations', 'Boats', 'Foxes']);
  });

  it('narrows the grid by the prompt’s words, the conversation and the checkpoint; the address follows', async () => {
    await openGallery();
    await page.getByRole('searchbox', { name: 'Search prompts' }).fill('RED fox');
    await poll(shownIds).toEqual(live().filter((image) => image.prompt.includes('red fox')).map((image) => image.id).reverse());
    await poll(() => page.url()).toBe(`${stage.easel.url}/gallery?q=RED+fox`);
    await page.getByRole('searchbox', { name: 'Search prompts' }).fill('no such words');
    await poll(() => page.getByRole('status').first().textContent()).toContain('No picture matches');
    expect(await thumbs().count()).toBe(0);

    await page.getByRole('searchbox', { name: 'Search prompts' }).fill('');
    await page.getByRole('combobox', { name: 'Conversation' }).selectOption(boat);
    await poll(shownIds).toEqual(live().filter((image) => image.conversationId === boat).map((image) => image.id).reverse());
    await page.getByRole('combobox', { name: 'Checkpoint' }).selectOption('v1-5-pruned-emaonly');
    await poll(() => page.url()).toBe(`${stage.easel.url}/gallery?conversationId=${boat}&checkpoint=v1-5-pruned-emaonly`);
    expect(await shownIds()).toEqual(live().filter((image) => image.conversationId === boat).map((image) => image.id).reverse());

    // A reload shows the same.
    await page.reload();
    expect(await shownIds()).toEqual(live().filter((image) => image.conversationId === boat).map((image) => image.id).reverse());
    expect(await page.getByRole('combobox', { name: 'Conversation' }).inputValue()).toBe(boat);
  });

  it('"More" adds the next page to the grid until there is none', async () => {
    await openGallery('?limit=3');
    const all = live().map((image) => image.id).reverse();
    expect(await shownIds()).toEqual(all.slice(0, 3));
    await page.getByRole('button', { name: 'More' }).click();
    await poll(shownIds).toEqual(all);
    await poll(() => page.getByRole('button', { name: 'More' }).count()).toBe(0);
  });

  it('opens the large view; the arrow keys (and Previous, Next) step through the pictures, past the page into the next', async () => {
    await openGallery('?limit=2');
    const order = live().slice().reverse();
    await thumbs().first().click();
    await poll(() => view().isVisible()).toBe(true);
    const field = (id: string) => page.locator(`#gallery-dialog-${id}`);
    expect(await field('prompt').textContent()).toBe(order[0]?.prompt);
    expect(await field('seed').textContent()).toBe(String(order[0]?.seed));
    expect(await field('size').textContent()).toBe('512 × 384');
    expect(await field('model').textContent()).toBe('v1-5-pruned-emaonly');
    expect(await field('sampler').textContent()).not.toBe('—');
    expect(await page.locator('#gallery-dialog-img').getAttribute('src')).toBe(`/images/${order[0]?.id}.png`);
    expect(await view().getByRole('link', { name: 'Open its conversation' }).getAttribute('href')).toBe(`/c/${order[0]?.conversationId}`);
    expect(await view().getByRole('link', { name: 'Download' }).getAttribute('download')).toBe(`easel-${order[0]?.seed}-a-paper-boat-in-the-rain.png`);
    expect(await view().getByRole('button', { name: '← Previous' }).isDisabled()).toBe(true);

    await page.keyboard.press('ArrowRight');
    await poll(() => field('prompt').textContent()).toBe(order[1]?.prompt);
    // The end of the first page: Next brings the next page and moves on to its first picture.
    await page.keyboard.press('ArrowRight');
    await poll(() => field('prompt').textContent()).toBe(order[2]?.prompt);
    expect(await thumbs().count()).toBe(4);
    await page.keyboard.press('ArrowLeft');
    await poll(() => field('prompt').textContent()).toBe(order[1]?.prompt);
    await view().getByRole('button', { name: 'Next →' }).click();
    await view().getByRole('button', { name: 'Next →' }).click();
    await poll(() => field('prompt').textContent()).toBe(order[3]?.prompt);
    expect(await view().getByRole('button', { name: 'Next →' }).isDisabled()).toBe(true);
    expect(await page.locator('#gallery-dialog-position').textContent()).toBe('4 of 4');

    await page.keyboard.press('Escape');
    await poll(() => view().isVisible()).toBe(false);
    // Focus goes back to the picture last shown.
    await poll(() => page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.id)).toBe(order[3]?.id);
  });

  it('Delete asks first, then the picture goes: from the grid, its file, and the conversation open in another tab', async () => {
    const target = live().find((image) => image.conversationId === fox);
    if (!target) throw new Error('no picture to delete');
    // The conversation in another tab, following it live.
    const other = await open.context.newPage();
    const otherProblems: string[] = [];
    other.on('console', (message) => {
      if (message.type() === 'error') otherProblems.push(message.text());
    });
    await other.goto(`${stage.easel.url}/c/${fox}`);
    await other.locator('#status .state').first().waitFor();
    const inOther = () => other.locator(`#log [data-url="/images/${target.id}.png"]`).count();
    expect(await inOther()).toBe(1);

    await openGallery();
    await grid().locator(`#gallery-item-${target.id} button`).click();
    await poll(() => view().isVisible()).toBe(true);
    let asked = '';
    page.once('dialog', (dialog) => {
      asked = dialog.message();
      void dialog.dismiss();
    });
    await view().getByRole('button', { name: 'Delete' }).click();
    await poll(() => asked).toContain('Delete this picture?');
    expect(await shownIds()).toContain(target.id);

    page.once('dialog', (dialog) => void dialog.accept());
    await view().getByRole('button', { name: 'Delete' }).click();
    await poll(shownIds).not.toContain(target.id);
    deleted.add(target.id);
    // The view moved on to the next picture.
    expect(await page.locator('#gallery-dialog-status').textContent()).toBe('Deleted.');
    expect(await page.locator('#gallery-dialog-prompt').textContent()).not.toBe(target.prompt);
    const listed = (await (await stage.easel.get('/api/images')).json()) as { images: Array<{ id: string }> };
    expect(listed.images.map((image) => image.id)).not.toContain(target.id);
    expect((await stage.easel.get(`/images/${target.id}.png`)).status).toBe(404);

    await poll(inOther).toBe(0);
    expect(otherProblems).toEqual([]);
    await other.close();
    await page.keyboard.press('Escape');
  });

  it('Remix makes a new picture in its conversation from the prompt and settings with a new seed; Use prompt sets the prompt', async () => {
    const source = live().find((image) => image.conversationId === boat);
    if (!source) throw new Error('no picture to remix');
    await openGallery();
    await grid().locator(`#gallery-item-${source.id} button`).click();
    const before = a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length;
    const paneBefore = ((await (await stage.easel.get(`/api/conversations/${boat}`)).json()) as { prompt: string }).prompt;
    await view().getByRole('button', { name: 'Remix' }).click();
    await page.waitForURL(`${stage.easel.url}/c/${boat}`);
    await poll(() => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length).toBe(before + 1);
    const sent = a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').at(-1)?.body as Record<string, unknown>;
    expect(sent).toMatchObject({ prompt: source.prompt, steps: 2, width: 512, height: 384 });
    expect(sent.seed).not.toBe(source.seed);
    await poll(() => page.locator('#image-frame img').getAttribute('src')).not.toBe(`/images/${source.id}.png`);
    // Remix makes a picture; it does not change the conversation's prompt (Use prompt does that).
    expect(await page.getByRole('textbox', { name: 'Prompt', exact: true }).inputValue()).toBe(paneBefore);
    expect(((await (await stage.easel.get(`/api/conversations/${boat}`)).json()) as { prompt: string }).prompt).toBe(paneBefore);
    // The new picture is in the gallery (first), and stays out of this suite's bookkeeping.
    // The request reached the server before the picture is stored: wait for it to be listed.
    const newest = async () => ((await (await stage.easel.get('/api/images')).json()) as { images: Array<{ id: string; prompt: string }> }).images[0];
    await poll(async () => (await newest())?.prompt).toBe(source.prompt);
    deleted.add((await newest())?.id ?? '');

    const other = live().find((image) => image.conversationId === boat && image.prompt !== source.prompt) ?? source;
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('something else entirely');
    await poll(async () => ((await (await stage.easel.get(`/api/conversations/${boat}`)).json()) as { prompt: string }).prompt).toBe('something else entirely');
    await openGallery();
    await grid().locator(`#gallery-item-${other.id} button`).click();
    await view().getByRole('button', { name: 'Use prompt' }).click();
    await page.waitForURL(`${stage.easel.url}/c/${boat}`);
    expect(await page.getByRole('textbox', { name: 'Prompt', exact: true }).inputValue()).toBe(other.prompt);
  });

  it('Vary (subtle) starts from the picture shown, in its conversation; the variation says where it came from', async () => {
    const source = live().find((image) => image.conversationId === fox);
    if (!source) throw new Error('no picture to vary');
    await openGallery();
    await grid().locator(`#gallery-item-${source.id} button`).click();
    await view().getByRole('button', { name: 'Vary (subtle)' }).click();
    await page.waitForURL(`${stage.easel.url}/c/${fox}`);
    await poll(() => a1111.requests.filter((request) => request.path === '/sdapi/v1/img2img').length).toBe(1);
    const sent = a1111.requests.find((request) => request.path === '/sdapi/v1/img2img')?.body as Record<string, unknown>;
    expect(sent).toMatchObject({ prompt: source.prompt, denoising_strength: 0.35 });
    const listed = (await (await stage.easel.get('/api/images')).json()) as { images: Array<{ id: string; source?: { imageId: string } }> };
    await poll(async () => ((await (await stage.easel.get('/api/images')).json()) as typeof listed).images[0]?.source?.imageId).toBe(source.id);
    deleted.add(((await (await stage.easel.get('/api/images')).json()) as typeof listed).images[0]?.id ?? '');
    // Its large view says so.
    await openGallery();
    await grid().locator('.gallery-item button').first().click();
    expect(await view().locator('#gallery-dialog-source').textContent()).toBe('Varied from another picture, strength 0.35');
    await page.keyboard.press('Escape');
  });
});
