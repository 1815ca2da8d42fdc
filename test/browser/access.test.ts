// Token mode in a real browser: the "enter the token" form, the cookie it leads to, and the page
// working with it (htmx posts, the SSE stream, the sidebar's htmx switch to a new conversation).
import { expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';
import { replyMeta } from '../helpers/replies.ts';

const TOKEN = 'browser-token-0123456789abcdef';
const meta = (prompt: string) => replyMeta(prompt);

describeInBrowser('token mode in the browser', () => {
  const { stage, open } = useBrowserStage({ flags: ['--token', TOKEN] });

  it('asks for the token, takes it from the form, keeps it in an HttpOnly cookie and out of the address', async () => {
    const { page } = open;
    const first = await page.goto(`${stage.easel.url}/`);
    expect(first?.status()).toBe(401);
    await expect(page.getByRole('heading', { name: 'Easel needs its token' }).isVisible()).resolves.toBe(true);

    await page.getByLabel('Token').fill('wrong-token-value-here');
    await page.getByRole('button', { name: 'Open Easel' }).click();
    await poll(() => page.getByRole('alert').textContent()).toContain('That token is not the right one.');
    expect(await open.context.cookies()).toEqual([]);

    await page.getByLabel('Token').fill(TOKEN);
    await page.getByRole('button', { name: 'Open Easel' }).click();
    await poll(() => page.url()).toBe(`${stage.easel.url}/`);
    await page.locator('#status .state').first().waitFor();
    const cookie = (await open.context.cookies()).find((c) => c.name === 'easel_token');
    expect(cookie).toMatchObject({ value: TOKEN, httpOnly: true, sameSite: 'Strict', path: '/' });
    // The cookie is not readable by the page's scripts.
    expect(await page.evaluate(() => document.cookie)).not.toContain(TOKEN);

    // Chromium logs the two 401 answers above; nothing else (no CSP violation on the token form).
    expect(open.problems.filter((problem) => !/status of 401\b/.test(problem))).toEqual([]);
    open.problems.length = 0;
    stage.fake.enqueue(scriptReply('With the token, the page works.', meta('a lighthouse')));
    await page.getByRole('textbox', { name: 'Message' }).fill('a lighthouse');
    await page.getByRole('button', { name: 'Send' }).click();
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['With the token, the page works.']);
    await poll(() => page.getByRole('textbox', { name: 'Prompt', exact: true }).inputValue()).toBe('a lighthouse');
    // The first message made the conversation: its address replaced the empty page's.
    await poll(() => page.url()).toMatch(/\/c\/[0-9a-f-]{36}$/);

    await page.getByRole('link', { name: 'New conversation', exact: true }).click();
    await poll(() => new URL(page.url()).pathname).toBe('/');
    await poll(() => page.locator('#log .msg').count()).toBe(0);
    expect(open.problems).toEqual([]);
  });
});
