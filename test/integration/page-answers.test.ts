// The page's routes answer by answer, on a real port with the real server and the fakes, without Chromium:
// each status, header and htmx partial a route sends, and what it stores. page-routes.test.ts pins the
// send keys, a second tab and a reload; the browser suite what a person sees. These pin the server's side.
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { closeAfterEachTest, startEaselStage, useEasel } from '../helpers/easel.ts';
import { find, partials, read, targets } from '../helpers/html.ts';
import { sendForm } from '../helpers/page-stage.ts';
import { readSse, readSseFrames } from '../helpers/sse.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const READY = { prompt: 'a red fox in snow', generate_image: false, steps: 24, cfg: 6, seed: 5 };

// The page's routes run against the fake Ollama and a fake AUTOMATIC1111 (5 ms a step).
const { fake, a1111, easel } = useEasel('each test', { a1111: { stepDelayMs: 5 } });

const newSendKey = () => randomUUID();

const send = (method: string, path: string, fields?: Record<string, string> | FormData, headers?: Record<string, string>) => sendForm(easel, method, path, fields, headers);

/** The service's words for an id it does not know. */
const missing = (id: string) => `There is no conversation "${id}". Start a new one.`;

const getPage = (path: string, headers: Record<string, string> = {}) => fetch(easel.url + path, { headers });

const partialText = (markup: string, target: string) => partials(markup).find((partial) => partial.target === target)?.text;

async function stored(id: string) {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as {
    title: string;
    prompt: string;
    turns: Array<{ role: string; text: string; status: string }>;
    images: Array<{ id: string; prompt: string; steps: number; seed: number; negativePrompt: string }>;
    pinned: string[];
    settingSuggestions: Record<string, unknown>;
    suggestion: { prompt: string } | null;
    settings: Record<string, unknown>;
  };
}

/** A conversation with one answered message (the model's prompt `READY.prompt`, not generated). */
async function conversationWithReply(): Promise<string> {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply('Here it is.', READY));
  await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'a fox', sendKey: newSendKey() }));
  return id;
}

describe('pages', () => {
  it('"/" is a whole page for a navigation and the conversation\'s part for an htmx switch, never cached', async () => {
    const full = await getPage('/?q=fox');
    expect(full.status).toBe(200);
    expect(full.headers.get('cache-control')).toBe('no-store');
    expect(full.headers.get('vary')).toBe('HX-Request');
    const page = await full.text();
    expect(page.startsWith('<!doctype html>')).toBe(true);
    // The search survives a reload of "/?q=…".
    expect(find(read(page), '#conversation-search').getAttribute('value')).toBe('fox');

    const part = await (await getPage('/', { 'hx-request': 'true' })).text();
    expect(part).not.toContain('<!doctype html>');
    expect(find(read(part), 'main#conversation').getAttribute('data-conversation-id')).toMatch(/^[0-9a-f-]{36}$/);
    // Nothing is stored yet: no id marked in the list, an empty prompt with nothing to undo, an empty search.
    const fresh = read(page);
    expect(find(fresh, '#current-conversation').getAttribute('value')).toBe('');
    const plain = read(await (await getPage('/')).text());
    expect(find(plain, '#conversation-search').getAttribute('value')).toBe('');
    expect(find(plain, '.conversation-none').text).toBe('Your conversations appear here.');
    expect(find(fresh, 'textarea#prompt').text).toBe('');
    expect(find(fresh, '#prompt-undo').hasAttribute('disabled')).toBe(true);
    expect(find(fresh, '#prompt-redo').hasAttribute('disabled')).toBe(true);
    // A history restore asks for the whole page (htmx 4 sends both headers).
    const restored = await (await getPage('/', { 'hx-request': 'true', 'hx-history-restore-request': 'true' })).text();
    expect(restored.startsWith('<!doctype html>')).toBe(true);
  });

  it('a conversation that does not exist is a 404 page, or its part when switched to', async () => {
    const full = await getPage('/c/nope');
    expect(full.status).toBe(404);
    expect(full.headers.get('cache-control')).toBe('no-store');
    expect(find(read(await full.text()), 'h1').text).toBe('This conversation does not exist');
    const part = await getPage('/c/nope', { 'hx-request': 'true' });
    expect(part.status).toBe(404);
    expect(find(read(await part.text()), 'main#conversation h2').text).toBe('This conversation does not exist any more');
  });

  it('a stored conversation\'s page shows its title, and its query in the search', async () => {
    const id = await conversationWithReply();
    await easel.post(`/api/conversations/${id}`, { title: 'Fox' }, { method: 'PATCH' });
    const response = await getPage(`/c/${id}?q=fo`);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const root = read(await response.text());
    expect(find(root, 'title').text).toBe('Fox · Easel');
    expect(find(root, '#conversation-search').getAttribute('value')).toBe('fo');
    expect(find(root, `#item-${id} a`).getAttribute('aria-current')).toBe('page');
    expect(find(root, '#current-conversation').getAttribute('value')).toBe(id);
    expect(root.querySelectorAll('.edit-message, .regenerate-button')).toHaveLength(2);
    // A read is never refused for its content type (only writes must be forms).
    expect((await fetch(`${easel.url}/c/${id}`, { headers: { 'content-type': 'application/json' } })).status).toBe(200);
    expect((await fetch(`${easel.url}/c/${id}`, { method: 'HEAD', headers: { 'content-type': 'application/json' } })).status).toBe(200);
    // Without a search, the box is empty and the list whole.
    const plain = read(await (await getPage(`/c/${id}`)).text());
    expect(find(plain, '#conversation-search').getAttribute('value')).toBe('');
    expect(plain.querySelectorAll('#conversation-list a.conversation-link')).toHaveLength(1);
    expect(read(await (await getPage('/conversations')).text()).querySelectorAll('a.conversation-link')).toHaveLength(1);
  });

  it('while a reply is written (in another tab) a reload offers no Edit or Regenerate, and goes on with it live', async () => {
    const id = await conversationWithReply();
    let release!: () => void;
    fake.enqueue({ ...scriptReply('Slow.', READY), gate: new Promise<void>((resolve) => (release = resolve)) });
    const reply = send('POST', `/c/${id}/messages`, { text: 'more', sendKey: newSendKey() });
    await fake.waitForRequests(2, '/api/chat');
    const root = read(await (await getPage(`/c/${id}`)).text());
    expect(root.querySelectorAll('.edit-message, .regenerate-button')).toHaveLength(0);
    expect(root.querySelectorAll('.notice').map((notice) => notice.text)).not.toContain('Still being written…');
    expect(root.querySelectorAll('article.msg.assistant[aria-busy="true"] .typing')).toHaveLength(1);
    // The page follows the conversation from the point it shows.
    expect(find(root, '#live').getAttribute('hx-sse:connect')).toMatch(new RegExp(`^/c/${id}/events\\?after=[a-z0-9]+\\.\\d+&view=[a-f0-9]{16}$`));
    release();
    await readSseFrames(await reply);
  });

  it('the list answers a search with the open conversation marked', async () => {
    const id = await conversationWithReply();
    const response = await getPage(`/conversations?q=fox&current=${id}`);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const root = read(await response.text());
    expect(find(root, `#item-${id} a`).getAttribute('aria-current')).toBe('page');
    expect(find(read(await (await getPage('/conversations?q=zebra')).text()), '.conversation-none').text).toBe('No conversation holds these words.');
    expect(read(await (await getPage(`/conversations?current=other`)).text()).querySelector(`#item-${id} a[aria-current]`)).toBeNull();
  });
});

describe('rename and delete', () => {
  it('a rename answers the new head (with its image count) and tells the list to refresh', async () => {
    const id = await conversationWithReply();
    const response = await send('PATCH', `/c/${id}`, { title: 'Snow fox' });
    expect(response.status).toBe(200);
    expect(JSON.parse(response.headers.get('hx-trigger')!)).toEqual({ 'easel:list': { target: 'body' } });
    const body = await response.text();
    expect(targets(body)).toEqual(['#chat-head outerHTML']);
    expect(find(read(body), '#conversation-title').text).toBe('Snow fox');
    expect(find(read(body), '#delete-button').getAttribute('hx-confirm')).toBe('Delete “Snow fox”? This cannot be undone; Export keeps a copy.');
    expect((await stored(id)).title).toBe('Snow fox');
  });

  it('a refused rename says why beside the field, with the service\'s status; an unknown conversation is 404', async () => {
    const id = await conversationWithReply();
    const blank = await send('PATCH', `/c/${id}`, { title: 'x'.repeat(121) });
    expect(blank.status).toBe(422);
    expect(blank.headers.get('hx-trigger')).toBeNull();
    const said = partials(await blank.text());
    expect(said.map((p) => `${p.target} ${p.swap}`)).toEqual(['#rename-error innerHTML']);
    expect(said[0]?.text).toMatch(/120/);
    const unknown = await send('PATCH', '/c/nope', { title: 'x' });
    expect(unknown.status).toBe(404);
    expect(partialText(await unknown.text(), '#rename-error')).toBe(missing('nope'));
  });

  it('a delete sends the page to "/"; an unknown conversation is said in the composer with 404', async () => {
    const id = await conversationWithReply();
    const response = await send('DELETE', `/c/${id}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('hx-redirect')).toBe('/');
    expect(await response.text()).toBe('');
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);
    const again = await send('DELETE', `/c/${id}`);
    expect(again.status).toBe(404);
    expect(partialText(await again.text(), '#composer-status')).toBe(missing(id));
  });
});

describe('import from the page', () => {
  it('no file, or an empty one, asks for a .zip made with Export', async () => {
    const none = await send('POST', '/c/import', new FormData());
    expect(none.status).toBe(422);
    const empty = new FormData();
    empty.set('file', new File([], 'a.zip', { type: 'application/zip' }));
    const zero = await send('POST', '/c/import', empty);
    expect(zero.status).toBe(422);
    for (const answer of [none, zero]) {
      const said = partials(await answer.text());
      expect(said.map((p) => `${p.target} ${p.swap}`)).toEqual(['#import-status innerHTML']);
      expect(said[0]?.text).toBe('Choose a .zip made with Export.');
    }
  });

  it('a file that is not an export is refused with the archive\'s words; an export opens as a new conversation', async () => {
    const bad = new FormData();
    bad.set('file', new File([new Uint8Array([1, 2, 3, 4])], 'a.zip', { type: 'application/zip' }));
    const refused = await send('POST', '/c/import', bad);
    expect(refused.status).toBe(400);
    expect(partialText(await refused.text(), '#import-status')).toMatch(/zip/i);

    const id = await conversationWithReply();
    const zip = new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer());
    const good = new FormData();
    good.set('file', new File([zip], 'fox.zip', { type: 'application/zip' }));
    const imported = await send('POST', '/c/import', good);
    expect(imported.status).toBe(201);
    const path = imported.headers.get('hx-redirect')!;
    expect(path).toMatch(/^\/c\/[0-9a-f-]{36}$/);
    expect(path).not.toBe(`/c/${id}`);
    expect((await stored(path.slice(3))).turns.map((t) => t.text)).toEqual(['a fox', 'Here it is.']);
  });
});

describe('sending', () => {
  it('a message without a valid send key is refused with 400 and its text kept', async () => {
    const id = await easel.newConversation();
    const response = await send('POST', `/c/${id}/messages`, { text: 'hello', sendKey: 'short' });
    expect(response.status).toBe(400);
    expect(partialText(await response.text(), '#composer-status')).toBe('This page is out of date: reload it, then send again. Your text is kept.');
    expect(fake.chatRequests()).toHaveLength(0);
  });

  it('to a conversation that is gone: 404, its text kept; an empty message: 422 with the field\'s words', async () => {
    const gone = await send('POST', '/c/nope/messages', { text: 'hello', sendKey: newSendKey() });
    expect(gone.status).toBe(404);
    expect(partialText(await gone.text(), '#composer-status')).toBe('This conversation no longer exists. Start a new one; your text is kept.');
    const id = await easel.newConversation();
    const empty = await send('POST', `/c/${id}/messages`, { text: '  ', sendKey: newSendKey() });
    expect(empty.status).toBe(422);
    expect(partialText(await empty.text(), '#composer-status')).toMatch(/message/i);
  });

  it('a prompt the pane cannot hold stops the message: said beside the prompt and in the composer', async () => {
    const id = await easel.newConversation();
    const response = await send('POST', `/c/${id}/messages`, { text: 'hello', prompt: 'x'.repeat(2001), sendKey: newSendKey() });
    expect(response.status).toBe(422);
    const said = partials(await response.text());
    expect(said.map((p) => p.target)).toEqual(['#prompt-error', '#prompt-saved', '#composer-status']);
    expect(said[0]?.text).toMatch(/2000/);
    expect(said[2]?.text).toBe('Not sent: fix the prompt first.');
    expect(fake.chatRequests()).toHaveLength(0);
  });

  it('the first message on the empty page creates the conversation with the form\'s settings and prompt', async () => {
    const id = randomUUID();
    fake.enqueue(scriptReply('Hi.', ASKING));
    const response = await send('POST', `/c/${id}/messages`, {
      text: ' a fox ',
      startNew: '1',
      prompt: 'my own prompt',
      steps: '33',
      cfg: '5',
      seed: '9',
      width: '512',
      height: '768',
      negativePrompt: 'blurry',
      sendKey: newSendKey(),
    });
    expect(response.status).toBe(200);
    const frames = await readSseFrames(response);
    // No status line was shown, so no frame removes one.
    expect(frames.filter((frame) => frame.data.includes('-status" hx-swap="delete"'))).toEqual([]);
    // The first frame: the user's bubble (its text trimmed) and the reply's, before any word.
    expect(find(read(frames[0]!.data), 'article.msg.user .text').text).toBe('a fox');
    // The turn is stored: the head appears, and the sidebar is told to refresh.
    const created = frames.findIndex((frame) => frame.data.includes('hx-target="#chat-head"'));
    expect(created).toBeGreaterThan(0);
    expect(find(read(frames[created]!.data), '#delete-button').getAttribute('hx-delete')).toBe(`/c/${id}`);
    expect(frames[created + 1]).toEqual({ event: 'easel:list', data: '' });
    const record = await stored(id);
    expect(record.settings).toMatchObject({ steps: 33, cfg: 5, seed: 9, width: 512, height: 768, negativePrompt: 'blurry' });
    expect(record.prompt).toBe('my own prompt');
    expect(fake.chatRequests()[0]?.messages?.at(-1)?.content).toContain('a fox');
  });

  it('a message that could not be stored: its text goes back into the composer, and no Retry is offered', async () => {
    const id = await conversationWithReply();
    const db = new Database(join(easel.dataDir, 'easel.db'));
    try {
      db.exec(`CREATE TRIGGER no_running BEFORE INSERT ON turns WHEN NEW.status = 'running' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`);
      const frames = await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'my <lost> words', sendKey: newSendKey() }));
      const markup = frames.map((frame) => frame.data).join('');
      expect(find(read(markup), '.restore-text').getAttribute('data-text')).toBe('my <lost> words');
      expect(markup).not.toContain('retry-button');
      expect(markup).not.toContain('regenerate-button');
    } finally {
      db.exec('DROP TRIGGER IF EXISTS no_running');
      db.close();
    }
  });

  it('Edit sends with replaceLast: the last message is replaced, not added', async () => {
    const id = await conversationWithReply();
    fake.enqueue(scriptReply('Changed.', READY));
    await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'a wolf', replaceLast: '1', sendKey: newSendKey() }));
    const turns = (await stored(id)).turns;
    expect(turns.filter((t) => t.status !== 'replaced').map((t) => t.text)).toEqual(['a wolf', 'Changed.']);
    expect(turns.filter((t) => t.status === 'replaced').map((t) => t.text)).toEqual(['a fox', 'Here it is.']);
  });

  it('Regenerate streams a new reply with no user bubble; an unknown conversation is said with 404', async () => {
    const id = await conversationWithReply();
    fake.enqueue(scriptReply('Again.', READY));
    const response = await send('POST', `/c/${id}/regenerate`);
    expect(response.status).toBe(200);
    const frames = await readSseFrames(response);
    const start = read(frames[0]!.data);
    expect(start.querySelector('article.msg.user')).toBeNull();
    expect(start.querySelector('article.msg.assistant[aria-busy="true"]')).not.toBeNull();
    // The start removes the last message's Edit with the old reply's controls; the end gives it back, to the
    // message asked again (drawn by a reload or live, so found as the last one not replaced), as a reload shows it.
    expect(targets(frames[0]!.data)).toContain('#log .last-only delete');
    const end = frames.find((frame) => frame.data.includes('regenerate-button'))!.data;
    expect(targets(end)).toContain('#log > .msg.user:not(.replaced):not(:has(~ .msg.user:not(.replaced))) .msg-actions beforeend');
    expect(find(read(end), 'button.edit-message').text).toBe('Edit');
    const reloaded = read(await (await getPage(`/c/${id}`)).text()).querySelectorAll('#log article.msg.user');
    expect(reloaded.map((bubble) => bubble.querySelector('.edit-message')?.text)).toEqual(['Edit']);
    // Regenerate asks the same message: no list refresh of a new conversation, but the stored turn's.
    expect(frames.filter((frame) => frame.event === 'easel:list')).toHaveLength(1);
    const unknown = await send('POST', '/c/nope/regenerate');
    expect(unknown.status).toBe(404);
    expect(partialText(await unknown.text(), '#composer-status')).toBe(missing('nope'));
  });

  it('Stop and Cancel answer 204 with no body', async () => {
    const id = await easel.newConversation();
    for (const path of ['/stop', '/images/cancel']) {
      const response = await send('POST', `/c/${id}${path}`);
      expect(response.status).toBe(204);
      expect(await response.text()).toBe('');
    }
  });
});

describe('Generate', () => {
  it('without a valid send key: "out of date", 409, and no image', async () => {
    const id = await conversationWithReply();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'x', sendKey: 'short' });
    expect(response.status).toBe(409);
    const said = partials(await response.text());
    expect(said).toEqual([{ target: '#image-error', swap: 'innerHTML', text: 'This page is out of date: reload it.' }]);
    expect(a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img')).toHaveLength(0);
  });

  it('saves the prompt on screen first, and makes the image from it and the settings on screen', async () => {
    const id = await conversationWithReply();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a blue fox', steps: '12', cfg: '4', seed: '77', width: '512', height: '512', negativePrompt: '', sendKey: newSendKey() });
    expect(response.status).toBe(200);
    const frames = await readSseFrames(response);
    expect(frames.some((frame) => frame.data.includes('hx-target="#image-frame"'))).toBe(true);
    // The thumbnail carries what only the stored record knows (the image event has no steps or CFG).
    const entry = find(read(frames.find((frame) => frame.data.includes('hx-target="#log"'))!.data), 'article.generated button.thumb');
    expect(entry.attributes).toMatchObject({ 'data-steps': '12', 'data-cfg': '4', 'data-seed': '77' });
    const record = await stored(id);
    expect(record.prompt).toBe('a blue fox');
    expect(record.images.map((image) => [image.prompt, image.steps, image.seed])).toEqual([['a blue fox', 12, 77]]);
    // Made with the screen's settings, not stored as the conversation's.
    expect(record.settings.steps).toBe(24);
  });

  it('without settings in the form, the stored ones are used', async () => {
    const id = await conversationWithReply();
    await readSseFrames(await send('POST', `/c/${id}/generations`, { prompt: 'a blue fox', sendKey: newSendKey() }));
    expect((await stored(id)).images.map((image) => [image.steps, image.seed, image.negativePrompt])).toEqual([[24, 5, '']]);
  });

  it('to a conversation that does not exist, without the new page\'s mark: 404, and nothing is created', async () => {
    const id = randomUUID();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a fox', sendKey: newSendKey() });
    expect(response.status).toBe(404);
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);
  });

  it('a first Generate on the empty page creates the conversation, and its head comes first', async () => {
    const id = randomUUID();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a blue fox', startNew: '1', steps: '8', sendKey: newSendKey() });
    const frames = await readSseFrames(response);
    // The head first, then the pane as stored (its revision, for the page's next change).
    expect(partials(frames[0]!.data).map((p) => p.target).slice(0, 3)).toEqual(['#start-new', '#chat-head', '#current-conversation']);
    expect(find(read(frames[0]!.data), '.pane-values').getAttribute('data-prompt')).toBe('a blue fox');
    expect(frames[1]).toEqual({ event: 'easel:list', data: '' });
    expect(find(read(frames[0]!.data), '#delete-button').getAttribute('hx-delete')).toBe(`/c/${id}`);
    // The form held steps and no negative prompt: its settings are used.
    expect((await stored(id)).images.map((image) => image.steps)).toEqual([8]);
  });

  it('a Generate from a page that still says "new" (its first send made the conversation) does not create it again', async () => {
    const id = await conversationWithReply();
    const frames = await readSseFrames(await send('POST', `/c/${id}/generations`, { prompt: 'again', startNew: '1', negativePrompt: 'blur', sendKey: newSendKey() }));
    expect(frames.some((frame) => frame.data.includes('hx-target="#chat-head"'))).toBe(false);
    expect(frames.some((frame) => frame.event === 'easel:list')).toBe(false);
    // Only a negative prompt on screen: the screen's settings are used, the rest as stored.
    expect((await stored(id)).images.map((image) => [image.steps, image.seed, image.negativePrompt])).toEqual([[24, 5, 'blur']]);
  });

  it('to a conversation that does not exist, without the new page\'s mark: 404, and nothing is created', async () => {
    const id = randomUUID();
    const response = await send('POST', `/c/${id}/generations`, { prompt: 'a fox', sendKey: newSendKey() });
    expect(response.status).toBe(404);
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);
  });

  it('a refused Generate is said in the image area with the service\'s status', async () => {
    const id = await easel.newConversation();
    const response = await send('POST', `/c/${id}/generations`, { prompt: '', sendKey: newSendKey() });
    expect(response.status).toBe(422);
    const said = partials(await response.text());
    expect(said.map((p) => `${p.target} ${p.swap}`)).toEqual(['#image-error innerHTML']);
    expect(said[0]?.text).toMatch(/prompt/i);
  });

  it('following an image that has ended removes its block at once', async () => {
    const id = await easel.newConversation();
    const response = await getPage(`/c/${id}/images/gone"1/events?bubble=turn-1`);
    expect(response.status).toBe(200);
    const frames = await readSseFrames(response);
    expect(frames.map((frame) => targets(frame.data))).toEqual([['#generation-gone1 delete']]);
  });
});

describe('an automatic image', () => {
  it('the reply\'s stream ends once the image has its block; the block\'s follower brings the image into the reply', async () => {
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/settings`, { autoGenerate: true });
    fake.enqueue(scriptReply('Making it.', { ...READY, generate_image: true, steps: 30 }));
    const frames = await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'a fox', sendKey: newSendKey() }));
    // No empty message is ever sent (events that change nothing on the page render nothing).
    expect(frames.filter((frame) => frame.event === 'message' && frame.data === '')).toEqual([]);
    const done = frames.findIndex((frame) => frame.data.includes('regenerate-button'));
    expect(done).toBeGreaterThan(0);
    // The message is stored: Edit joins it at the end.
    expect(frames[done]!.data).toContain('class="edit-message last-only"');
    const last = frames.at(-1)!.data;
    expect(last).toContain('hx-target="#image-status" hx-swap="beforeend"');
    expect(frames.some((frame) => frame.data.includes('hx-target="#image-frame"'))).toBe(false);
    const follower = find(read(last), '.image-follower').getAttribute('hx-get')!;
    const bubble = find(read(frames[0]!.data), 'article.msg.assistant').id;
    expect(follower).toMatch(new RegExp(`^/c/${id}/images/[A-Za-z0-9_-]+/events\\?bubble=${bubble}$`));

    const followed = await readSseFrames(await getPage(follower));
    const shown = followed.flatMap((frame) => targets(frame.data));
    // Its block is on the page already: no second one.
    expect(shown).not.toContain('#image-status beforeend');
    expect(shown).toContain(`#${bubble}-images beforeend`);
    expect(shown).toContain('#image-frame innerHTML');
    const image = (await stored(id)).images[0]!;
    expect(shown).toContain(`#generation-${image.id} delete`);
    // The thumbnail has the stored record's settings.
    const thumb = find(read(followed.find((frame) => frame.data.includes(`${bubble}-images`))!.data), `hx-partial[hx-target="#${bubble}-images"] button.thumb`);
    expect(thumb.getAttribute('data-steps')).toBe('30');
  });

  it('a Cancel while it is followed is said quietly in the image area, not as a failed reply', async () => {
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/settings`, { autoGenerate: true });
    fake.enqueue(scriptReply('Making it.', { ...READY, generate_image: true, steps: 150 }));
    const frames = await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'a fox', sendKey: newSendKey() }));
    const follower = find(read(frames.at(-1)!.data), '.image-follower').getAttribute('hx-get')!;
    const following = getPage(follower);
    await expect.poll(() => a1111.requests.some((request) => request.path === '/sdapi/v1/txt2img')).toBe(true);
    expect((await send('POST', `/c/${id}/images/cancel`)).status).toBe(204);
    const shown = (await readSseFrames(await following)).map((frame) => frame.data).join('');
    const said = partials(shown).find((p) => p.target === '#image-error');
    expect(said).toMatchObject({ swap: 'innerHTML' });
    expect(find(read(shown), 'hx-partial[hx-target="#image-error"] p.image-note').getAttribute('role')).toBe('status');
    expect(shown).not.toContain('-notes');
  });

  it('a follower without a bubble of the page\'s making puts the image nowhere but the image area', async () => {
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/settings`, { autoGenerate: true });
    fake.enqueue(scriptReply('Making it.', { ...READY, generate_image: true }));
    const frames = await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'a fox', sendKey: newSendKey() }));
    const follower = find(read(frames.at(-1)!.data), '.image-follower').getAttribute('hx-get')!;
    const followed = await readSseFrames(await getPage(follower.replace(/bubble=.*$/, 'bubble=%23log')));
    const shown = followed.flatMap((frame) => partials(frame.data).map((p) => p.target));
    expect(shown).toContain('#image-frame');
    expect(shown.filter((target) => target!.endsWith('-images'))).toEqual([]);
  });
});

describe('the prompt pane', () => {
  it('a prompt save answers "Saved." and the pane, without replacing typing; a gone conversation is 404', async () => {
    const id = await conversationWithReply();
    const response = await send('PUT', `/c/${id}/prompt`, { prompt: 'a grey fox' });
    expect(response.status).toBe(200);
    const body = await response.text();
    expect(partialText(body, '#prompt-saved')).toBe('Saved.');
    expect(partialText(body, '#prompt-error')).toBe('');
    const values = find(read(body), '.pane-values');
    expect(values.getAttribute('data-prompt')).toBe('a grey fox');
    expect(values.hasAttribute('data-force')).toBe(false);
    expect((await stored(id)).prompt).toBe('a grey fox');

    const gone = await send('PUT', '/c/nope/prompt', { prompt: 'x' });
    expect(gone.status).toBe(404);
    expect(partialText(await gone.text(), '#prompt-error')).toBe('This conversation no longer exists. Start a new one.');
    const tooLong = await send('PUT', `/c/${id}/prompt`, { prompt: 'x'.repeat(2001) });
    expect(tooLong.status).toBe(422);
    // Beside the prompt in the field's own words: no `prompt:` (the API's message names the field).
    expect(partialText(await tooLong.text(), '#prompt-error')).toBe('A prompt can hold at most 2000 characters.');
    const generate = await send('POST', `/c/${id}/generations`, { prompt: 'x'.repeat(2001), sendKey: newSendKey() });
    expect(generate.status).toBe(422);
    expect(partialText(await generate.text(), '#image-error')).toBe('A prompt can hold at most 2000 characters.');
  });

  it('Undo saves the typing on screen first, then goes back, replacing the fields (forced)', async () => {
    const id = await conversationWithReply();
    const undo = await send('POST', `/c/${id}/prompt/undo`, { prompt: 'typed, not saved' });
    expect(undo.status).toBe(200);
    const values = find(read(await undo.text()), '.pane-values');
    expect(values.getAttribute('data-prompt')).toBe(READY.prompt);
    expect(values.getAttribute('data-force')).toBe('yes');
    const redo = await send('POST', `/c/${id}/prompt/redo`);
    expect(find(read(await redo.text()), '.pane-values').getAttribute('data-prompt')).toBe('typed, not saved');
    const nothing = await send('POST', `/c/${id}/prompt/redo`);
    expect(nothing.status).toBe(409);
    const refused = partials(await nothing.text());
    expect(refused.map((p) => `${p.target} ${p.swap}`)).toEqual(['#prompt-saved innerHTML']);
    expect(refused[0]?.text).toMatch(/redo/i);
  });

  it('"Use suggestion" saves the typing as a version and takes the model\'s prompt; "Keep mine" lets it go', async () => {
    const id = await conversationWithReply();
    for (const accept of ['1', '0']) {
      let release!: () => void;
      fake.enqueue({ ...scriptReply('New idea.', { ...READY, prompt: `the model's ${accept}` }), gate: new Promise<void>((resolve) => (release = resolve)) });
      const reply = send('POST', `/c/${id}/messages`, { text: 'more', sendKey: newSendKey() });
      await fake.waitForRequests(accept === '1' ? 2 : 3, '/api/chat');
      await send('PUT', `/c/${id}/prompt`, { prompt: `mine ${accept}` });
      release();
      await readSseFrames(await reply);
      expect((await stored(id)).suggestion?.prompt).toBe(`the model's ${accept}`);
      const answer = await send('POST', `/c/${id}/suggestion`, { accept, prompt: `typed ${accept}` });
      expect(answer.status).toBe(200);
      const record = await stored(id);
      expect(record.suggestion).toBeNull();
      // Taken: the model's prompt; kept: the user's saved one (the typing is not saved by "Keep mine").
      expect(record.prompt).toBe(accept === '1' ? "the model's 1" : 'mine 0');
      // Taking it kept the typing on screen as the version before it: Undo goes back to it.
      if (accept === '1') expect(find(read(await (await send('POST', `/c/${id}/prompt/undo`)).text()), '.pane-values').getAttribute('data-prompt')).toBe('typed 1');
    }
  });
});

describe('a page whose pane is older than the stored one', () => {
  it('a prompt, settings, undo, Generate or message sent from it is refused (409): the newer pane is shown, not forced, and nothing changes', async () => {
    const id = await conversationWithReply();
    const current = (await (await easel.get(`/api/conversations/${id}`)).json()) as { paneRevision: number };
    const old = String(current.paneRevision - 1);
    const writes: Array<[string, Response]> = [
      ['prompt', await send('PUT', `/c/${id}/prompt`, { prompt: 'an old prompt', baseRevision: old })],
      ['settings', await send('PUT', `/c/${id}/settings`, { steps: '40', cfg: '7', seed: '-1', width: '512', height: '512', negativePrompt: '', changed: 'steps', baseRevision: old })],
      ['undo', await send('POST', `/c/${id}/prompt/undo`, { prompt: 'typed', baseRevision: old })],
      ['generate', await send('POST', `/c/${id}/generations`, { prompt: 'an old prompt', sendKey: newSendKey(), baseRevision: old })],
      ['message', await send('POST', `/c/${id}/messages`, { text: 'more', sendKey: newSendKey(), baseRevision: old })],
    ];
    for (const [name, response] of writes) {
      expect(response.status, name).toBe(409);
      const body = await response.text();
      const values = find(read(body), '.pane-values');
      expect(values.getAttribute('data-prompt'), name).toBe(READY.prompt);
      expect(values.getAttribute('data-revision'), name).toBe(String(current.paneRevision));
      expect(values.hasAttribute('data-force'), name).toBe(false);
      expect(read(body).text, name).toMatch(/changed elsewhere/);
    }
    const after = await stored(id);
    expect(after.prompt).toBe(READY.prompt);
    expect(after.settings.steps).toBe(24);
    expect(after.turns).toHaveLength(2);
    expect(a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img')).toHaveLength(0);
  });
});

describe('the live view of a page', () => {
  it('draws another client\'s reply, pane and title as partials, each with its id; the page\'s own turn is not drawn twice', async () => {
    const id = await conversationWithReply();
    const root = read(await (await getPage(`/c/${id}`)).text());
    const url = find(root, '#live').getAttribute('hx-sse:connect') ?? '';
    const viewId = find(root, '#live').getAttribute('data-view') ?? '';
    const live = await getPage(url);
    expect(live.headers.get('content-type')).toContain('text/event-stream');
    const reader = live.body!.getReader();
    const decoder = new TextDecoder();
    let seen = '';
    const readUntil = async (needle: string) => {
      while (!seen.includes(needle)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the live stream ended before ${needle}`);
        seen += decoder.decode(value, { stream: true });
      }
    };
    // From this page: its own turn comes on its own request, not on the live stream.
    fake.enqueue(scriptReply('Mine.', READY));
    await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'from this page', sendKey: newSendKey(), viewId }));
    // From another client: drawn here.
    fake.enqueue(scriptReply('From elsewhere.', READY));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'from the API' }));
    await readUntil('From elsewhere.');
    expect(seen).toContain('from the API');
    expect(seen).not.toContain('from this page');
    expect(seen).not.toContain('Mine.');
    expect(seen).toMatch(/^id: [a-z0-9]+\.\d+$/m);
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a wolf' });
    await readUntil('data-prompt="a wolf"');
    await fetch(`${easel.url}/api/conversations/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title: 'Wolves' }) });
    await readUntil('Wolves');
    await reader.cancel();
  });
});

describe('settings', () => {
  it('a save sets (and pins) only the fields named as changed, and answers "Saved." with the pane', async () => {
    const id = await conversationWithReply();
    const response = await send('PUT', `/c/${id}/settings`, { steps: '31', cfg: '9', seed: '5', changed: 'steps,bogus' });
    expect(response.status).toBe(200);
    const body = await response.text();
    expect(partialText(body, '#settings-status')).toBe('Saved.');
    expect(partialText(body, '#error-steps')).toBe('');
    expect(find(read(body), '#meta-steps .pin')).toBeTruthy();
    expect(read(body).querySelector('#meta-cfg .pin')).toBeNull();
    const record = await stored(id);
    expect(record.settings).toMatchObject({ steps: 31, cfg: 6 });
    expect(record.pinned).toEqual(['steps']);
  });

  it('without `changed`, every field of the form is saved', async () => {
    const id = await conversationWithReply();
    await send('PUT', `/c/${id}/settings`, { steps: '31', cfg: '9' });
    expect((await stored(id)).settings).toMatchObject({ steps: 31, cfg: 9 });
  });

  it('a refused value is marked at its field with a summary, and every other field\'s old message cleared', async () => {
    const id = await conversationWithReply();
    const response = await send('PUT', `/c/${id}/settings`, { steps: '0', changed: 'steps' });
    expect(response.status).toBe(422);
    const said = partials(await response.text());
    expect(said.map((p) => p.target)).toEqual([
      '#error-chatModel',
      '#error-checkpoint',
      '#error-sampler',
      '#error-scheduler',
      '#error-family',
      '#error-visionModel',
      '#error-steps',
      '#error-cfg',
      '#error-seed',
      '#error-width',
      '#error-height',
      '#error-negativePrompt',
      '#error-autoGenerate',
      '#error-autoCheck',
      '#error-autoRefine',
      '#settings-status',
    ]);
    expect(said.find((p) => p.target === '#error-steps')?.text).toBe('Steps must be at least 1.');
    expect(said.filter((p) => p.target !== '#error-steps').slice(0, -1).every((p) => p.text === '')).toBe(true);
    expect(said.at(-1)?.text).toBe('Not saved: fix the marked field.');
    const gone = await send('PUT', '/c/nope/settings', { steps: '3' });
    expect(gone.status).toBe(404);
    expect(partialText(await gone.text(), '#settings-status')).toBe(missing('nope'));
  });

  it('a pinned field keeps the user\'s value; the model\'s is offered, can be taken, and the pin removed', async () => {
    const id = await conversationWithReply();
    await send('PUT', `/c/${id}/settings`, { steps: '31', changed: 'steps' });
    fake.enqueue(scriptReply('More steps.', { ...READY, steps: 40 }));
    await readSseFrames(await send('POST', `/c/${id}/messages`, { text: 'more', sendKey: newSendKey() }));
    expect((await stored(id)).settingSuggestions).toEqual({ steps: 40 });

    const take = await send('POST', `/c/${id}/settings/suggestion`, { field: 'steps' });
    expect(take.status).toBe(200);
    expect(find(read(await take.text()), '.pane-values').attributes).toMatchObject({ 'data-steps': '40', 'data-force': 'yes' });
    expect((await stored(id)).settingSuggestions).toEqual({});

    const unpin = await send('POST', `/c/${id}/settings/unpin`, { field: 'steps' });
    expect(unpin.status).toBe(200);
    const body = await unpin.text();
    expect(read(body).querySelector('#meta-steps .pin')).toBeNull();
    expect(find(read(body), '.pane-values').getAttribute('data-force')).toBe('yes');
    expect((await stored(id)).pinned).toEqual([]);
  });

  it('unpin and take are refused with the service\'s words for an unknown field or conversation', async () => {
    const id = await conversationWithReply();
    const badField = await send('POST', `/c/${id}/settings/unpin`, { field: 'width' });
    expect(badField.status).toBe(422);
    expect(partialText(await badField.text(), '#prompt-saved')).not.toBe('');
    const gone = await send('POST', '/c/nope/settings/unpin', { field: 'steps' });
    expect(gone.status).toBe(404);
    expect(partialText(await gone.text(), '#prompt-saved')).toBe(missing('nope'));
    const none = await send('POST', `/c/${id}/settings/suggestion`, { field: 'steps' });
    expect(none.status).toBe(409);
    expect(partialText(await none.text(), '#prompt-saved')).not.toBe('');
  });
});

describe('status and assets', () => {
  const started = closeAfterEachTest();
  it('the status line and Generate follow the backend, and a page opened after shows Generate ready', async () => {
    const body = await (await getPage('/status')).text();
    expect(targets(body)).toEqual(['#generate outerMorph', '#vary-help outerMorph', '#generate-help innerHTML']);
    expect(find(read(body), '#generate').getAttribute('data-backend-ready')).toBe('yes');
    // A1111 can vary: the Vary buttons follow the same answer (web/js/vary.js).
    expect(find(read(body), '#generate').getAttribute('data-vary')).toBe('yes');
    // Enabled: web/easel.js disables it again while the prompt is empty.
    expect(find(read(body), '#generate').hasAttribute('disabled')).toBe(false);
    expect(partialText(body, '#generate-help')).toBe('Generate makes an image from this prompt and the settings below.');
    expect(find(read(await (await getPage('/')).text()), '#generate').getAttribute('data-backend-ready')).toBe('yes');
  });

  it('a backend too busy making our image to answer the health check in time is said to be busy, not down', { timeout: 20_000 }, async () => {
    const { easel: own, a1111: busy } = await started.track(startEaselStage({ a1111: { stepDelayMs: 50, busyWhileMaking: true } }));
    const states = async () => read(await (await fetch(`${own.url}/status`)).text()).querySelectorAll('span.state').map((state) => `${state.classNames}: ${state.text}`);
    expect((await states())[1]).toMatch(new RegExp(`^state ok: AUTOMATIC1111 answers at ${busy!.url} with model v1-5-pruned-emaonly`));
    const id = await own.newConversation();
    await own.put(`/api/conversations/${id}/settings`, { steps: 150 });
    // 150 steps of 50 ms: the image is still being made when the check (3 s at most) gives up.
    const image = await sendForm(own, 'POST', `/c/${id}/generations`, { prompt: 'a fox', sendKey: newSendKey() });
    while (!busy!.requests.some((request) => request.path === '/sdapi/v1/progress')) await new Promise((resolve) => setTimeout(resolve, 20));
    const during = await fetch(`${own.url}/status`);
    const body = await during.text();
    expect(read(body).querySelectorAll('span.state').map((state) => `${state.classNames}: ${state.text}`)[1]).toBe(`state ok: AUTOMATIC1111 at ${busy!.url} is busy making an image.`);
    // Generate stays usable: the next image waits its turn.
    expect(find(read(body), '#generate').getAttribute('data-backend-ready')).toBe('yes');
    await sendForm(own, 'POST', `/c/${id}/images/cancel`);
    await readSseFrames(image);
    // Once it is done the check is answered again, and says so.
    expect((await states())[1]).toMatch(/^state ok: AUTOMATIC1111 answers at /);
  });

  it('an asset has its type and ETag, answers 304 to its ETag, and an unknown one is 404', async () => {
    const response = await getPage('/assets/easel.css');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(response.headers.get('cache-control')).toBe('no-cache');
    const etag = response.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    expect((await response.text()).length).toBeGreaterThan(100);
    const again = await getPage('/assets/easel.css', { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.headers.get('etag')).toBe(etag);
    expect((await getPage('/assets/easel.css', { 'if-none-match': '"other"' })).status).toBe(200);
    const unknown = await getPage('/assets/nope.js');
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toBe('Not found');
  });

  it('a write under /c that is not a form is refused with 415; reads pass', async () => {
    const id = await easel.newConversation();
    const json = await fetch(`${easel.url}/c/${id}/stop`, { method: 'POST', headers: { 'sec-fetch-site': 'same-origin', 'content-type': 'application/json' }, body: '{}' });
    expect(json.status).toBe(415);
    expect(await json.text()).toContain('application/x-www-form-urlencoded or multipart/form-data');
    expect((await getPage(`/c/${id}`)).status).toBe(200);
  });
});
