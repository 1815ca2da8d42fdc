// A model that is slow to start, in a real browser: the status line in the bubble's place, SSE
// keep-alive comments the page must ignore, and a first-token timeout with Retry.
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };

describeInBrowser('a model slow to start', () => {
  const { stage, open, page } = useBrowserStage({ flags: ['--first-token-timeout', '1.5'], timing: { statusAfterMs: 50, keepAliveMs: 50 }, newConversation: true });
  afterEach(() => {
    // Keep-alive comments and the status line leave no console error, CSP violation or htmx warning.
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
  });

  const lastReply = () => page.locator('#log .msg.assistant').last();

  async function send(text: string): Promise<void> {
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill(text);
    await page.getByRole('button', { name: 'Send' }).click();
  }

  it('shows "Loading …" in the bubble until the first words take its place', async () => {
    stage.fake.enqueue(async () => {
      await stage.fake.waitForRequests(1, '/api/ps');
      return { ...scriptReply('A lighthouse, at last.', ASKING), loadMs: 800 };
    });
    await send('a lighthouse');
    await poll(() => lastReply().locator('.text .status').textContent()).toBe('Loading mistral:7b…');
    await poll(() => lastReply().locator('.text').textContent()).toBe('A lighthouse, at last.');
    expect(await lastReply().locator('.status').count()).toBe(0);
  });

  it('a first-token timeout replaces the status with the error and a Retry that works', async () => {
    stage.fake.setLoaded(['mistral:7b']);
    stage.fake.enqueue({ ...scriptReply('Never seen.', ASKING), loadMs: 60_000 });
    await send('a harbour');
    await poll(() => lastReply().locator('.text .status').textContent()).toBe('Waiting for mistral:7b to start answering…');
    await poll(() => lastReply().locator('.error-box').textContent()).toMatch(/did not start answering within 1\.5 s/);
    expect(await lastReply().locator('.text').textContent()).toBe('');
    expect(await lastReply().locator('.error-box').textContent()).not.toContain('ollama serve');

    stage.fake.enqueue(scriptReply('A harbour at dawn.', ASKING));
    await lastReply().getByRole('button', { name: 'Retry' }).click();
    await poll(() => lastReply().locator('.text').textContent()).toBe('A harbour at dawn.');
  });

  it('a slow metadata-only call shows its status after the text the user read, never in its place', async () => {
    stage.fake.enqueue('A lighthouse on a cliff. Stormy or calm?');
    stage.fake.enqueue({ chunks: [JSON.stringify(ASKING)], loadMs: 600 });
    await send('a lighthouse');
    await poll(() => lastReply().locator('.text .status').textContent()).toBe('Waiting for mistral:7b to start answering…');
    expect(await lastReply().locator('.text').textContent()).toBe('A lighthouse on a cliff. Stormy or calm?Waiting for mistral:7b to start answering…');
    await poll(() => lastReply().locator('.status').count()).toBe(0);
    expect(await lastReply().locator('.text').textContent()).toBe('A lighthouse on a cliff. Stormy or calm?');
  });
});
