// Every page a live view: two pages on one conversation see the same conversation, a reload mid-reply picks the
// reply up where it is, closing the sending page does not stop it, and a stale page cannot overwrite newer work.
import type { Page } from 'playwright-core';
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { replyMeta } from '../helpers/replies.ts';
import { openNewConversation, openPage, type OpenPage } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';

const meta = replyMeta('a red fox asleep in deep snow at dawn');
const SLOW_TEXT = Array.from({ length: 60 }, (_, index) => `word${index}`).join(' ');

describeInBrowser('two pages on one conversation', () => {
  const { stage, open, page, a1111 } = useBrowserStage({ a1111: {} });
  let second: OpenPage | undefined;
  afterEach(async () => {
    expect(open.problems).toEqual([]);
    expect(second?.problems ?? []).toEqual([]);
    await second?.close();
    second = undefined;
  });

  async function openSecond(id: string): Promise<Page> {
    second = await openPage(stage);
    await second.page.goto(`${stage.easel.url}/c/${id}`);
    await second.page.locator('#status .state').first().waitFor();
    return second.page;
  }

  const lastReply = (on: Page) => on.locator('#log article.msg.assistant').last();

  it('a reply sent from one page appears live in the other, ending with the same text and pane', async () => {
    const id = await openNewConversation(stage, open);
    const other = await openSecond(id);
    stage.fake.enqueue(scriptReply(SLOW_TEXT, meta, { delayMs: 15 }));
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('a fox in the snow');
    await page.getByRole('button', { name: 'Send' }).click();
    // The other page shows the message and the reply while it is written.
    await poll(() => other.locator('#log .msg.user').last().textContent()).toContain('a fox in the snow');
    await poll(() => other.locator('#log .typing').count()).toBe(1);
    await poll(async () => (await lastReply(other).textContent())?.includes('word59')).toBe(true);
    await poll(() => other.locator('#log .typing').count()).toBe(0);
    expect((await lastReply(other).locator('.text').textContent())?.trim()).toBe(SLOW_TEXT);
    await poll(() => other.locator('#prompt').inputValue()).toBe('a red fox asleep in deep snow at dawn');
    // Drawn once on each page, not twice on the sender's.
    expect(await page.locator('#log article.msg.assistant').count()).toBe(1);
    expect(await other.locator('#log article.msg.assistant').count()).toBe(1);
  });

  it('a reload in the middle of a reply picks it up where it is and finishes it; closing the sending page does not stop it', async () => {
    const id = await openNewConversation(stage, open);
    stage.fake.enqueue(scriptReply(SLOW_TEXT, meta, { delayMs: 20 }));
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('a slow one');
    await page.getByRole('button', { name: 'Send' }).click();
    await poll(async () => (await lastReply(page).textContent())?.includes('word5')).toBe(true);
    const other = await openSecond(id);
    // The sender goes away mid-reply.
    await page.goto('about:blank');
    await poll(() => other.locator('#log .typing').count()).toBe(1);
    await poll(async () => (await lastReply(other).textContent())?.includes('word59')).toBe(true);
    await poll(() => other.locator('#log .typing').count()).toBe(0);
    expect((await lastReply(other).locator('.text').textContent())?.trim()).toBe(SLOW_TEXT);
    expect(await other.getByText('Still being written…').count()).toBe(0);
    expect(await other.getByText('Stopped.').count()).toBe(0);
    const stored = (await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { turns: Array<{ status: string; text: string }> };
    expect(stored.turns.at(-1)).toMatchObject({ status: 'ok', text: SLOW_TEXT });
  });

  it('a prompt edited in one page shows in the other, whose Generate then makes the image from the newer prompt', async () => {
    const id = await openNewConversation(stage, open);
    const other = await openSecond(id);
    await page.locator('#prompt').fill('a lighthouse at dusk');
    await page.locator('#prompt').blur();
    await poll(() => page.locator('#prompt-saved').textContent()).toContain('Saved');
    await poll(() => other.locator('#prompt').inputValue()).toBe('a lighthouse at dusk');
    // The other page's revision is now the newest: its Generate makes the image from the newer prompt.
    await other.getByRole('button', { name: 'Generate' }).click();
    const txt2img = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img');
    await poll(() => txt2img().length).toBe(1);
    expect((txt2img()[0]?.body as { prompt?: string } | undefined)?.prompt).toBe('a lighthouse at dusk');
    // The image made from the other page shows in this one too.
    await poll(() => page.locator('#image-frame img').count()).toBe(1);
  });

  it('a page whose first message made the conversation follows it: a message from another tab appears in it', async () => {
    await page.goto(`${stage.easel.url}/`);
    await page.locator('#status .state').first().waitFor();
    stage.fake.enqueue(scriptReply('A first answer.', meta));
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('the first message');
    await page.getByRole('button', { name: 'Send' }).click();
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    await poll(() => page.locator('#live').getAttribute('hx-sse:connect')).toMatch(/^\/c\/[0-9a-f-]{36}\/events\?/);
    const id = /\/c\/([0-9a-f-]{36})\//.exec((await page.locator('#live').getAttribute('hx-sse:connect')) ?? '')?.[1] ?? '';
    const other = await openSecond(id);
    stage.fake.enqueue(scriptReply('A second answer.', meta));
    await other.getByRole('textbox', { name: 'Message', exact: true }).fill('from the other tab');
    await other.getByRole('button', { name: 'Send' }).click();
    await poll(() => page.locator('#log .msg.user').last().textContent()).toContain('from the other tab');
    await poll(async () => (await lastReply(page).textContent())?.includes('A second answer.')).toBe(true);
    expect(await page.locator('#log article.msg.assistant').count()).toBe(2);
  });

  it('switching to another conversation during a reply does not stop it; coming back shows it whole', async () => {
    const id = await openNewConversation(stage, open);
    stage.fake.enqueue(scriptReply(SLOW_TEXT, meta, { delayMs: 20 }));
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('a slow one');
    await page.getByRole('button', { name: 'Send' }).click();
    await poll(async () => (await lastReply(page).textContent())?.includes('word3')).toBe(true);
    await page.getByRole('link', { name: 'New conversation' }).click();
    await poll(() => page.title()).toBe('New conversation · Easel');
    await poll(async () => ((await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { busy: boolean }).busy).toBe(false);
    await page.goto(`${stage.easel.url}/c/${id}`);
    expect((await lastReply(page).locator('.text').textContent())?.trim()).toBe(SLOW_TEXT);
    expect(await page.getByText('Stopped.').count()).toBe(0);
  });

  it('an image asked for with Generate goes on when its page is reloaded, and the reloaded page shows it arrive', async () => {
    const id = await stage.easel.newConversation();
    // 60 steps of the fake's 20 ms: time to reload while it is made.
    expect((await stage.easel.put(`/api/conversations/${id}/settings`, { steps: 60 })).status).toBe(200);
    await page.goto(`${stage.easel.url}/c/${id}`);
    await page.locator('#status .state').first().waitFor();
    await page.locator('#prompt').fill('a heron in the mist');
    await page.locator('#prompt').blur();
    await poll(() => page.locator('#prompt-saved').textContent()).toContain('Saved');
    await page.getByRole('button', { name: 'Generate' }).click();
    await poll(() => page.locator('#image-status .generation').count()).toBe(1);
    await page.reload();
    await poll(() => page.locator('#image-frame img').getAttribute('alt')).toBe('Image: a heron in the mist');
    await poll(() => page.locator('#log .msg.generated img').count()).toBe(1);
    expect(await page.locator('#image-error').textContent()).toBe('');
  });

  it('a Generate from a page behind the stored pane is refused: nothing is made, and the page goes on from the newer pane', async () => {
    const id = await openNewConversation(stage, open);
    const other = await openSecond(id);
    // The other page is behind (as a page whose live view was paused, on a phone in the background).
    await other.locator('#live').evaluate((live: HTMLElement) => live.setAttribute('data-revision', '0'));
    expect((await stage.easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a heron in the mist' })).status).toBe(200);
    await poll(() => other.locator('#prompt').inputValue()).toBe('a heron in the mist');
    await other.locator('#live').evaluate((live: HTMLElement) => live.setAttribute('data-revision', '0'));
    const before = a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length;
    await other.getByRole('button', { name: 'Generate' }).click();
    await poll(() => other.locator('#image-error').textContent()).toMatch(/changed elsewhere/);
    expect(a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img')).toHaveLength(before);
    expect(await other.locator('#prompt').inputValue()).toBe('a heron in the mist');
    // The page now knows the newer revision: Generate goes through.
    await other.getByRole('button', { name: 'Generate' }).click();
    await poll(() => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length).toBe(before + 1);
  });

  it('a prompt being typed when another tab changes it stays, and the page says that saving it replaces the other', async () => {
    const id = await openNewConversation(stage, open);
    await page.locator('#prompt').fill('a crane at dawn');
    // Another tab stores its prompt before this page's typing is saved (700 ms after the last key).
    expect((await stage.easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a heron in the mist' })).status).toBe(200);
    await poll(() => page.locator('#prompt-saved').textContent()).toContain('Changed in another tab');
    expect(await page.locator('#prompt').inputValue()).toBe('a crane at dawn');
    // Saving it is the user's choice, made knowingly; the other prompt stays a version Undo brings back.
    await poll(async () => ((await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { prompt: string }).prompt).toBe('a crane at dawn');
    await poll(() => page.locator('#prompt-saved').textContent()).toContain('It replaced a prompt changed in another tab');
    await page.getByRole('button', { name: 'Undo', exact: true }).click();
    await poll(() => page.locator('#prompt').inputValue()).toBe('a heron in the mist');
  });
});
