// The conversation library in a real browser: the empty new-conversation page, the sidebar (switching
// in place, search, a narrow window), Rename, Delete, Regenerate, Edit, Copy, Import, an interrupted reply
// and a message the store could not save.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { conversationIdOf } from './browser.ts';
import { describeInBrowser, poll, useBrowserStage } from './suite.ts';
import { replyMeta } from '../helpers/replies.ts';

const meta = (prompt: string) => replyMeta(prompt);

describeInBrowser('the conversation library', () => {
  const { stage, open, page } = useBrowserStage();
  afterEach(async () => {
    expect(open.problems).toEqual([]);
    expect(stage.fake.scriptErrors).toEqual([]);
    expect(stage.fake.pendingReplies).toBe(0);
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  const message = () => page.getByRole('textbox', { name: 'Message', exact: true });
  const library = () => page.getByRole('navigation', { name: 'Conversations' });
  const titles = () => library().locator('.conversation-title').allTextContents();

  async function openEmptyPage(): Promise<void> {
    open.problems.length = 0;
    await page.goto(`${stage.easel.url}/`);
    await page.locator('#status .state').first().waitFor();
  }

  async function send(text: string, reply: string): Promise<void> {
    stage.fake.enqueue(scriptReply(reply, meta('')));
    await message().fill(text);
    await page.getByRole('button', { name: 'Send' }).click();
    await waitForReply();
  }

  async function waitForReply(): Promise<void> {
    await poll(() => page.locator('#log .typing').count()).toBe(0);
    await poll(() => page.getByRole('button', { name: 'Send' }).isEnabled()).toBe(true);
  }

  async function stored(id: string) {
    return (await (await stage.easel.get(`/api/conversations/${id}`)).json()) as {
      title: string;
      prompt: string;
      settings: { steps: number };
      turns: Array<{ role: string; text: string; status: string }>;
    };
  }

  async function count(): Promise<number> {
    return ((await (await stage.easel.get('/api/conversations')).json()) as { conversations: unknown[] }).conversations.length;
  }

  /** Starts a conversation from the empty page, as a person does. */
  async function startConversation(text: string, reply: string): Promise<string> {
    await openEmptyPage();
    await send(text, reply);
    await poll(() => new URL(page.url()).pathname).toMatch(/^\/c\//);
    return conversationIdOf(page);
  }

  it('"/" is an empty page that stores nothing; the first message creates the conversation, with the prompt and settings set before it', async () => {
    const before = await count();
    await openEmptyPage();
    await page.reload();
    expect(await count()).toBe(before);
    expect(await page.title()).toBe('New conversation · Easel');

    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('a paper boat');
    await page.getByLabel('Steps').fill('31');
    await page.getByLabel('Steps').blur();
    // Nothing is saved yet (there is nothing to save it into), and nothing complains.
    await page.waitForTimeout(900);
    expect(await count()).toBe(before);

    await send('A paper boat on a puddle', 'What colour is the paper?');
    await poll(() => new URL(page.url()).pathname).toMatch(/^\/c\/[0-9a-f-]{36}$/);
    const id = conversationIdOf(page);
    await poll(() => page.title()).toBe('A paper boat on a puddle · Easel');
    expect(await page.locator('#conversation-title').textContent()).toBe('A paper boat on a puddle');
    await poll(() => library().locator('[aria-current="page"] .conversation-title').textContent()).toBe('A paper boat on a puddle');
    expect((await stored(id)).prompt).toBe('a paper boat');
    // The model heard of both with the first message (its reply's metadata then sets the settings).
    const first = stage.fake.chatRequests().at(-1)?.messages?.at(-1)?.content ?? '';
    expect(first).toContain('[The user edited the prompt to: "a paper boat"]');
    expect(first).toContain('steps 31');
    expect(await count()).toBe(before + 1);

    // The new conversation's controls work at once: a prompt edit is saved to it.
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('a red paper boat');
    await poll(async () => (await stored(id)).prompt).toBe('a red paper boat');
  });

  it('switches conversations in place from the sidebar; the address can be bookmarked and reloaded', async () => {
    const lighthouse = await startConversation('A lighthouse in a storm', 'Day or night?');
    const fox = await startConversation('A red fox in the snow', 'Morning or dusk?');
    await poll(titles).toEqual(['A red fox in the snow', 'A lighthouse in a storm', ...(await titles()).slice(2)]);

    await page.evaluate(() => ((window as unknown as { __stayed: boolean }).__stayed = true));
    await library().getByRole('link', { name: /A lighthouse in a storm/ }).click();
    await poll(() => new URL(page.url()).pathname).toBe(`/c/${lighthouse}`);
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['Day or night?']);
    await poll(() => page.title()).toBe('A lighthouse in a storm · Easel');
    expect(await library().locator('[aria-current="page"] .conversation-title').textContent()).toBe('A lighthouse in a storm');
    // No page load happened: the same window, the sidebar untouched.
    expect(await page.evaluate(() => (window as unknown as { __stayed?: boolean }).__stayed)).toBe(true);

    // The switched-to conversation works: a message goes to it, and it moves to the top.
    await send('At night', 'Night it is.');
    await poll(titles).toEqual(['A lighthouse in a storm', 'A red fox in the snow', ...(await titles()).slice(2)]);
    expect((await stored(lighthouse)).turns.map((t) => t.text)).toEqual(['A lighthouse in a storm', 'Day or night?', 'At night', 'Night it is.']);
    expect((await stored(fox)).turns).toHaveLength(2);

    await page.reload();
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['Day or night?', 'Night it is.']);
    await page.goBack();
    await poll(() => new URL(page.url()).pathname).toBe(`/c/${fox}`);
    await poll(() => page.locator('#log .msg.assistant .text').allTextContents()).toEqual(['Morning or dusk?']);
  });

  it('cuts a long title with an ellipsis where its time begins, and shows the whole title on hover', async () => {
    // Under the 60 characters a title taken from a message keeps, and longer than the list shows.
    const long = 'A lighthouse on a rocky cliff at dusk with storm clouds';
    await startConversation(long, 'Day or night?');
    const item = library().locator('[aria-current="page"]');
    await poll(() => item.locator('.conversation-title').getAttribute('title')).toBe(long);
    const shown = await item.evaluate((link) => {
      const title = link.querySelector('.conversation-title')!;
      const time = link.querySelector('time')!;
      return {
        cut: title.scrollWidth > title.clientWidth,
        overflow: getComputedStyle(title).textOverflow,
        // The title takes the row up to the time, less the gap between them.
        room: time.getBoundingClientRect().left - title.getBoundingClientRect().right - parseFloat(getComputedStyle(link).columnGap),
      };
    });
    expect(shown).toMatchObject({ cut: true, overflow: 'ellipsis' });
    expect(Math.abs(shown.room)).toBeLessThan(1);
  });

  it('searches the list by the words of messages and prompts', async () => {
    await startConversation('A teapot with steam', 'Porcelain or iron?');
    const search = page.getByRole('searchbox', { name: 'Search conversations' });
    await search.fill('porcelain');
    await poll(titles).toEqual(['A teapot with steam']);
    await search.fill('porcelain zebra');
    await poll(() => library().locator('.conversation-none').textContent()).toBe('No conversation holds these words.');
    await search.fill('');
    await poll(async () => (await titles()).length).toBeGreaterThan(1);
  });

  it('renames: the heading, the page title and the list follow, and a reload keeps it', async () => {
    const id = await startConversation('A windmill by a canal', 'Tulips too?');
    await page.getByRole('button', { name: 'Rename' }).click();
    const field = page.getByRole('textbox', { name: 'New title' });
    expect(await field.inputValue()).toBe('A windmill by a canal');
    await field.fill('Dutch landscape');
    await field.press('Enter');
    await poll(() => page.locator('#conversation-title').textContent()).toBe('Dutch landscape');
    await poll(() => page.title()).toBe('Dutch landscape · Easel');
    await poll(() => library().locator('[aria-current="page"] .conversation-title').textContent()).toBe('Dutch landscape');
    expect((await stored(id)).title).toBe('Dutch landscape');
    await page.reload();
    expect(await page.locator('#conversation-title').textContent()).toBe('Dutch landscape');

    // A title the server refuses is said beside the field, and Escape leaves it as it was.
    await page.getByRole('button', { name: 'Rename' }).click();
    await field.fill('bell \u0007 title');
    await field.press('Enter');
    await poll(() => page.locator('#rename-error').textContent()).toContain('invisible control character (U+0007)');
    open.problems.splice(0, open.problems.length, ...open.problems.filter((p) => !/status of 422/.test(p)));
    await field.press('Escape');
    expect(await page.locator('#conversation-title').isVisible()).toBe(true);
    expect((await stored(id)).title).toBe('Dutch landscape');
  });

  it('deletes after a confirmation, and opens an empty page instead', async () => {
    const id = await startConversation('A castle on a hill', 'Ruined or grand?');
    let asked = '';
    page.once('dialog', (dialog) => {
      asked = dialog.message();
      void dialog.dismiss();
    });
    await page.getByRole('button', { name: 'Delete' }).click();
    await poll(() => asked).toContain('Delete “A castle on a hill”?');
    expect((await stage.easel.get(`/api/conversations/${id}`)).status).toBe(200);

    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Delete' }).click();
    await poll(() => new URL(page.url()).pathname).toBe('/');
    expect((await stage.easel.get(`/api/conversations/${id}`)).status).toBe(404);
    expect(await titles()).not.toContain('A castle on a hill');
    await page.locator('#status .state').first().waitFor();
  });

  it('Regenerate asks again: the old reply stays, marked replaced, and a reload shows the same', async () => {
    const id = await startConversation('A hot-air balloon', 'Over mountains?');
    stage.fake.enqueue(scriptReply('Over the sea, at sunrise?', meta('')));
    await page.getByRole('button', { name: 'Regenerate' }).click();
    await waitForReply();
    await poll(() => page.locator('#log .msg.assistant:not(.replaced) .text').allTextContents()).toEqual(['Over the sea, at sunrise?']);
    expect(await page.locator('#log .msg.assistant.replaced .text').allTextContents()).toEqual(['Over mountains?']);
    expect(await page.getByRole('button', { name: 'Regenerate' }).count()).toBe(1);
    expect((await stored(id)).turns.map((t) => t.status)).toEqual(['ok', 'replaced', 'ok']);
    // The message asked again offers Edit again, once, as a reload shows it; and it works.
    const editOnMessage = () => page.locator('#log .msg.user').last().getByRole('button', { name: 'Edit' });
    await poll(() => editOnMessage().count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Edit' }).count()).toBe(1);
    await editOnMessage().click();
    expect(await message().inputValue()).toBe('A hot-air balloon');
    await page.locator('#edit-cancel').click();
    // After a reload the message's bubble is the stored turn's: a Regenerate gives it Edit back the same way.
    await page.reload();
    expect(await editOnMessage().count()).toBe(1);
    stage.fake.enqueue(scriptReply('Over a desert, at dusk?', meta('')));
    await page.getByRole('button', { name: 'Regenerate' }).click();
    await waitForReply();
    await poll(() => editOnMessage().count()).toBe(1);
    await page.reload();
    expect(await page.locator('#log .msg.assistant.replaced .replaced-label').count()).toBe(2);
    expect(await page.locator('#log .msg.assistant:not(.replaced) .text').allTextContents()).toEqual(['Over a desert, at dusk?']);
    expect(await editOnMessage().count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Edit' }).count()).toBe(1);
  });

  it('Edit puts the last message back in the composer; sending replaces it and its reply', async () => {
    const id = await startConversation('A cat on a sofa', 'What colour?');
    await send('A grey one', 'A grey cat, noted.');
    await page.locator('#log .msg.user').last().getByRole('button', { name: 'Edit' }).click();
    expect(await message().inputValue()).toBe('A grey one');
    await message().fill('A ginger one');
    stage.fake.enqueue(scriptReply('A ginger cat, lovely.', meta('')));
    await message().press('Enter');
    await waitForReply();
    await poll(() => page.locator('#log .msg:not(.replaced) .text').allTextContents()).toEqual(['A cat on a sofa', 'What colour?', 'A ginger one', 'A ginger cat, lovely.']);
    expect(await page.locator('#log .msg.replaced .text').allTextContents()).toEqual(['A grey one', 'A grey cat, noted.']);
    expect((await stored(id)).turns.map((t) => t.status)).toEqual(['ok', 'ok', 'replaced', 'replaced', 'ok', 'ok']);
    const request = stage.fake.chatRequests().at(-1)?.messages?.map((m) => m.content.split('\n---\n')[0]) ?? [];
    expect(request.slice(1)).toEqual(['A cat on a sofa', 'What colour?', 'A ginger one']);
    // Only the last message offers Edit.
    expect(await page.getByRole('button', { name: 'Edit' }).count()).toBe(1);
  });

  it('copies a message, and shows its time', async () => {
    await open.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stage.easel.url });
    await startConversation('A lantern in the fog', 'Warm light?');
    const reply = page.locator('#log .msg.assistant').last();
    await reply.getByRole('button', { name: 'Copy this reply', exact: true }).click();
    await poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe('Warm light?');
    await poll(() => reply.getByRole('button', { name: 'Copied', exact: true }).count()).toBe(1);
    // Then the button is named for its message again.
    await poll(() => reply.getByRole('button', { name: 'Copy this reply', exact: true }).textContent()).toBe('Copy');
    await page.locator('#log .msg.user').last().getByRole('button', { name: 'Copy your message', exact: true }).click();
    await poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe('A lantern in the fog');
    const time = reply.locator('time');
    expect(await time.getAttribute('title')).toMatch(/\d/);
    expect(await time.textContent()).toMatch(/\d{1,2}:\d{2}/);
  });

  it('an interrupted reply shows with its words and Regenerate; the model then gets the message once', async () => {
    const id = await startConversation('A story about a dragon', 'Once upon a time');
    // What a crash leaves: the reply's row, its words saved, marked interrupted when Easel started again.
    const db = new Database(join(stage.easel.dataDir, 'easel.db'));
    db.prepare("UPDATE turns SET status = 'interrupted', metadata = NULL WHERE conversation_id = ? AND role = 'assistant'").run(id);
    db.prepare("DELETE FROM context_entries WHERE conversation_id = ? AND entry LIKE '%\"assistant\"%'").run(id);
    db.close();
    await page.reload();
    await poll(() => page.locator('#log .msg.assistant .notice').textContent()).toContain('Interrupted');
    expect(await page.locator('#log .msg.assistant .text').textContent()).toBe('Once upon a time');
    stage.fake.enqueue(scriptReply('Once upon a time, a dragon slept.', meta('')));
    await page.getByRole('button', { name: 'Regenerate' }).click();
    await waitForReply();
    const request = stage.fake.chatRequests().at(-1)?.messages ?? [];
    expect(request.slice(1).map((m) => m.content)).toEqual(['A story about a dragon']);
  });

  it('a message the store cannot save: the error in the bubble, the text back in the composer', async () => {
    const id = await startConversation('A bridge in the rain', 'Stone or steel?');
    const db = new Database(join(stage.easel.dataDir, 'easel.db'));
    db.exec(`CREATE TRIGGER no_running BEFORE INSERT ON turns WHEN NEW.status = 'running' BEGIN SELECT RAISE(ABORT, 'injected'); END`);
    try {
      await message().fill('Stone, with moss');
      await page.getByRole('button', { name: 'Send' }).click();
      await waitForReply();
      await poll(() => page.locator('#log .error-text').last().textContent()).toContain('could not save your message');
      await poll(() => message().inputValue()).toBe('Stone, with moss');
    } finally {
      db.exec('DROP TRIGGER no_running');
      db.close();
    }
    expect((await stored(id)).turns).toHaveLength(2);
  });

  it('on a narrow window the list is behind a button', async () => {
    await startConversation('A kite on a beach', 'What colours?');
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await library().isVisible()).toBe(false);
    await page.getByRole('button', { name: 'Conversations' }).click();
    await poll(() => library().isVisible()).toBe(true);
    await library().getByRole('link', { name: /A lighthouse in a storm/ }).click();
    await poll(() => page.locator('#conversation-title').textContent()).toBe('A lighthouse in a storm');
    await poll(() => library().isVisible()).toBe(false);
  });

  it('search, rename, Export, Import and Delete as a person does them: no inline style and no CSP violation on the way', async () => {
    // Counted inside the page from its first script on, across the navigations Import and Delete make.
    await page.addInitScript(() => {
      const seen: string[] = [];
      (window as unknown as { __styleProblems: string[] }).__styleProblems = seen;
      document.addEventListener('securitypolicyviolation', (event) => seen.push(`${event.violatedDirective}: ${event.sample}`), true);
      new MutationObserver((mutations) => {
        for (const mutation of mutations) {
          const nodes = mutation.type === 'attributes' ? [mutation.target] : [...mutation.addedNodes];
          for (const node of nodes) {
            if (!(node instanceof Element)) continue;
            for (const styled of [node, ...node.querySelectorAll('style, [style]')]) {
              if (styled.matches('style, [style]')) seen.push(styled.outerHTML.slice(0, 120));
            }
          }
        }
      }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['style'] });
    });
    const styleProblems = () => page.evaluate(() => (window as unknown as { __styleProblems?: string[] }).__styleProblems ?? ['the page has no watch']);
    const id = await startConversation('Origami cranes on a windowsill', 'Morning light?');
    await send('Yes, soft morning light', 'Morning it is.');

    const search = page.getByRole('searchbox', { name: 'Search conversations' });
    await search.fill('origami');
    await poll(titles).toEqual(['Origami cranes on a windowsill']);
    await search.fill('origami zebra');
    await poll(() => library().locator('.conversation-none').textContent()).toBe('No conversation holds these words.');
    await search.fill('');
    await poll(titles).toContain('Origami cranes on a windowsill');

    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('textbox', { name: 'New title' }).fill('Cranes');
    await page.getByRole('button', { name: 'Save' }).click();
    await poll(() => page.locator('#conversation-title').textContent()).toBe('Cranes');

    const download = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Export' }).click();
    const zip = await (await download).path();
    expect(await styleProblems()).toEqual([]);

    await page.locator('#import-file').setInputFiles(zip);
    await poll(() => conversationIdOf(page)).not.toBe(id);
    await poll(() => page.locator('#conversation-title').textContent()).toBe('Cranes (copy)');
    // A new page load: its buttons work once htmx has processed it (it then fetches the status line).
    await page.locator('#status .state').first().waitFor();
    expect(await styleProblems()).toEqual([]);

    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Delete' }).click();
    await poll(() => new URL(page.url()).pathname).toBe('/');
    await page.locator('#status .state').first().waitFor();
    expect(await styleProblems()).toEqual([]);
    expect(open.problems).toEqual([]);
  });

  it('imports an exported conversation as a new one and opens it', async () => {
    const id = await startConversation('A snowy cabin', 'Smoke from the chimney?');
    const zip = Buffer.from(await (await stage.easel.get(`/api/conversations/${id}/export`)).arrayBuffer());
    await page.locator('#import-file').setInputFiles({ name: 'cabin.zip', mimeType: 'application/zip', buffer: zip });
    await poll(() => conversationIdOf(page)).not.toBe(id);
    await poll(() => page.locator('#log .msg .text').allTextContents()).toEqual(['A snowy cabin', 'Smoke from the chimney?']);

    await page.locator('#import-file').setInputFiles({ name: 'notes.zip', mimeType: 'application/zip', buffer: Buffer.from('not a zip') });
    await poll(() => page.locator('#import-status').textContent()).toContain('not a zip archive');
    open.problems.splice(0, open.problems.length, ...open.problems.filter((p) => !/status of 400/.test(p)));
  });
});
