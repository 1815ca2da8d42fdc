// Vary and Count in a real browser, against the fake AUTOMATIC1111: a thumbnail's "Vary (subtle)" makes a new image
// from the prompt pane, starting from that one (img2img with strength 0.35), and the large view's Vary does the same;
// with a server that cannot vary, the buttons are disabled and say why. Count 3 beside Generate makes a batch of
// three, shown together as one entry of the chat, live and after a reload.
import { afterEach, expect, it } from 'vitest';
import { createFakeLocalAi } from '../fakes/fake-localai.ts';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';

describeInBrowser('Vary and Count', () => {
  const { stage, open, page, a1111 } = useBrowserStage({ a1111: { stepDelayMs: 10 } });
  const cleanups: Array<() => Promise<void>> = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    // A clean page logs nothing: no CSP violation, no script error, no htmx warning.
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
  });

  const img2img = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/img2img');
  const promptBox = () => page.getByRole('textbox', { name: 'Prompt', exact: true });

  async function openConversation(easel: TestEasel, ready: string): Promise<string> {
    const id = await easel.newConversation();
    expect((await easel.put(`/api/conversations/${id}/settings`, { steps: 4, width: 64, height: 64 })).status).toBe(200);
    open.problems.length = 0;
    await page.goto(`${easel.url}/c/${encodeURIComponent(id)}`);
    await poll(() => page.locator('#status').textContent()).toContain(ready);
    await poll(() => page.locator('#generate').getAttribute('data-backend-ready')).toBe('yes');
    return id;
  }

  async function generate(text: string): Promise<void> {
    await promptBox().fill(text);
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await poll(() => page.locator('#log article.generated').count()).toBeGreaterThan(0);
    await poll(() => page.locator('#image-status .generation').count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Generate', exact: true }).isEnabled()).toBe(true);
  }

  it('Vary (subtle) on a thumbnail sends that image to img2img with 0.35, and the new image joins the chat', async () => {
    const id = await openConversation(stage.easel, 'AUTOMATIC1111 answers');
    await generate('a red fox');
    const first = (await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { images: Array<{ id: string; url: string }> };
    const source = first.images[0]!;

    await promptBox().fill('a red fox in the snow');
    const button = page.locator('#log article.generated').first().getByRole('button', { name: 'Vary (subtle)' });
    await poll(() => button.isEnabled()).toBe(true);
    await button.click();
    await poll(() => page.locator('#log article.generated').count()).toBe(2);
    await poll(() => page.locator('#image-status .generation').count()).toBe(0);

    expect(img2img()).toHaveLength(1);
    const body = img2img().at(-1)!.body as Record<string, unknown>;
    expect(body).toMatchObject({ prompt: 'a red fox in the snow', denoising_strength: 0.35 });
    const stored = Buffer.from(await (await stage.easel.get(source.url)).arrayBuffer());
    expect(Buffer.from(String((body['init_images'] as string[])[0]), 'base64').equals(stored)).toBe(true);
    const after = (await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { images: Array<{ source: unknown }> };
    expect(after.images.at(-1)?.source).toEqual({ imageId: source.id, strength: 0.35 });
    // The buttons are usable again once the image is made.
    await poll(() => page.locator('#log article.generated').last().getByRole('button', { name: 'Vary (strong)' }).isEnabled()).toBe(true);
  });

  it("the large view's Vary (strong) varies the image it shows, and closes", async () => {
    await openConversation(stage.easel, 'AUTOMATIC1111 answers');
    await generate('a red fox');
    const before = img2img().length;
    await page.locator('#log article.generated button.thumb').first().click();
    const dialog = page.getByRole('dialog', { name: 'Image and its settings' });
    await poll(() => dialog.isVisible()).toBe(true);
    await dialog.getByRole('button', { name: 'Vary (strong)' }).click();
    await poll(() => dialog.isVisible()).toBe(false);
    await poll(() => img2img().length).toBe(before + 1);
    expect(img2img().at(-1)!.body).toMatchObject({ denoising_strength: 0.65 });
    await poll(() => page.locator('#log article.generated').count()).toBe(2);
  });

  it('with a server that cannot vary, the buttons are disabled and described by its reason', async () => {
    const localai = await createFakeLocalAi();
    cleanups.push(() => localai.close());
    const easel = await startTestEasel({ ollamaUrl: stage.fake.url, flags: ['--image-backend', 'localai', '--image-url', localai.url] });
    cleanups.push(() => easel.close());
    await openConversation(easel, 'LocalAI answers');
    await generate('a red fox');
    const button = page.locator('#log article.generated').first().getByRole('button', { name: 'Vary (subtle)' });
    await poll(() => button.isDisabled()).toBe(true);
    const describedBy = await button.getAttribute('aria-describedby');
    expect(describedBy).toBe('vary-help');
    expect(await page.locator('#vary-help').textContent()).toMatch(/^LocalAI cannot vary an image by a chosen strength/);
    expect(await button.getAttribute('title')).toMatch(/^LocalAI cannot vary an image by a chosen strength/);
    // Off this Easel before it closes: its page would fail to reach it.
    await page.goto('about:blank');
  });

  it('Count 3: one request with batch_size 3, and the three images as one entry, live and after a reload', async () => {
    const id = await openConversation(stage.easel, 'AUTOMATIC1111 answers');
    const before = a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length;
    await page.getByRole('spinbutton', { name: 'Count' }).fill('3');
    await promptBox().fill('a red fox');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await poll(() => page.locator('#log article.generated button.thumb').count()).toBe(3);
    await poll(() => page.locator('#image-status .generation').count()).toBe(0);
    expect(await page.locator('#log article.generated').count()).toBe(1);
    const sent = a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img');
    expect(sent.length - before).toBe(1);
    expect(sent.at(-1)!.body).toMatchObject({ batch_size: 3 });
    const stored = (await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { images: Array<{ seed: number }> };
    const seeds = stored.images.map((image) => image.seed);
    expect(seeds).toEqual([seeds[0], seeds[0]! + 1, seeds[0]! + 2]);
    await page.reload();
    await poll(() => page.locator('#log article.generated').count()).toBe(1);
    expect(await page.locator('#log article.generated button.thumb').count()).toBe(3);
  });
});
