// The page's own routes (HTML, form posts) on a real port: one-shot send keys, a second tab, and
// what a reload renders from the store. The browser suite covers the page's behaviour; these pin
// the server's answers, and run without Chromium.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { useEasel } from '../helpers/easel.ts';
import { sendForm } from '../helpers/page-stage.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };

// The page's routes run against the fake Ollama and a fake AUTOMATIC1111 (5 ms a step).
const { fake, a1111, easel } = useEasel('each test', { a1111: { stepDelayMs: 5 } });

const newSendKey = () => randomUUID();

const postForm = (path: string, fields: Record<string, string>) => sendForm(easel, 'POST', path, fields);

async function stored(id: string) {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as {
    turns: Array<{ role: string; text: string; status: string }>;
    images: Array<{ id: string }>;
    busy: boolean;
  };
}

describe('sending from the page', () => {
  it('a second send from another tab while a reply streams is refused with 409 and says why', async () => {
    let release!: () => void;
    fake.enqueue({ ...scriptReply('Thinking about it.', ASKING), gate: new Promise<void>((resolve) => (release = resolve)) });
    const id = await easel.newConversation();
    const first = await postForm(`/c/${id}/messages`, { text: 'one', sendKey: newSendKey() });
    expect(first.status).toBe(200);
    await fake.waitForRequests(1, '/api/chat');

    const second = await postForm(`/c/${id}/messages`, { text: 'two', sendKey: newSendKey() });
    expect(second.status).toBe(409);
    expect(await second.text()).toContain('A reply is still being written in this conversation');

    release();
    await first.text();
    expect((await stored(id)).turns.map((t) => t.text)).toEqual(['one', 'Thinking about it.']);
    expect(fake.chatRequests()).toHaveLength(1);
  });

  it('the same send key twice runs the reply once', async () => {
    fake.enqueue(scriptReply('Once.', ASKING));
    const id = await easel.newConversation();
    const key = newSendKey();
    await (await postForm(`/c/${id}/messages`, { text: 'hello', sendKey: key })).text();
    const again = await postForm(`/c/${id}/messages`, { text: 'hello', sendKey: key });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain('already sent once');
    expect(fake.chatRequests()).toHaveLength(1);
  });
});

describe('Generate from the page', () => {
  it('the same send key twice makes one image', async () => {
    const id = await easel.newConversation();
    expect((await easel.put(`/api/conversations/${id}/settings`, { steps: 2 })).status).toBe(200);
    const key = newSendKey();
    const first = await postForm(`/c/${id}/generations`, { prompt: 'a red fox', sendKey: key });
    expect(first.status).toBe(200);
    expect(await first.text()).toContain('The image is ready.');

    const again = await postForm(`/c/${id}/generations`, { prompt: 'a red fox', sendKey: key });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain('it is not made twice');
    expect(a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img')).toHaveLength(1);
    expect((await stored(id)).images).toHaveLength(1);
  });
});

describe('a reload renders the stored transcript as text', () => {
  it('markup in a stored reply, a user message and an error message is escaped', async () => {
    const reply = 'Try <img src="/pwned-reply" onerror="alert(1)"> or <button hx-get="/pwned-htmx" hx-trigger="load">x</button>';
    const user = '<script>alert("user")</script> a cat';
    const failure = '<img src="/pwned-error">';
    fake.enqueue(scriptReply(reply, ASKING));
    fake.enqueue({ chunks: ['Partial <b>bold'], errorAfter: { chunks: 1, message: failure } });
    const id = await easel.newConversation();
    await (await postForm(`/c/${id}/messages`, { text: user, sendKey: newSendKey() })).text();
    await (await postForm(`/c/${id}/messages`, { text: 'again', sendKey: newSendKey() })).text();
    expect((await stored(id)).turns.map((t) => t.status)).toEqual(['ok', 'ok', 'ok', 'error']);

    const page = await (await easel.get(`/c/${id}`)).text();
    for (const raw of ['<img src="/pwned', '<button hx-get', '<script>alert', '<b>bold']) expect(page).not.toContain(raw);
    expect(page).toContain('Try &lt;img src=&quot;/pwned-reply&quot; onerror=&quot;alert(1)&quot;&gt; or &lt;button hx-get=&quot;/pwned-htmx&quot;');
    expect(page).toContain('&lt;script&gt;alert(&quot;user&quot;)&lt;/script&gt; a cat');
    expect(page).toContain('Partial &lt;b&gt;bold');
    expect(page).toContain('&lt;img src=&quot;/pwned-error&quot;&gt;');
  });
});

describe('the library on the page', () => {
  const draftId = (page: string) => /hx-post="\/c\/([0-9a-f-]{36})\/messages"/.exec(page)?.[1];
  const conversations = async () => ((await (await easel.get('/api/conversations')).json()) as { conversations: Array<{ id: string }> }).conversations;

  it('"/" is an empty page with a fresh id each time, and stores nothing', async () => {
    const first = await (await easel.get('/')).text();
    const second = await (await easel.get('/')).text();
    expect(draftId(first)).toBeDefined();
    expect(draftId(second)).not.toBe(draftId(first));
    expect(first).toContain('<input type="hidden" id="start-new" name="startNew" value="1">');
    expect(await conversations()).toEqual([]);
  });

  it('the first message creates the conversation under the page\'s id, with the prompt and settings on screen', async () => {
    const id = draftId(await (await easel.get('/')).text())!;
    // Without startNew an unknown conversation stays unknown.
    expect((await postForm(`/c/${id}/messages`, { text: 'hi', sendKey: newSendKey() })).status).toBe(404);
    expect((await postForm('/c/not-a-uuid/messages', { text: 'hi', sendKey: newSendKey(), startNew: '1' })).status).toBe(422);
    expect(await conversations()).toEqual([]);

    fake.enqueue(scriptReply('A fox, then.', ASKING));
    const response = await postForm(`/c/${id}/messages`, { text: 'a fox', sendKey: newSendKey(), startNew: '1', prompt: 'a red fox', steps: '33', cfg: '7', seed: '-1', width: '512', height: '512', negativePrompt: '', autoGenerate: 'on' });
    expect(response.status).toBe(200);
    const body = await response.text();
    // Once stored: the page's marker goes, its head appears, and the sidebar is told to refresh.
    expect(body).toContain('<hx-partial hx-target="#start-new" hx-swap="delete">');
    expect(body).toContain('<h2 id="conversation-title" class="conversation-heading">a fox</h2>');
    expect(body).toContain('event: easel:list');
    expect((await conversations()).map((c) => c.id)).toEqual([id]);
    const request = fake.chatRequests().at(-1)?.messages?.at(-1)?.content ?? '';
    expect(request).toContain('[The user edited the prompt to: "a red fox"]');
    expect(request).toContain('steps 33');
  });

  it('a first Generate creates the conversation with the prompt and settings on screen', async () => {
    const id = draftId(await (await easel.get('/')).text())!;
    const response = await postForm(`/c/${id}/generations`, { prompt: 'a lighthouse', sendKey: newSendKey(), startNew: '1', steps: '2', cfg: '7', seed: '5', width: '512', height: '512', negativePrompt: '' });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('The image is ready.');
    const conversation = (await stored(id)) as unknown as { images: unknown[]; turns: unknown[] };
    expect(conversation.images).toHaveLength(1);
    expect(((await (await easel.get(`/api/conversations/${id}`)).json()) as { prompt: string; title: string })).toMatchObject({ prompt: 'a lighthouse', title: 'a lighthouse' });
  });

  it('switching answers the conversation\'s part of the page, its title and the list; a page load gets the whole page', async () => {
    fake.enqueue(scriptReply('Which cat?', ASKING));
    const id = await easel.newConversation();
    await (await postForm(`/c/${id}/messages`, { text: 'a <cat>', sendKey: newSendKey() })).text();
    const part = await (await fetch(`${easel.url}/c/${id}?q=cat`, { headers: { 'hx-request': 'true' } })).text();
    expect(part.startsWith('<title>a &lt;cat&gt; · Easel</title><main id="conversation"')).toBe(true);
    expect(part).toContain(`<a href="/c/${id}" class="conversation-link" aria-current="page"`);
    expect(part).not.toContain('<!doctype html>');
    const full = await (await easel.get(`/c/${id}`)).text();
    expect(full.startsWith('<!doctype html>')).toBe(true);
    expect(full).toContain('<nav id="library"');
    const gone = await fetch(`${easel.url}/c/00000000-0000-4000-8000-000000000000`, { headers: { 'hx-request': 'true' } });
    expect(gone.status).toBe(404);
    expect(await gone.text()).toContain('does not exist any more');
  });

  it('a switch after the status is known shows Generate ready, not "Checking the image backend…"', async () => {
    fake.enqueue(scriptReply('Which cat?', ASKING));
    const id = await easel.newConversation();
    await (await postForm(`/c/${id}/messages`, { text: 'a cat', sendKey: newSendKey() })).text();
    const before = await (await fetch(`${easel.url}/c/${id}`, { headers: { 'hx-request': 'true' } })).text();
    expect(before).toContain('Checking the image backend…');

    expect(await (await easel.get('/status')).text()).toContain('AUTOMATIC1111 answers');
    const part = await (await fetch(`${easel.url}/c/${id}`, { headers: { 'hx-request': 'true' } })).text();

    expect(part).not.toContain('Checking the image backend…');
    expect(part).toContain('Generate makes an image from this prompt');
  });

  it('imports a zip sent as a form (multipart); a zip sent as the body belongs to the API', async () => {
    fake.enqueue(scriptReply('Which cat?', ASKING));
    const id = await easel.newConversation();
    await (await postForm(`/c/${id}/messages`, { text: 'a cat', sendKey: newSendKey() })).text();
    const zip = new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer());
    const form = new FormData();
    form.set('file', new Blob([zip], { type: 'application/zip' }), 'cat.zip');
    const imported = await fetch(`${easel.url}/c/import`, { method: 'POST', headers: { 'sec-fetch-site': 'same-origin' }, body: form });
    expect(imported.status).toBe(201);
    const location = imported.headers.get('hx-redirect');
    expect(location).toMatch(/^\/c\/[0-9a-f-]{36}$/);
    expect(location).not.toBe(`/c/${id}`);

    const raw = await fetch(`${easel.url}/c/import`, { method: 'POST', headers: { 'content-type': 'application/zip' }, body: zip });
    expect(raw.status).toBe(415);
    expect((await fetch(`${easel.url}/api/conversations/import`, { method: 'POST', headers: { 'content-type': 'application/zip' }, body: zip })).status).toBe(201);
  });
});
