// The gallery's commands where the whole server cannot reach: through the service (buildService: SQLite and the
// images folder in a temp dir, the real A1111 adapter against the fake, sharp's thumbnailer), with a store double
// only where the failure must be made. A limit neither a number nor text refused, a store that cannot be read when a new
// image's thumbnail is due (logged), an image another delete took first (not_found), and no thumbnailer at all.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../server/a1111/index.ts';
import { StorageError, type ConversationStore, type EaselService } from '../../server/core/index.ts';
import { createThumbnailer } from '../../server/sharp/index.ts';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { makeImageRecord } from '../helpers/records.ts';
import { recordLog } from '../helpers/log-entries.ts';
import { buildService, failingStore, newConversationId, type TestServiceOptions } from '../helpers/service.ts';
import { collectAll } from '../helpers/streams.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The service over a fresh data folder, its log kept as entries. */
function setUp(options: Omit<TestServiceOptions, 'logger' | 'dbPath' | 'imagesDir'> & { withThumbnails?: boolean } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'easel-gallery-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const imagesDir = join(dir, 'images');
  mkdirSync(imagesDir);
  const { logger, entries } = recordLog();
  const { withThumbnails, ...rest } = options;
  const thumbnails = withThumbnails ? createThumbnailer({ imagesDir, thumbsDir: join(dir, 'thumbs'), logger }) : undefined;
  const built = buildService({ ...rest, dbPath: join(dir, 'easel.db'), imagesDir, logger, ...(thumbnails ? { thumbnails } : {}) });
  cleanups.push(() => built.realStore.close());
  cleanups.push(() => built.service.shutdown());
  cleanups.push(() => thumbnails?.settled());
  return { ...built, entries };
}

/** An image of a new conversation, put in the store as a generation would: its id. */
function storeImage({ service, store }: { service: EaselService; store: ConversationStore }): string {
  const id = 'a'.repeat(32);
  store.addImage(makeImageRecord({ id, conversationId: newConversationId(service), file: `${id}.png`, url: `/images/${id}.png` }));
  return id;
}

describe('listGallery', () => {
  it('refuses a limit that is neither a number nor digits as text (a list, as a query parser may give)', () => {
    const { service } = setUp();
    expect(service.listGallery({ limit: 5 })).toMatchObject({ ok: true, value: { query: { limit: 5 } } });
    expect(service.listGallery({ limit: ['5'] })).toMatchObject({ ok: false, error: { code: 'invalid', fields: { limit: 'limit must be a whole number from 1 to 200.' } } });
  });
});

describe('a new image’s thumbnail', () => {
  it('is logged as not made, with the image’s id, when the store cannot be read at that moment', async () => {
    const a1111 = await createFakeA1111({ stepDelayMs: 1 });
    cleanups.push(() => a1111.close());
    const { service, entries } = setUp({
      backend: createA1111Backend({ url: a1111.url, pollIntervalMs: 20 }),
      withThumbnails: true,
      wrapStore: (real) => failingStore(real, 'getImage', new StorageError('failed', 'SQLITE_IOERR', { location: '/data/easel.db' })),
    });
    const started = service.generate(newConversationId(service), { prompt: 'a fox', settings: { steps: 1, width: 64, height: 64 } }, new AbortController().signal);
    if (!started.ok) throw new Error(started.error.message);
    const image = (await collectAll(started.value)).find((event) => event.type === 'image');
    expect(image).toBeDefined();
    const imageId = (image as { id: string }).id;
    await expect.poll(() => entries.filter((entry) => entry.message === 'no thumbnail was made for a new image')).toEqual([
      { level: 'warn', message: 'no thumbnail was made for a new image', fields: { imageId, error: expect.any(StorageError) } },
    ]);
  });
});

describe('deleteImage', () => {
  it('answers not_found when another delete took the image between its lookup and its delete', async () => {
    const built = setUp({
      // The record is gone by the time the store deletes it: the store finds nothing.
      wrapStore: (real) => ({
        ...real,
        deleteImage: (id) => {
          real.deleteImage(id);
          return real.deleteImage(id);
        },
      }),
    });
    const id = storeImage(built);
    expect(await built.service.deleteImage(id)).toEqual({ ok: false, error: { code: 'not_found', message: `There is no image "${id}": it was deleted, or the id is wrong.` } });
  });
});

describe('readThumbnail', () => {
  it('without a thumbnailer: unavailable, saying to open the image itself', async () => {
    const built = setUp();
    const id = storeImage(built);
    expect(await built.service.readThumbnail(id)).toEqual({ ok: false, error: { code: 'unavailable', message: 'This Easel makes no thumbnails; open the image itself.' } });
  });
});
