// The conversation library through the HTTP API: list and search, rename, delete (with the image files),
// export and import, Regenerate and Edit, and everything found back after a restart.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { strToU8, unzipSync, zipSync } from 'fflate';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFakeA1111, type FakeA1111 } from '../fakes/fake-a1111.ts';
import { createFakeOllama, scriptReply, type FakeOllama } from '../fakes/fake-ollama.ts';
import { BROKEN_PNGS } from '../fakes/png-bytes.ts';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { readSse, shownText, type SseEvent } from '../helpers/sse.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const READY = (prompt: string) => ({ prompt, generate_image: false, steps: 20, cfg: 7, seed: -1 });

let fake: FakeOllama;
let a1111: FakeA1111;
let easel: TestEasel;
const dirs: string[] = [];

beforeEach(async () => {
  fake = await createFakeOllama();
  a1111 = await createFakeA1111({ stepDelayMs: 1 });
  easel = await start();
});

afterEach(async () => {
  await easel.close();
  await a1111.close();
  await fake.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function start(dataDir?: string): Promise<TestEasel> {
  return startTestEasel({
    ollamaUrl: fake.url,
    flags: ['--image-backend', 'a1111', '--image-url', a1111.url],
    ...(dataDir ? { dataDir } : {}),
  });
}

async function send(id: string, text: string, extra: Record<string, unknown> = {}): Promise<SseEvent[]> {
  const response = await easel.post(`/api/conversations/${id}/messages`, { text, ...extra });
  expect(response.status).toBe(200);
  return readSse(response);
}

async function chat(text: string, reply: string, prompt = ''): Promise<string> {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply(reply, prompt ? READY(prompt) : ASKING));
  await send(id, text);
  return id;
}

interface Conversation {
  id: string;
  title: string;
  createdAt: string;
  updatedAt: string;
  prompt: string;
  settings: Record<string, unknown>;
  turns: Array<{ id: number; role: string; text: string; status: string; images?: Array<{ url: string }> }>;
  images: Array<{ id: string; url: string; seed: number | null; steps: number | null; cfg: number | null; sampler?: string | null; prompt: string; promptVersion: number | null; createdAt: string }>;
  promptVersion: number | null;
  canUndo: boolean;
  canRedo: boolean;
  suggestion: { prompt: string; turnId: number } | null;
  pinned: string[];
  settingSuggestions: Record<string, unknown>;
  promptVersions: Array<{ id: number; parentId: number | null; prompt: string; source: string; turnId: number | null; createdAt: string }>;
}

async function conversation(id: string): Promise<Conversation> {
  const response = await easel.get(`/api/conversations/${id}`);
  expect(response.status).toBe(200);
  return (await response.json()) as Conversation;
}

async function list(query?: string): Promise<Array<{ id: string; title: string; preview: string; updatedAt: string }>> {
  const response = await easel.get(`/api/conversations${query === undefined ? '' : `?q=${encodeURIComponent(query)}`}`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { conversations: Array<{ id: string; title: string; preview: string; updatedAt: string }> }).conversations;
}

function lastRequest(): Array<{ role: string; content: string }> {
  return (fake.chatRequests().at(-1)?.messages ?? []).map(({ role, content }) => ({ role, content }));
}

function patch(id: string, body: unknown): Promise<Response> {
  return fetch(`${easel.url}/api/conversations/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

function importZip(bytes: Uint8Array, type = 'application/zip'): Promise<Response> {
  return fetch(`${easel.url}/api/conversations/import`, { method: 'POST', headers: { 'content-type': type }, body: bytes as Uint8Array<ArrayBuffer> });
}

async function generate(id: string, prompt: string): Promise<void> {
  const response = await easel.post(`/api/conversations/${id}/generations`, { prompt, settings: { steps: 2, seed: 7 } });
  expect(response.status).toBe(200);
  const events = await readSse(response);
  expect(events.map((e) => e.type)).toContain('image');
}

describe('the list', () => {
  it('lists conversations newest activity first, titled from the first message, with a preview', async () => {
    const fox = await chat('A red fox in the snow\nwith a long second line', 'What light do you want?');
    const cat = await chat('a tabby cat', 'Indoors or out?');
    const conversations = await list();
    expect(conversations.map((c) => c.id)).toEqual([cat, fox]);
    expect(conversations[1]).toMatchObject({ title: 'A red fox in the snow', preview: 'What light do you want?' });
    // New activity moves a conversation to the top.
    fake.enqueue(scriptReply('At dusk, then.', ASKING));
    await send(fox, 'dusk');
    expect((await list()).map((c) => c.id)).toEqual([fox, cat]);
  });

  it('searches every word in messages, replies, titles and prompts', async () => {
    const fox = await chat('a red fox', 'Snowy meadow or forest?');
    const cat = await chat('a tabby cat', 'Indoors?', 'a tabby cat on a windowsill');
    expect((await list('meadow')).map((c) => c.id)).toEqual([fox]);
    expect((await list('windowsill')).map((c) => c.id)).toEqual([cat]);
    expect((await list('fox meadow')).map((c) => c.id)).toEqual([fox]);
    expect((await list('fox tabby')).map((c) => c.id)).toEqual([]);
    expect((await list('"unbalanced')).map((c) => c.id)).toEqual([]);
    expect((await list('')).length).toBe(2);
  });

  it('no conversation is created by reading pages or the list', async () => {
    for (const path of ['/', '/api/conversations', '/c/00000000-0000-4000-8000-000000000000']) await (await easel.get(path)).text();
    expect(await list()).toEqual([]);
  });
});

describe('rename', () => {
  it('renames, refuses a bad title, and "" gives back the title from the first message', async () => {
    const id = await chat('a lighthouse at night', 'Stormy?');
    const renamed = await patch(id, { title: '  Lighthouse ideas  ' });
    expect(renamed.status).toBe(200);
    expect(await renamed.json()).toMatchObject({ id, title: 'Lighthouse ideas' });
    expect((await conversation(id)).title).toBe('Lighthouse ideas');
    expect((await list('ideas')).map((c) => c.id)).toEqual([id]);

    const tooLong = await patch(id, { title: 'x'.repeat(121) });
    expect(tooLong.status).toBe(422);
    expect(((await tooLong.json()) as { error: string }).error).toContain('at most 120 characters');
    expect((await patch(id, { title: 7 })).status).toBe(422);
    expect((await patch(id, {})).status).toBe(422);
    expect((await patch('nope', { title: 'x' })).status).toBe(404);

    expect(await (await patch(id, { title: '' })).json()).toMatchObject({ title: 'a lighthouse at night' });
  });
});

describe('delete', () => {
  it('removes the conversation, every record of it and its image files; others are untouched', async () => {
    const id = await chat('a red fox', 'Here it is.', 'a red fox');
    await generate(id, 'a red fox');
    await generate(id, 'a red fox at dusk');
    const other = await chat('a cat', 'Here.', 'a cat');
    await generate(other, 'a cat');
    const files = (await conversation(id)).images.map((image) => join(easel.dataDir, 'images', image.url.slice('/images/'.length)));
    const otherFiles = (await conversation(other)).images.map((image) => join(easel.dataDir, 'images', image.url.slice('/images/'.length)));
    expect(files.every((file) => existsSync(file))).toBe(true);

    const deleted = await fetch(`${easel.url}/api/conversations/${id}`, { method: 'DELETE' });
    expect(deleted.status).toBe(204);
    expect(files.some((file) => existsSync(file))).toBe(false);
    expect(otherFiles.every((file) => existsSync(file))).toBe(true);
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);
    expect((await list()).map((c) => c.id)).toEqual([other]);
    expect((await list('fox')).map((c) => c.id)).toEqual([]);
    expect((await fetch(`${easel.url}/api/conversations/${id}`, { method: 'DELETE' })).status).toBe(404);

    const db = new Database(join(easel.dataDir, 'easel.db'), { readonly: true });
    for (const table of ['turns', 'images', 'context_entries']) {
      expect(db.prepare(`SELECT count(*) AS n FROM ${table} WHERE conversation_id = ?`).get(id), table).toEqual({ n: 0 });
    }
    db.close();
  });

  it('stops a reply being written before deleting', async () => {
    const id = await easel.newConversation();
    fake.enqueue({ chunks: ['Half ', 'a ', 'thought'], gate: new Promise<void>(() => {}) });
    const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'a long story' });
    await fake.waitForRequests(1, '/api/chat');
    expect((await fetch(`${easel.url}/api/conversations/${id}`, { method: 'DELETE' })).status).toBe(204);
    const events = await readSse(response);
    expect(events.at(-1)).toMatchObject({ type: 'done', data: { level: 'stopped' } });
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);
  });
});

describe('export and import', () => {
  it('an exported conversation imports back as a new one, equal in every record and image', async () => {
    const id = await chat('a red fox in the snow', 'Which light?');
    fake.enqueue(scriptReply('Golden hour it is.', READY('a red fox in the snow at golden hour')));
    await send(id, 'golden hour');
    await generate(id, 'a red fox in the snow at golden hour');
    await patch(id, { title: 'Fox études' });
    // The pane's history and pins come along: a hand-set value the model disagrees with, an edit undone.
    expect((await easel.put(`/api/conversations/${id}/settings`, { steps: 40 })).status).toBe(200);
    fake.enqueue(scriptReply('Woodblock, then.', { ...READY('a red fox in the snow at golden hour, woodblock print'), steps: 25 }));
    await send(id, 'as a woodblock print');
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a red fox, ink wash' })).status).toBe(200);
    expect((await easel.post(`/api/conversations/${id}/prompt/undo`)).status).toBe(200);

    const exported = await easel.get(`/api/conversations/${id}/export`);
    expect(exported.status).toBe(200);
    expect(exported.headers.get('content-type')).toBe('application/zip');
    expect(exported.headers.get('content-disposition')).toMatch(/^attachment; filename="easel-fox-etudes-\d{4}-\d{2}-\d{2}\.zip"$/);
    const zip = new Uint8Array(await exported.arrayBuffer());
    const files = unzipSync(zip);
    expect(Object.keys(files)).toEqual(['conversation.json', 'images/01-a-red-fox-in-the-snow-at-golden-hour-seed-7.png']);
    const manifest = JSON.parse(new TextDecoder().decode(files['conversation.json'])) as Record<string, unknown>;
    expect(manifest).toMatchObject({
      format: 'easel-conversation',
      version: 2,
      title: 'Fox études',
      prompt: 'a red fox in the snow at golden hour, woodblock print',
      pinned: ['steps'],
      settingSuggestions: { steps: 25 },
      suggestion: null,
    });
    expect((manifest.context as unknown[]).length).toBe(6);

    const imported = await importZip(zip);
    expect(imported.status).toBe(201);
    const { id: copy } = (await imported.json()) as { id: string };
    expect(copy).not.toBe(id);

    const [before, after] = [await conversation(id), await conversation(copy)];
    // Ids are renumbered by an import: versions and turns are compared by their position.
    const comparable = (c: Conversation) => {
      const versionAt = (versionId: number | null) => (versionId === null ? null : c.promptVersions.findIndex((v) => v.id === versionId));
      const turnAt = (turnId: number | null) => (turnId === null ? null : c.turns.findIndex((t) => t.id === turnId));
      return {
        createdAt: c.createdAt,
        prompt: c.prompt,
        settings: c.settings,
        pane: { promptVersion: versionAt(c.promptVersion), canUndo: c.canUndo, canRedo: c.canRedo, pinned: c.pinned, settingSuggestions: c.settingSuggestions },
        promptVersions: c.promptVersions.map(({ id: _id, parentId, turnId, ...version }) => ({ ...version, parent: versionAt(parentId), turn: turnAt(turnId) })),
        turns: c.turns.map(({ id: _id, images, ...turn }) => ({ ...turn, images: images?.length ?? 0 })),
        images: c.images.map(({ id: _id, url: _url, promptVersion, ...image }) => ({ ...image, promptVersion: versionAt(promptVersion) })),
      };
    };
    expect(comparable(before).promptVersions.map((v) => v.source)).toEqual(['model', 'model', 'user']);
    expect(comparable(before).pane).toMatchObject({ promptVersion: 1, canUndo: true, canRedo: true });
    expect(comparable(before).images[0]?.promptVersion).toBe(0);
    expect(comparable(after)).toEqual(comparable(before));
    // Beside its original in the library, the copy says it is one.
    expect([before.title, after.title]).toEqual(['Fox études', 'Fox études (copy)']);
    // New image names, the same bytes.
    expect(after.images[0]?.url).not.toBe(before.images[0]?.url);
    const bytes = async (url: string) => new Uint8Array(await (await easel.get(url)).arrayBuffer());
    expect(await bytes(after.images[0]!.url)).toEqual(await bytes(before.images[0]!.url));
    // The working context came along: the next request of the copy holds the whole exchange.
    fake.enqueue(scriptReply('Sure.', ASKING));
    await send(copy, 'and a moon');
    expect(lastRequest().map((m) => m.content).join('\n')).toContain('golden hour');
    // Exporting the copy gives the same conversation.json, but for the time of the export.
    const again = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer()));
    const strip = (bytes: Uint8Array) => ({ ...(JSON.parse(new TextDecoder().decode(bytes)) as object), exportedAt: undefined });
    expect(strip(again['conversation.json']!)).toEqual(strip(files['conversation.json']!));
  });

  it('an import titled like a conversation in the library is named as a copy, numbered; with the original gone it keeps its title', async () => {
    const id = await chat('a lighthouse in a storm', 'Day or night?');
    const zip = new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer());
    const titleOf = async (response: Response) => (await conversation(((await response.json()) as { id: string }).id)).title;
    expect(await titleOf(await importZip(zip))).toBe('a lighthouse in a storm (copy)');
    expect(await titleOf(await importZip(zip))).toBe('a lighthouse in a storm (copy 2)');
    const alone = await chat('a heron in the mist', 'Which season?');
    const heron = new Uint8Array(await (await easel.get(`/api/conversations/${alone}/export`)).arrayBuffer());
    expect((await fetch(`${easel.url}/api/conversations/${alone}`, { method: 'DELETE' })).status).toBe(204);
    expect(await titleOf(await importZip(heron))).toBe('a heron in the mist');
  });

  it('the copy of a title at its length bound is cut to fit its suffix, with no space left before it', async () => {
    const id = await easel.newConversation();
    // 120 characters (the bound), the 113th a space: ' (copy)' leaves room for 113, ' (copy 2)' for 111.
    const title = `${'w'.repeat(112)} lantern`;
    expect((await patch(id, { title })).status).toBe(200);
    const zip = new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer());
    const titleOf = async (response: Response) => (await conversation(((await response.json()) as { id: string }).id)).title;
    expect(await titleOf(await importZip(zip))).toBe(`${'w'.repeat(112)} (copy)`);
    expect(await titleOf(await importZip(zip))).toBe(`${'w'.repeat(111)} (copy 2)`);
  });

  it('an image whose backend claimed no seed, steps or CFG (null) exports and imports back as it was', async () => {
    const id = await chat('a red fox', 'Here.', 'a red fox');
    await generate(id, 'a red fox');
    const good = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer()));
    const manifest = JSON.parse(new TextDecoder().decode(good['conversation.json'])) as { images: Array<Record<string, unknown>> };
    const image = Object.keys(good).find((name) => name.startsWith('images/'))!;
    // What an OpenAI-compatible server leaves unclaimed (docs/API.md, the image event), and a sampler A1111 names.
    manifest.images = manifest.images.map((entry) => ({ ...entry, seed: null, steps: null, cfg: null, sampler: 'Euler a' }));
    const imported = await importZip(zipSync({ 'conversation.json': strToU8(JSON.stringify(manifest)), [image]: good[image]! }));
    expect(imported.status).toBe(201);
    const { id: copy } = (await imported.json()) as { id: string };
    expect((await conversation(copy)).images.map(({ seed, steps, cfg, sampler }) => ({ seed, steps, cfg, sampler }))).toEqual([
      { seed: null, steps: null, cfg: null, sampler: 'Euler a' },
    ]);
    const again = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${copy}/export`)).arrayBuffer()));
    expect(Object.keys(again)).toEqual(['conversation.json', 'images/01-a-red-fox.png']);
  });

  it('an export of version 1 (before prompt versions) still imports: its prompt becomes the first version', async () => {
    const id = await chat('a red fox', 'Here.', 'a red fox');
    await generate(id, 'a red fox');
    const good = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer()));
    const { promptVersions: _v, promptVersion: _c, suggestion: _s, pinned: _p, settingSuggestions: _g, ...rest } = JSON.parse(
      new TextDecoder().decode(good['conversation.json']),
    ) as Record<string, unknown> & { transcript: Array<Record<string, unknown>>; images: Array<Record<string, unknown>> };
    const older = {
      ...rest,
      version: 1,
      transcript: rest.transcript.map(({ imageNote: _n, ...turn }) => turn),
      images: rest.images.map(({ promptVersion: _i, source: _f, ...image }) => image),
    };
    const image = Object.keys(good).find((name) => name.startsWith('images/'))!;
    const imported = await importZip(zipSync({ 'conversation.json': strToU8(JSON.stringify(older)), [image]: good[image]! }));
    expect(imported.status).toBe(201);
    const copy = await conversation(((await imported.json()) as { id: string }).id);
    expect(copy.promptVersions.map(({ prompt, source }) => ({ prompt, source }))).toEqual([{ prompt: 'a red fox', source: 'earlier' }]);
    expect(copy).toMatchObject({ prompt: 'a red fox', promptVersion: copy.promptVersions[0]!.id, canUndo: false, pinned: [], suggestion: null });
    expect(copy.images[0]?.promptVersion).toBeNull();
  });

  it('a suggestion waiting in the export waits in the copy, beside the turn that made it, and can be taken there', async () => {
    const id = await chat('a red fox', 'Here.', 'a red fox');
    const good = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer()));
    const manifest = JSON.parse(new TextDecoder().decode(good['conversation.json'])) as Record<string, unknown>;
    const edited = { ...manifest, suggestion: { prompt: 'a red fox at dawn', turn: 1 } };
    const imported = await importZip(zipSync({ 'conversation.json': strToU8(JSON.stringify(edited)) }));
    expect(imported.status).toBe(201);
    const copyId = ((await imported.json()) as { id: string }).id;
    const copy = await conversation(copyId);
    expect(copy.suggestion).toEqual({ prompt: 'a red fox at dawn', turnId: copy.turns[1]!.id });
    const taken = await easel.post(`/api/conversations/${copyId}/suggestion`, { accept: true });
    expect(taken.status).toBe(200);
    expect(await taken.json()).toMatchObject({ prompt: 'a red fox at dawn', suggestion: null, canUndo: true });
  });

  it('an export unzipped and zipped again by a file manager imports: folder entries, one enclosing folder, macOS and Windows extras', async () => {
    const id = await chat('a red fox', 'Here.', 'a red fox');
    await generate(id, 'a red fox');
    const good = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer()));
    const image = Object.keys(good).find((name) => name.startsWith('images/'))!;
    const rezipped = [
      // Folder entries, as zip -r and Windows' "Send to → Compressed folder" write them.
      zipSync({ 'images/': new Uint8Array(0), 'conversation.json': good['conversation.json']!, [image]: good[image]! }),
      // macOS Finder's "Compress" of the unzipped folder: one enclosing folder, resource forks, .DS_Store.
      zipSync({
        'easel-a-red-fox/': new Uint8Array(0),
        'easel-a-red-fox/conversation.json': good['conversation.json']!,
        'easel-a-red-fox/images/': new Uint8Array(0),
        [`easel-a-red-fox/${image}`]: good[image]!,
        'easel-a-red-fox/.DS_Store': strToU8('finder'),
        '__MACOSX/easel-a-red-fox/._conversation.json': strToU8('fork'),
        'easel-a-red-fox/images/Thumbs.db': strToU8('thumbs'),
      }),
    ];
    for (const zip of rezipped) {
      const imported = await importZip(zip);
      expect(imported.status).toBe(201);
      const copy = await conversation(((await imported.json()) as { id: string }).id);
      expect(copy.turns.map((turn) => turn.text)).toEqual(['a red fox', 'Here.']);
      expect(copy.images).toHaveLength(1);
    }
  });

  it('refuses what is not an export, with a clear message, and stores nothing', async () => {
    const id = await chat('a red fox', 'Here.', 'a red fox');
    await generate(id, 'a red fox');
    const good = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer()));
    const manifest = JSON.parse(new TextDecoder().decode(good['conversation.json'])) as Record<string, unknown>;
    const image = Object.keys(good).find((name) => name.startsWith('images/'))!;
    const firstVersion = (manifest.promptVersions as object[])[0]!;
    const withManifest = (changes: Record<string, unknown>, extra: Record<string, Uint8Array> = {}) =>
      zipSync({ 'conversation.json': strToU8(JSON.stringify({ ...manifest, ...changes })), [image]: good[image]!, ...extra });
    const imagesBefore = readdirSync(join(easel.dataDir, 'images')).length;

    const cases: Array<[string, Uint8Array, number, RegExp]> = [
      ['not a zip', strToU8('just some text'), 400, /not a zip archive/],
      ['a path out of the folder', zipSync({ 'conversation.json': good['conversation.json']!, '../../evil.png': good[image]! }), 422, /leads out of its folder/],
      ['an absolute path', zipSync({ 'conversation.json': good['conversation.json']!, '/etc/evil.png': good[image]! }), 422, /absolute path/],
      ['a Windows path', zipSync({ 'conversation.json': good['conversation.json']!, 'images\\..\\evil.png': good[image]! }), 422, /backslash/],
      ['another file', zipSync({ 'conversation.json': good['conversation.json']!, [image]: good[image]!, 'notes.txt': strToU8('hi') }), 422, /"notes\.txt", which is not part of an Easel export/],
      ['no manifest', zipSync({ [image]: good[image]! }), 422, /holds no conversation\.json/],
      ['broken JSON', zipSync({ 'conversation.json': strToU8('{"format": ') }), 422, /not valid JSON/],
      ['a newer version', withManifest({ version: 3 }), 422, /newer Easel \(format version 3/],
      ['a version-1 manifest with version-2 fields', withManifest({ version: 1 }), 422, /conversation\.json does not describe a conversation Easel can import/],
      ['a version whose parent comes after it', withManifest({ promptVersions: [{ ...firstVersion, parent: 0 }] }), 422, /promptVersions\.0\.parent must be the position of an earlier version/],
      ['a current version that is not listed', withManifest({ promptVersion: 5 }), 422, /promptVersion is 5, but there are 1 prompt versions/],
      ['a prompt unlike its current version', withManifest({ prompt: 'something else' }), 422, /the prompt differs from the text of its current version/],
      ['a suggestion of a turn not there', withManifest({ suggestion: { prompt: 'x', turn: 99 } }), 422, /suggestion\.turn is 99, but the transcript has 2 turns/],
      ['an image of a version not there', withManifest({ images: [{ ...(manifest.images as object[])[0], promptVersion: 3 }] }), 422, /images\.0\.promptVersion is 3/],
      ['a pin of a field that cannot be pinned', withManifest({ pinned: ['width'] }), 422, /pinned\.0/],
      ['a bad setting', withManifest({ settings: { ...(manifest.settings as object), steps: 999 } }), 422, /settings\.steps/],
      ['a missing image', zipSync({ 'conversation.json': good['conversation.json']! }), 422, /missing from the file/],
      ['a broken PNG', zipSync({ 'conversation.json': good['conversation.json']!, [image]: BROKEN_PNGS.truncatedIdat() }), 422, /not an image Easel can use/],
    ];
    for (const [what, zip, status, message] of cases) {
      const response = await importZip(zip);
      expect(response.status, what).toBe(status);
      expect(((await response.json()) as { error: string }).error, what).toMatch(message);
    }
    expect((await importZip(strToU8('x'), 'application/json')).status).toBe(415);
    expect((await list()).map((c) => c.id)).toEqual([id]);
    expect(readdirSync(join(easel.dataDir, 'images')).length).toBe(imagesBefore);
  });

  it('refuses a zip declaring more than it may unpack before inflating it, and a body over the cap (413)', async () => {
    // A "zip bomb": a PNG entry whose declared size is over the 64 MB an image may have.
    const bomb = zipSync({ 'conversation.json': strToU8('{}'), 'images/01-x.png': new Uint8Array(65 * 1024 * 1024) }, { level: 1 });
    expect(bomb.byteLength).toBeLessThan(1024 * 1024);
    const response = await importZip(bomb);
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: string }).error).toMatch(/images\/01-x\.png unpacks to 65 MB, more than Easel accepts for it \(64 MB\)/);

    const declared = await rawRequest(easel.url, {
      method: 'POST',
      path: '/api/conversations/import',
      headers: { 'content-type': 'application/zip', 'content-length': String(300 * 1024 * 1024) },
    }).catch((error: Error) => ({ status: -1, body: error.message, headers: {} }));
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body).error).toContain('larger than 200 MB');
    // The other routes keep their 64 KiB limit.
    expect((await easel.post('/api/conversations', 'x'.repeat(70 * 1024))).status).toBe(413);
  });
});

describe('Regenerate and Edit', () => {
  it('Regenerate asks again for the same message; the old reply stays in the transcript as replaced', async () => {
    const id = await chat('a red fox', 'A fox. Which light?');
    fake.enqueue(scriptReply('A fox! Day or night?', ASKING));
    const response = await easel.post(`/api/conversations/${id}/regenerate`, {});
    expect(response.status).toBe(200);
    const events = await readSse(response);
    expect(events[0]).toMatchObject({ type: 'started', data: { conversationId: id, userTurnId: null } });
    expect(shownText(events)).toBe('A fox! Day or night?');

    const turns = (await conversation(id)).turns;
    expect(turns.map((t) => [t.role, t.text, t.status])).toEqual([
      ['user', 'a red fox', 'ok'],
      ['assistant', 'A fox. Which light?', 'replaced'],
      ['assistant', 'A fox! Day or night?', 'ok'],
    ]);
    // The model was asked the message once, without the replaced reply.
    expect(lastRequest().slice(1)).toEqual([{ role: 'user', content: 'a red fox' }]);
    fake.enqueue(scriptReply('Night.', ASKING));
    await send(id, 'night');
    const history = lastRequest().slice(1).map((m) => m.content.split('\n---\n')[0]);
    expect(history).toEqual(['a red fox', 'A fox! Day or night?', 'night']);
  });

  it('Edit replaces the last message and the reply after it, in the transcript (kept as replaced) and for the model', async () => {
    const id = await chat('a cat', 'Which cat?');
    fake.enqueue(scriptReply('A tabby then.', ASKING));
    await send(id, 'a tabby');
    fake.enqueue(scriptReply('A ginger cat, lovely.', ASKING));
    const events = await send(id, 'a ginger cat', { replaceLast: true });
    expect(shownText(events)).toBe('A ginger cat, lovely.');
    expect((await conversation(id)).turns.map((t) => [t.text, t.status])).toEqual([
      ['a cat', 'ok'],
      ['Which cat?', 'ok'],
      ['a tabby', 'replaced'],
      ['A tabby then.', 'replaced'],
      ['a ginger cat', 'ok'],
      ['A ginger cat, lovely.', 'ok'],
    ]);
    expect(lastRequest().slice(1).map((m) => m.content.split('\n---\n')[0])).toEqual(['a cat', 'Which cat?', 'a ginger cat']);
    const bad = await easel.post(`/api/conversations/${id}/messages`, { text: 'x', replaceLast: 'yes' });
    expect(bad.status).toBe(422);
  });

  it('an edited message keeps the prompt note the model had not answered yet', async () => {
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a blue bird' });
    fake.enqueue({ chunks: ['Hm'], errorAfter: { chunks: 1, message: 'out of memory' } });
    await send(id, 'a bird');
    fake.enqueue(scriptReply('A blue jay.', ASKING));
    await send(id, 'a jay', { replaceLast: true });
    expect(lastRequest().slice(1)).toEqual([{ role: 'user', content: '[The user edited the prompt to: "a blue bird"]\n\na jay' }]);
  });

  it('refuses Regenerate and Edit with nothing to act on, or while a reply is written', async () => {
    const id = await easel.newConversation();
    const nothing = await easel.post(`/api/conversations/${id}/regenerate`, {});
    expect(nothing.status).toBe(422);
    expect(((await nothing.json()) as { error: string }).error).toContain('send a message first');
    expect((await easel.post(`/api/conversations/${id}/messages`, { text: 'x', replaceLast: true })).status).toBe(422);
    expect((await easel.post('/api/conversations/nope/regenerate', {})).status).toBe(404);

    fake.enqueue({ chunks: ['Slow'], gate: new Promise<void>(() => {}) });
    const running = await easel.post(`/api/conversations/${id}/messages`, { text: 'a story' });
    await fake.waitForRequests(1, '/api/chat');
    expect((await easel.post(`/api/conversations/${id}/regenerate`, {})).status).toBe(409);
    expect((await easel.post(`/api/conversations/${id}/messages`, { text: 'y', replaceLast: true })).status).toBe(409);
    await easel.post(`/api/conversations/${id}/stop`, {});
    await readSse(running);
  });
});

describe('a restart', () => {
  it('finds every conversation, message, title, prompt, image and the model\'s context back', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'easel-restart-'));
    dirs.push(dataDir);
    await easel.close();
    easel = await start(dataDir);
    const id = await chat('a red fox', 'Which light?');
    await patch(id, { title: 'Foxes' });
    await easel.put(`/api/conversations/${id}/settings`, { steps: 33 });
    await generate(id, 'a red fox');
    const before = await conversation(id);

    await easel.close();
    easel = await start(dataDir);
    const after = await conversation(id);
    expect(after).toEqual(before);
    expect((await list()).map((c) => [c.id, c.title])).toEqual([[id, 'Foxes']]);
    expect((await easel.get(after.images[0]!.url)).status).toBe(200);

    await easel.close();
    easel = await start(dataDir);
    fake.enqueue(scriptReply('Golden.', ASKING));
    await send(id, 'golden hour');
    // The model's context survived both restarts, and the settings change is told once.
    expect(lastRequest().slice(1).map((m) => m.content.split('\n---\n')[0])).toEqual([
      'a red fox',
      'Which light?',
      '[Current settings: steps 33, cfg 7, seed -1, size 512x512]\n\ngolden hour',
    ]);
    expect(readFileSync(join(dataDir, 'easel.db')).byteLength).toBeGreaterThan(0);
  });
});
