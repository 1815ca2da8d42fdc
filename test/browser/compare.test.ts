// Compare in a real browser, against the fake AUTOMATIC1111: with two versions of the prompt, "Compare with
// previous" makes both on the same seeds, side by side with the differing words marked; "This one" makes the
// chosen one the prompt, and the assistant hears of the choice with the next message.
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { replyMeta } from '../helpers/replies.ts';
import { openPage } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';

describeInBrowser('Compare', () => {
  const { stage, open, page, a1111 } = useBrowserStage({ a1111: { stepDelayMs: 5 } });

  afterEach(() => {
    // A clean page logs nothing: no CSP violation, no script error, no htmx warning.
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
  });

  const txt2img = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').map((request) => request.body as { prompt: string; seed: number; batch_size?: number });

  it('makes both versions on the same seeds side by side, and "This one" makes the chosen the prompt the model hears of', async () => {
    const id = await stage.easel.newConversation();
    expect((await stage.easel.put(`/api/conversations/${id}/settings`, { steps: 3, width: 64, height: 64, seed: 500 })).status).toBe(200);
    await stage.easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a red fox in the snow' });
    await stage.easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a blue fox in the snow at dusk' });
    open.problems.length = 0;
    await page.goto(`${stage.easel.url}/c/${id}`);
    await poll(() => page.locator('#generate').getAttribute('data-backend-ready')).toBe('yes');

    const before = txt2img().length;
    await page.getByRole('button', { name: 'Compare with previous' }).click();
    await poll(() => page.locator('.compare-side img').count()).toBe(2);
    const sent = txt2img().slice(before);
    expect(sent.map((request) => request.prompt)).toEqual(['a red fox in the snow', 'a blue fox in the snow at dusk']);
    expect(new Set(sent.map((request) => request.seed))).toEqual(new Set([500]));
    expect(await page.locator('.compare-side[data-side="a"] mark').allTextContents()).toEqual(['red']);
    expect((await page.locator('.compare-side[data-side="b"] mark').allTextContents()).join(' ')).toContain('blue');

    // Typing not saved yet when "This one" is pressed is kept: saved as a version first, one undo away.
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('a green fox, my own words');
    await page.locator('.compare-side[data-side="a"]').getByRole('button', { name: 'This one' }).click();
    await poll(() => page.getByRole('textbox', { name: 'Prompt', exact: true }).inputValue()).toBe('a red fox in the snow');
    const versions = ((await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { promptVersions: Array<{ prompt: string }> }).promptVersions.map((version) => version.prompt);
    expect(versions.slice(-2)).toEqual(['a green fox, my own words', 'a red fox in the snow']);
    stage.fake.enqueue(scriptReply('Red it is.', replyMeta('a red fox in the snow')));
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('good, keep going');
    await page.getByRole('button', { name: 'Send' }).click();
    await poll(() => stage.fake.chatRequests().length).toBe(1);
    expect(stage.fake.chatRequests()[0]?.messages?.at(-1)?.content).toContain('chose: "a red fox in the snow" over "a blue fox in the snow at dusk"');
  });

  it('compares the typing on screen with the version it changes, side by side in another tab and after a reload', async () => {
    const id = await stage.easel.newConversation();
    expect((await stage.easel.put(`/api/conversations/${id}/settings`, { steps: 3, width: 64, height: 64, seed: 77 })).status).toBe(200);
    await stage.easel.put(`/api/conversations/${id}/prompt`, { prompt: 'an owl on a branch' });
    open.problems.length = 0;
    await page.goto(`${stage.easel.url}/c/${id}`);
    const other = await openPage(stage);
    try {
      await other.page.goto(`${stage.easel.url}/c/${id}`);
      await poll(() => page.locator('#generate').getAttribute('data-backend-ready')).toBe('yes');
      // Not saved yet: Compare saves it first, and it is side B.
      await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('an owl on a branch at night');
      await page.getByRole('button', { name: 'Compare with previous' }).click();
      await poll(() => page.locator('.compare-side img').count()).toBe(2);
      expect(await page.locator('.compare-side[data-side="b"] mark').allTextContents()).toEqual(['at night']);
      // The other tab draws the same two columns as it happens, each picture in its side.
      for (const shown of [other.page]) {
        await poll(() => shown.locator('.compare-side[data-side="a"] img').count()).toBe(1);
        await poll(() => shown.locator('.compare-side[data-side="b"] img').count()).toBe(1);
        expect(await shown.locator('.compare-side[data-side="b"] .compare-prompt').textContent()).toBe('an owl on a branch at night');
      }
      await page.reload();
      await poll(() => page.locator('.compare-side[data-side="b"] img').count()).toBe(1);
      expect(await page.locator('.compare-side[data-side="a"] .compare-prompt').textContent()).toBe('an owl on a branch');
      expect(other.problems).toEqual([]);
    } finally {
      await other.close();
    }
  });
});
