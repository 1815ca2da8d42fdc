// What the pages following a conversation, and every page's library list, are told of a change (service-state's
// announce): the library's row only when its title, time or preview changed; the pane and the title only when
// they did, once each; a store that cannot be read then, said where the write is, never failing what was done.
// Through createEaselService with its real adapters, the Ollama adapter against the fake, and a clock of the test's.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createLogger,
  StorageError,
  type ConversationStore,
  type EaselService,
  type FeedEntry,
  type ImageBackend,
  type LibraryEvent,
  type LiveEvent,
} from '../../../server/core/index.ts';
import { createFakeOllama, scriptReply } from '../../fakes/fake-ollama.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { buildService, failingStore, newConversationId } from '../../helpers/service.ts';
import { collectAll } from '../../helpers/streams.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const instantBackend: ImageBackend = {
  name: 'a1111',
  url: 'http://127.0.0.1:7860',
  generate: async () => ({ png: makePng(8, 8) }),
  checkHealth: async () => ({ reachable: true, detail: 'ready' }),
};

async function setUp(options: { store?: (real: ConversationStore) => ConversationStore } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'easel-followers-told-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const fake = await createFakeOllama();
  cleanups.push(() => fake.close());
  const logs: string[] = [];
  // The test's clock: a row's time changes only when the test moves it.
  const clock = { at: Date.parse('2026-11-28T10:00:00.000Z'), now: () => clock.at };
  const { service, realStore } = buildService({
    ollamaUrl: fake.url,
    dbPath: join(dir, 'easel.db'),
    imagesDir: dir,
    backend: instantBackend,
    clock,
    logger: createLogger({ level: 'debug', write: (line) => logs.push(line.replace(/^\S+ /, '')) }),
    ...(options.store ? { wrapStore: options.store } : {}),
  });
  cleanups.push(() => realStore.close());
  cleanups.push(() => service.shutdown());
  return { service, fake, clock, logs };
}

/** Every entry of a feed, as it comes, until the test ends. */
function readAll<E>(entries: AsyncIterable<FeedEntry<E>>): E[] {
  const events: E[] = [];
  void (async () => {
    for await (const entry of entries) events.push(entry.event);
  })();
  return events;
}

function follow(service: EaselService, id: string): LiveEvent[] {
  const hangup = new AbortController();
  cleanups.push(() => hangup.abort());
  const following = service.followConversation(id, { signal: hangup.signal });
  if (!following.ok) throw new Error(following.error.message);
  return readAll(following.value.entries);
}

async function send(service: EaselService, id: string, text: string): Promise<void> {
  const sent = service.sendMessage(id, text, new AbortController().signal);
  if (!sent.ok) throw new Error(sent.error.message);
  await collectAll(sent.value);
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe("the library's row of a conversation", () => {
  it('is sent again only when its title, its time or its preview changed, each on its own; a pane change alone is no row change', async () => {
    const { service, fake, clock } = await setUp();
    const hangup = new AbortController();
    cleanups.push(() => hangup.abort());
    const library = readAll<LibraryEvent>(service.followLibrary({ signal: hangup.signal }).entries);
    const row = () => {
      const event = library.at(-1);
      return event && 'conversation' in event ? [event.type, event.conversation.title, event.conversation.updatedAt.slice(11, 19), event.conversation.preview] : event;
    };
    const id = newConversationId(service);
    await settle();
    expect(library).toHaveLength(1);
    expect(row()).toEqual(['created', 'New conversation', '10:00:00', '']);

    // Without a message or a title of its own, the conversation is called by its prompt: the title alone changed.
    expect(service.setPrompt(id, 'a red fox').ok).toBe(true);
    await settle();
    expect(library).toHaveLength(2);
    expect(row()).toEqual(['updated', 'a red fox', '10:00:00', '']);

    // A setting is the pane's, not the row's.
    expect(service.setSettings(id, { steps: 31 }).ok).toBe(true);
    await settle();
    expect(library).toHaveLength(2);

    // An image a minute later: the time alone changed.
    clock.at += 60_000;
    const made = service.generate(id, { prompt: 'a red fox' }, new AbortController().signal);
    if (!made.ok) throw new Error(made.error.message);
    await collectAll(made.value);
    await settle();
    expect(library).toHaveLength(3);
    expect(row()).toEqual(['updated', 'a red fox', '10:01:00', '']);

    // Two messages in that same minute: the first names the conversation; the second changes only the preview.
    fake.enqueue(scriptReply('Snow it is.', ASKING), scriptReply('A moon too.', ASKING));
    await send(service, id, 'a fox in snow');
    await settle();
    const afterFirst = library.length;
    expect(row()).toEqual(['updated', 'a fox in snow', '10:01:00', 'Snow it is.']);
    await send(service, id, 'and a moon');
    await settle();
    expect(library.slice(afterFirst).map((event) => ('conversation' in event ? [event.conversation.title, event.conversation.preview] : event))).toEqual([
      ['a fox in snow', 'and a moon'],
      ['a fox in snow', 'A moon too.'],
    ]);
  });

  it('a rename is said as one, with the title to the followers and no pane they already have', async () => {
    const { service } = await setUp();
    const hangup = new AbortController();
    cleanups.push(() => hangup.abort());
    const library = readAll<LibraryEvent>(service.followLibrary({ signal: hangup.signal }).entries);
    const id = newConversationId(service);
    const followers = follow(service, id);
    await settle();
    expect(service.renameConversation(id, 'Foxes').ok).toBe(true);
    await settle();
    expect(library.map((event) => event.type)).toEqual(['created', 'renamed']);
    expect(followers).toEqual([{ type: 'title', title: 'Foxes' }]);
  });
});

describe('a reply tells its followers', () => {
  it('of the pane it changed once, with its own events, not again when it ends', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    const followers = follow(service, id);
    fake.enqueue(scriptReply('Here is a fox.', { ...ASKING, prompt: 'a fox in snow' }));
    await send(service, id, 'a fox');
    await settle();
    const panes = followers.filter((event) => event.type === 'pane');
    expect(panes).toHaveLength(1);
    expect(panes[0]).toMatchObject({ prompt: 'a fox in snow' });
  });

  it('while it runs, the conversation shows it running, not interrupted', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    let release!: () => void;
    fake.enqueue(scriptReply('Here is a fox.', ASKING, { gate: new Promise<void>((resolve) => (release = resolve)) }));
    const sent = service.sendMessage(id, 'a fox', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const events = sent.value[Symbol.asyncIterator]();
    for (let step = await events.next(); !step.done && step.value.type !== 'delta'; step = await events.next());
    expect(service.getConversation(id)?.turns.at(-1)).toMatchObject({ role: 'assistant', status: 'running' });
    release();
    await collectAll({ [Symbol.asyncIterator]: () => events });
    expect(service.getConversation(id)?.turns.at(-1)).toMatchObject({ role: 'assistant', status: 'ok' });
  });

  it('at its done, the next message is taken at once, though its image is still to come', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    fake.enqueue(scriptReply('Here.', { ...ASKING, prompt: 'a fox', generate_image: true }), scriptReply('Sure.', ASKING));
    const sent = service.sendMessage(id, 'a fox', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const events = sent.value[Symbol.asyncIterator]();
    for (let step = await events.next(); !step.done && step.value.type !== 'done'; step = await events.next());
    // No wait: the reply is over the moment its done is read.
    expect(service.isBusy(id)).toBe(false);
    const next = service.sendMessage(id, 'and snow', new AbortController().signal);
    expect(next.ok).toBe(true);
    if (next.ok) await collectAll(next.value);
    await collectAll({ [Symbol.asyncIterator]: () => events });
  });
});

describe('a write the store refuses', () => {
  it("is logged here, unless the store logged it already (a vanished or damaged file, with its path)", async () => {
    for (const [code, logged] of [
      ['full', ['ERROR a write to the conversation store failed']],
      ['gone', []],
      ['corrupt', []],
    ] as const) {
      const { service, logs } = await setUp({ store: (real) => failingStore(real, 'addUserPromptVersion', new StorageError(code, code, { location: '/data/easel.db' })) });
      const id = newConversationId(service);
      expect(service.setPrompt(id, 'a red fox')).toMatchObject({ ok: false, error: { code: 'storage' } });
      expect(logs.map((line) => line.replace(/ \{.*$/, ''))).toEqual(logged);
    }
  });
});

describe('a store that cannot be read when the followers are told', () => {
  it('never fails what was done; a failure that is not the store\'s is logged, the store\'s is said where it writes', async () => {
    for (const [failure, logged] of [
      [new TypeError('a bug'), ['WARN  the followers could not be told of a change']],
      [new StorageError('failed', 'SQLITE_IOERR', { location: '/data/easel.db' }), []],
      [new StorageError('gone', 'the database file was deleted', { location: '/data/easel.db' }), []],
    ] as const) {
      let failing = false;
      const { service, logs } = await setUp({ store: (real) => failingStore(real, 'getListing', failure, () => failing) });
      const id = newConversationId(service);
      failing = true;
      // The change stands and is answered.
      expect(service.setPrompt(id, 'a red fox')).toMatchObject({ ok: true, value: { prompt: 'a red fox' } });
      failing = false;
      expect(service.getPane(id)?.prompt).toBe('a red fox');
      expect(logs.map((line) => line.replace(/ \{.*$/, ''))).toEqual(logged);
      if (logged.length > 0) expect(logs[0]).toContain(`"conversationId":"${id}"`);
    }
  });
});
