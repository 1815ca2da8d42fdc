// Keyboard use, settings, status line, layout and the page's security rules, in a real browser.
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { conversationIdOf } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';
import { replyMeta } from '../helpers/replies.ts';

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const meta = (prompt: string) => replyMeta(prompt);

describeInBrowser('controls, settings and status', () => {
  const { stage, open, page } = useBrowserStage({ newConversation: true });
  afterEach(async () => {
    stage.fake.setModels(['mistral:7b']);
    expect(open.problems).toEqual([]);
    expect(stage.fake.pendingReplies).toBe(0);
  });

  const focusedName = () => page.evaluate(() => document.activeElement?.getAttribute('id') ?? document.activeElement?.tagName);

  async function storedSettings(): Promise<Record<string, unknown>> {
    const response = await stage.easel.get(`/api/conversations/${conversationIdOf(page)}`);
    return ((await response.json()) as { settings: Record<string, unknown> }).settings;
  }

  it('a message sent while Easel cannot be reached at all (no HTTP answer) comes back into the composer, and says so', async () => {
    // The connection refused before any answer: the request never gets a status.
    await page.route('**/messages', (route) => route.abort('connectionrefused'));
    const chatsBefore = stage.fake.chatRequests().length;
    try {
      const message = page.getByRole('textbox', { name: 'Message' });
      await message.fill('a lighthouse at dusk');
      await page.getByRole('button', { name: 'Send', exact: true }).click();
      await poll(() => page.locator('#composer-status').textContent()).toBe('Could not reach Easel. Is it still running? Your text is kept.');
      expect(await message.inputValue()).toBe('a lighthouse at dusk');
      expect(stage.fake.chatRequests()).toHaveLength(chatsBefore);
    } finally {
      await page.unroute('**/messages');
    }
    // The browser reports the refused connection; nothing else went wrong.
    expect(open.problems.filter((problem) => !/ERR_CONNECTION_REFUSED|Failed to fetch|htmx/i.test(problem))).toEqual([]);
    open.problems.length = 0;
  });

  it('works from the keyboard alone: Tab, Shift+Enter for a new line, Enter to send, empty is not sent', async () => {
    expect(await focusedName()).toBe('message');
    await page.keyboard.press('Tab');
    expect(await focusedName()).toBe('send');
    await page.keyboard.press('Shift+Tab');
    expect(await focusedName()).toBe('message');

    const chatsBefore = stage.fake.chatRequests().length;
    await page.keyboard.press('Enter');
    await poll(() => page.locator('#composer-status').textContent()).toBe('Type a message first.');
    expect(stage.fake.chatRequests().length).toBe(chatsBefore);
    expect(open.requests.filter((r) => r.endsWith('/messages'))).toEqual([]);

    stage.fake.enqueue(scriptReply('Two lines, noted.', meta('two lines')));
    await page.keyboard.type('first line');
    await page.keyboard.press('Shift+Enter');
    await page.keyboard.type('second line');
    expect(await page.getByRole('textbox', { name: 'Message' }).inputValue()).toBe('first line\nsecond line');
    await page.keyboard.press('Enter');

    await poll(() => page.locator('#log .msg.user .text').allTextContents()).toEqual(['first line\nsecond line']);
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['Two lines, noted.']);
    expect(stage.fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toBe('first line\nsecond line');
    expect(await page.getByRole('textbox', { name: 'Message' }).inputValue()).toBe('');

    // On to the prompt pane by keyboard: an edit there is saved.
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).focus();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('typed by keyboard');
    await poll(() => page.locator('#prompt-saved').textContent()).toBe('Saved.');
  });

  it('a bad setting shows a message next to the field and changes nothing; a good one is saved', async () => {
    const steps = page.getByLabel('Steps', { exact: true });
    await steps.fill('999');
    await steps.press('Tab');
    await poll(() => page.locator('#error-steps').textContent()).toBe('Steps must be at most 150.');
    expect(await steps.getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#settings-status').textContent()).toBe('Not saved: fix the marked field.');
    expect((await storedSettings()).steps).toBe(20);

    await steps.fill('abc'.replace(/./g, '')); // a number field turns text into ""
    await steps.press('Tab');
    await poll(() => page.locator('#error-steps').textContent()).toContain('Steps must be a whole number');
    expect((await storedSettings()).steps).toBe(20);

    await steps.fill('30');
    await steps.press('Tab');
    await poll(() => page.locator('#settings-status').textContent()).toBe('Saved.');
    expect(await page.locator('#error-steps').textContent()).toBe('');
    expect(await steps.getAttribute('aria-invalid')).toBe('false');
    expect((await storedSettings()).steps).toBe(30);

    const seed = page.getByLabel('Seed', { exact: true });
    await seed.fill('1234');
    await seed.press('Tab');
    await poll(async () => (await storedSettings()).seed).toBe(1234);
    await page.getByRole('button', { name: 'Random' }).click();
    expect(await seed.inputValue()).toBe('-1');
    await poll(async () => (await storedSettings()).seed).toBe(-1);

    // The presets are the sizes of the family that paints (SD 1.5 here, as nothing says otherwise).
    await page.getByLabel('Size', { exact: true }).selectOption({ label: 'Landscape 768 × 512' });
    await poll(async () => [(await storedSettings()).width, (await storedSettings()).height]).toEqual([768, 512]);
    expect(await page.getByLabel('Width', { exact: true }).inputValue()).toBe('768');

    await page.getByLabel('Generate automatically when the assistant is ready').uncheck();
    await poll(async () => (await storedSettings()).autoGenerate).toBe(false);

    // A changed setting is told to the model in the next turn.
    stage.fake.enqueue(scriptReply('Noted.', meta('x')));
    await page.getByRole('textbox', { name: 'Message' }).fill('go');
    await page.getByRole('textbox', { name: 'Message' }).press('Enter');
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['Noted.']);
    expect(stage.fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toMatch(/steps 30/);
  });

  it('follows a streaming reply only while the reader is at the bottom of the log', async () => {
    const long = Array.from({ length: 60 }, (_, i) => `Line ${i} of a long answer.`).join('\n');
    stage.fake.enqueue(scriptReply(long, meta('long')));
    await page.getByRole('textbox', { name: 'Message' }).fill('tell me a lot');
    await page.getByRole('textbox', { name: 'Message' }).press('Enter');
    const log = page.getByRole('log');
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    const gap = () => log.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight);
    expect(await log.evaluate((el) => el.scrollHeight > el.clientHeight * 1.5)).toBe(true);
    expect(await gap()).toBeLessThan(2);

    stage.fake.enqueue({ chunks: [...Array.from({ length: 40 }, (_, i) => `More ${i}.\n`), `---\n${JSON.stringify(meta('long'))}`], delayMs: 15 });
    await page.getByRole('textbox', { name: 'Message' }).fill('more');
    await page.getByRole('textbox', { name: 'Message' }).press('Enter');
    await poll(() => page.locator('#log .msg.assistant .text').last().textContent()).toContain('More 2.');
    const lengthWhenScrolledUp = await log.evaluate((el) => {
      el.scrollTo({ top: 0 });
      return el.querySelectorAll('.msg.assistant .text')[1]?.textContent?.length ?? 0;
    });
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    expect(await log.evaluate((el) => el.scrollTop)).toBe(0);
    // The reply kept growing after the reader scrolled up, and the log stayed where they put it.
    const finalText = (await page.locator('#log .msg.assistant .text').last().textContent()) ?? '';
    expect(finalText).toContain('More 39.');
    expect(finalText.length).toBeGreaterThan(lengthWhenScrolledUp);
  });

  it('Copy puts the prompt on the clipboard', async () => {
    await open.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stage.easel.url });
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('a teal teapot, studio light');
    await page.getByRole('button', { name: 'Copy' }).click();
    await poll(() => page.locator('#prompt-saved').textContent()).toBe('Copied.');
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe('a teal teapot, studio light');
  });

  it('the status line says in words what is wrong and the exact command to fix it', async () => {
    await poll(() => page.locator('#status').textContent()).toContain('is ready with mistral:7b');
    expect(await page.locator('#status').textContent()).toContain('No image backend is configured');
    expect(await page.getByRole('button', { name: 'Generate', exact: true }).isDisabled()).toBe(true);
    expect(await page.locator('#generate-help').textContent()).toContain('--image-backend');

    stage.fake.setModels([]);
    await page.reload();
    await poll(() => page.locator('#status code').textContent()).toBe('ollama pull mistral:7b');
  });

  it('"New conversation" opens an empty page that stores nothing; the old one stays at its address', async () => {
    stage.fake.enqueue(scriptReply('A boat.', meta('a boat')));
    await page.getByRole('textbox', { name: 'Message' }).fill('a boat');
    await page.getByRole('button', { name: 'Send' }).click();
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['A boat.']);
    const first = page.url();

    const conversations = async () => ((await (await stage.easel.get('/api/conversations')).json()) as { conversations: unknown[] }).conversations.length;
    const before = await conversations();
    await page.getByRole('link', { name: 'New conversation', exact: true }).click();
    await poll(() => new URL(page.url()).pathname).toBe('/');
    await poll(() => page.locator('#log .msg').count()).toBe(0);
    // An empty page stores nothing: the conversation comes with its first message.
    expect(await conversations()).toBe(before);
    expect(await page.getByRole('textbox', { name: 'Prompt', exact: true }).inputValue()).toBe('');
    await page.goto(first);
    expect(await page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['A boat.']);
  });

  it('puts the image and the prompt above the chat on a narrow window', async () => {
    await page.setViewportSize({ width: 600, height: 900 });
    const chat = await page.getByRole('log').boundingBox();
    const image = await page.getByRole('region', { name: 'Image' }).boundingBox();
    const promptPane = await page.getByRole('textbox', { name: 'Prompt', exact: true }).boundingBox();
    expect(chat && image && promptPane).toBeTruthy();
    expect(image!.y).toBeLessThan(chat!.y);
    expect(promptPane!.y).toBeLessThan(chat!.y);

    await page.setViewportSize({ width: 1280, height: 860 });
    const wideChat = await page.getByRole('log').boundingBox();
    const wideImage = await page.getByRole('region', { name: 'Image' }).boundingBox();
    expect(wideImage!.x).toBeGreaterThan(wideChat!.x + wideChat!.width - 1);
  });

  it('serves every page response under the strict CSP, with htmx from our own server', async () => {
    const id = conversationIdOf(page);
    for (const path of [`/c/${id}`, '/status', '/assets/easel.js', '/assets/htmx.min.js']) {
      const response = await fetch(stage.easel.url + path);
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-security-policy'), path).toBe(CSP);
    }
    const html = await (await fetch(`${stage.easel.url}/c/${id}`)).text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|\sstyle=|\son[a-z]+=|hx-on/i);
    expect(html).toContain('src="/assets/htmx.min.js"');
    expect(open.requests.every((r) => !r.includes('://'))).toBe(true);
    expect(await page.evaluate(() => (window as unknown as { htmx: { version: string } }).htmx.version)).toBe('4.0.1');
  });

  it('is one-shot: a repeated send with the same key never runs a reply twice', async () => {
    const id = conversationIdOf(page);
    stage.fake.enqueue(scriptReply('Once.', meta('once')));
    const post = () =>
      fetch(`${stage.easel.url}/c/${id}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ text: 'only once', sendKey: 'k'.repeat(24) }),
      });
    const before = stage.fake.chatRequests().length;
    const first = await post();
    expect(first.headers.get('content-type')).toContain('text/event-stream');
    const stream = await first.text();
    // The reply streams into its live block (one partial per network read: content and order, not count).
    const streamed = [...stream.matchAll(/-live" hx-swap="beforeend">([^<]*)<\/hx-partial>/g)].map((match) => match[1]).join('');
    expect(streamed).toBe('Once.');
    expect(stream).toContain('only once');
    const second = await post();
    expect(second.status).toBe(409);
    expect(await second.text()).toContain('already sent');
    expect(stage.fake.chatRequests().length).toBe(before + 1);

    const foreign = await fetch(`${stage.easel.url}/c/${id}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
      body: new URLSearchParams({ text: 'from elsewhere', sendKey: 'z'.repeat(24) }),
    });
    expect(foreign.status).toBe(403);
    expect(stage.fake.chatRequests().length).toBe(before + 1);
  });
});
