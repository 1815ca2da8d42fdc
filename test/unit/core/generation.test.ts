// The image generator with the real AUTOMATIC1111 adapter against the fake, a real SQLite store, and a
// saveFile that writes through writeFileAtomically into a temp dir (failures injected at the fs level).
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { createImageGenerator, DEFAULT_SETTINGS, silentLogger } from '../../../server/core/index.ts';
import { createSqliteStore } from '../../../server/sqlite/index.ts';
import { writeFileAtomically, type AtomicWriteFs } from '../../../server/util/index.ts';
import { createFakeA1111, type FakeA1111Options } from '../../fakes/fake-a1111.ts';
import { createFakeLocalAi } from '../../fakes/fake-localai.ts';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import type { SeedRange } from '../../../server/core/index.ts';
import { collectAll, makeErrnoError } from '../../helpers/streams.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(options: { a1111?: FakeA1111Options; io?: AtomicWriteFs } = {}) {
  const a1111 = await createFakeA1111({ stepDelayMs: 5, ...options.a1111 });
  cleanups.push(() => a1111.close());
  const dir = mkdtempSync(join(tmpdir(), 'easel-generation-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const imagesDir = join(dir, 'images');
  await fs.mkdir(imagesDir);
  const store = createSqliteStore({ path: join(dir, 'easel.db') });
  cleanups.push(() => store.close());
  store.createConversation({ id: 'c1', createdAt: new Date().toISOString(), settings: DEFAULT_SETTINGS });
  const images = createImageGenerator({
    backend: createA1111Backend({ url: a1111.url, pollIntervalMs: 20 }),
    store,
    logger: silentLogger,
    clock: Date,
    saveFile: (name, bytes) => writeFileAtomically(join(imagesDir, name), bytes, options.io),
    imagesDir,
  });
  return { a1111, images, store, imagesDir };
}

function input(signal = new AbortController().signal, steps = 4) {
  return { conversationId: 'c1', turnId: null, prompt: 'a fox', settings: { ...DEFAULT_SETTINGS, steps }, promptVersion: null, signal };
}

describe('saving the finished image', () => {
  it('a full disk: image_disk_full says to free space; no file and no record are left', async () => {
    const diskFull: AtomicWriteFs = {
      rename: fs.rename,
      rm: fs.rm,
      async open(path, flags) {
        const handle = await fs.open(path, flags);
        // The first half reaches the temporary file, then the disk is full.
        return Object.assign(Object.create(handle) as fs.FileHandle, {
          writeFile: async (bytes: Uint8Array) => {
            await handle.writeFile(bytes.subarray(0, bytes.length >> 1));
            throw makeErrnoError('ENOSPC');
          },
          close: () => handle.close(),
        });
      },
    };
    const { images, store, imagesDir } = await setUp({ io: diskFull });
    const events = await collectAll(images.generate(input()));
    expect(events.at(-1)).toEqual({
      type: 'error',
      code: 'image_disk_full',
      message: expect.stringMatching(/could not be saved: the disk holding .*images is full \(ENOSPC\), and nothing was written\. Free some disk space/),
    });
    expect(readdirSync(imagesDir)).toEqual([]);
    expect(store.listImages('c1')).toEqual([]);
  });

  it('a read-only disk: image_save_failed names the folder and says to check permissions', async () => {
    const readOnly: AtomicWriteFs = { open: () => Promise.reject(makeErrnoError('EROFS')), rename: fs.rename, rm: fs.rm };
    const { images, imagesDir } = await setUp({ io: readOnly });
    const events = await collectAll(images.generate(input()));
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'image_save_failed', message: expect.stringContaining(`${imagesDir} (EROFS)`) });
    expect(String((events.at(-1) as { message: string }).message)).toContain('Easel may write to it');
    expect(readdirSync(imagesDir)).toEqual([]);
  });
});

describe('the queue', () => {
  it('a generation nobody reads any more is interrupted, and the next one waits until it has settled', async () => {
    const { a1111, images } = await setUp({ a1111: { stepDelayMs: 30, interruptDelayMs: 200 } });
    const first = images.generate(input(undefined, 40));
    for (let next = await first.next(); !next.done && next.value.type !== 'progress'; next = await first.next());
    // The caller walks away without aborting its signal (e.g. a renderer that stopped iterating).
    await first.return(undefined);
    const second = await collectAll(images.generate(input(undefined, 2)));
    expect(second.map((event) => event.type)).toContain('image');
    expect(a1111.interrupts).toBe(1);
    expect(a1111.maxConcurrentTxt2Img).toBe(1);
    // The first job settles when its interrupt is answered; only then may the second reach the backend.
    const interrupt = a1111.requests.find((r) => r.path === '/sdapi/v1/interrupt')!;
    const secondTxt2Img = a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img')[1]!;
    expect(secondTxt2Img.at - interrupt.at).toBeGreaterThanOrEqual(190);
    await images.settled();
  });
});

describe('seeds and the backend that takes them', () => {
  it("draws a random seed inside the backend's own range (LocalAI: 1 to 2147483647), the full range otherwise", async () => {
    const localai = await createFakeLocalAi();
    cleanups.push(() => localai.close());
    const dir = mkdtempSync(join(tmpdir(), 'easel-generation-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const store = createSqliteStore({ path: ':memory:' });
    cleanups.push(() => store.close());
    store.createConversation({ id: 'c1', createdAt: new Date().toISOString(), settings: DEFAULT_SETTINGS });
    const ranges: SeedRange[] = [];
    const generatorWith = (backend: ReturnType<typeof createOpenAiImagesBackend>) =>
      createImageGenerator({
        backend,
        store,
        logger: silentLogger,
        clock: Date,
        saveFile: (name, bytes) => writeFileAtomically(join(dir, name), bytes),
        randomSeed: (range) => {
          ranges.push(range);
          return range.max;
        },
      });
    const events = await collectAll(generatorWith(createOpenAiImagesBackend({ url: localai.url, dialect: 'localai' })).generate(input()));
    expect(events.at(-1)).toMatchObject({ type: 'image', seed: 2_147_483_647 });
    expect(localai.runs[0]).toMatchObject({ seedUsed: 2_147_483_647, random: false });
    await collectAll(generatorWith(createOpenAiImagesBackend({ url: localai.url })).generate(input()));
    expect(ranges).toEqual([{ min: 1, max: 2_147_483_647 }, { min: 0, max: 4_294_967_295 }]);
  });
});
