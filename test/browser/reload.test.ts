// After a reload the page is rendered from the store, not from the stream: model and user text
// must stay inert text there too.
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { openNewConversation } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';
import { replyMeta } from '../helpers/replies.ts';

const meta = replyMeta();

describeInBrowser('a reload', () => {
  const { stage, open, page } = useBrowserStage();
  afterEach(() => {
    // A clean page logs nothing: an injected inline script or handler would be a CSP violation here.
    expect(open.problems).toEqual([]);
    expect(stage.fake.pendingReplies).toBe(0);
  });

  async function send(text: string): Promise<void> {
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill(text);
    await page.getByRole('button', { name: 'Send' }).click();
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Send' }).isEnabled()).toBe(true);
  }

  it('shows a stored reply, message and error holding markup as text, and runs none of it', async () => {
    const reply =
      'Try <img src="/pwned-reply" onerror="window.__ran = \'img\'"> or <script>window.__ran = "script"</script> ' +
      'or <button hx-get="/pwned-htmx" hx-trigger="load">x</button>';
    const user = '<b>bold?</b> <img src="/pwned-user">';
    const failure = '<img src="/pwned-error" onerror="window.__ran = \'error\'">';
    await openNewConversation(stage, open);
    stage.fake.enqueue(scriptReply(reply, meta));
    await send(user);
    stage.fake.enqueue({ chunks: ['Cut <i>short'], errorAfter: { chunks: 1, message: failure } });
    await send('again');
    await poll(() => page.getByRole('button', { name: 'Retry' }).count()).toBe(1);

    open.problems.length = 0;
    open.requests.length = 0;
    await page.reload();
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual([reply, 'Cut <i>short']);
    expect(await page.locator('#log .msg.user .text').allTextContents()).toEqual([user, 'again']);
    await poll(() => page.locator('#log .error-text').textContent()).toContain(failure);
    expect(await page.locator('#log img, #log script, #log b, #log i, #log [hx-get]').count()).toBe(0);
    // Give a load trigger or an image every chance to fire: htmx has run once the status line came.
    await poll(() => open.requests.filter((r) => r === 'GET /status').length).toBeGreaterThanOrEqual(1);
    await poll(() => page.locator('#status .state').count()).toBeGreaterThanOrEqual(1);
    expect(await page.evaluate(() => (window as unknown as { __ran?: string }).__ran)).toBeUndefined();
    expect(open.requests.filter((r) => r.includes('pwned'))).toEqual([]);
  });
});
