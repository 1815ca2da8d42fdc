// The image area in a real browser, against the fake AUTOMATIC1111: auto-generation, Generate, Cancel.
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { createFakeA1111, type FakeA1111 } from '../fakes/fake-a1111.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { openNewConversation, openPage, startStage, type OpenPage, type Stage } from './browser.ts';
import { describeInBrowser, poll } from './suite.ts';

describeInBrowser('the image area', () => {
  let a1111: FakeA1111;
  let stage: Stage;
  let open: OpenPage;
  let page: Page;

  beforeAll(async () => {
    a1111 = await createFakeA1111({ stepDelayMs: 40 });
    stage = await startStage({ flags: ['--image-backend', 'a1111', '--image-url', a1111.url] });
    open = await openPage(stage);
    page = open.page;
  });
  afterAll(async () => {
    await stage?.close();
    await a1111?.close();
  });
  beforeEach(async () => {
    await openNewConversation(stage, open);
    await poll(() => page.locator('#status').textContent()).toContain('AUTOMATIC1111 answers');
  });
  afterEach(() => {
    expect(open.problems).toEqual([]);
    expect(stage.fake.pendingReplies).toBe(0);
  });

  const txt2img = () => a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img');
  const imageInFrame = () => page.locator('#image-frame img');

  it('makes the image when the assistant is ready: progress, then the picture and a thumbnail in the reply', async () => {
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { __progress: string[] }).__progress = seen;
      new MutationObserver(() => {
        const bar = document.getElementById('image-progress');
        if (bar) seen.push(bar.getAttribute('value') ?? 'indeterminate');
      }).observe(document.getElementById('image-status')!, { childList: true, subtree: true, attributes: true });
    });
    stage.fake.enqueue(scriptReply('Here it comes.', { prompt: 'a paper boat on a pond', generate_image: true, steps: 6, cfg: 7, seed: 42 }));
    await page.getByRole('textbox', { name: 'Message' }).fill('a paper boat');
    await page.getByRole('textbox', { name: 'Message' }).press('Enter');

    await poll(() => imageInFrame().getAttribute('src')).toMatch(/^\/images\/[a-f0-9]{32}\.png$/);
    expect(await imageInFrame().evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0)).toBe(true);
    expect(await page.locator('#image-frame').textContent()).toContain('Seed 42');
    await poll(() => page.locator('#log .msg.assistant').last().locator('.thumbs img').count()).toBe(1);
    expect(await page.evaluate(() => (window as unknown as { __progress: string[] }).__progress.length)).toBeGreaterThan(0);
    expect(txt2img().at(-1)?.body).toMatchObject({ prompt: 'a paper boat on a pond', steps: 6, seed: 42 });

    await page.reload();
    await poll(() => imageInFrame().count()).toBe(1);
    expect(await page.locator('#log .thumbs img').count()).toBe(1);
  });

  it('Generate uses the prompt on screen, even an edit not saved yet', async () => {
    const generate = page.getByRole('button', { name: 'Generate' });
    await poll(() => generate.isEnabled()).toBe(true);
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('a lantern in the fog');
    await generate.click();
    await poll(() => imageInFrame().getAttribute('alt')).toBe('Image: a lantern in the fog');
    expect(txt2img().at(-1)?.body).toMatchObject({ prompt: 'a lantern in the fog' });
  });

  it('Cancel interrupts the backend and says so, keeping the prompt', async () => {
    const steps = page.getByLabel('Steps', { exact: true });
    await steps.fill('150');
    await steps.press('Tab');
    await poll(() => page.locator('#settings-status').textContent()).toBe('Saved.');
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('a slow sunrise');
    const interrupts = a1111.interrupts;
    await page.getByRole('button', { name: 'Generate' }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await poll(() => a1111.interrupts).toBeGreaterThan(interrupts);
    await poll(() => page.locator('#image-status [role="alert"]').textContent()).toMatch(/cancel/i);
    expect(await page.getByRole('textbox', { name: 'Prompt', exact: true }).inputValue()).toBe('a slow sunrise');
    expect(await imageInFrame().count()).toBe(0);
  });
});
