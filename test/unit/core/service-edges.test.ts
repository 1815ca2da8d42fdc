// The service's rules the whole-folder mutation run of server/core found untested, through createEaselService
// with its real adapters (SQLite, zip, image files in a temp dir, the Ollama adapter against the fake): an import
// whose images or records cannot be written, its size bound, taking a setting's suggestion, the empty page's
// first message carrying the prompt and settings, and the words of each refusal.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildArchiveFiles } from '../../../server/core/archive.ts';
import {
  createLogger,
  DEFAULT_SETTINGS,
  isConversationId,
  ImageBackendError,
  MAX_IMPORT_BYTES,
  StorageError,
  type ConversationStore,
  type FeedEntry,
  type ImageBackend,
  type ImageFiles,
  type LiveEvent,
  type Logger,
  type TurnEvent,
} from '../../../server/core/index.ts';
import { buildSystemPrompt, FAMILY_STYLES } from '../../../server/protocol/index.ts';
import { createZipArchive } from '../../../server/zip/index.ts';
import { createFakeOllama, scriptReply } from '../../fakes/fake-ollama.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { recordLog } from '../../helpers/log-entries.ts';
import { makeImageRecord } from '../../helpers/records.ts';
import { buildService, failingStore, newConversationId } from '../../helpers/service.ts';
import { collectAll, makeErrnoError } from '../../helpers/streams.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(
  options: {
    imageFiles?: (real: ImageFiles) => ImageFiles;
    store?: (real: ConversationStore) => ConversationStore;
    replySaveIntervalMs?: number;
    backend?: ImageBackend;
    shutdownWaitMs?: number;
    /** Instead of the one that writes `logs` (recordLog's, to check an entry's fields). */
    logger?: Logger;
  } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'easel-service-edges-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const fake = await createFakeOllama();
  cleanups.push(() => fake.close());
  const logs: string[] = [];
  const logger = options.logger ?? createLogger({ level: 'debug', write: (line) => logs.push(line.replace(/^\S+ /, '')) });
  const { service, store, realStore } = buildService({
    ollamaUrl: fake.url,
    dbPath: join(dir, 'easel.db'),
    imagesDir: dir,
    logger,
    ...(options.backend ? { backend: options.backend } : {}),
    ...(options.store ? { wrapStore: options.store } : {}),
    ...(options.imageFiles ? { wrapImageFiles: options.imageFiles } : {}),
    ...(options.replySaveIntervalMs === undefined ? {} : { replySaveIntervalMs: options.replySaveIntervalMs }),
    ...(options.shutdownWaitMs === undefined ? {} : { shutdownWaitMs: options.shutdownWaitMs }),
  });
  cleanups.push(() => realStore.close());
  cleanups.push(() => service.shutdown());
  return { service, fake, logs, dir, store };
}

/** Every event of the conversation as a follower reads it, and its deltas with their ids; `stop` ends the follow. */
function followAll(service: Awaited<ReturnType<typeof setUp>>['service'], id: string) {
  const hangup = new AbortController();
  const following = service.followConversation(id, { signal: hangup.signal });
  if (!following.ok) throw new Error(following.error.message);
  const entries: Array<FeedEntry<LiveEvent>> = [];
  void (async () => {
    for await (const entry of following.value.entries) entries.push(entry);
  })();
  const seenDeltas = () => entries.flatMap(({ id: entryId, event }) => (event.type === 'delta' ? [{ id: entryId, text: event.text }] : []));
  return { entries, seenDeltas, stop: () => hangup.abort() };
}

const AT = '2026-11-26T10:00:00.000Z';
const png = makePng(8, 8);

/** An export with two images. */
async function archiveWithTwoImages(): Promise<Uint8Array> {
  const image = (id: string) => makeImageRecord({ id, file: `${id}.png`, url: '' });

  const files = await buildArchiveFiles(
    {
      title: 'Fox',
      createdAt: AT,
      updatedAt: AT,
      prompt: '',
      settings: DEFAULT_SETTINGS,
      turns: [],
      context: [],
      images: [image('a'), image('b')],
      promptVersions: [],
      promptVersion: null,
      suggestion: null,
      pinned: [],
      settingSuggestions: {},
    },
    { exportedAt: AT, readImage: async () => png },
  );
  return createZipArchive().pack(files);
}


describe('an import that cannot be written', () => {
  it('names a full disk, another error and its code, and leaves no image behind', async () => {
    const cases: Array<[string | undefined, string]> = [
      ['ENOSPC', 'Nothing was imported: the disk holding the images folder is full (ENOSPC). Free some disk space, then import the file again.'],
      ['EDQUOT', 'Nothing was imported: the disk holding the images folder is full (EDQUOT). Free some disk space, then import the file again.'],
      ['EACCES', 'Nothing was imported: an image could not be written to the images folder (EACCES). Check that Easel may write to its data folder (--data-dir), then import the file again.'],
      [undefined, 'Nothing was imported: an image could not be written to the images folder. Check that Easel may write to its data folder (--data-dir), then import the file again.'],
    ];
    const zip = await archiveWithTwoImages();
    for (const [code, message] of cases) {
      let saves = 0;
      const { service, logs, dir } = await setUp({
        imageFiles: (real) => ({
          ...real,
          save: async (name, bytes) => {
            if (++saves === 2) throw makeErrnoError(code);
            await real.save(name, bytes);
          },
        }),
      });
      expect(await service.importConversation(zip)).toEqual({ ok: false, error: { code: 'storage', message } });
      expect(readdirSync(dir).filter((name) => name.endsWith('.png'))).toEqual([]);
      expect(service.listConversations()).toEqual([]);
      expect(logs.filter((line) => line.startsWith('ERROR an imported image could not be written'))).toEqual([
        expect.stringContaining(`{"error":{"name":"Error","message":"${code ?? 'no code'}: simulated"`),
      ]);
    }
  });

  it('a store that refuses the conversation removes the images already written, and says what to do', async () => {
    const { service, logs, dir } = await setUp({
      store: (real) => failingStore(real, 'importConversation', new StorageError('full', 'SQLITE_FULL', { location: '/data/easel.db' })),
    });
    const imported = await service.importConversation(await archiveWithTwoImages());
    expect(imported).toEqual({
      ok: false,
      error: {
        code: 'storage',
        message:
          'Easel could not store the imported conversation: the disk holding /data/easel.db is full. Nothing was imported. Free some disk space, then import the file again.',
        storageCode: 'storage_full',
      },
    });
    expect(readdirSync(dir).filter((name) => name.endsWith('.png'))).toEqual([]);
    expect(logs.filter((line) => line.startsWith('ERROR a write to the conversation store failed {"action":"import"'))).toHaveLength(1);
  });

  it('takes a file of exactly the size bound to unpacking, and refuses one byte more with its size', async () => {
    const { service } = await setUp();
    const atBound = await service.importConversation(new Uint8Array(MAX_IMPORT_BYTES));
    expect(atBound.ok || atBound.error.code).toBe('bad_archive');
    expect(await service.importConversation(new Uint8Array(MAX_IMPORT_BYTES + 600 * 1024))).toEqual({
      ok: false,
      error: { code: 'too_large', message: 'The file is 201 MB; Easel imports conversations of at most 200 MB.' },
    });
  });
});

describe('taking a setting the assistant suggests', () => {
  it('refuses a field it never suggests and a field with nothing waiting, then takes a waiting value and pins it', async () => {
    const { service, fake } = await setUp();
    const conversationId = newConversationId(service);
    expect(service.takeSettingSuggestion(conversationId, 'width')).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'width is not a setting the assistant suggests (steps, cfg, seed, negativePrompt).' },
    });
    expect(service.takeSettingSuggestion(conversationId, 'steps')).toEqual({ ok: false, error: { code: 'conflict', message: 'The assistant suggests nothing for steps now.' } });

    expect(service.setSettings(conversationId, { steps: 40 }).ok).toBe(true);
    fake.enqueue(scriptReply('More steps.', { prompt: 'a fox', generate_image: false, steps: 25, cfg: 7, seed: -1 }));
    const sent = service.sendMessage(conversationId, 'a fox', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    await collectAll(sent.value);
    expect(service.getPane(conversationId)?.settingSuggestions).toEqual({ steps: 25 });

    const taken = service.takeSettingSuggestion(conversationId, 'steps');
    expect(taken.ok && { steps: taken.value.settings.steps, pinned: taken.value.pinned, suggestions: taken.value.settingSuggestions }).toEqual({ steps: 25, pinned: ['steps'], suggestions: {} });
  });
});

describe('the first message of the empty page', () => {
  it('creates the conversation with the prompt and settings on screen, the changed ones pinned', async () => {
    const { service, fake } = await setUp();
    fake.enqueue(scriptReply('Hello.', { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 }));
    const id = '0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c';
    const sent = service.sendMessage(id, 'hi', new AbortController().signal, { create: true, prompt: 'a fox', settings: { steps: 30 } });
    if (!sent.ok) throw new Error(sent.error.message);
    await collectAll(sent.value);
    expect(service.getPane(id)).toMatchObject({ prompt: 'a fox', pinned: ['steps'], settings: { ...DEFAULT_SETTINGS, steps: 30 } });
    // The model read the prompt it was given.
    expect(fake.chatRequests()[0]?.messages?.at(-1)?.content).toContain('a fox');
  });

  it('on a conversation, a prompt and settings changed on screen are saved first; unchanged ones add nothing', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    const reply = () => scriptReply('Hello.', { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 });
    fake.enqueue(reply(), reply());
    const first = service.sendMessage(id, 'hi', new AbortController().signal, { prompt: 'a fox', settings: { steps: 30 } });
    if (!first.ok) throw new Error(first.error.message);
    await collectAll(first.value);
    expect(service.getPane(id)).toMatchObject({ prompt: 'a fox', pinned: ['steps'] });
    expect(service.listPromptVersions(id)?.map((version) => version.source)).toEqual(['user']);

    const again = service.sendMessage(id, 'again', new AbortController().signal, { prompt: 'a fox', settings: { steps: 30 } });
    if (!again.ok) throw new Error(again.error.message);
    await collectAll(again.value);
    expect(service.listPromptVersions(id)).toHaveLength(1);
    expect(fake.chatRequests()[1]?.messages?.at(-1)?.content).not.toContain('[The user');
  });

  it('tells the library once that it made the conversation, as the message is stored', async () => {
    const { service, fake } = await setUp();
    const library = service.followLibrary().entries[Symbol.asyncIterator]();
    fake.enqueue(scriptReply('Hello.', { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 }));
    const id = '0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c';
    const sent = service.sendMessage(id, 'hi', new AbortController().signal, { create: true });
    if (!sent.ok) throw new Error(sent.error.message);
    await collectAll(sent.value);
    // A rename after the turn marks the end of what the turn told the library.
    expect(service.renameConversation(id, 'Foxes').ok).toBe(true);
    const told: string[] = [];
    for (let step = await library.next(); !step.done && step.value.event.type !== 'renamed'; step = await library.next()) told.push(step.value.event.type);
    await library.return?.();
    expect(told[0]).toBe('created');
    expect(told.filter((type) => type === 'created')).toHaveLength(1);
  });

  it('refuses a new conversation whose id is not one Easel makes, by message or by Generate', async () => {
    const { service } = await setUp();
    expect(service.sendMessage('not-an-id', 'hi', new AbortController().signal, { create: true })).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'This new conversation has no valid id: reload the page and send again.' },
    });
    expect(service.generate('not-an-id', { prompt: 'a fox' }, new AbortController().signal, { create: true })).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'This new conversation has no valid id: reload the page and try again.' },
    });
  });
});

describe('what the screen shows, saved by the core before the command', () => {
  it('undo and redo save the prompt on screen first; a prompt the rules refuse is not saved, and undo still leads out of it', async () => {
    const { service } = await setUp();
    const id = newConversationId(service);
    expect(service.setPrompt(id, 'a fox').ok).toBe(true);
    expect(service.setPrompt(id, 'a red fox').ok).toBe(true);

    const undone = service.undoPrompt(id, { prompt: 'a red fox, typed' });
    // The typing became a version, and undo went back from it.
    expect(undone.ok && undone.value.prompt).toBe('a red fox');
    const redone = service.redoPrompt(id, {});
    expect(redone.ok && redone.value.prompt).toBe('a red fox, typed');

    // Text the prompt rule refuses (too long, a control character) stays unsaved, and Undo is still the way out.
    const escaped = service.undoPrompt(id, { prompt: 'x'.repeat(5000) });
    expect(escaped.ok && escaped.value.prompt).toBe('a red fox');
    expect(service.listPromptVersions(id)?.map((version) => version.prompt)).toEqual(['a fox', 'a red fox', 'a red fox, typed']);
  });

  it('a store that cannot save the prompt on screen ends the command, saying so', async () => {
    const { service } = await setUp({
      store: (real) => failingStore(real, 'addUserPromptVersion', new StorageError('full', 'SQLITE_FULL', { location: '/data/easel.db' })),
    });
    const id = newConversationId(service);
    const undone = service.undoPrompt(id, { prompt: 'typed' });
    expect(undone.ok || undone.error).toMatchObject({ code: 'storage', storageCode: 'storage_full' });
  });

  it('settings sent whole with the fields the user changed: only those are set and pinned', async () => {
    const { service } = await setUp();
    const id = newConversationId(service);
    const saved = service.setSettings(id, { steps: 30, cfg: 9, seed: 5 }, { only: ['steps'] });
    expect(saved.ok && saved.value).toMatchObject({ steps: 30, cfg: 7, seed: -1 });
    expect(service.getPane(id)?.pinned).toEqual(['steps']);
  });

  it('the empty page is a draft: a fresh id and the defaults, stored by nothing', async () => {
    const { service } = await setUp();
    const draft = service.draftConversation();
    expect(isConversationId(draft.id)).toBe(true);
    expect(draft).toMatchObject({ prompt: '', settings: DEFAULT_SETTINGS, turns: [], pane: { canUndo: false, promptVersion: null } });
    // Its whole view (pane, preview…) is the one an empty conversation has once stored, but for its id and times.
    const created = service.createConversation();
    if (!created.ok) throw new Error(created.error.message);
    const apart = ({ id: _id, createdAt: _createdAt, updatedAt: _updatedAt, ...rest }: typeof draft) => rest;
    expect(apart(draft)).toEqual(apart(created.value));
    expect(service.getConversation(draft.id)).toBeUndefined();
    expect(service.draftConversation().id).not.toBe(draft.id);
  });
});

describe('the words of a refusal', () => {
  it('undo, redo, a suggestion answer and an image to follow say exactly what is wrong', async () => {
    const { service } = await setUp();
    const id = newConversationId(service);
    expect(service.undoPrompt(id)).toMatchObject({ ok: false, error: { message: 'There is nothing to undo: this is the first version of the prompt.' } });
    expect(service.redoPrompt(id)).toMatchObject({ ok: false, error: { message: 'There is nothing to redo: this is the newest version of the prompt.' } });
    expect(service.answerSuggestion(id, 'yes')).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'accept must be true (use the suggestion) or false (keep yours).', fields: { accept: 'accept must be true or false.' } },
    });
    expect(service.answerSuggestion(id, true)).toEqual({ ok: false, error: { code: 'conflict', message: 'No suggestion is waiting: the prompt is as shown.' } });
    expect(service.followImage(id, 'nope')).toEqual({
      ok: false,
      error: { code: 'not_found', message: 'No such image is being made in this conversation (it may have ended a while ago: GET the conversation to see its images).' },
    });
    expect(service.followImage('0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c', 'nope')).toEqual({
      ok: false,
      error: { code: 'not_found', message: 'There is no conversation "0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c". Start a new one.' },
    });
    expect(service.cancelImages(id)).toBe(false);
  });
});

describe('a turn as the service runs it', () => {
  const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
  const storedText = (service: Awaited<ReturnType<typeof setUp>>['service'], id: string) => service.getConversation(id)?.turns.at(-1)?.text;

  it('saves the shown text as it streams, empties it on a retry and holds the reset\'s words on a reset', async () => {
    const { service, fake } = await setUp({ replySaveIntervalMs: 0 });
    const id = newConversationId(service);
    fake.enqueue({ chunks: ['prose ', 'one'] }, { chunks: ['{"prompt": "a cat in a hat, highly', ' detailed'], doneReason: 'length' }, 'prose 2', {
      chunks: ['{"prompt": "a cat'],
      doneReason: 'length',
    });
    const sent = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const seen: Array<[string, string | undefined]> = [];
    for await (const event of sent.value) {
      if (event.type === 'delta' || event.type === 'retry' || event.type === 'reset') seen.push([event.type, storedText(service, id)]);
    }
    expect(seen).toEqual([
      ['delta', 'prose one'],
      ['retry', ''],
      ['delta', 'prose 2'],
      ['retry', ''],
      ['reset', "I'm having trouble understanding the format. Let's start fresh."],
    ]);
  });

  it('saves at the interval it was given', async () => {
    const { service, fake } = await setUp({ replySaveIntervalMs: 5 });
    const id = newConversationId(service);
    // Three lines, then the model hangs: the turn is still running when the text is read back.
    fake.enqueue({ chunks: ['First ', 'second ', 'third', ' never'], stallAfter: 3, delayMs: 20 });
    const sent = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const reading = collectAll(sent.value);
    await fake.waitForStall();
    // The later lines came within the interval after the first save: the saver holds them 5 ms, not Easel's default second.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(storedText(service, id)).toBe('First second third');
    service.stop(id);
    await reading;
  });

  it('a reply that cannot be saved as it streams is logged, and the turn goes on', async () => {
    const { service, fake, logs } = await setUp({
      store: (real) => failingStore(real, 'saveReplyText', new StorageError('failed', 'SQLITE_IOERR', { location: '/data/easel.db' })),
    });
    const id = newConversationId(service);
    fake.enqueue(scriptReply('A cat.', ASKING));
    const sent = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    expect((await collectAll(sent.value)).at(-1)).toMatchObject({ type: 'done', level: 'clean' });
    expect(logs.some((line) => line.startsWith(`WARN  the reply could not be saved while streaming {"conversationId":"${id}"`))).toBe(true);
  });

  it('a Regenerate that cannot be stored says the change was not saved; a reply that cannot be stored says so and is logged', async () => {
    let failBegin = false;
    let failFinish = false;
    const fail = () => {
      throw new StorageError('full', 'SQLITE_FULL', { location: '/data/easel.db' });
    };
    const { service, fake, logs } = await setUp({
      store: (real) => ({
        ...real,
        beginTurn: (...args: Parameters<ConversationStore['beginTurn']>) => (failBegin ? fail() : real.beginTurn(...args)),
        finishTurn: (...args: Parameters<ConversationStore['finishTurn']>) => (failFinish ? fail() : real.finishTurn(...args)),
      }),
    });
    const id = newConversationId(service);
    fake.enqueue(scriptReply('A cat.', ASKING), scriptReply('Another cat.', ASKING));
    const first = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!first.ok) throw new Error(first.error.message);
    await collectAll(first.value);

    failBegin = true;
    const regenerated = service.regenerate(id, new AbortController().signal);
    if (!regenerated.ok) throw new Error(regenerated.error.message);
    expect((await collectAll(regenerated.value))[0]).toEqual({
      type: 'error',
      code: 'storage_full',
      message: 'Easel could not save the change: the disk holding /data/easel.db is full. Nothing was changed. Free some disk space, then try again.',
    });

    expect(logs.filter((line) => line.startsWith('ERROR the message could not be stored'))).toEqual([
      `ERROR the message could not be stored; nothing was sent to the model {"conversationId":"${id}","error":{"name":"StorageError","message":"SQLITE_FULL"}}`,
    ]);
    failBegin = false;
    failFinish = true;
    const again = service.sendMessage(id, 'a dog', new AbortController().signal);
    if (!again.ok) throw new Error(again.error.message);
    const events = await collectAll(again.value);
    expect(events.at(-2)).toMatchObject({ type: 'error', code: 'storage_full', message: expect.stringMatching(/^Easel could not save the reply: /) });
    expect(logs.filter((line) => line.startsWith(`ERROR the reply could not be stored {"conversationId":"${id}"`))).toHaveLength(1);
  });

  it('a read of the turn that meets a damaged database ends it with storage_failed (the text back), not an internal error', async () => {
    const { service, fake, logs } = await setUp({
      store: (real) => failingStore(real, 'readContext', new StorageError('corrupt', 'SQLITE_CORRUPT', { location: '/data/easel.db' })),
    });
    const conversationId = newConversationId(service);
    const sent = service.sendMessage(conversationId, 'a fox', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const events = await collectAll(sent.value);
    expect(events.find((event) => event.type === 'error')).toEqual({
      type: 'error',
      code: 'storage_failed',
      message:
        'Easel could not save your message: the database /data/easel.db is damaged (the details are in the server log). Nothing was saved, and your message is back in the box: stop Easel, move /data/easel.db aside or restore it from a backup, and start Easel again, then send it again.',
    });
    expect(events.at(-1)).toMatchObject({ type: 'done', level: 'error' });
    expect(fake.chatRequests()).toHaveLength(0);
    // The store logs a damaged file once, with its path; the turn does not repeat it.
    expect(logs.filter((line) => line.includes('turn failed unexpectedly'))).toEqual([]);
  });

  it('a request already aborted when it arrives reads nothing, and the turn is still the server\'s: it runs and is stored', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    fake.enqueue(scriptReply('A cat.', ASKING));
    const controller = new AbortController();
    controller.abort(new Error('the client hung up'));
    const sent = service.sendMessage(id, 'a cat', controller.signal);
    if (!sent.ok) throw new Error(sent.error.message);
    expect(await collectAll(sent.value)).toEqual([]);
    await expect.poll(() => service.isBusy(id)).toBe(false);
    expect(fake.chatRequests()).toHaveLength(1);
    expect(service.getConversation(id)?.turns.at(-1)).toMatchObject({ status: 'ok', text: 'A cat.' });
  });

  it('a reader that stops reading does not stop the turn: only Stop does, and the reply is kept as stopped', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    fake.enqueue({ chunks: ['Half a ', 'thought'], gate: new Promise<void>(() => {}) });
    const sent = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    for await (const event of sent.value) if (event.type === 'delta') break;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(fake.hangups).toBe(0);
    expect(service.isBusy(id)).toBe(true);
    expect(service.stop(id)).toBe(true);
    // Stopped but not stored yet: still busy, so the next message waits for it.
    expect(service.isBusy(id)).toBe(true);
    await fake.waitForHangup();
    await expect.poll(() => service.isBusy(id)).toBe(false);
    expect(service.getConversation(id)?.turns.at(-1)).toMatchObject({ status: 'stopped', text: 'Half a' });
  });

  it('a request that hangs up mid-reply ends its own stream at once; the reply goes on and is stored', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    let release!: () => void;
    fake.enqueue(scriptReply('A cat.', ASKING, { gate: new Promise<void>((resolve) => (release = resolve)) }));
    const hangup = new AbortController();
    const sent = service.sendMessage(id, 'a cat', hangup.signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const events = sent.value[Symbol.asyncIterator]();
    for (let step = await events.next(); !step.done; step = await events.next()) if (step.value.type === 'delta') break;
    hangup.abort(new Error('the client hung up'));
    // The reply still waits at the gate: only a stream closed by the hang-up ends now.
    const rest = collectAll({ [Symbol.asyncIterator]: () => events }).then(() => 'ended');
    expect(await Promise.race([rest, new Promise((resolve) => setTimeout(() => resolve('still open'), 2000))])).toBe('ended');
    release();
    await expect.poll(() => service.isBusy(id)).toBe(false);
    expect(service.getConversation(id)?.turns.at(-1)).toMatchObject({ status: 'ok', text: 'A cat.' });
  });

  it('a follower joining mid-reply gets the text shown so far, not the copy saved a second ago', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    // Three lines, then the model hangs: the first was saved at once, the next two wait for the save interval.
    fake.enqueue({ chunks: ['One', ' two', ' three', ' four'], stallAfter: 3 });
    const sent = service.sendMessage(id, 'count', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const seen: TurnEvent[] = [];
    const reading = (async () => {
      for await (const event of sent.value) seen.push(event);
    })();
    await fake.waitForStall();
    await expect.poll(() => seen.flatMap((event) => (event.type === 'delta' ? [event.text] : [])).join('')).toBe('One two three');
    const started = seen.find((event) => event.type === 'started');
    const following = service.followConversation(id);
    if (!following.ok) throw new Error(following.error.message);
    expect(following.value.running).toEqual({ turnId: started?.type === 'started' ? started.turnId : -1, text: 'One two three' });
    expect(following.value.snapshot?.turns.at(-1)).toMatchObject({ status: 'running', text: 'One two three' });
    service.stop(id);
    await reading;
  });

  it('a follower resuming mid-reply is given the text as of the id it resumes from; from before the reply began, none', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    const { entries, seenDeltas, stop } = followAll(service, id);
    const beforeReply = service.snapshotConversation(id)?.snapshotId;
    // Lines apart in time, so that each is a delta of its own.
    fake.enqueue({ chunks: ['One', ' two', ' three', ' four'], stallAfter: 3, delayMs: 30 });
    const sent = service.sendMessage(id, 'count', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const reading = collectAll(sent.value);
    await fake.waitForStall();
    await expect.poll(() => seenDeltas().map((delta) => delta.text)).toEqual(['One', ' two', ' three']);
    const turnId = entries.flatMap(({ event }) => (event.type === 'started' ? [event.turnId] : []))[0];
    // A prompt typed meanwhile: a change of its own among the events replayed, no text of the reply.
    expect(service.setPrompt(id, 'a red fox').ok).toBe(true);
    // The page showed 'One' when it lost the stream: the two deltas replayed after it must not be shown twice.
    const resumed = service.followConversation(id, { lastEventId: seenDeltas()[0]?.id });
    expect(resumed.ok && resumed.value.snapshot).toBeUndefined();
    expect(resumed.ok && resumed.value.running).toEqual({ turnId, text: 'One' });
    // Its `started` is replayed: the reply is drawn from it, with no text before.
    const fromStart = service.followConversation(id, { lastEventId: beforeReply });
    expect(fromStart.ok && fromStart.value.snapshot).toBeUndefined();
    expect(fromStart.ok && fromStart.value.running).toBeUndefined();
    service.stop(id);
    await reading;
    stop();
  });

  it('a follower resuming from before a retry or a reset is given no text: the replayed event replaced it', async () => {
    let atReplyStored: (() => void) | undefined;
    const { service, fake } = await setUp({
      store: (real) => ({
        ...real,
        finishTurn: (...args: Parameters<ConversationStore['finishTurn']>) => {
          atReplyStored?.();
          return real.finishTurn(...args);
        },
      }),
    });
    const id = newConversationId(service);
    const { entries, seenDeltas, stop } = followAll(service, id);
    // Prose without metadata, then a broken metadata call: a retry; the retried reply then hangs after 'Two three'.
    fake.enqueue({ chunks: ['prose', ' one'], delayMs: 30 }, { chunks: ['{"prompt": "a cat'], doneReason: 'length' }, { chunks: ['Two', ' three', ' four'], stallAfter: 2, delayMs: 30 });
    const sent = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const reading = collectAll(sent.value);
    await fake.waitForStall();
    await expect.poll(() => seenDeltas().map((delta) => delta.text)).toEqual(['prose', ' one', 'Two', ' three']);
    const beforeRetry = service.followConversation(id, { lastEventId: seenDeltas()[1]?.id });
    expect(beforeRetry.ok && beforeRetry.value.running).toBeUndefined();
    service.stop(id);
    await reading;

    // A reset is followed by its `done` with no await between: a follower can come in only while the reply is stored.
    const seenAtEnd: Array<string | undefined> = [];
    atReplyStored = () => {
      seenAtEnd.push(entries.at(-1)?.event.type);
      const atEnd = service.followConversation(id, { lastEventId: entries.at(-1)?.id });
      seenAtEnd.push(atEnd.ok && atEnd.value.running ? atEnd.value.running.text : 'no text');
    };
    fake.enqueue({ chunks: ['prose ', 'one'] }, { chunks: ['{"prompt": "a cat'], doneReason: 'length' }, 'prose 2', { chunks: ['{"prompt": "a cat'], doneReason: 'length' });
    const again = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!again.ok) throw new Error(again.error.message);
    expect((await collectAll(again.value)).some((event) => event.type === 'reset')).toBe(true);
    // The follower had seen the last retry: only the reset is replayed, and the text before it is not given.
    expect(seenAtEnd).toEqual(['retry', 'no text']);
    stop();
  });

  it('a read that fails once the reply was written says the reply may be incomplete, logged with the conversation', async () => {
    let failReads = false;
    const { logger, entries } = recordLog();
    const { service, fake } = await setUp({
      logger,
      store: (real) => failingStore(real, 'getConversation', new StorageError('failed', 'SQLITE_IOERR', { location: '/data/easel.db' }), () => failReads),
    });
    const id = newConversationId(service);
    let release!: () => void;
    fake.enqueue(scriptReply('A cat.', ASKING, { gate: new Promise<void>((resolve) => (release = resolve)) }));
    const sent = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const events = sent.value[Symbol.asyncIterator]();
    for (let step = await events.next(); !step.done; step = await events.next()) if (step.value.type === 'delta') break;
    // The turn reads the conversation again once the reply is in, to decide the pane: that read fails.
    failReads = true;
    release();
    const rest = await collectAll({ [Symbol.asyncIterator]: () => events });
    failReads = false;
    expect(rest.at(-2)).toMatchObject({ type: 'error', code: 'storage_failed', message: expect.stringMatching(/^Easel could not save the reply: .*your message is kept/) });
    expect(rest.at(-1)).toMatchObject({ type: 'done', level: 'error' });
    expect(entries.filter((entry) => entry.message === 'the conversation could not be read during a turn')).toEqual([
      { level: 'error', message: 'the conversation could not be read during a turn', fields: { conversationId: id, error: expect.any(StorageError) } },
    ]);
    expect(service.isBusy(id)).toBe(false);
  });

  it('the library lists a conversation by its messages as shown: an edited one by its new words, an empty reply skipped', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    fake.enqueue(scriptReply('A fox.', ASKING), scriptReply('A cat.', ASKING));
    const first = service.sendMessage(id, 'a fox', new AbortController().signal);
    if (!first.ok) throw new Error(first.error.message);
    await collectAll(first.value);
    const edited = service.sendMessage(id, 'a cat', new AbortController().signal, { replaceLast: true });
    if (!edited.ok) throw new Error(edited.error.message);
    await collectAll(edited.value);
    expect(service.getSummary(id)).toMatchObject({ title: 'a cat', preview: 'A cat.' });

    fake.enqueue({ chunks: ['never'], loadMs: 5000 });
    const stopped = service.sendMessage(id, 'a dog', new AbortController().signal);
    if (!stopped.ok) throw new Error(stopped.error.message);
    for await (const event of stopped.value) if (event.type === 'started') service.stop(id);
    expect(service.getConversation(id)?.turns.at(-1)).toMatchObject({ text: '', status: 'stopped' });
    expect(service.getSummary(id)?.preview).toBe('a dog');
  });
});

describe('the library and settings, word for word', () => {
  async function withConversation() {
    const harness = await setUp();
    return { ...harness, id: newConversationId(harness.service) };
  }

  it('a bad title or settings patch names each field in one message', async () => {
    const { service, id } = await withConversation();
    expect(service.renameConversation(id, 5)).toEqual({ ok: false, error: { code: 'invalid', message: 'title must be a string', fields: { title: 'title must be a string' } } });
    expect(service.renameConversation(id, 'x'.repeat(121))).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'title: A title can hold at most 120 characters.', fields: { title: 'A title can hold at most 120 characters.' } },
    });
    expect(service.setSettings(id, { steps: 'many', colour: 'red', cfg: 99 })).toEqual({
      ok: false,
      error: {
        code: 'invalid',
        message: 'steps: Steps must be a whole number from 1 to 150. cfg: CFG must be at most 30. colour is not a setting Easel knows.',
        fields: { steps: 'Steps must be a whole number from 1 to 150.', cfg: 'CFG must be at most 30.', colour: 'colour is not a setting Easel knows.' },
      },
    });
  });

  it('renaming a conversation that is not there says so before it reads the title', async () => {
    const { service } = await withConversation();
    expect(service.renameConversation('0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c', 5)).toEqual({
      ok: false,
      error: { code: 'not_found', message: 'There is no conversation "0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c". Start a new one.' },
    });
  });

  it('unpin must be a list of the settings the model sets: anything else is refused with that sentence', async () => {
    const { service, id } = await withConversation();
    const message = 'unpin must be a list of steps, cfg, seed, negativePrompt.';
    for (const unpin of ['steps', ['steps', 'width'], ['width']]) {
      expect(service.setSettings(id, { unpin })).toEqual({ ok: false, error: { code: 'invalid', message, fields: { unpin: message } } });
    }
    expect(service.setSettings(id, { unpin: ['steps'] }).ok).toBe(true);
    // A body that is not an object is not read for unpin.
    expect(service.setSettings(id, ['unpin']).ok).toBe(false);
    // A body that is no object at all is named as the body.
    expect(service.setSettings(id, 'steps')).toMatchObject({ ok: false, error: { code: 'invalid', fields: { body: expect.any(String) } } });
    // A message's prompt that is no text is named as the prompt.
    expect(service.sendMessage(id, 'hi', new AbortController().signal, { prompt: 5 })).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'prompt must be a string', fields: { prompt: 'prompt must be a string' } },
    });
  });

  it('deleting a conversation that is not there says so; a file that cannot be removed is logged, the delete still done', async () => {
    const { service, id, logs, dir } = await withConversation();
    expect(await service.deleteConversation('0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c')).toEqual({
      ok: false,
      error: { code: 'not_found', message: 'There is no conversation "0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c". Start a new one.' },
    });
    expect(await service.deleteConversation(id)).toEqual({ ok: true, value: undefined });
    expect(service.getConversation(id)).toBeUndefined();
    expect(logs.filter((line) => line.startsWith('WARN'))).toEqual([]);
    expect(dir).not.toBe('');
  });

  it('an export whose image file is gone leaves it out and logs which', async () => {
    const { service, logs, store, id } = await withConversation();
    const file = 'ffffffffffffffffffffffffffffffff.png';
    store.addImage(makeImageRecord({ id: 'gone', conversationId: id, file, url: `/images/${file}`, seed: 1 }));

    const exported = await service.exportConversation(id);
    expect(exported.ok).toBe(true);
    expect(logs.filter((line) => line.startsWith(`WARN  an image file is missing and was left out of the export {"conversationId":"${id}","file":"ffffffffffffffffffffffffffffffff.png"`))).toHaveLength(1);
  });

  it('a search lists only the conversations whose words match', async () => {
    const { service, fake, id } = await withConversation();
    const other = newConversationId(service);
    fake.enqueue(scriptReply('A fox.', { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 }));
    const sent = service.sendMessage(id, 'a red fox', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    await collectAll(sent.value);
    expect(service.listConversations('fox').map((summary) => summary.id)).toEqual([id]);
    expect(service.listConversations().map((summary) => summary.id).sort()).toEqual([id, other].sort());
  });
});

describe('Generate and the image after a reply', () => {
  function gatedBackend() {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const requests: string[] = [];
    const backend: ImageBackend = {
      name: 'a1111',
      url: 'http://127.0.0.1:7860',
      generate: async (request, { signal }) => {
        requests.push(request.prompt);
        // As the adapters do (their fetch rejects at once): an aborted signal is a cancel, however early.
        const cancelled = () => new ImageBackendError('cancelled', 'cancelled');
        if (signal.aborted) throw cancelled();
        await Promise.race([gate, new Promise((_, reject) => signal.addEventListener('abort', () => reject(cancelled())))]);
        return { png };
      },
      checkHealth: async () => ({ reachable: true, detail: 'ready' }),
    };
    return { backend, release, requests };
  }

  it('refuses a blank prompt in words, and records the pane\'s version only for the pane\'s prompt', async () => {
    const { backend, release } = gatedBackend();
    release();
    const { service } = await setUp({ backend });
    const id = newConversationId(service);
    expect(service.generate(id, { prompt: '   ' }, new AbortController().signal)).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'The prompt is empty: write one or chat until the assistant suggests one.', fields: { prompt: 'The prompt is empty.' } },
    });
    expect(service.setPrompt(id, 'a fox').ok).toBe(true);
    const version = service.getPane(id)?.promptVersion;
    const fromPane = service.generate(id, {}, new AbortController().signal);
    if (!fromPane.ok) throw new Error(fromPane.error.message);
    const events = await collectAll(fromPane.value);
    expect(events.find((event) => event.type === 'image')).toMatchObject({ prompt: 'a fox', promptVersion: version });
    expect(events.at(-1)).toStrictEqual({ type: 'done', attempts: 0, repairs: [], level: 'clean', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null });
    const overridden = service.generate(id, { prompt: 'a cat' }, new AbortController().signal);
    if (!overridden.ok) throw new Error(overridden.error.message);
    const image = (await collectAll(overridden.value)).find((event) => event.type === 'image');
    expect(image).toMatchObject({ prompt: 'a cat' });
    expect(image).not.toHaveProperty('promptVersion');
  });

  it('a Generate whose reader stops reading cancels its image at the backend', async () => {
    let aborted = false;
    const backend: ImageBackend = {
      name: 'a1111',
      url: 'http://127.0.0.1:7860',
      generate: (_request, { signal }) =>
        new Promise((_, reject) =>
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(new ImageBackendError('cancelled', 'cancelled'));
          }),
        ),
      checkHealth: async () => ({ reachable: true, detail: 'ready' }),
    };
    const { service } = await setUp({ backend });
    const id = newConversationId(service);
    const started = service.generate(id, { prompt: 'a fox' }, new AbortController().signal);
    if (!started.ok) throw new Error(started.error.message);
    for await (const event of started.value) if (event.type === 'generation') break;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(aborted).toBe(true);
    expect(service.cancelImages(id)).toBe(false);
  });

  it('a Generate whose request was already aborted is cancelled', async () => {
    const { backend } = gatedBackend();
    const { service } = await setUp({ backend });
    const id = newConversationId(service);
    const controller = new AbortController();
    controller.abort(new Error('the client hung up'));
    const started = service.generate(id, { prompt: 'a fox' }, controller.signal);
    if (!started.ok) throw new Error(started.error.message);
    const events = await collectAll(started.value);
    expect(events.find((event) => event.type === 'error')).toMatchObject({ code: 'image_cancelled' });
    // A Generate's stream ends as every stream does, its level saying how the image ended, not a made-up clean reply.
    expect(events.at(-1)).toMatchObject({ type: 'done', attempts: 0, level: 'stopped' });
  });

  it('a Generate whose image fails ends its stream with done at level error', async () => {
    const backend: ImageBackend = {
      name: 'a1111',
      url: 'http://127.0.0.1:7860',
      generate: async () => {
        throw new ImageBackendError('backend_error', 'the checkpoint is missing');
      },
      checkHealth: async () => ({ reachable: true, detail: 'ready' }),
    };
    const { service } = await setUp({ backend });
    const id = newConversationId(service);
    const started = service.generate(id, { prompt: 'a fox' }, new AbortController().signal);
    if (!started.ok) throw new Error(started.error.message);
    const events = await collectAll(started.value);
    expect(events.find((event) => event.type === 'error')).toMatchObject({ code: 'image_backend_error' });
    expect(events.at(-1)).toMatchObject({ type: 'done', attempts: 0, level: 'error' });
  });

  it('after the reply\'s done, the next message is taken while its image is still being made', async () => {
    const { backend, release, requests } = gatedBackend();
    const { service, fake } = await setUp({ backend });
    const id = newConversationId(service);
    fake.enqueue(scriptReply('Here.', { prompt: 'a fox', generate_image: true, steps: 20, cfg: 7, seed: -1 }), scriptReply('Sure.', { prompt: 'a fox', generate_image: false, steps: 20, cfg: 7, seed: -1 }));
    const sent = service.sendMessage(id, 'a fox', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const iterator = sent.value[Symbol.asyncIterator]();
    for (let step = await iterator.next(); !step.done; step = await iterator.next()) if (step.value.type === 'done') break;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(requests).toEqual(['a fox']);
    const next = service.sendMessage(id, 'and snow', new AbortController().signal);
    expect(next.ok).toBe(true);
    if (next.ok) await collectAll(next.value);
    release();
    await collectAll({ [Symbol.asyncIterator]: () => iterator });
  });
});

describe('what the model is told, and what a delete leaves', () => {
  const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
  const lastUserMessage = (fake: Awaited<ReturnType<typeof setUp>>['fake'], index: number) => fake.chatRequests()[index]?.messages?.at(-1)?.content ?? '';

  it('the system prompt names a family only when something says it: chosen, or read from the checkpoint', async () => {
    const { service, fake } = await setUp();
    fake.enqueue(scriptReply('Hello.', ASKING), scriptReply('Hello.', ASKING));
    const unsaid = newConversationId(service);
    const chosen = newConversationId(service);
    expect(service.setSettings(chosen, { family: 'sdxl' }).ok).toBe(true);
    for (const id of [unsaid, chosen]) {
      const sent = service.sendMessage(id, 'hi', new AbortController().signal);
      if (!sent.ok) throw new Error(sent.error.message);
      await collectAll(sent.value);
    }
    const system = (index: number) => fake.chatRequests()[index]?.messages?.[0];
    // Nothing says the family: the prompt for any image model, not SD 1.5's style guessed.
    expect(system(0)).toEqual({ role: 'system', content: buildSystemPrompt() });
    expect(system(1)).toEqual({ role: 'system', content: buildSystemPrompt(FAMILY_STYLES.sdxl) });
  });

  it('a reply that cannot be saved while it streams is logged, unless the store logged it (a vanished or damaged file)', async () => {
    for (const [code, warned] of [
      ['full', 1],
      ['gone', 0],
    ] as const) {
      const { service, fake, logs } = await setUp({ replySaveIntervalMs: 0, store: (real) => failingStore(real, 'saveReplyText', new StorageError(code, code, { location: '/data/easel.db' })) });
      fake.enqueue(scriptReply('Hello there, a fox it is.', ASKING, { delayMs: 2 }));
      const id = newConversationId(service);
      const sent = service.sendMessage(id, 'hi', new AbortController().signal);
      if (!sent.ok) throw new Error(sent.error.message);
      await collectAll(sent.value);
      expect(logs.filter((line) => line.startsWith('WARN  the reply could not be saved while streaming')).length > 0 ? 1 : 0).toBe(warned);
    }
  });

  it('the empty page\'s first message tells the model only what was changed from the defaults', async () => {
    const { service, fake } = await setUp();
    fake.enqueue(scriptReply('Hello.', ASKING), scriptReply('Hello.', ASKING));
    const plain = service.sendMessage('0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c', 'hi', new AbortController().signal, { create: true, settings: { ...DEFAULT_SETTINGS } });
    if (!plain.ok) throw new Error(plain.error.message);
    await collectAll(plain.value);
    expect(lastUserMessage(fake, 0)).not.toContain('[The user edited');
    expect(lastUserMessage(fake, 0)).not.toContain('[Current settings');

    const changed = service.sendMessage('1b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c', 'hi', new AbortController().signal, { create: true, settings: { cfg: 9 } });
    if (!changed.ok) throw new Error(changed.error.message);
    await collectAll(changed.value);
    expect(lastUserMessage(fake, 1)).toContain('[Current settings: steps 20, cfg 9');
    expect(lastUserMessage(fake, 1)).not.toContain('[The user edited');
  });

  it('an Edit tells the model the note of the message it replaces and the newer edit, one per line', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    fake.enqueue({ chunks: [], errorAfter: { chunks: 0, message: 'model runner crashed', status: 500 } }, scriptReply('A cat.', ASKING));
    const first = service.sendMessage(id, 'a fox', new AbortController().signal, { prompt: 'a fox' });
    if (!first.ok) throw new Error(first.error.message);
    expect((await collectAll(first.value)).at(-1)).toMatchObject({ type: 'done', level: 'error' });
    const edited = service.sendMessage(id, 'a cat', new AbortController().signal, { replaceLast: true, prompt: 'a cat' });
    if (!edited.ok) throw new Error(edited.error.message);
    await collectAll(edited.value);
    expect(lastUserMessage(fake, 1)).toBe('[The user edited the prompt to: "a fox"]\n[The user edited the prompt to: "a cat"]\n\na cat');
  });

  it('a typed prompt leaves a waiting suggestion waiting; taking the suggestion is no edit to tell the model of', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    expect(service.setPrompt(id, 'my fox').ok).toBe(true);
    // The user edits while the reply is written: the model's prompt waits as a suggestion.
    let release!: () => void;
    fake.enqueue({ ...scriptReply('A fox.', { ...ASKING, prompt: 'a fox, snow' }), gate: new Promise<void>((resolve) => (release = resolve)) });
    const sent = service.sendMessage(id, 'a fox', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const reading = collectAll(sent.value);
    await fake.waitForRequests(1, '/api/chat');
    expect(service.setPrompt(id, 'my fox, edited').ok).toBe(true);
    release();
    await reading;
    expect(service.getPane(id)?.suggestion?.prompt).toBe('a fox, snow');
    expect(service.setPrompt(id, 'my fox, again').ok).toBe(true);
    expect(service.getPane(id)?.suggestion?.prompt).toBe('a fox, snow');

    expect(service.answerSuggestion(id, true).ok).toBe(true);
    fake.enqueue(scriptReply('Snow it is.', ASKING));
    const next = service.sendMessage(id, 'go on', new AbortController().signal);
    if (!next.ok) throw new Error(next.error.message);
    await collectAll(next.value);
    expect(lastUserMessage(fake, 1)).toBe('go on');
  });

  it('an image file that cannot be removed is logged and the delete is done; the id can be used again after', async () => {
    const { service, store, logs } = await setUp({
      imageFiles: (real) => ({
        ...real,
        remove: async () => {
          throw makeErrnoError('EACCES');
        },
      }),
    });
    const id = '0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c';
    store.createConversation({ id, createdAt: AT, settings: DEFAULT_SETTINGS });
    const file = 'ffffffffffffffffffffffffffffffff.png';
    store.addImage(makeImageRecord({ conversationId: id, file, url: `/images/${file}` }));
    expect(await service.deleteConversation(id)).toEqual({ ok: true, value: undefined });
    expect(logs.filter((line) => line.startsWith(`WARN  an image file of a deleted conversation could not be removed {"file":"${file}"`))).toHaveLength(1);
    expect(service.sendMessage(id, 'hi', new AbortController().signal, { create: true }).ok).toBe(true);
  });
});

describe('more refusals and an unexpected failure', () => {
  it('an Edit or Regenerate with nothing to act on, and a Generate without a prompt, say what to do first', async () => {
    const { service } = await setUp({ backend: { name: 'a1111', url: 'http://127.0.0.1:7860', generate: async () => ({ png }), checkHealth: async () => ({ reachable: true, detail: '' }) } });
    const id = newConversationId(service);
    expect(service.sendMessage(id, 'x', new AbortController().signal, { replaceLast: true })).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'There is no message to edit yet: send one first.' },
    });
    expect(service.regenerate(id, new AbortController().signal)).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'There is no reply to regenerate yet: send a message first.' },
    });
    expect(service.generate('0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c', {}, new AbortController().signal, { create: true })).toMatchObject({
      ok: false,
      error: { code: 'invalid', fields: { prompt: 'The prompt is empty.' } },
    });
    expect(service.generate(id, { prompt: 5 }, new AbortController().signal)).toMatchObject({ ok: false, error: { fields: { prompt: 'prompt must be a string' } } });
  });

  it('a failure inside Easel while a turn starts ends it with internal_error, logged, and frees the conversation', async () => {
    const { service, logs } = await setUp({
      store: (real) => ({
        ...real,
        beginTurn: () => {
          throw new TypeError('a bug');
        },
      }),
    });
    const id = newConversationId(service);
    const sent = service.sendMessage(id, 'hi', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const events = await collectAll(sent.value);
    expect(events).toEqual([
      { type: 'error', code: 'internal_error', message: 'Something went wrong inside Easel while answering; the details are in the server log. Press Retry.' },
      { type: 'done', attempts: 0, repairs: [], level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null },
    ]);
    expect(logs).toContain(`ERROR turn failed unexpectedly {"conversationId":"${id}","error":{"name":"TypeError","message":"a bug"}}`);
    expect(service.isBusy(id)).toBe(false);
  });

  it('a conversation deleted before its turn starts sends nothing and says so', async () => {
    let reads = 0;
    const { service, fake } = await setUp({
      store: (real) => ({
        ...real,
        // The second read is the turn's own, after the send was accepted: the conversation is gone by then.
        getConversation: (id: string) => (++reads === 2 ? undefined : real.getConversation(id)),
      }),
    });
    const id = newConversationId(service);
    reads = 0;
    const sent = service.sendMessage(id, 'hi', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    expect((await collectAll(sent.value))[0]).toEqual({
      type: 'error',
      code: 'not_found',
      message: 'This conversation was deleted; your message was not sent. Start a new conversation.',
    });
    expect(fake.chatRequests()).toHaveLength(0);
  });
});

describe('shutdown and a delete wait for the work they stop', () => {
  /** A backend that, like A1111 finishing its current image when the client has gone, delivers it a little later. */
  function finishesAnywayBackend(finishMs: number, started: () => void): ImageBackend {
    return {
      name: 'a1111',
      url: 'http://127.0.0.1:7860',
      generate: async () => {
        started();
        await new Promise((resolve) => setTimeout(resolve, finishMs));
        return { png };
      },
      checkHealth: async () => ({ reachable: true, detail: 'ready' }),
    };
  }

  it('shutdown returns only once a running reply has stored its outcome', async () => {
    const { service, fake } = await setUp();
    const id = newConversationId(service);
    fake.enqueue({ chunks: ['Half a ', 'thought'], gate: new Promise<void>(() => {}) });
    const sent = service.sendMessage(id, 'a cat', new AbortController().signal);
    if (!sent.ok) throw new Error(sent.error.message);
    const iterator = sent.value[Symbol.asyncIterator]();
    for (let step = await iterator.next(); !step.done; step = await iterator.next()) if (step.value.type === 'delta') break;
    await service.shutdown();
    expect(service.getConversation(id)?.turns.at(-1)).toMatchObject({ role: 'assistant', status: 'stopped' });
    expect(service.isBusy(id)).toBe(false);
    expect((await collectAll({ [Symbol.asyncIterator]: () => iterator })).at(-1)).toMatchObject({ type: 'done', level: 'stopped' });
  });

  it('shutdown gives up waiting after its limit when a backend never settles', async () => {
    const backend: ImageBackend = {
      name: 'a1111',
      url: 'http://127.0.0.1:7860',
      generate: () => new Promise(() => {}),
      checkHealth: async () => ({ reachable: true, detail: 'ready' }),
    };
    const { service } = await setUp({ backend, shutdownWaitMs: 50 });
    const id = newConversationId(service);
    const started = service.generate(id, { prompt: 'a fox' }, new AbortController().signal);
    expect(started.ok).toBe(true);
    const before = Date.now();
    await service.shutdown();
    expect(Date.now() - before).toBeLessThan(2000);
  });

  it('a delete waits until its images have stopped, so none writes into the deleted conversation', async () => {
    let startedImage!: () => void;
    const imageStarted = new Promise<void>((resolve) => (startedImage = resolve));
    const { service, logs, store, dir } = await setUp({ backend: finishesAnywayBackend(30, () => startedImage()) });
    const id = newConversationId(service);
    const started = service.generate(id, { prompt: 'a fox' }, new AbortController().signal);
    if (!started.ok) throw new Error(started.error.message);
    const reading = collectAll(started.value);
    await imageStarted;
    const deleting = service.deleteConversation(id);
    // While it waits for the image, the library no longer lists it.
    expect(service.listConversations().map((listing) => listing.id)).toEqual([]);
    expect(await deleting).toEqual({ ok: true, value: undefined });
    await reading;
    expect(store.getConversation(id)).toBeUndefined();
    expect(readdirSync(dir).filter((name) => name.endsWith('.png'))).toEqual([]);
    expect(logs.filter((line) => line.startsWith('ERROR') || line.startsWith('WARN'))).toEqual([]);
  });
});
