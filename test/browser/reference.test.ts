// A reference image in a real browser, against the fake AUTOMATIC1111: a picture file dropped onto the conversation's
// page (a drop event carrying a DataTransfer built in the page) shows the drop hint while dragged, lands in the chat
// as "Reference image" with its Vary buttons, and Vary (subtle) sends it to img2img; "Add a reference image…" (the
// keyboard's way) does the same, and a file that is no picture is refused in the image error slot.
import { afterEach, expect, it } from 'vitest';
import { makePng } from '../fakes/png-bytes.ts';
import { conversationIdOf, openPage } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';

describeInBrowser('Reference images', () => {
  const { stage, open, page, a1111 } = useBrowserStage({ a1111: { stepDelayMs: 10 } });

  afterEach(() => {
    // A clean page logs nothing: no CSP violation, no script error, no htmx warning.
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
  });

  async function openConversation(): Promise<string> {
    const id = await stage.easel.newConversation();
    expect((await stage.easel.put(`/api/conversations/${id}/settings`, { steps: 4 })).status).toBe(200);
    open.problems.length = 0;
    await page.goto(`${stage.easel.url}/c/${encodeURIComponent(id)}`);
    await poll(() => page.locator('#generate').getAttribute('data-backend-ready')).toBe('yes');
    return id;
  }

  it('a dropped picture shows the hint while dragged, lands in the chat with Vary buttons, and Vary starts from it', async () => {
    const id = await openConversation();
    const png = Buffer.from(makePng(40, 24)).toString('base64');
    await page.evaluate(() => {
      const files = new DataTransfer();
      files.items.add(new File(['x'], 'x.txt', { type: 'text/plain' }));
      document.body.dispatchEvent(new DragEvent('dragover', { dataTransfer: files, bubbles: true, cancelable: true }));
    });
    await poll(() => page.locator('#drop-hint').isVisible()).toBe(true);
    await page.evaluate((base64) => {
      const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
      const files = new DataTransfer();
      files.items.add(new File([bytes], 'fox.png', { type: 'image/png' }));
      document.querySelector('#log')?.dispatchEvent(new DragEvent('drop', { dataTransfer: files, bubbles: true, cancelable: true }));
    }, png);
    await poll(() => page.locator('#drop-hint').isVisible()).toBe(false);
    const entry = page.locator('#log article.generated.reference');
    await poll(() => entry.count()).toBe(1);
    await poll(() => entry.locator('.generated-label').innerText()).toContain('Reference image');
    expect(await entry.locator('.generated-label').isVisible()).toBe(true);
    const images = (await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { images: Array<{ id: string; url: string; prompt: string }> };
    expect(images.images).toHaveLength(1);
    expect(images.images[0]).toMatchObject({ prompt: '' });
    // The image area shows it too.
    await poll(() => page.locator('#image-frame img').getAttribute('src')).toBe(images.images[0]!.url);

    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('a red fox in the snow');
    const vary = entry.getByRole('button', { name: 'Vary (subtle)' });
    await poll(() => vary.isEnabled()).toBe(true);
    await vary.click();
    await poll(() => a1111.requests.filter((request) => request.path === '/sdapi/v1/img2img').length).toBe(1);
    const body = a1111.requests.find((request) => request.path === '/sdapi/v1/img2img')!.body as Record<string, unknown>;
    const stored = Buffer.from(await (await stage.easel.get(images.images[0]!.url)).arrayBuffer());
    expect(Buffer.from(String((body['init_images'] as string[])[0]), 'base64').equals(stored)).toBe(true);
    await poll(() => page.locator('#log article.generated').count()).toBe(2);
    await poll(() => page.locator('#image-status .generation').count()).toBe(0);
    // After a reload it is drawn the same.
    await page.reload();
    await poll(() => page.locator('#log article.generated.reference').getByRole('button', { name: 'Vary (strong)' }).count()).toBe(1);
  });

  it('"Add a reference image…" takes a chosen file; a file that is no picture is refused in the image error slot', async () => {
    await openConversation();
    const input = page.getByLabel('Add a reference image…');
    await input.setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hello') });
    await poll(() => page.locator('#image-error').textContent()).toContain('notes.txt is not a PNG, JPEG or WebP picture');
    // The refusal's status is logged by the browser itself: expected here.
    open.problems.splice(0, open.problems.length, ...open.problems.filter((problem) => !/status of 415/.test(problem)));
    await input.setInputFiles({ name: 'fox.png', mimeType: 'image/png', buffer: Buffer.from(makePng(16, 16)) });
    await poll(() => page.locator('#log article.generated.reference').count()).toBe(1);
    await poll(() => page.locator('#image-error').textContent()).toBe('');
    await poll(() => page.locator('#log article.generated.reference').getByRole('button', { name: 'Vary (strong)' }).isVisible()).toBe(true);
  });

  /** Drops a PNG of this size on the page's log, as a file manager's drag would. */
  async function dropPicture(on: typeof page, width: number, height: number): Promise<void> {
    await on.evaluate((base64) => {
      const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
      const files = new DataTransfer();
      files.items.add(new File([bytes], 'fox.png', { type: 'image/png' }));
      document.querySelector('#log')?.dispatchEvent(new DragEvent('drop', { dataTransfer: files, bubbles: true, cancelable: true }));
    }, Buffer.from(makePng(width, height)).toString('base64'));
  }

  it('a picture dropped on the empty page starts the conversation, and another tab of it shows the next one live', async () => {
    open.problems.length = 0;
    await page.goto(`${stage.easel.url}/`);
    await page.locator('#status .state').first().waitFor();
    await dropPicture(page, 32, 20);
    await poll(() => page.locator('#log article.generated.reference').count()).toBe(1);
    // The page is the conversation's now: its address, and the library lists it.
    await poll(() => new URL(page.url()).pathname.startsWith('/c/')).toBe(true);
    const id = conversationIdOf(page);
    await poll(() => page.locator(`#conversation-list a[href="/c/${id}"]`).count()).toBe(1);

    const other = await openPage(stage);
    try {
      await other.page.goto(`${stage.easel.url}/c/${id}`);
      await other.page.locator('#status .state').first().waitFor();
      await dropPicture(page, 24, 24);
      await poll(() => page.locator('#log article.generated.reference').count()).toBe(2);
      // Drawn once in each page: the one that added it (its answer and its live view) and the other.
      await poll(() => other.page.locator('#log article.generated.reference').count()).toBe(2);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await page.locator('#log article.generated.reference').count()).toBe(2);
      expect(other.problems).toEqual([]);
    } finally {
      await other.close();
    }
  });
});
