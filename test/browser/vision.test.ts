// The vision model in a real browser, against the fake Ollama (gemma3:4b can see) and the fake AUTOMATIC1111: Check
// under a picture says "Checking…" (in a second tab too), then what the picture shows and misses; Fix and
// regenerate makes it again on its seed from the revised prompt; the critique is there after a reload. A picture
// dropped on the prompt pane is described, and its description becomes the prompt, one undo away (not a reference
// image, which a drop on the chat makes).
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { makePng } from '../fakes/png-bytes.ts';
import { replyMeta } from '../helpers/replies.ts';
import { openPage } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';

const CRITIQUE = {
  matches: ['a tabby cat', 'a stack of books'],
  misses: [{ element: 'a blue wizard hat', evidence: 'the cat wears no hat' }],
  revisedPrompt: 'a tabby cat wearing a blue wizard hat, sitting on a stack of old books',
};

describeInBrowser('The vision model', () => {
  const { stage, open, page, a1111 } = useBrowserStage({
    a1111: { stepDelayMs: 5 },
    flags: ['--vision-model', 'gemma3:4b'],
    ollama: { models: ['mistral:7b', { name: 'gemma3:4b', capabilities: ['completion', 'vision'] }] },
  });

  afterEach(() => {
    // A clean page logs nothing: no CSP violation, no script error, no htmx warning.
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
  });

  const txt2img = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').map((request) => request.body as { prompt: string; seed: number; width: number });

  it('Check shows the critique here and in another tab, Fix and regenerate makes the picture again on its seed, and a reload keeps it', async () => {
    const id = await stage.easel.newConversation();
    expect((await stage.easel.put(`/api/conversations/${id}/settings`, { steps: 3, width: 64, height: 64 })).status).toBe(200);
    stage.fake.enqueue(scriptReply('A cat it is.', replyMeta('a tabby cat on a stack of books', { steps: 3, generate_image: false })));
    await (await stage.easel.post(`/api/conversations/${id}/messages`, { text: 'a tabby cat in a blue wizard hat on old books' })).text();
    // The picture's own seed (the pane's stays random): Fix and regenerate must use the picture's.
    await (await stage.easel.post(`/api/conversations/${id}/generations`, { settings: { seed: 500 } })).text();
    open.problems.length = 0;
    await page.goto(`${stage.easel.url}/c/${id}`);
    await poll(() => page.locator('#generate').getAttribute('data-backend-ready')).toBe('yes');
    const other = await openPage(stage);
    try {
      await other.page.goto(`${stage.easel.url}/c/${id}`);
      await other.page.locator('#status .state').first().waitFor();

      // The vision model answers once the test has seen "Checking…".
      let answer!: () => void;
      const json = JSON.stringify(CRITIQUE);
      stage.fake.enqueue({ chunks: [json.slice(0, 10), json.slice(10)], gate: new Promise<void>((resolve) => (answer = resolve)) });
      await page.locator('#log .thumb-item').getByRole('button', { name: 'Check', exact: true }).click();
      for (const shown of [page, other.page]) await poll(() => shown.locator('#log .critique-status-text').textContent()).toBe('Checking the picture with gemma3:4b…');
      answer();

      for (const shown of [page, other.page]) {
        await poll(() => shown.locator('#log .critique h3').textContent()).toBe('Checked by gemma3:4b');
        expect(await shown.locator('#log .critique .critique-matches li').allTextContents()).toEqual(CRITIQUE.matches);
        expect(await shown.locator('#log .critique .critique-misses li').allTextContents()).toEqual(['a blue wizard hat — the cat wears no hat']);
        await poll(() => shown.locator('#log .critique-status').count()).toBe(0);
        // Drawn once, though this page's own stream and its live view both draw it.
        expect(await shown.locator('#log .critique').count()).toBe(1);
        await poll(() => shown.locator('#suggestion-label').textContent()).toBe('The vision model checked the picture and suggests:');
      }
      // Under the picture's own entry.
      expect(await page.locator('#log article.generated .critique').count()).toBe(1);

      const before = txt2img().length;
      await page.getByRole('button', { name: 'Fix and regenerate' }).click();
      await poll(() => txt2img().length).toBe(before + 1);
      expect(txt2img().at(-1)).toMatchObject({ prompt: CRITIQUE.revisedPrompt, seed: 500, width: 64 });
      await poll(() => page.locator('#log article.generated').count()).toBe(2);
      await poll(() => page.getByRole('textbox', { name: 'Prompt', exact: true }).inputValue()).toBe(CRITIQUE.revisedPrompt);
      await poll(() => other.page.locator('#log article.generated').count()).toBe(2);
      expect(other.problems).toEqual([]);
    } finally {
      await other.close();
    }

    await page.reload();
    await poll(() => page.locator('#log .critique h3').textContent()).toBe('Checked by gemma3:4b');
    expect(await page.locator('#log article.generated').first().locator('.critique-misses li').allTextContents()).toEqual(['a blue wizard hat — the cat wears no hat']);
  });

  it('a picture dropped on the prompt is described: its description becomes the prompt, one undo away, and no reference image is added', async () => {
    const id = await stage.easel.newConversation();
    await stage.easel.put(`/api/conversations/${id}/prompt`, { prompt: 'an owl on a branch' });
    open.problems.length = 0;
    await page.goto(`${stage.easel.url}/c/${id}`);
    await page.locator('#status .state').first().waitFor();
    const prompt = page.getByRole('textbox', { name: 'Prompt', exact: true });
    // Typing not saved yet goes with the picture, saved first: Undo brings it back.
    await prompt.fill('my own words');

    let answer!: () => void;
    const json = JSON.stringify({ prompt: 'a red fox in deep snow, morning light', subject: 'a fox in the snow' });
    stage.fake.enqueue({ chunks: [json.slice(0, 10), json.slice(10)], gate: new Promise<void>((resolve) => (answer = resolve)) });
    await page.evaluate((base64) => {
      const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
      const files = new DataTransfer();
      files.items.add(new File([bytes], 'fox.png', { type: 'image/png' }));
      document.querySelector('#prompt')?.dispatchEvent(new DragEvent('drop', { dataTransfer: files, bubbles: true, cancelable: true }));
    }, Buffer.from(makePng(40, 24)).toString('base64'));
    await poll(() => page.locator('#describe-status').textContent()).toBe('Describing the picture…');
    answer();

    await poll(() => prompt.inputValue()).toBe('a red fox in deep snow, morning light');
    await poll(() => page.locator('#describe-status').textContent()).toBe('The prompt now describes the picture (a fox in the snow). Undo brings yours back.');
    expect(stage.fake.chatRequests().at(-1)?.model).toBe('gemma3:4b');
    expect(stage.fake.chatImages().at(-1)?.flat()).toHaveLength(1);
    expect(await page.locator('#log article.generated.reference').count()).toBe(0);
    expect(((await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { images: unknown[] }).images).toEqual([]);

    await page.locator('#prompt-undo').click();
    await poll(() => prompt.inputValue()).toBe('my own words');
  });
});
