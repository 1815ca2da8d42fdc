// Settings → Models in a real browser, against the fake Ollama and the fake AUTOMATIC1111: picking a chat model,
// pulling one with its progress bar (and cancelling one), the status line's offers when the default model is
// missing, and another checkpoint bringing its family's size, steps, presets, hints and token counter.
import { afterEach, expect, it } from 'vitest';
import { conversationIdOf, recordStates } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';

const CHECKPOINTS = ['v1-5-pruned-emaonly.safetensors', 'SDXL/juggernautXL_v9.safetensors', 'flux1-dev.safetensors'];
const LLAVA = { name: 'llava:7b', capabilities: ['completion', 'vision'], sizeBytes: 4_700_000_000, parameterSize: '7B' };

describeInBrowser('Settings → Models', () => {
  const { stage, open, page } = useBrowserStage({ newConversation: true, a1111: { stepDelayMs: 5, checkpoints: CHECKPOINTS } });

  afterEach(async () => {
    stage.fake.setModels(['mistral:7b']);
    stage.fake.setPullable({});
    // A clean page logs nothing: no CSP violation, no script error, no htmx warning.
    expect(open.problems).toEqual([]);
  });

  const chatModel = () => page.getByLabel('Chat model', { exact: true });
  const checkpoint = () => page.getByLabel('Checkpoint', { exact: true });
  const stored = async () => ((await (await stage.easel.get(`/api/conversations/${conversationIdOf(page)}`)).json()) as { settings: Record<string, unknown> }).settings;
  const optionTexts = (select: ReturnType<typeof chatModel>) => select.locator('option').allTextContents();

  it('lists the installed models once Ollama answers, and a pick is saved as the conversation\'s chat model', async () => {
    stage.fake.setModels(['mistral:7b', LLAVA]);
    await page.reload();
    await poll(() => optionTexts(chatModel())).toEqual(['Default (mistral:7b)', 'mistral:7b · 4.4 GB · 7.2B', 'llava:7b · 4.7 GB · 7B · vision']);
    await chatModel().selectOption('llava:7b');
    await poll(() => page.locator('#settings-status').textContent()).toBe('Saved.');
    expect((await stored()).chatModel).toBe('llava:7b');
    // A reload shows it chosen.
    await page.reload();
    await poll(() => chatModel().inputValue()).toBe('llava:7b');
    await poll(() => optionTexts(chatModel())).toContain('llava:7b · 4.7 GB · 7B · vision');
    expect(await chatModel().inputValue()).toBe('llava:7b');
  });

  it('pulls a model with a visible bar and what is left, then lists it to pick; the name field saves no setting', async () => {
    stage.fake.setPullable({ 'llava:7b': { ...LLAVA, totalBytes: 4_100_000_000, steps: 10, durationMs: 1500 } });
    const saves = () => open.requests.filter((request) => request.startsWith('PUT ') && request.endsWith('/settings')).length;
    const bar = await recordStates(page, { root: '#pull', observe: { childList: true, subtree: true, characterData: true }, element: { first: '#pull .pull-left' }, whenAbsent: '' });
    await page.getByLabel("Pull a model from Ollama's library").fill('llava:7b');
    await page.getByRole('button', { name: 'Pull', exact: true }).click();
    await poll(() => page.locator('#pull-bar').isVisible()).toBe(true);
    await poll(() => page.getByRole('button', { name: 'Cancel', exact: true }).isVisible()).toBe(true);
    await poll(() => page.locator('#pull-result').textContent()).toBe('Pulled llava:7b. Pick it as the chat model above.');
    const seen = (await bar()).filter((left) => left !== '');
    expect(seen).toContain('4.1 GB of 4.1 GB left');
    expect(seen.some((left) => /^[1-3]\.\d GB of 4\.1 GB left$/.test(left))).toBe(true);
    expect(await page.locator('#pull-progress').isHidden()).toBe(true);
    expect(await page.getByRole('button', { name: 'Cancel', exact: true }).isHidden()).toBe(true);
    // The section asked again: the new model is there to pick.
    await poll(() => optionTexts(chatModel())).toContain('llava:7b · 4.7 GB · 7B · vision');
    expect(saves()).toBe(0);
  });

  it('Cancel closes the pull\'s stream, which cancels it in Ollama', async () => {
    let release!: () => void;
    stage.fake.setPullable({ 'llava:7b': { ...LLAVA, gate: new Promise<void>((resolve) => (release = resolve)) } });
    const cancelledBefore = stage.fake.pullsCancelled.length;
    await page.getByLabel("Pull a model from Ollama's library").fill('llava:7b');
    await page.getByLabel("Pull a model from Ollama's library").press('Enter');
    await poll(() => page.locator('#pull .pull-status').textContent()).toMatch(/^pulling [0-9a-f]{12}$/);
    await page.getByRole('button', { name: 'Cancel', exact: true }).click();
    await stage.fake.waitForPullCancelled(cancelledBefore + 1);
    release();
    await poll(() => page.locator('#pull-result').textContent()).toBe('Pull cancelled.');
    expect(await page.getByRole('button', { name: 'Pull', exact: true }).isEnabled()).toBe(true);
  });

  it('with the default model missing, the status line offers the installed ones and pulls it from there', async () => {
    stage.fake.setModels([LLAVA]);
    stage.fake.setPullable({ 'mistral:7b': { steps: 3 } });
    await page.reload();
    const status = page.locator('#status');
    await poll(() => status.textContent()).toContain('mistral:7b is not pulled. Pick an installed model in Settings → Models, or pull it.');
    await status.getByRole('link', { name: 'Pick an installed model in Settings → Models' }).click();
    await poll(() => page.evaluate(() => document.activeElement?.id)).toBe('setting-chatModel');
    await status.getByRole('button', { name: 'pull it' }).click();
    await poll(() => page.locator('#pull-result').textContent()).toBe('Pulled mistral:7b. Pick it as the chat model above.');
    await poll(() => status.textContent()).toContain('is ready with mistral:7b');
  });

  it('another checkpoint brings its family: the size, steps and CFG follow, the presets, hints and counter too', async () => {
    await poll(() => optionTexts(checkpoint())).toContain('flux1-dev · Flux');
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('a red fox, snow');
    await poll(() => page.locator('#prompt-count').textContent()).toBe('15 characters · about 5 of 75 CLIP tokens');
    expect(await page.getByLabel('Size', { exact: true }).locator('option').allTextContents()).toContain('Portrait 512 × 768');

    await checkpoint().selectOption('SDXL_juggernautXL_v9');
    await poll(() => page.getByLabel('Width', { exact: true }).inputValue()).toBe('1024');
    expect(await page.getByLabel('Height', { exact: true }).inputValue()).toBe('1024');
    await poll(() => page.getByLabel('Steps', { exact: true }).inputValue()).toBe('30');
    expect(await page.getByLabel('CFG', { exact: true }).inputValue()).toBe('6');
    await poll(() => page.getByLabel('Size', { exact: true }).locator('option').allTextContents()).toContain('Portrait 832 × 1216');
    expect(await page.getByLabel('Size', { exact: true }).inputValue()).toBe('1024x1024');
    await poll(() => page.locator('#family-detect').textContent()).toBe('Detect (SDXL, from the checkpoint)');
    expect(await stored()).toMatchObject({ checkpoint: 'SDXL_juggernautXL_v9', width: 1024, height: 1024, steps: 30, cfg: 6 });

    // A portrait stays a portrait; Flux reads prompts with T5 and ignores the negative prompt and CFG.
    await page.getByLabel('Size', { exact: true }).selectOption('832x1216');
    await poll(() => page.locator('#settings-status').textContent()).toBe('Saved.');
    await checkpoint().selectOption('flux1-dev');
    await poll(() => page.getByLabel('CFG', { exact: true }).inputValue()).toBe('1');
    expect(await page.getByLabel('Width', { exact: true }).inputValue()).toBe('832');
    await poll(() => page.locator('#prompt-count').textContent()).toBe('15 characters · about 6 of 512 T5 tokens');
    expect(await page.locator('#family-hint-negativePrompt').textContent()).toBe('Flux ignores the negative prompt.');
    expect(await page.locator('#family-hint-cfg').textContent()).toBe('Flux ignores CFG.');

    // Back to the server's own: SD 1.5's sizes, its hints gone.
    await checkpoint().selectOption('');
    await poll(() => page.locator('#prompt-count').textContent()).toBe('15 characters · about 5 of 75 CLIP tokens');
    expect(await page.locator('#family-hint-negativePrompt').isHidden()).toBe(true);
    await poll(() => page.getByLabel('Width', { exact: true }).inputValue()).toBe('512');
    expect(await page.getByLabel('Height', { exact: true }).inputValue()).toBe('768');
  });
});
