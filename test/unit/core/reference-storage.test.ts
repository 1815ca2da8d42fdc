// Where a reference picture is kept, through the service with its real store, images folder and converter: a
// file that cannot be written or a record the store refuses leaves nothing behind and says what to do (logged
// with the conversation), a thumbnail not made is logged with the image, and a picture sent "to create" a
// conversation makes it with an empty prompt (the library told), or joins it when it exists by then.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { silentLogger, StorageError, type Thumbnailer } from '../../../server/core/index.ts';
import { createImageConverter, createThumbnailer } from '../../../server/sharp/index.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { recordLog } from '../../helpers/log-entries.ts';
import { buildService, failingStore, newConversationId, type TestServiceOptions } from '../../helpers/service.ts';
import { makeErrnoError } from '../../helpers/streams.ts';

/** The service on a new images folder; `thumbnailsIn` makes its thumbnailer for that folder. */
function setUp(options: Omit<TestServiceOptions, 'imagesDir' | 'logger' | 'converter' | 'thumbnails'> = {}, thumbnailsIn?: (imagesDir: string) => Thumbnailer) {
  const dir = mkdtempSync(join(tmpdir(), 'easel-reference-storage-'));
  const { logger, entries: logs } = recordLog();
  const converter = createImageConverter({ logger: silentLogger });
  const built = buildService({ imagesDir: dir, logger, converter, ...options, ...(thumbnailsIn ? { thumbnails: thumbnailsIn(dir) } : {}) });
  onTestFinished(() => {
    built.realStore.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { ...built, dir, logs, id: newConversationId(built.service) };
}

describe('a reference picture that cannot be stored', () => {
  it('a file the images folder refuses: nothing stored, the user told to check the data folder, the failure logged with the conversation', async () => {
    const { service, dir, logs, id } = setUp({
      wrapImageFiles: (real) => ({
        ...real,
        save: () => Promise.reject(makeErrnoError('ENOSPC')),
      }),
    });
    const refused = await service.addReference(id, makePng(8, 8), 'image/png');
    expect(refused.ok ? 'added' : refused.error.code).toBe('storage');
    expect(refused.ok ? '' : refused.error.message).toContain('could not be written to the images folder');
    expect(refused.ok ? '' : refused.error.message).toContain('--data-dir');
    expect(service.getConversation(id)?.images).toEqual([]);
    expect(readdirSync(dir)).toEqual([]);
    const logged = logs.filter((event) => event.message === 'a reference image could not be written');
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 'error', fields: { conversationId: id, error: expect.objectContaining({ code: 'ENOSPC' }) } });
  });

  it('a record the store refuses: the file written is removed again, and the refusal is the store\'s', async () => {
    const { service, dir, id } = setUp({
      wrapStore: (real) => failingStore(real, 'addImage', new StorageError('full', 'SQLITE_FULL', { location: '/data/easel.db' })),
    });
    const refused = await service.addReference(id, makePng(8, 8), 'image/png');
    expect(refused.ok ? 'added' : refused.error.code).toBe('storage');
    expect(refused.ok ? '' : refused.error.message).toContain('is full');
    // No record, no file: the library would never show nor delete it.
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('the thumbnail of a reference picture', () => {
  it('one that cannot be made is logged with the image and why', async () => {
    // The picture deleted before its thumbnail is made (the conversation deleted at once): the real thumbnailer finds no PNG.
    const { service, logs, id } = setUp({}, (imagesDir) => {
      const real = createThumbnailer({ imagesDir, thumbsDir: join(imagesDir, 'thumbs'), logger: silentLogger });
      return {
        ensure: async (file, imageId, signal) => {
          rmSync(join(imagesDir, file), { force: true });
          return real.ensure(file, imageId, signal);
        },
        remove: (imageId) => real.remove(imageId),
      };
    });
    const added = await service.addReference(id, makePng(8, 8), 'image/png');
    if (!added.ok) throw new Error(added.error.message);
    await vi.waitFor(() => expect(logs.filter((event) => event.message === 'no thumbnail was made for a reference image')).toHaveLength(1));
    expect(logs.find((event) => event.message === 'no thumbnail was made for a reference image')).toMatchObject({
      level: 'warn',
      fields: { imageId: added.value.id, reason: expect.stringContaining('is gone') },
    });
  });
});

describe('a picture sent to create its conversation', () => {
  it('joins the conversation when it exists by then, as the page\'s second picture does', async () => {
    const { service, id } = setUp();
    const added = await service.addReference(id, makePng(8, 8), 'image/png', { create: true });
    expect(added.ok ? 'added' : added.error.message).toBe('added');
    expect(service.getConversation(id)?.images).toHaveLength(1);
  });

  it('makes it with an empty prompt, and tells the library it was created', async () => {
    const { service } = setUp();
    const library = service.followLibrary().entries[Symbol.asyncIterator]();
    const id = '0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c';
    const added = await service.addReference(id, makePng(8, 8), 'image/png', { create: true });
    expect(added.ok ? 'added' : added.error.message).toBe('added');
    expect(service.getConversation(id)?.prompt).toBe('');
    expect((await library.next()).value?.event).toMatchObject({ type: 'created', conversation: { id } });
    await library.return?.();
  });

  it('two pictures dropped at the same moment on the empty page make one conversation holding both', async () => {
    // Each is converted before the conversation is made, so the second finds it made by the first meanwhile.
    const { service } = setUp();
    const id = '0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c';
    const added = await Promise.all([1, 2].map(() => service.addReference(id, makePng(8, 8), 'image/png', { create: true })));
    expect(added.map((result) => (result.ok ? 'added' : result.error.message))).toEqual(['added', 'added']);
    expect(service.getConversation(id)?.images).toHaveLength(2);
  });

  it('is refused when the new conversation\'s id is not one Easel makes, and nothing is stored', async () => {
    const { service, dir } = setUp();
    const refused = await service.addReference('not-an-id', makePng(8, 8), 'image/png', { create: true });
    expect(refused.ok ? 'added' : refused.error.message).toContain('This new conversation has no valid id');
    expect(readdirSync(dir)).toEqual([]);
  });
});
