// What the page shows of a reply and an image (issue 9): Markdown that stays inert, download links,
// notices that survive a reload, what a screen reader is told, and a phone-width page that opens at the top.
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { openNewConversation } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';
import { replyMeta } from '../helpers/replies.ts';

const meta = (extra: Record<string, unknown> = {}) => replyMeta('', extra);

describeInBrowser('the page presents replies truthfully', () => {
  const { stage, open, page } = useBrowserStage();
  afterEach(() => {
    expect(open.problems).toEqual([]);
    expect(stage.fake.pendingReplies).toBe(0);
  });

  const lastReply = () => page.locator('#log .msg.assistant').last();

  async function send(text: string): Promise<void> {
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill(text);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Send', exact: true }).isEnabled()).toBe(true);
  }

  it('renders a reply as Markdown, streamed and after a reload, and leaves hostile HTML inert', async () => {
    await openNewConversation(stage, open);
    const reply =
      'A **bold** and *soft* idea with `code`:\n\n- one\n- two\n\n```\n<script>window.__ran = "fence"</script>\n```\n\n' +
      'See [the docs](https://example.com/docs) or [this](javascript:window.__ran="link").\n\n' +
      '<img src="/pwned-md" onerror="window.__ran = \'img\'"> <script>window.__ran = "script"</script>';
    stage.fake.enqueue(scriptReply(reply, meta()));
    await send('format it');
    for (const when of ['streamed', 'reloaded']) {
      if (when === 'reloaded') await page.reload();
      const text = lastReply().locator('.text');
      await poll(() => text.locator('strong').textContent()).toBe('bold');
      expect(await text.locator('em').textContent(), when).toBe('soft');
      expect(await text.locator('li').allTextContents(), when).toEqual(['one', 'two']);
      expect(await text.locator('pre code').textContent(), when).toContain('<script>');
      const link = text.getByRole('link', { name: 'the docs' });
      expect(await link.getAttribute('rel'), when).toBe('noopener noreferrer');
      expect(await link.getAttribute('href'), when).toBe('https://example.com/docs');
      // A javascript: link is not a link; the model's tags are shown as text, none is an element.
      expect(await text.locator('a').count(), when).toBe(1);
      expect(await text.locator('img, script').count(), when).toBe(0);
      expect(await text.textContent(), when).toContain('<img src="/pwned-md"');
    }
    expect(await page.evaluate(() => (window as unknown as { __ran?: string }).__ran)).toBeUndefined();
    expect(open.requests.filter((r) => r.includes('pwned'))).toEqual([]);
  });

  it('keeps a notice with its turn: a clamped value is said again after a reload', async () => {
    await openNewConversation(stage, open);
    stage.fake.enqueue(scriptReply('Lots of steps.', meta({ steps: 500 })));
    await send('many steps please');
    const notice = () => lastReply().locator('.notice').allTextContents();
    await poll(notice).toEqual([expect.stringMatching(/500 is above the maximum/)]);
    await page.reload();
    await poll(notice).toEqual([expect.stringMatching(/500 is above the maximum/)]);
  });

  it('tells a screen reader the truth: busy while streaming, a keyboard-scrollable log, focus back after Stop', async () => {
    await openNewConversation(stage, open);
    const log = page.locator('#log');
    expect(await log.getAttribute('role')).toBe('log');
    expect(await log.getAttribute('tabindex')).toBe('0');
    expect(await page.locator('#prompt-announce').getAttribute('aria-live')).toBe('polite');

    stage.fake.enqueue({ chunks: Array.from({ length: 400 }, (_, i) => `word${i} `), delayMs: 30 });
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('a long story');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await poll(() => lastReply().locator('.text').textContent()).toContain('word2');
    expect(await lastReply().getAttribute('aria-busy')).toBe('true');
    await page.getByRole('button', { name: 'Stop' }).click();
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    await poll(() => lastReply().getAttribute('aria-busy')).not.toBe('true');
    await poll(() => page.evaluate(() => document.activeElement?.id)).toBe('message');
  });

  it("tells a screen reader where it is: a reply's headings under the page's, a Copy named for its message, live and after a reload", async () => {
    await openNewConversation(stage, open);
    stage.fake.enqueue(scriptReply('# Ideas\n\n## Light\n\nA warm lamp.', meta()));
    await send('ideas');
    for (const when of ['streamed', 'reloaded']) {
      if (when === 'reloaded') await page.reload();
      const reply = lastReply();
      await poll(() => reply.getByRole('heading', { level: 3 }).textContent()).toBe('Ideas');
      expect(await reply.getByRole('heading', { level: 4 }).textContent(), when).toBe('Light');
      expect(await page.getByRole('heading', { level: 1 }).allTextContents(), when).toEqual([' Easel']);
      await poll(() => reply.getByRole('button', { name: 'Copy this reply', exact: true }).count()).toBe(1);
      expect(await page.locator('#log .msg.user').getByRole('button', { name: 'Copy your message', exact: true }).count(), when).toBe(1);
      expect(await reply.getByRole('button', { name: 'Copy this reply', exact: true }).textContent(), when).toBe('Copy');
    }
  });

  it('a keyboard skips the top bar, the library and the panes: the first Tab shows "Skip to the conversation", which focuses the log', async () => {
    await openNewConversation(stage, open);
    // At phone width the page opens at its top (a desktop opens with the focus in the composer).
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.reload();
      await page.locator('#status .state').first().waitFor();
      const skip = page.getByRole('link', { name: 'Skip to the conversation', exact: true });
      expect((await skip.boundingBox())!.width).toBeLessThanOrEqual(1);
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to the conversation');
      expect((await skip.boundingBox())!.width).toBeGreaterThan(100);
      await page.keyboard.press('Enter');
      await poll(() => page.evaluate(() => document.activeElement?.id)).toBe('log');
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('message');
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
  });

  it('refuses a message longer than the limit with a notice, keeping the text, and counts the prompt', async () => {
    await openNewConversation(stage, open);
    const box = page.getByRole('textbox', { name: 'Message', exact: true });
    const max = Number(await box.getAttribute('data-max-chars'));
    const long = 'x'.repeat(max + 5);
    const before = stage.fake.chatRequests().length;
    await box.fill(long);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await poll(() => page.locator('#composer-status').textContent()).toContain('Not sent: your message has');
    expect(await box.inputValue()).toBe(long);
    expect(stage.fake.chatRequests().length).toBe(before);
    await box.fill('');

    const prompt = page.getByRole('textbox', { name: 'Prompt', exact: true });
    await prompt.fill('');
    expect(await page.locator('#generate').isDisabled()).toBe(true);
    expect(await page.locator('#generate-empty').isVisible()).toBe(true);
    await prompt.fill('a red fox');
    await poll(() => page.locator('#prompt-count').textContent()).toBe('9 characters · about 3 of 75 CLIP tokens');
    expect(await page.locator('#generate-empty').isVisible()).toBe(false);
    await prompt.fill(Array.from({ length: 80 }, (_, i) => `word${i}`).join(' '));
    await poll(() => page.locator('#prompt-count').getAttribute('class')).toContain('over');
  });

  it('on a touch device Enter adds a line and the Send button sends', async () => {
    const phone = await stage.browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
    try {
      const touchPage = await phone.newPage();
      const id = await stage.easel.newConversation();
      await touchPage.goto(`${stage.easel.url}/c/${encodeURIComponent(id)}`);
      await touchPage.locator('#status .state').first().waitFor();
      expect(await touchPage.evaluate(() => matchMedia('(pointer: coarse)').matches)).toBe(true);
      const box = touchPage.getByRole('textbox', { name: 'Message', exact: true });
      const before = stage.fake.chatRequests().length;
      await box.fill('first line');
      await box.press('End');
      await box.press('Enter');
      await box.pressSequentially('second line');
      expect(await box.inputValue()).toBe('first line\nsecond line');
      expect(stage.fake.chatRequests().length).toBe(before);
      stage.fake.enqueue(scriptReply('Two lines read.', meta()));
      await touchPage.getByRole('button', { name: 'Send', exact: true }).click();
      await poll(() => touchPage.locator('#log .msg.assistant .text').last().textContent()).toBe('Two lines read.');
      expect(stage.fake.chatRequests().length).toBe(before + 1);
    } finally {
      await phone.close();
    }
  });

  it('opens at the top at phone width, with one scrolling region', async () => {
    await openNewConversation(stage, open);
    for (let i = 0; i < 6; i++) {
      stage.fake.enqueue(scriptReply(`Reply ${i}.\n\n${'A line of text that fills the bubble. '.repeat(8)}`, meta()));
      await send(`message ${i}`);
    }
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.reload();
      await poll(() => page.locator('#log .msg.assistant').count()).toBe(6);
      await page.waitForTimeout(300);
      expect(await page.evaluate(() => window.scrollY)).toBe(0);
      // The log does not scroll inside the page: the page is the one scrolling region.
      const log = await page.evaluate(() => {
        const element = document.getElementById('log')!;
        return { scrollHeight: element.scrollHeight, clientHeight: element.clientHeight };
      });
      expect(log.scrollHeight).toBeLessThanOrEqual(log.clientHeight + 1);
      expect(await page.evaluate(() => document.documentElement.scrollHeight > innerHeight)).toBe(true);
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
  });

  it('at phone width a prompt the reply changed out of view is cued beside the composer: one tap shows it, and the cue goes once it is seen', async () => {
    const id = await openNewConversation(stage, open);
    for (let i = 0; i < 3; i++) {
      stage.fake.enqueue(scriptReply(`Reply ${i}.\n\n${'A line of text that fills the bubble. '.repeat(8)}`, meta()));
      await send(`message ${i}`);
    }
    const cue = page.getByRole('button', { name: 'Prompt updated ↑' });
    const promptBox = page.getByRole('textbox', { name: 'Prompt', exact: true });
    /** How much of the prompt is inside the window, from 0 to 1. */
    const promptInView = () =>
      page.evaluate(() => {
        const box = document.getElementById('prompt')!.getBoundingClientRect();
        return Math.max(0, Math.min(box.bottom, innerHeight) - Math.max(box.top, 0)) / box.height;
      });
    // On a wide window the prompt is in view beside the chat: a new prompt needs no cue.
    stage.fake.enqueue(scriptReply('A first prompt.', replyMeta('a paper boat')));
    await send('a boat');
    await poll(() => promptBox.inputValue()).toBe('a paper boat');
    expect(await promptInView()).toBe(1);
    expect(await cue.isVisible()).toBe(false);

    await page.setViewportSize({ width: 390, height: 844 });
    try {
      stage.fake.enqueue(scriptReply('Here is the rewritten prompt.', replyMeta('a paper boat on a puddle, rain')));
      await send('make it rain');
      await poll(() => promptBox.inputValue()).toBe('a paper boat on a puddle, rain');
      // The reader is at the composer, the prompt far above it: the cue says so, next to where they are.
      expect(await promptInView()).toBe(0);
      await poll(() => cue.isVisible()).toBe(true);
      expect(await cue.evaluate((button) => button.closest('#composer') !== null)).toBe(true);
      await cue.click();
      await poll(promptInView).toBe(1);
      expect(await cue.isVisible()).toBe(false);
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('prompt-heading');

      // Seen by scrolling there too: the cue goes once the prompt is in view.
      stage.fake.enqueue(scriptReply('Once more.', replyMeta('a paper boat on a puddle, heavy rain')));
      await send('heavier');
      await poll(() => cue.isVisible()).toBe(true);
      await promptBox.scrollIntoViewIfNeeded();
      await poll(() => cue.isVisible()).toBe(false);

      // A change made while the prompt is in view (here by another tab) needs no cue.
      expect((await stage.easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a paper boat, sunshine' })).status).toBe(200);
      await poll(() => promptBox.inputValue()).toBe('a paper boat, sunshine');
      await page.waitForTimeout(200);
      expect(await cue.isVisible()).toBe(false);
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
  });
});
