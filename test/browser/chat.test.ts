// The chat pane in a real browser: streaming, withholding, the prompt pane, reset, Stop, Retry, escaping.
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { conversationIdOf, recordStates, type Watch } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';
import { replyMeta } from '../helpers/replies.ts';
import { RESET_MESSAGE } from '../../server/protocol/index.ts';

const meta = replyMeta;

/** The last reply bubble's text after every DOM change, to see every state it went through. */
const REPLY_STATES: Watch = {
  root: '#log',
  observe: { childList: true, subtree: true, characterData: true },
  element: { last: '#log .msg.assistant .text' },
  whenAbsent: '',
};

describeInBrowser('the chat pane', () => {
  const { stage, open, page } = useBrowserStage({ newConversation: true });
  afterEach(async () => {
    stage.fake.setModels(['mistral:7b']);
    // A clean page logs nothing: no CSP violation, no script error, no htmx warning.
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
    expect(stage.fake.pendingReplies).toBe(0);
  });

  const message = () => page.getByRole('textbox', { name: 'Message', exact: true });
  const promptBox = () => page.getByRole('textbox', { name: 'Prompt', exact: true });
  const lastReply = () => page.locator('#log .msg.assistant').last();

  async function send(text: string): Promise<void> {
    await message().fill(text);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
  }

  /** The reply has finished once its typing dots are gone and Send is usable again. */
  async function waitForReply(): Promise<void> {
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Send', exact: true }).isEnabled()).toBe(true);
  }

  it('streams a reply token by token: the text grows through several lengths', async () => {
    const text = 'A quiet harbour at dawn, fishing boats resting on still water, mist over the hills.';
    stage.fake.enqueue(scriptReply(text, meta('a quiet harbour at dawn'), { delayMs: 20 }));
    const states = await recordStates(page, REPLY_STATES);
    await send('a harbour');
    await poll(() => page.locator('#log .msg.user .text').last().textContent()).toBe('a harbour');
    await waitForReply();
    await poll(() => lastReply().locator('.text').textContent()).toBe(text);

    const lengths = [...new Set((await states()).map((s) => s.length))].filter((n) => n > 0);
    const intermediate = lengths.filter((n) => n < text.length);
    expect(intermediate.length).toBeGreaterThanOrEqual(3);
    // Never shrinks: each state extends the one before.
    expect(lengths).toEqual([...lengths].sort((a, b) => a - b));
  });

  it('never shows the delimiter or the JSON, with split delimiters and after a retry', async () => {
    stage.fake.enqueue(
      { chunks: ['Sure, a lake', ' for you.'], delayMs: 10 },
      // The metadata-only step's answer, cut by its cap: the full reminder follows and replaces the text.
      { chunks: ['{"prompt": "a lake'], doneReason: 'length' },
      {
        chunks: ['A still lake', ' under', ' pines.\n', '-', '-', '-\n{"prompt": "a still lake', ' under pines", "generate_image": false, "steps": 25, "cfg": 6.5, "seed": -1}'],
        delayMs: 20,
      },
    );
    const states = await recordStates(page, REPLY_STATES);
    await send('a lake');
    await waitForReply();

    await poll(() => lastReply().locator('.text').textContent()).toBe('A still lake under pines.');
    const seen = await states();
    expect(seen.some((s) => s.startsWith('Sure, a lake'))).toBe(true);
    for (const state of [...seen, await page.locator('body').innerText()]) {
      expect(state).not.toContain('---');
      expect(state).not.toMatch(/[{}]|generate_image|"prompt"/);
    }
  });

  it('keeps the text when only the metadata is asked for again: it never shrinks, and the settings arrive', async () => {
    const text = 'A cabin in the woods, smoke from the chimney. Shall I make it?';
    stage.fake.enqueue({ chunks: ['A cabin in the woods,', ' smoke from the chimney.', ' Shall I make it?'], delayMs: 20 });
    stage.fake.enqueue({ chunks: [JSON.stringify(meta('a log cabin in a snowy forest, chimney smoke', { steps: 28 }))], delayMs: 150 });
    const states = await recordStates(page, REPLY_STATES);
    await send('a cabin');
    await waitForReply();

    await poll(() => promptBox().inputValue()).toBe('a log cabin in a snowy forest, chimney smoke');
    expect(await lastReply().locator('.text').textContent()).toBe(text);
    const lengths = (await states()).map((state) => state.length).filter((length) => length > 0);
    // Once the text was whole it stayed whole: no retry emptied the bubble and re-streamed it.
    expect(lengths.slice(lengths.indexOf(text.length))).toEqual(lengths.slice(lengths.indexOf(text.length)).map(() => text.length));
    expect(lengths).toEqual([...lengths].sort((a, b) => a - b));
    await page.reload();
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual([text]);
  });

  it('fills the prompt pane and settings from the metadata, and a reload shows it all again', async () => {
    stage.fake.enqueue(scriptReply('A lighthouse in a storm.\nShall I make it?', meta('a lighthouse in a storm, dramatic waves', { steps: 32, cfg: 8.5, seed: 77, negative_prompt: 'blurry' })));
    await send('a lighthouse');
    await waitForReply();

    await poll(() => promptBox().inputValue()).toBe('a lighthouse in a storm, dramatic waves');
    await poll(() => page.getByLabel('Steps', { exact: true }).inputValue()).toBe('32');
    await poll(() => page.getByLabel('CFG', { exact: true }).inputValue()).toBe('8.5');
    await poll(() => page.getByLabel('Seed', { exact: true }).inputValue()).toBe('77');
    await poll(() => page.getByRole('textbox', { name: 'Negative prompt' }).inputValue()).toBe('blurry');

    await page.reload();
    await poll(() => page.locator('#log .msg.user .text').allTextContents()).toEqual(['a lighthouse']);
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['A lighthouse in a storm.\nShall I make it?']);
    await poll(() => promptBox().inputValue()).toBe('a lighthouse in a storm, dramatic waves');
    await poll(() => page.getByLabel('Steps', { exact: true }).inputValue()).toBe('32');
  });

  it('an edit in the prompt pane reaches the model in the next request, saved or not yet saved', async () => {
    stage.fake.enqueue(scriptReply('A fox.', meta('a fox')), scriptReply('Snowy now.', meta('a red fox in snow')), scriptReply('Night it is.', meta('a red fox in snow at night')));
    await send('a fox');
    await waitForReply();
    await poll(() => promptBox().inputValue()).toBe('a fox');

    // Saved by the debounced autosave, then told in the next turn.
    await promptBox().fill('a red fox in snow');
    await poll(() => page.locator('#prompt-saved').textContent()).toBe('Saved.');
    await send('looks good');
    await waitForReply();
    expect(stage.fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toContain('[The user edited the prompt to: "a red fox in snow"]');

    // Typed and sent at once, before the autosave: the edit travels with the message.
    await promptBox().fill('a red fox in snow at night');
    await message().fill('and at night?');
    await message().press('Enter');
    await waitForReply();
    const last = stage.fake.chatRequests().at(-1)?.messages?.at(-1)?.content ?? '';
    expect(last).toContain('[The user edited the prompt to: "a red fox in snow at night"]');
    expect(last.endsWith('and at night?')).toBe(true);
  });

  it('a suggestion never overwrites an edit made during the reply: it is offered beside it, and "Use suggestion" takes it', async () => {
    let release!: () => void;
    stage.fake.enqueue(
      scriptReply('An owl.', meta('an owl')),
      { ...scriptReply('Moonlit then.', meta('an owl, moonlit, cinematic')), gate: new Promise<void>((resolve) => (release = resolve)) },
    );
    await send('an owl');
    await waitForReply();
    await poll(() => promptBox().inputValue()).toBe('an owl');

    // The edit comes while the reply is being written: the model never saw it, so it wins.
    const asked = stage.fake.chatRequests().length;
    await send('make it moonlit');
    await stage.fake.waitForRequests(asked + 1, '/api/chat');
    await promptBox().fill('my own owl words');
    await poll(() => page.locator('#prompt-saved').textContent()).toBe('Saved.');
    release();
    await waitForReply();

    await poll(() => promptBox().inputValue()).toBe('my own owl words');
    await poll(() => page.locator('#suggestion-text').textContent()).toBe('an owl, moonlit, cinematic');
    // The server keeps the text on screen, not the model's version.
    const id = conversationIdOf(page);
    await poll(async () => ((await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { prompt: string }).prompt).toBe('my own owl words');

    await page.getByRole('button', { name: 'Use suggestion' }).click();
    await poll(() => promptBox().inputValue()).toBe('an owl, moonlit, cinematic');
    await poll(() => page.locator('#suggestion').isHidden()).toBe(true);
    await poll(async () => ((await (await stage.easel.get(`/api/conversations/${id}`)).json()) as { prompt: string }).prompt).toBe('an owl, moonlit, cinematic');
  });

  it('a reset shows the reset message and a divider marking the fresh start', async () => {
    stage.fake.enqueue('prose 1', { chunks: ['{"prompt": "a cat'], doneReason: 'length' }, 'prose 2', { chunks: ['{"prompt": "a cat in a hat, highly detailed, ', 'intricate'], doneReason: 'length' });
    await send('a cat');
    await waitForReply();
    await poll(() => lastReply().locator('.text').textContent()).toBe(RESET_MESSAGE);
    await poll(() => page.getByRole('separator', { name: 'Fresh start' }).isVisible()).toBe(true);
    expect(await page.locator('#log').innerText()).not.toMatch(/[{}]|intricate/);

    await page.reload();
    await poll(() => page.getByRole('separator', { name: 'Fresh start' }).isVisible()).toBe(true);

    // "Send again" sends the user's message once more, into the fresh context, and goes once it starts.
    stage.fake.enqueue(scriptReply('A cat, at last.', meta('a cat')));
    await page.getByRole('button', { name: 'Send again' }).click();
    await waitForReply();
    await poll(() => lastReply().locator('.text').textContent()).toBe('A cat, at last.');
    const resent = stage.fake.chatRequests().at(-1)?.messages ?? [];
    expect(resent.at(-1)?.content).toContain('a cat');
    expect(resent.filter((message) => message.role === 'assistant').map((message) => message.content)).not.toContain('prose 1');
    await poll(() => page.getByRole('button', { name: 'Send again' }).isVisible()).toBe(false);
  });

  it('Stop aborts the reply: Ollama sees the hang-up and the bubble says it stopped', async () => {
    const words = Array.from({ length: 200 }, (_, i) => `word${i} `);
    stage.fake.enqueue({ chunks: words, delayMs: 50 });
    const hangupsBefore = stage.fake.hangups;
    await send('a long story');
    await poll(() => lastReply().locator('.text').textContent()).toContain('word2');
    await poll(() => page.getByRole('button', { name: 'Send', exact: true }).isDisabled()).toBe(true);

    await page.getByRole('button', { name: 'Stop' }).click();
    await stage.fake.waitForHangup(hangupsBefore + 1);
    await waitForReply();
    await poll(() => lastReply().locator('.notes').textContent()).toBe('Stopped.');
    await poll(() => page.getByRole('button', { name: 'Stop' }).isHidden()).toBe(true);
    expect(await lastReply().locator('.text').innerText()).not.toContain('word199');
  });

  it('an error turns into an inline error with Retry; the text is kept and sent again', async () => {
    stage.fake.setModels([]);
    await send('a red balloon over Paris');
    await waitForReply();
    await poll(() => lastReply().getByRole('alert').textContent()).toContain('ollama pull mistral:7b');
    await poll(() => page.locator('#log .msg.user .text').last().textContent()).toBe('a red balloon over Paris');
    await poll(() => page.locator('#status').textContent()).toContain('ollama pull mistral:7b');

    stage.fake.setModels(['mistral:7b']);
    stage.fake.enqueue(scriptReply('A red balloon drifting over Paris rooftops.', meta('a red balloon over Paris')));
    await page.getByRole('button', { name: 'Retry' }).click();
    await waitForReply();
    await poll(() => lastReply().locator('.text').textContent()).toBe('A red balloon drifting over Paris rooftops.');
    expect(stage.fake.chatRequests().at(-1)?.messages?.at(-1)?.content).toBe('a red balloon over Paris');
    await poll(() => page.getByRole('button', { name: 'Retry' }).count()).toBe(0);
    await poll(() => page.locator('#status').textContent()).not.toContain('ollama pull');
    // The error Retry fixed is gone, live and after a reload.
    const visibleAlerts = () => page.locator('#log [role="alert"]:visible').count();
    expect(await visibleAlerts()).toBe(0);
    await page.reload();
    await poll(() => lastReply().locator('.text').textContent()).toBe('A red balloon drifting over Paris rooftops.');
    expect(await visibleAlerts()).toBe(0);

    // Retry is offered on the last turn only: a failed reply answered by a later message offers none.
    const visibleRetries = () => page.locator('#log button:has-text("Retry"):visible').count();
    stage.fake.setModels([]);
    await send('now over Rome');
    await waitForReply();
    await poll(visibleRetries).toBe(1);
    stage.fake.setModels(['mistral:7b']);
    stage.fake.enqueue(scriptReply('Over Rome, then.', meta('a red balloon over Rome')));
    await send('over Rome, please');
    await waitForReply();
    await poll(() => lastReply().locator('.text').textContent()).toBe('Over Rome, then.');
    await poll(visibleRetries).toBe(0);
    await page.reload();
    await poll(() => lastReply().locator('.text').textContent()).toBe('Over Rome, then.');
    expect(await visibleRetries()).toBe(0);
    expect(await page.locator('#log [role="alert"]:visible').count()).toBe(1);
  });

  it('a reply holding <script> and hx-get is shown as text and runs nothing', async () => {
    const hostile =
      'Try <script>window.__ran = "script"</script> or <img src="/pwned-img" onerror="window.__ran = \'img\'"> ' +
      'or <button hx-get="/pwned-htmx" hx-trigger="load">x</button> or <hx-partial hx-target="#log" hx-swap="innerHTML">gone</hx-partial>';
    const hostilePrompt = '<img src="/pwned-prompt" onerror="window.__ran = \'prompt\'"> a cat';
    stage.fake.enqueue(scriptReply(hostile, meta(hostilePrompt)));
    await send('<b>bold?</b> <script>window.__ran = "user"</script>');
    await waitForReply();

    await poll(() => lastReply().locator('.text').textContent()).toBe(hostile);
    await poll(() => page.locator('#log .msg.user .text').last().textContent()).toBe('<b>bold?</b> <script>window.__ran = "user"</script>');
    await poll(() => promptBox().inputValue()).toBe(hostilePrompt);
    expect(await page.locator('#log script, #log img, #log b, #log [hx-get], #log .text button, #log .msg > button').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __ran?: string }).__ran)).toBeUndefined();
    // Give a load trigger or an image every chance to fire: the status refresh after the reply came later.
    await poll(() => open.requests.filter((r) => r === 'GET /status').length).toBeGreaterThanOrEqual(2);
    expect(open.requests.filter((r) => r.includes('pwned'))).toEqual([]);
  });
});
