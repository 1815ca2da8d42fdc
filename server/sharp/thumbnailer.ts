// The Thumbnailer on sharp (libvips): each picture's thumbnail is made once, kept as `<image id>.webp` in a folder
// beside the images folder (DATA_DIR/thumbs: the images folder holds the PNGs alone), and read back from there after. sharp works on libuv's thread pool, never on the event loop;
// at most `concurrency` thumbnails are made at once, so a page of sixty new ones does not take every core.
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isImageId, THUMBNAIL_MAX_SIDE, type Logger, type Result, type Thumbnailer } from '../core/index.ts';
import { isImageFileName, readErrorCode, writeFileAtomically } from '../util/index.ts';

type Sharp = (typeof import('sharp'))['default'];

/** What a thumbnail may weigh: one over it (a very busy picture) is made again at a lower quality. */
export const THUMBNAIL_MAX_BYTES = 40 * 1024;
/** WebP quality: a 384-pixel thumbnail of a typical 1024² picture is ~15 kB at 75. */
const QUALITY = 75;
/** libvips' WebP effort (0–6, default 4): at 2 the encoding takes a third of the time, for ~4 % more bytes. */
const EFFORT = 2;
const FALLBACK_QUALITY = 45;
/** The default of --max-image-pixels (checkPngImage's): no larger picture is ever stored. */
const DEFAULT_MAX_PIXELS = 8192 * 8192;

export interface ThumbnailerOptions {
  /** Where the PNGs are (DATA_DIR/images). */
  imagesDir: string;
  /** Where the thumbnails are kept (DATA_DIR/thumbs), made when the first one is written; its parent must exist. */
  thumbsDir: string;
  logger: Logger;
  /** The most pixels a picture read may have (--max-image-pixels). */
  maxPixels?: number;
  /** At most this many are made at once; default 2. */
  concurrency?: number;
}

export interface SharpThumbnailer extends Thumbnailer {
  /** Resolves once every thumbnail being made now is made (or given up): shutdown waits for it before the data goes. */
  settled(): Promise<void>;
}

interface Job {
  /** Callers waiting for it; one without a signal never stops waiting. None left before it starts: it is not made. */
  waiters: number;
  /** It will never run (every caller left before its turn): a caller that comes now starts another. */
  dropped: boolean;
  result: Promise<Result<Uint8Array>>;
}

const ok = (bytes: Uint8Array): Result<Uint8Array> => ({ ok: true, value: bytes });
const refused = (code: 'not_found' | 'invalid' | 'unavailable', message: string): Result<Uint8Array> => ({ ok: false, error: { code, message } });

export function createThumbnailer(options: ThumbnailerOptions): SharpThumbnailer {
  const { imagesDir, thumbsDir, logger } = options;
  const maxPixels = options.maxPixels ?? DEFAULT_MAX_PIXELS;
  const limit = createLimit(options.concurrency ?? 2);
  const making = new Map<string, Job>();
  // Loaded at the first thumbnail, not at start: libvips is megabytes that a chat-only session never needs.
  let loaded: Promise<Sharp> | undefined;
  const loadSharp = () =>
    (loaded ??= import('sharp').then(({ default: sharp }) => {
      // No operation cache (each picture is read once) and one libvips thread per thumbnail: the pool runs two.
      sharp.cache(false);
      sharp.concurrency(1);
      return sharp;
    }));

  const pathOf = (id: string) => join(thumbsDir, `${id}.webp`);

  async function make(imageFile: string, id: string): Promise<Result<Uint8Array>> {
    let png: Buffer;
    try {
      png = await readFile(join(imagesDir, imageFile));
    } catch (error) {
      if (readErrorCode(error) === 'ENOENT') return refused('not_found', `The image file ${imageFile} is gone from ${imagesDir}, so it has no thumbnail.`);
      logger.warn('an image could not be read for its thumbnail', { file: imageFile, error });
      return refused('invalid', `The image file ${imageFile} could not be read (${readErrorCode(error) ?? 'unknown error'}), so it has no thumbnail.`);
    }
    let webp: Buffer;
    try {
      const sharp = await loadSharp();
      const encode = (quality: number) =>
        sharp(png, { limitInputPixels: maxPixels, failOn: 'error' })
          .resize({ width: THUMBNAIL_MAX_SIDE, height: THUMBNAIL_MAX_SIDE, fit: 'inside', withoutEnlargement: true })
          .webp({ quality, effort: EFFORT })
          .toBuffer();
      webp = await encode(QUALITY);
      if (webp.length > THUMBNAIL_MAX_BYTES) webp = await encode(FALLBACK_QUALITY);
    } catch (error) {
      logger.warn('a thumbnail could not be made', { file: imageFile, error });
      const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
      return refused('invalid', `The image file ${imageFile} cannot be read as a picture (${reason}), so it has no thumbnail.`);
    }
    try {
      // The thumbs folder only: the data folder itself must exist (one removed meanwhile is not made again).
      await mkdir(thumbsDir).catch((error: unknown) => {
        if (readErrorCode(error) !== 'EEXIST') throw error;
      });
      await writeFileAtomically(pathOf(id), webp);
    } catch (error) {
      // Served anyway; it is made again next time.
      logger.warn('a thumbnail could not be kept', { imageId: id, error });
    }
    return ok(new Uint8Array(webp));
  }

  /** A new job, its first caller waiting already (so that it is not dropped before that caller counts), queued for its turn. */
  function startJob(imageFile: string, id: string, signal: AbortSignal | undefined): Promise<Result<Uint8Array>> {
    let settle!: (result: Result<Uint8Array>) => void;
    const job: Job = { waiters: 0, dropped: false, result: new Promise((resolve) => (settle = resolve)) };
    making.set(id, job);
    const waited = wait(job, signal);
    void limit(async () => {
      if (job.waiters === 0) {
        job.dropped = true;
        return refused('unavailable', 'The thumbnail was not made: nobody waits for it any more.');
      }
      return make(imageFile, id);
    })
      .then(settle, (error: unknown) => settle(refused('invalid', `The thumbnail could not be made: ${String(error)}`)))
      .finally(() => {
        if (making.get(id) === job) making.delete(id);
      });
    return waited;
  }

  function wait(job: Job, signal: AbortSignal | undefined): Promise<Result<Uint8Array>> {
    job.waiters++;
    if (!signal) return job.result;
    const gone = () => refused('unavailable', 'The thumbnail is no longer awaited.');
    if (signal.aborted) {
      job.waiters--;
      return Promise.resolve(gone());
    }
    return new Promise((resolve) => {
      const onAbort = () => {
        job.waiters--;
        resolve(gone());
      };
      signal.addEventListener('abort', onAbort, { once: true });
      void job.result.then((result) => {
        signal.removeEventListener('abort', onAbort);
        resolve(result);
      });
    });
  }

  return {
    async ensure(imageFile, id, signal) {
      if (!isImageId(id) || !isImageFileName(imageFile)) return refused('not_found', `There is no image ${JSON.stringify(id)} with a thumbnail.`);
      const running = making.get(id);
      if (running && !running.dropped) return wait(running, signal);
      const kept = await readFile(pathOf(id)).catch(() => undefined);
      if (kept) return ok(new Uint8Array(kept));
      // Another caller may have started it while the file was looked for.
      const started = making.get(id);
      return started && !started.dropped ? wait(started, signal) : startJob(imageFile, id, signal);
    },

    async remove(id) {
      if (!isImageId(id)) return;
      // One being made now is written first, then removed: never left behind.
      await making.get(id)?.result;
      await rm(pathOf(id), { force: true });
    },

    async settled() {
      while (making.size > 0) await Promise.all([...making.values()].map((job) => job.result));
    },
  };
}

/** Runs at most `max` pieces of work at once; the rest wait their turn, in order. */
function createLimit(max: number): <T>(work: () => Promise<T>) => Promise<T> {
  let active = 0;
  const queue: Array<() => void> = [];
  return async (work) => {
    // A slot is taken now, or handed over by the work that ends (so none is taken twice).
    if (active < max) active++;
    else await new Promise<void>((resolve) => queue.push(resolve));
    try {
      return await work();
    } finally {
      const next = queue.shift();
      if (next) next();
      else active--;
    }
  };
}
