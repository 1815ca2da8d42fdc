// Thumbnails: a small WebP of each picture, for the gallery, made once and kept beside the images. The core says
// what it needs (Thumbnailer); server/sharp/ makes them, off the event loop.
import type { ImageGenerator } from './generation.ts';
import type { Result } from './results.ts';

/** The long side of a thumbnail, at most, in pixels: a picture is made smaller, never larger. */
export const THUMBNAIL_MAX_SIDE = 384;

export interface Thumbnailer {
  /**
   * The thumbnail of the image stored as `imageFile` (its id `id`), as WebP bytes: made from the PNG the first
   * time it is asked for, kept, and read back after. Refused with `not_found` when the PNG is gone, `invalid` when
   * it cannot be read as a picture, `unavailable` when `signal` ended the wait before it was made.
   */
  ensure(imageFile: string, id: string, signal?: AbortSignal): Promise<Result<Uint8Array>>;
  /** Removes the image's thumbnail; one never made is not an error. */
  remove(id: string): Promise<void>;
}

/** Image ids (and so thumbnail names) are 128 random bits as hex, whoever made the image. */
const IMAGE_ID = /^[a-f0-9]{32}$/;

export function isImageId(value: string): boolean {
  return IMAGE_ID.test(value);
}

/** Where an image's thumbnail is served (by server/http/app.ts, for the page and the API alike). */
export function thumbnailUrl(imageId: string): string {
  return `/images/thumbs/${imageId}.webp`;
}

/** The size of the thumbnail of a `width` × `height` picture: its long side at most THUMBNAIL_MAX_SIDE, its shape kept. */
export function thumbnailSize(width: number, height: number): { width: number; height: number } {
  const scale = Math.min(1, THUMBNAIL_MAX_SIDE / Math.max(width, height, 1));
  return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
}

/**
 * The generator as it is, except that the images a generation saved are handed to `saved` (by id) when it ends:
 * their thumbnails are made then, not when the gallery first shows them. Every other member is the generator's own.
 */
export function withThumbnails(images: ImageGenerator, saved: (imageId: string) => void): ImageGenerator {
  async function* generate(...args: Parameters<ImageGenerator['generate']>): ReturnType<ImageGenerator['generate']> {
    // Made once the generation is over, not between a batch's images: the thumbnails' CPU does not slow the batch
    // (a batch of 8 through Easel stays within 5 % of the image server's own time: npm run bench -- --only batches).
    const made: string[] = [];
    try {
      for await (const event of images.generate(...args)) {
        if (event.type === 'image') made.push(event.id);
        yield event;
      }
    } finally {
      for (const id of made) saved(id);
    }
  }
  return new Proxy(images, {
    get(target, key) {
      if (key === 'generate') return generate;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
