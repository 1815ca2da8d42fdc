// The image area in a real browser, against the fake AUTOMATIC1111: auto-generation on and off,
// Generate, progress, Cancel, a backend that is down, and the large view with its settings.
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { findClosedPort } from '../helpers/ports.ts';
import { conversationIdOf, recordStates, type Watch } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';
import { replyMeta } from '../helpers/replies.ts';

// Few steps: the fake backend's images come quickly.
const meta = (prompt: string, extra: Record<string, unknown> = {}) => replyMeta(prompt, { steps: 4, ...extra });

/** Every state of the progressbar: its aria-valuenow, or "indeterminate" when it has none. */
const PROGRESS: Watch = {
  root: '#image-status',
  observe: { childList: true, subtree: true, attributes: true },
  element: { first: '#image-status [role="progressbar"]' },
  attribute: { name: 'aria-valuenow', orElse: 'indeterminate' },
};

interface StoredConversation {
  prompt: string;
  settings: Record<string, unknown>;
  turns: Array<{ role: string; images?: unknown[] }>;
}

describeInBrowser('the image area', () => {
  const { stage, open, page, a1111 } = useBrowserStage({ a1111: { stepDelayMs: 40 } });
  let extraEasel: TestEasel | undefined;

  afterEach(async () => {
    await extraEasel?.close();
    extraEasel = undefined;
    // A clean page logs nothing: no CSP violation, no script error, no htmx warning.
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
    expect(stage.fake.pendingReplies).toBe(0);
  });

  const txt2img = () => a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img');
  const imageInFrame = () => page.locator('#image-frame img');
  const promptBox = () => page.getByRole('textbox', { name: 'Prompt', exact: true });
  const field = (label: string) => page.getByLabel(label, { exact: true });
  const dialog = () => page.getByRole('dialog', { name: 'Image and its settings' });
  const stored = async (id: string) => (await (await stage.easel.get(`/api/conversations/${id}`)).json()) as StoredConversation;

  /** A new conversation, its settings set first (few steps keep the suite fast), the backend seen as up. */
  async function openConversation(settings: Record<string, unknown> = { steps: 4 }): Promise<string> {
    const id = await stage.easel.newConversation();
    expect((await stage.easel.put(`/api/conversations/${id}/settings`, settings)).status).toBe(200);
    open.problems.length = 0;
    open.requests.length = 0;
    await page.goto(`${stage.easel.url}/c/${encodeURIComponent(id)}`);
    await poll(() => page.locator('#status').textContent()).toContain('AUTOMATIC1111 answers');
    // Generate also waits for a prompt; the backend being up is what the page knows at this point.
    await poll(() => page.locator('#generate').getAttribute('data-backend-ready')).toBe('yes');
    return id;
  }

  async function send(text: string): Promise<void> {
    await page.getByRole('textbox', { name: 'Message' }).fill(text);
    await page.getByRole('textbox', { name: 'Message' }).press('Enter');
  }

  async function waitForReply(): Promise<void> {
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Send' }).isEnabled()).toBe(true);
  }

  /** Generate from the prompt pane; resolves once the new image fills the image area. */
  async function generate(promptText: string): Promise<void> {
    const before = (await imageInFrame().count()) > 0 ? await imageInFrame().getAttribute('src') : null;
    await promptBox().fill(promptText);
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await poll(async () => ((await imageInFrame().count()) > 0 ? imageInFrame().getAttribute('src') : null)).not.toBe(before);
    await poll(() => page.locator('#image-status .generation').count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Generate', exact: true }).isEnabled()).toBe(true);
  }

  it('makes the image when the assistant is ready: it fills the image area and is a thumbnail in the reply', async () => {
    await openConversation({ autoGenerate: true });
    const requestsBefore = txt2img().length;
    const progress = await recordStates(page, PROGRESS);
    stage.fake.enqueue(scriptReply('Here it comes.', meta('a paper boat on a pond', { generate_image: true, steps: 6, seed: 42 })));
    await send('a paper boat');

    await poll(() => imageInFrame().getAttribute('src')).toMatch(/^\/images\/[a-f0-9]{32}\.png$/);
    expect(await imageInFrame().evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0)).toBe(true);
    expect(await page.locator('#image-frame').textContent()).toContain('Seed 42');
    const reply = page.locator('#log .msg.assistant').last();
    await poll(() => reply.locator('.thumbs img').count()).toBe(1);
    expect(await reply.locator('.thumbs img').getAttribute('alt')).toBe('Image: a paper boat on a pond');
    // Every picture can be saved under a readable name, and shows its prompt on hover.
    const src = await imageInFrame().getAttribute('src');
    for (const link of [page.locator('#image-frame a.download'), reply.locator('.thumbs a.download')]) {
      expect(await link.getAttribute('download')).toBe('easel-42-a-paper-boat-on-a-pond.png');
      expect(await link.getAttribute('href')).toBe(src);
    }
    expect(await reply.locator('.thumbs .thumb').getAttribute('title')).toBe('a paper boat on a pond');
    expect(await page.locator('#image-frame .current').getAttribute('title')).toBe('a paper boat on a pond');
    // The bar was shown (the backend's first poll comes only after a while) and is gone again.
    expect((await progress()).length).toBeGreaterThan(0);
    await poll(() => page.getByRole('progressbar').count()).toBe(0);
    expect(txt2img().length).toBe(requestsBefore + 1);
    expect(txt2img().at(-1)?.body).toMatchObject({ prompt: 'a paper boat on a pond', steps: 6, seed: 42 });

    // A big picture scrolls inside the side column: the composer stays in view.
    const sendBox = await page.getByRole('button', { name: 'Send' }).boundingBox();
    expect(sendBox!.y + sendBox!.height).toBeLessThanOrEqual(page.viewportSize()!.height);

    await page.reload();
    await poll(() => imageInFrame().count()).toBe(1);
    expect(await page.locator('#log .msg.assistant .thumbs img').count()).toBe(1);
  });

  it('a finished image in a background tab puts "Image ready" in the title until the tab is seen', async () => {
    await openConversation({ autoGenerate: true });
    const title = await page.title();
    // The tab goes to the background (what switching tabs does to the page's visibility).
    await page.evaluate(() => {
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
      document.dispatchEvent(new Event('visibilitychange'));
    });
    stage.fake.enqueue(scriptReply('Coming up.', meta('a kite over dunes', { generate_image: true, steps: 4 })));
    await send('a kite');
    await poll(() => imageInFrame().count()).toBe(1);
    await poll(() => page.title()).toBe(`Image ready · ${title}`);
    await page.evaluate(() => {
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'visible' });
      document.dispatchEvent(new Event('visibilitychange'));
    });
    expect(await page.title()).toBe(title);
  });

  it('makes no image when "Generate automatically" is off: no request reaches the backend', async () => {
    await openConversation();
    const auto = page.getByRole('checkbox', { name: /Generate automatically/ });
    expect(await auto.isChecked()).toBe(true);
    await auto.uncheck();
    await poll(() => page.locator('#settings-status').textContent()).toBe('Saved.');
    const requestsBefore = a1111.requests.length;

    stage.fake.enqueue(scriptReply('Ready when you are.', meta('a red kite over dunes', { generate_image: true })));
    await send('a kite');
    await waitForReply();
    await poll(() => promptBox().inputValue()).toBe('a red kite over dunes');
    expect(await page.locator('#image-status').innerHTML()).toBe('');
    expect(await imageInFrame().count()).toBe(0);
    expect(await page.locator('#log .thumbs img').count()).toBe(0);
    // Health checks may still ask for the options (and whether it is sd-server); nothing else goes to the backend.
    const healthPaths = ['/sdapi/v1/options', '/sdcpp/v1/capabilities'];
    expect(a1111.requests.slice(requestsBefore).filter((r) => !healthPaths.includes(r.path))).toEqual([]);
  });

  it('Generate uses the prompt and settings on screen and puts the image in the chat where it was made', async () => {
    const id = await openConversation();
    stage.fake.enqueue(scriptReply('A lantern, then.', meta('a lantern')), scriptReply('Brighter it is.', meta('a bright lantern')));
    await send('a lantern');
    await waitForReply();

    // The steps edit is still being saved when Generate is pressed: the request carries it anyway.
    await field('Steps').fill('5');
    await promptBox().fill('a lantern in the fog');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await poll(() => imageInFrame().getAttribute('alt')).toBe('Image: a lantern in the fog');
    expect(txt2img().at(-1)?.body).toMatchObject({ prompt: 'a lantern in the fog', steps: 5 });
    await poll(() => page.locator('#log .msg.generated .thumbs img').count()).toBe(1);

    await send('brighter');
    await waitForReply();
    const order = () => page.locator('#log > *').evaluateAll((nodes) => nodes.map((node) => node.className));
    const expected = ['msg user', 'msg assistant', 'msg generated', 'msg user', 'msg assistant'];
    expect(await order()).toEqual(expected);
    // Made by the button, it belongs to no turn; the reload places it by time.
    expect((await stored(id)).turns.some((turn) => turn.images !== undefined)).toBe(false);

    await page.reload();
    await poll(order).toEqual(expected);
    expect(await page.locator('#log .msg.generated img').getAttribute('alt')).toBe('Image: a lantern in the fog');
    // The entry says what it was made from.
    expect(await page.locator('#log .msg.generated .generated-prompt').textContent()).toBe('a lantern in the fog');
  });

  it('a run of Generate entries says "Made with Generate" once to the eye, and on each entry to a screen reader', async () => {
    await openConversation();
    await generate('a lantern');
    await generate('a brighter lantern');
    const labels = page.locator('#log .msg.generated .generated-label');
    for (const when of ['live', 'reloaded']) {
      if (when === 'reloaded') await page.reload();
      await poll(() => labels.count()).toBe(2);
      expect(await labels.allTextContents(), when).toEqual(['Easel: Made with Generate', 'Easel: Made with Generate']);
      // The first label is seen; the one right after it takes no room on screen.
      const heights = await labels.evaluateAll((nodes) => nodes.map((node) => node.getBoundingClientRect().height));
      expect(heights[0], when).toBeGreaterThan(8);
      expect(heights[1], when).toBeLessThanOrEqual(1);
      expect(await page.locator('#log .msg.generated .generated-prompt').allTextContents(), when).toEqual(['a lantern', 'a brighter lantern']);
    }
  });

  it('shows the progress the backend reports: an indeterminate bar, then a growing aria-valuenow', async () => {
    await openConversation({ steps: 40 });
    const progress = await recordStates(page, PROGRESS);
    await promptBox().fill('a slow tide');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    const bar = page.getByRole('progressbar', { name: 'Image progress' });
    await poll(() => bar.getAttribute('aria-valuenow')).toMatch(/^\d+$/);
    await poll(() => imageInFrame().getAttribute('alt')).toBe('Image: a slow tide');

    const states = await progress();
    expect(states[0]).toBe('indeterminate');
    const values = [...new Set(states.filter((s) => s !== 'indeterminate').map(Number))];
    expect(values.length).toBeGreaterThanOrEqual(3);
    expect(values).toEqual([...values].sort((a, b) => a - b));
    expect(values.every((v) => v >= 0 && v <= 100)).toBe(true);
    expect(await bar.count()).toBe(0);
  });

  it('Cancel interrupts the backend and says so inline, keeping the prompt', async () => {
    await openConversation({ steps: 150 });
    await promptBox().fill('a slow sunrise');
    const interrupts = a1111.interrupts;
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.getByRole('progressbar', { name: 'Image progress' }).waitFor();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await poll(() => a1111.interrupts).toBeGreaterThan(interrupts);
    // A Cancel the user pressed is a quiet note (a status), not an alert.
    await poll(() => page.locator('#image-error [role="status"].image-note').textContent()).toMatch(/cancelled.*The prompt is kept/);
    expect(await page.locator('#image-error [role="alert"]').count()).toBe(0);
    await poll(() => page.getByRole('progressbar').count()).toBe(0);
    expect(await promptBox().inputValue()).toBe('a slow sunrise');
    expect(await imageInFrame().count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Generate', exact: true }).isEnabled()).toBe(true);
  });

  it("Cancel stops the image a reply started on its own; the reply's text stays", async () => {
    await openConversation({ autoGenerate: true });
    const interrupts = a1111.interrupts;
    stage.fake.enqueue(scriptReply('Painting it now.', meta('a slow sunset', { generate_image: true, steps: 150 })));
    await send('a sunset');
    await page.getByRole('progressbar', { name: 'Image progress' }).waitFor();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await poll(() => a1111.interrupts).toBeGreaterThan(interrupts);
    await poll(() => page.locator('#image-error [role="status"]').textContent()).toMatch(/cancelled.*The prompt is kept/);
    await waitForReply();
    expect(await page.locator('#log .msg.assistant .text').last().textContent()).toBe('Painting it now.');
    expect(await imageInFrame().count()).toBe(0);
  });

  it('Cancel during a reply stops the image only: the reply is written to the end', async () => {
    await openConversation({ steps: 150 });
    const words = Array.from({ length: 30 }, (_, i) => `word${i} `);
    stage.fake.enqueue({ chunks: [...words, '\n---\n{"prompt": "a lake", "generate_image": false, "steps": 4, "cfg": 7, "seed": -1}'], delayMs: 30 });
    const hangups = stage.fake.hangups;
    await send('tell me a long story');
    await poll(() => page.locator('#log .msg.assistant .text').last().textContent()).toContain('word1');
    await promptBox().fill('a quick sketch');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await poll(() => page.locator('#image-error [role="status"]').textContent()).toContain('cancelled');
    await waitForReply();
    expect(await page.locator('#log .msg.assistant .text').last().textContent()).toContain('word29');
    expect(await page.locator('#log .msg.assistant .notes').last().textContent()).not.toContain('Stopped');
    expect(stage.fake.hangups).toBe(hangups);
  });

  it('a backend that is down shows in the status line and inline; the chat goes on', async () => {
    const port = await findClosedPort();
    extraEasel = await startTestEasel({ ollamaUrl: stage.fake.url, flags: ['--image-backend', 'a1111', '--image-url', `http://127.0.0.1:${port}`] });
    const id = await extraEasel.newConversation();
    await page.goto(`${extraEasel.url}/c/${id}`);
    await poll(() => page.locator('#status .state.warn').textContent()).toContain(`127.0.0.1:${port} is not answering`);

    stage.fake.enqueue(scriptReply('Making it now.', meta('a windmill at dusk', { generate_image: true })), scriptReply('Sure, taller.', meta('a tall windmill at dusk')));
    await send('a windmill');
    await waitForReply();
    await poll(() => page.locator('#log .msg.assistant .text').last().textContent()).toBe('Making it now.');
    const error = page.locator('#image-error [role="alert"]');
    await poll(() => error.textContent()).toContain('is not answering');
    expect(await error.textContent()).toContain('The prompt is kept');
    expect(await promptBox().inputValue()).toBe('a windmill at dusk');
    expect(await page.getByRole('progressbar').count()).toBe(0);

    await send('taller');
    await waitForReply();
    await poll(() => page.locator('#log .msg.assistant .text').last().textContent()).toBe('Sure, taller.');
    expect(await page.locator('#log .error-box').count()).toBe(0);
  });

  it('the large view shows the settings; "Use these settings" fills the panes and the model hears of it', async () => {
    const id = await openConversation({ steps: 6, cfg: 5.5, seed: 1234, width: 640, height: 448, negativePrompt: 'blurry, text' });
    await generate('a grey heron in reeds, morning mist');

    // Change everything, then take it back from the picture.
    expect((await stage.easel.put(`/api/conversations/${id}/settings`, { steps: 30, cfg: 9, seed: -1, width: 512, height: 512, negativePrompt: '' })).status).toBe(200);
    expect((await stage.easel.put(`/api/conversations/${id}/prompt`, { prompt: 'something else entirely' })).status).toBe(200);
    await page.reload();
    await poll(() => promptBox().inputValue()).toBe('something else entirely');
    expect(await field('Steps').inputValue()).toBe('30');

    const thumb = page.locator('#log .msg.generated .thumb');
    await thumb.click();
    await poll(() => dialog().isVisible()).toBe(true);
    const shown = (name: string) => page.locator(`#image-dialog-${name}`).textContent();
    expect(await shown('prompt')).toBe('a grey heron in reeds, morning mist');
    expect(await shown('negative-prompt')).toBe('blurry, text');
    expect(await shown('steps')).toBe('6');
    expect(await shown('cfg')).toBe('5.5');
    expect(await shown('seed')).toBe('1234');
    expect(await shown('size')).toBe('640 × 448');
    expect(await shown('model')).toBe('v1-5-pruned-emaonly');
    expect(await page.locator('#image-dialog-img').evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth === 640)).toBe(true);

    // Escape closes it and focus goes back to the thumbnail.
    await page.keyboard.press('Escape');
    await poll(() => dialog().isVisible()).toBe(false);
    expect(await thumb.evaluate((el) => el === document.activeElement)).toBe(true);

    await thumb.click();
    await poll(() => dialog().isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Use these settings' }).click();
    await poll(() => dialog().isVisible()).toBe(false);
    expect(await thumb.evaluate((el) => el === document.activeElement)).toBe(true);
    expect(await promptBox().inputValue()).toBe('a grey heron in reeds, morning mist');
    expect(await field('Steps').inputValue()).toBe('6');
    expect(await field('CFG').inputValue()).toBe('5.5');
    expect(await field('Seed').inputValue()).toBe('1234');
    expect(await field('Width').inputValue()).toBe('640');
    expect(await field('Height').inputValue()).toBe('448');
    expect(await page.getByRole('textbox', { name: 'Negative prompt' }).inputValue()).toBe('blurry, text');
    await poll(async () => (await stored(id)).prompt).toBe('a grey heron in reeds, morning mist');
    await poll(async () => (await stored(id)).settings).toMatchObject({ steps: 6, cfg: 5.5, seed: 1234, width: 640, height: 448, negativePrompt: 'blurry, text' });

    stage.fake.enqueue(scriptReply('Back to the heron.', meta('a grey heron in reeds, morning mist')));
    await send('that one again');
    await waitForReply();
    const told = stage.fake.chatRequests().at(-1)?.messages?.at(-1)?.content ?? '';
    expect(told).toContain('[The user edited the prompt to: "a grey heron in reeds, morning mist"]');
    expect(told).toContain('[Current settings: steps 6, cfg 5.5, seed 1234, size 640x448, negative prompt "blurry, text"]');
  });

  it('"Reuse seed" takes only the seed; the Close button closes the view', async () => {
    const id = await openConversation({ seed: 987654 });
    await generate('a copper kettle');
    await field('Seed').fill('5');
    await field('Seed').press('Tab');
    await poll(() => page.locator('#settings-status').textContent()).toBe('Saved.');
    await field('Steps').fill('12');
    await field('Steps').press('Tab');
    await poll(async () => (await stored(id)).settings).toMatchObject({ seed: 5, steps: 12 });

    const big = page.locator('#image-frame .current');
    await big.click();
    await poll(() => dialog().isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Close' }).click();
    await poll(() => dialog().isVisible()).toBe(false);
    expect(await big.evaluate((el) => el === document.activeElement)).toBe(true);

    await big.click();
    await page.getByRole('button', { name: 'Reuse seed' }).click();
    await poll(() => dialog().isVisible()).toBe(false);
    expect(await field('Seed').inputValue()).toBe('987654');
    expect(await field('Steps').inputValue()).toBe('12');
    expect(await promptBox().inputValue()).toBe('a copper kettle');
    await poll(async () => (await stored(id)).settings).toMatchObject({ seed: 987654, steps: 12 });
  });

  it('a prompt holding markup shows as text in the large view and runs nothing, also after a reload', async () => {
    const id = await openConversation();
    const hostile = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
    await generate(hostile);
    await page.locator('#image-frame .current').click();
    await poll(() => dialog().isVisible()).toBe(true);
    expect(await page.locator('#image-dialog-prompt').textContent()).toBe(hostile);
    expect(await page.locator('#image-dialog-prompt').evaluate((dd) => dd.children.length)).toBe(0);
    expect(await imageInFrame().getAttribute('alt')).toBe(`Image: ${hostile}`);
    expect(await page.evaluate(() => document.querySelectorAll('img[src="x"], #log script, #image-frame script').length)).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    await page.keyboard.press('Escape');
    await poll(() => dialog().isVisible()).toBe(false);

    // After a reload the image is rendered from the store: its prompt is still text and runs nothing.
    await page.reload();
    expect(conversationIdOf(page)).toBe(id);
    await poll(() => imageInFrame().getAttribute('alt')).toBe(`Image: ${hostile}`);
    expect(await page.locator('#log .msg.generated img').getAttribute('alt')).toBe(`Image: ${hostile}`);
    expect(await page.evaluate(() => document.querySelectorAll('img[src="x"], #log script, #image-frame script').length)).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
  });
});
