// The store's images and checks (sqlite/image-table.ts) and the working context's rows (context-table.ts), read
// through the store itself: the gallery's search and pages, the vision model's checks going with their picture,
// and the context read back in its order from a store opened afresh.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, type ConversationStore } from '../../../server/core/index.ts';
import { createSqliteStore } from '../../../server/sqlite/index.ts';
import { makeImageRecord } from '../../helpers/records.ts';

const at = (minute: number) => `2026-11-28T10:${String(minute).padStart(2, '0')}:00.000Z`;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'easel-images-'));
  dirs.push(dir);
  return join(dir, 'easel.db');
}

/** A store with one conversation and three pictures, oldest first: a fox, an éclair, a Straße. */
function withPictures(): ConversationStore {
  const store = createSqliteStore({ path: ':memory:' });
  store.createConversation({ id: 'c1', createdAt: at(0), settings: DEFAULT_SETTINGS });
  const prompts = ['a red fox in the snow', 'un ÉCLAIR au chocolat', 'eine ruhige Straße bei Nacht'];
  prompts.forEach((prompt, index) => store.addImage(makeImageRecord({ id: `i${index}`, conversationId: 'c1', file: `i${index}.png`, prompt, createdAt: at(index + 1) })));
  return store;
}

const ids = (list: { images: Array<{ id: string }> }) => list.images.map((image) => image.id);

describe('the gallery through the store', () => {
  it('finds every word in any case, Unicode included; no words lists all, newest first', () => {
    const store = withPictures();
    expect(ids(store.listAllImages({ words: [], limit: 10 }))).toEqual(['i2', 'i1', 'i0']);
    expect(ids(store.listAllImages({ words: ['éclair'], limit: 10 }))).toEqual(['i1']);
    expect(ids(store.listAllImages({ words: ['STRASSE'], limit: 10 }))).toEqual([]);
    expect(ids(store.listAllImages({ words: ['STRAẞE'], limit: 10 }))).toEqual(['i2']);
    expect(ids(store.listAllImages({ words: ['red', 'snow'], limit: 10 }))).toEqual(['i0']);
    expect(ids(store.listAllImages({ words: ['red', 'night'], limit: 10 }))).toEqual([]);
  });

  it('pages by the cursor of a page\'s last picture; the last page has no next, even when it is exactly full', () => {
    const store = withPictures();
    const first = store.listAllImages({ words: [], limit: 2 });
    expect(ids(first)).toEqual(['i2', 'i1']);
    expect(first.next?.createdAt).toBe(at(2));
    const second = store.listAllImages({ words: [], limit: 2, before: first.next ?? undefined });
    expect(ids(second)).toEqual(['i0']);
    expect(second.next).toBeNull();
    expect(store.listAllImages({ words: [], limit: 3 }).next).toBeNull();
    // A page of one: its cursor is that picture's.
    expect(store.listAllImages({ words: [], limit: 1 }).next?.createdAt).toBe(at(3));
  });
});

describe('the gallery\'s filters', () => {
  it('name the conversations that have pictures, and the checkpoints the pictures were made with', () => {
    const store = withPictures();
    store.createConversation({ id: 'empty', createdAt: at(0), settings: DEFAULT_SETTINGS });
    store.addImage(makeImageRecord({ id: 'i9', conversationId: 'c1', file: 'i9.png', model: 'sdxl_base', createdAt: at(9) }));
    const facets = store.listImageFacets();
    expect(facets.conversations.map((conversation) => conversation.id)).toEqual(['c1']);
    expect(facets.models).toEqual(['sdxl_base']);
  });
});

describe('the gallery\'s filters of a damaged row', () => {
  it('leave out a conversation whose row cannot be read, and list the others', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    for (const id of ['good', 'bad']) {
      store.createConversation({ id, createdAt: at(0), settings: DEFAULT_SETTINGS });
      store.addImage(makeImageRecord({ id: `${id}-image`, conversationId: id, file: `${id}.png`, createdAt: at(1) }));
    }
    const behind = new Database(path);
    behind.prepare("UPDATE conversations SET settings = '{not json' WHERE id = 'bad'").run();
    behind.close();
    expect(store.listImageFacets().conversations.map((conversation) => conversation.id)).toEqual(['good']);
    store.close();
  });
});

describe('checks kept with their picture', () => {
  it('are listed oldest first with their own ids, and go when the picture goes', () => {
    const store = withPictures();
    const check = (imageId: string, revisedPrompt: string) =>
      store.addImageCheck({ imageId, conversationId: 'c1', model: 'gemma3:4b', matches: ['a fox'], misses: [{ element: 'snow', evidence: 'grass' }], revisedPrompt, createdAt: at(9) });
    const first = check('i0', 'a red fox in deep snow');
    const second = check('i1', 'un éclair');
    expect(second.id).toBeGreaterThan(first.id);
    expect(store.listImageChecks('c1').map((stored) => [stored.imageId, stored.revisedPrompt, stored.misses])).toEqual([
      ['i0', 'a red fox in deep snow', [{ element: 'snow', evidence: 'grass' }]],
      ['i1', 'un éclair', [{ element: 'snow', evidence: 'grass' }]],
    ]);
    store.deleteImage('i0');
    expect(store.listImageChecks('c1').map((stored) => stored.imageId)).toEqual(['i1']);
  });
});

describe('the working context', () => {
  it('is read back in the order it was appended, by a store opened afresh', () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    store.createConversation({ id: 'c1', createdAt: at(0), settings: DEFAULT_SETTINGS });
    const entries = [
      { kind: 'user' as const, text: 'one' },
      { kind: 'user' as const, text: 'two' },
      { kind: 'user' as const, text: 'three' },
    ];
    store.beginTurn('c1', { user: { text: 'one' }, replaces: [], context: { kind: 'edit', dropFront: 0, dropBack: 0, append: entries } }, at(1));
    store.close();
    const reopened = createSqliteStore({ path });
    expect(reopened.readContext('c1').map((entry) => entry.text)).toEqual(['one', 'two', 'three']);
    reopened.close();
  });

  it('of a deleted conversation is not remembered for a new one of the same id', () => {
    const store = createSqliteStore({ path: ':memory:' });
    store.createConversation({ id: 'c1', createdAt: at(0), settings: DEFAULT_SETTINGS });
    store.beginTurn('c1', { user: { text: 'old' }, replaces: [], context: { kind: 'edit', dropFront: 0, dropBack: 0, append: [{ kind: 'user', text: 'old' }] } }, at(1));
    expect(store.readContext('c1')).toHaveLength(1);
    store.deleteConversation('c1');
    store.createConversation({ id: 'c1', createdAt: at(2), settings: DEFAULT_SETTINGS });
    expect(store.readContext('c1')).toEqual([]);
  });
});
