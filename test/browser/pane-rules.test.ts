// What the user typed is theirs, in a real browser against the fakes: a pre-send edit the model supersedes,
// an edit during a reply kept with the model's prompt offered, undo, pinned settings, "ready but not made",
// and a chat that goes on while the picture is made. The same rules through the API: test/integration/pane-rules-api.test.ts.
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { conversationIdOf } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';
import { readyMeta, replyMeta } from '../helpers/replies.ts';

// Few steps: the fake backend's images come quickly.
const meta = (prompt: string, extra: Record<string, unknown> = {}) => replyMeta(prompt, { steps: 4, ...extra });
const ready = (prompt: string, extra: Record<string, unknown> = {}) => readyMeta(prompt, { steps: 4, ...extra });

describeInBrowser('the prompt pane follows one rule', () => {
  const { stage, open, page, a1111 } = useBrowserStage({ a1111: { stepDelayMs: 40 } });
  afterEach(async () => {
    // A clean page logs nothing: no CSP violation, no script error, no htmx warning.
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
    expect(stage.fake.pendingReplies).toBe(0);
  });

  const txt2img = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img');
  const promptBox = () => page.getByRole('textbox', { name: 'Prompt', exact: true });
  const imageInFrame = () => page.locator('#image-frame img');
  const lastReply = () => page.locator('#log .msg.assistant').last();
  const field = (label: string) => page.getByLabel(label, { exact: true });
  const storedPrompt = async () => ((await (await stage.easel.get(`/api/conversations/${conversationIdOf(page)}`)).json()) as { prompt: string }).prompt;

  /** A new conversation with these settings, opened once the image backend is seen as up. */
  async function openConversation(settings: Record<string, unknown> = {}): Promise<string> {
    const id = await stage.easel.newConversation();
    if (Object.keys(settings).length > 0) expect((await stage.easel.put(`/api/conversations/${id}/settings`, settings)).status).toBe(200);
    open.problems.length = 0;
    open.requests.length = 0;
    await page.goto(`${stage.easel.url}/c/${encodeURIComponent(id)}`);
    await poll(() => page.locator('#generate').getAttribute('data-backend-ready')).toBe('yes');
    return id;
  }

  async function send(text: string): Promise<void> {
    await page.getByRole('textbox', { name: 'Message' }).fill(text);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
  }

  async function waitForReply(): Promise<void> {
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Send', exact: true }).isEnabled()).toBe(true);
  }

  async function editPrompt(text: string): Promise<void> {
    await promptBox().fill(text);
    await poll(() => page.locator('#prompt-saved').textContent()).toBe('Saved.');
  }

  it('a prompt edited before sending is superseded by the model prompt, and the automatic image is made from what the pane shows', async () => {
    await openConversation();
    stage.fake.enqueue(scriptReply('A fox.', meta('a red fox')), scriptReply('Woodblock it is.', ready('a red fox, woodblock print, ukiyo-e')));
    await send('a fox');
    await waitForReply();
    await editPrompt('a red fox, woodblock');
    await send('make it a woodblock print and go ahead');

    await poll(() => imageInFrame().getAttribute('alt')).toBe('Image: a red fox, woodblock print, ukiyo-e');
    expect(await promptBox().inputValue()).toBe('a red fox, woodblock print, ukiyo-e');
    expect(await page.locator('#suggestion').isHidden()).toBe(true);
    expect(txt2img().at(-1)?.body).toMatchObject({ prompt: 'a red fox, woodblock print, ukiyo-e' });
    expect(stage.fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toContain('[The user edited the prompt to: "a red fox, woodblock"]');
  });

  it('a prompt edited while the reply streams is kept: no automatic image, the model prompt is offered and taken, then Generate makes it', async () => {
    await openConversation();
    stage.fake.enqueue(scriptReply('An owl.', meta('an owl')));
    await send('an owl');
    await waitForReply();
    const before = txt2img().length;
    let release!: () => void;
    stage.fake.enqueue({ ...scriptReply('Moonlit, here it comes.', ready('an owl, moonlit')), gate: new Promise<void>((resolve) => (release = resolve)) });
    const asked = stage.fake.chatRequests().length;
    await send('moonlit, and go ahead');
    // The stage is shared by the file's tests: wait for this message's request.
    await stage.fake.waitForRequests(asked + 1, '/api/chat');
    await editPrompt('my own owl words');
    release();
    await waitForReply();

    await poll(() => page.locator('#suggestion-text').textContent()).toBe('an owl, moonlit');
    expect(await promptBox().inputValue()).toBe('my own owl words');
    const note = lastReply().locator('.image-note');
    await poll(() => note.textContent()).toMatch(/you changed the prompt while it was answering/);
    expect(txt2img().length).toBe(before);
    expect(await imageInFrame().count()).toBe(0);

    await page.getByRole('button', { name: 'Use suggestion' }).click();
    await poll(() => promptBox().inputValue()).toBe('an owl, moonlit');
    await poll(() => page.locator('#suggestion').isHidden()).toBe(true);
    expect(await storedPrompt()).toBe('an owl, moonlit');
    await note.getByRole('button', { name: 'Generate' }).click();
    await poll(() => imageInFrame().getAttribute('alt')).toBe('Image: an owl, moonlit');
  });

  it('undo goes back through the versions to an earlier prompt, by button and by Ctrl+Z outside the text box', async () => {
    await openConversation();
    stage.fake.enqueue(scriptReply('A cat.', meta('a cat')), scriptReply('Baroque, then.', meta('a cat, oil painting, baroque')));
    await send('a cat');
    await waitForReply();
    const undo = page.getByRole('button', { name: 'Undo', exact: true });
    await poll(() => undo.isDisabled()).toBe(true);
    await editPrompt('a cat, oil');
    await send('baroque');
    await waitForReply();
    await poll(() => promptBox().inputValue()).toBe('a cat, oil painting, baroque');

    await undo.click();
    await poll(() => promptBox().inputValue()).toBe('a cat, oil');
    await undo.click();
    await poll(() => promptBox().inputValue()).toBe('a cat');
    await poll(() => undo.isDisabled()).toBe(true);
    expect(await storedPrompt()).toBe('a cat');

    await page.locator('#log').click();
    const redone = page.waitForResponse((response) => response.url().endsWith('/prompt/redo'));
    await page.keyboard.press('Control+Shift+Z');
    await redone;
    await poll(() => promptBox().inputValue()).toBe('a cat, oil');
    // The redo's answer has been swapped in and its request is over: a Ctrl+Z pressed while that request still
    // ran would be dropped by htmx, as a second click on a busy form is.
    await poll(() => page.locator('.htmx-request').count()).toBe(0);
    await poll(() => undo.isEnabled()).toBe(true);
    await page.keyboard.press('Control+Z');
    await poll(() => promptBox().inputValue()).toBe('a cat');
    // Inside the text box Ctrl+Z is the box's own undo, not the versions'.
    await promptBox().focus();
    await page.keyboard.press('Control+Z');
    await poll(() => page.getByRole('button', { name: 'Redo', exact: true }).isEnabled()).toBe(true);
    expect(await storedPrompt()).toBe('a cat');
  });

  it('Ctrl+Z in the prompt box right after the assistant rewrote it goes back to the version before; once typed in, it undoes the typing', async () => {
    await openConversation();
    stage.fake.enqueue(scriptReply('A cat.', meta('a cat')), scriptReply('Baroque, then.', meta('a cat, oil painting, baroque')));
    await send('a cat');
    await waitForReply();
    await editPrompt('a cat, oil');
    await send('baroque');
    await waitForReply();
    await poll(() => promptBox().inputValue()).toBe('a cat, oil painting, baroque');
    await poll(() => page.locator('.htmx-request').count()).toBe(0);
    // The box's own history never held the rewrite: the versions answer, not a mix of old typing.
    await promptBox().focus();
    await page.keyboard.press('Control+Z');
    await poll(() => promptBox().inputValue()).toBe('a cat, oil');
    await poll(storedPrompt).toBe('a cat, oil');
    // Typing makes Ctrl+Z the box's own again.
    await poll(() => page.locator('.htmx-request').count()).toBe(0);
    await page.keyboard.press('End');
    await page.keyboard.type(' x');
    await page.keyboard.press('Control+Z');
    await poll(() => promptBox().inputValue()).not.toContain(' x');
    expect(await promptBox().inputValue()).toContain('a cat, oil');
  });

  it('Ctrl+Z inside the message box or a settings field undoes that field\'s typing, never a prompt version', async () => {
    await openConversation();
    stage.fake.enqueue(scriptReply('A cat.', meta('a cat')));
    await send('a cat');
    await waitForReply();
    await editPrompt('a cat, oil');
    const undo = page.getByRole('button', { name: 'Undo', exact: true });
    await poll(() => undo.isEnabled()).toBe(true);

    const message = page.getByRole('textbox', { name: 'Message' });
    await message.click();
    await page.keyboard.type('a dog');
    await page.keyboard.press('Control+Z');
    await poll(() => message.inputValue()).toBe('');

    const negative = page.getByRole('textbox', { name: 'Negative prompt' });
    await negative.click();
    await page.keyboard.type('blurry');
    await page.keyboard.press('Control+Z');
    await poll(() => negative.inputValue()).toBe('');

    const steps = field('Steps');
    await steps.click();
    // Nothing typed in Steps: Chromium's one undo history for the page would reach back into the prompt's typing.
    await page.keyboard.press('Control+Z');

    // Give a wrongly taken Ctrl+Z the time to reach the server: the version stays, Undo is still offered.
    await page.waitForTimeout(300);
    expect(await promptBox().inputValue()).toBe('a cat, oil');
    expect(await storedPrompt()).toBe('a cat, oil');
    expect(await undo.isEnabled()).toBe(true);
    expect(open.requests.filter((request) => request.includes('/prompt/undo'))).toEqual([]);
  });

  it('a setting set by hand is kept against the model value, which is offered beside it and can be taken; the pin can be removed', async () => {
    await openConversation();
    await field('Steps').fill('6');
    await field('Steps').blur();
    await poll(() => page.locator('#settings-status').textContent()).toBe('Saved.');
    stage.fake.enqueue(scriptReply('A lighthouse, coming up.', ready('a lighthouse in a storm', { steps: 3, cfg: 9 })));
    await send('a lighthouse, go');
    await poll(() => imageInFrame().getAttribute('alt')).toBe('Image: a lighthouse in a storm');

    expect(await field('Steps').inputValue()).toBe('6');
    expect(await field('CFG').inputValue()).toBe('9');
    expect(txt2img().at(-1)?.body).toMatchObject({ steps: 6, cfg_scale: 9 });
    const suggestion = page.locator('#meta-steps').getByRole('button', { name: 'Assistant suggests 3' });
    await poll(() => suggestion.isVisible()).toBe(true);
    await suggestion.click();
    await poll(() => field('Steps').inputValue()).toBe('3');
    await poll(() => page.locator('#meta-steps .setting-suggestion').count()).toBe(0);

    const pin = page.getByRole('button', { name: /Steps is set by you/ });
    expect(await pin.isVisible()).toBe(true);
    await pin.click();
    await poll(() => page.locator('#meta-steps .pin').count()).toBe(0);
    expect(((await (await stage.easel.get(`/api/conversations/${conversationIdOf(page)}`)).json()) as { pinned: string[] }).pinned).toEqual([]);
  });

  it('a prompt over the limit is said once, in plain words, and Generate waits until it is short enough', async () => {
    await openConversation();
    await editPrompt('a lighthouse');
    const error = page.locator('#prompt-error');
    const generate = page.locator('#generate');
    expect(await generate.isDisabled()).toBe(false);
    await promptBox().fill('a lighthouse '.repeat(154)); // 2002 characters
    const words = 'A prompt can hold at most 2,000 characters: shorten it to save it or to generate.';
    await poll(() => error.textContent()).toBe(words);
    expect(await page.locator('#prompt-count').textContent()).toBe('2,002 of at most 2,000 characters');
    expect(await generate.isDisabled()).toBe(true);
    expect(await promptBox().getAttribute('aria-invalid')).toBe('true');
    // Long after the save would have gone: nothing was sent (it would be refused), and the one message stays.
    await page.waitForTimeout(1000);
    expect(open.requests.filter((request) => request === `PUT /c/${conversationIdOf(page)}/prompt`)).toHaveLength(1);
    expect(await error.textContent()).toBe(words);
    expect(await page.locator('#prompt-saved').textContent()).toBe('');
    expect(await storedPrompt()).toBe('a lighthouse');
    // The Generate of an image note submits the same form: held back too, nothing is asked of the backend.
    const before = txt2img().length;
    await page.evaluate(() => (document.getElementById('generate-form') as HTMLFormElement).requestSubmit());
    await page.waitForTimeout(300);
    expect(txt2img().length).toBe(before);
    expect(await page.locator('#image-error').textContent()).toBe('');

    await promptBox().fill('a lighthouse at dusk');
    await poll(() => page.locator('#prompt-saved').textContent()).toBe('Saved.');
    expect(await error.textContent()).toBe('');
    expect(await generate.isDisabled()).toBe(false);
    expect(await storedPrompt()).toBe('a lighthouse at dusk');
  });

  it('"ready but not made" says why in the reply, with Generate, also after a reload', async () => {
    await openConversation({ autoGenerate: false });
    const before = txt2img().length;
    stage.fake.enqueue(scriptReply('Your kite is ready.', ready('a red kite over dunes')));
    await send('a kite');
    await waitForReply();
    const note = lastReply().locator('.image-note');
    await poll(() => note.textContent()).toMatch(/“Generate automatically” is off, so no image was made/);
    expect(txt2img().length).toBe(before);

    await page.reload();
    await poll(() => note.textContent()).toMatch(/“Generate automatically” is off/);
    await note.getByRole('button', { name: 'Generate' }).click();
    await poll(() => imageInFrame().getAttribute('alt')).toBe('Image: a red kite over dunes');
  });

  it('while the image is made the chat is free: no typing dots, no Stop, and a message is sent and answered', async () => {
    await openConversation();
    // 80 steps of 40 ms: the picture takes seconds, as a real one does.
    stage.fake.enqueue(scriptReply('Painting it now.', ready('a misty forest', { steps: 80 })), scriptReply('Birds next time, sure.', meta('a misty forest, birds')));
    await send('a forest, go');
    await poll(() => page.getByRole('progressbar', { name: 'Image progress' }).count()).toBe(1);
    await waitForReply();
    expect(await page.locator('#stop').isVisible()).toBe(false);
    expect(await page.locator('#image-status').getByRole('button', { name: 'Cancel' }).isVisible()).toBe(true);

    await send('add birds later');
    await poll(() => lastReply().locator('.text').textContent()).toBe('Birds next time, sure.');
    // The reply came while the picture was still being made.
    expect(await page.getByRole('progressbar', { name: 'Image progress' }).count()).toBe(1);
    expect(await imageInFrame().count()).toBe(0);
    await poll(() => imageInFrame().getAttribute('alt')).toBe('Image: a misty forest');
  });
});
