// The ImageConverter (server/core/reference-commands.ts) on sharp: a reference image the user brings (PNG, JPEG or
// WebP) made a PNG on libuv's thread pool, never on the event loop. The size is read from the header first, so a
// picture of more pixels than allowed is refused before any of it is decoded.
import type { ConvertedImage, ImageConverter, Logger } from '../core/index.ts';

type Sharp = (typeof import('sharp'))['default'];

export function createImageConverter(options: { logger: Logger }): ImageConverter {
  // Loaded at the first reference, not at start: libvips is megabytes that a chat-only session never needs.
  let loaded: Promise<Sharp> | undefined;
  const loadSharp = () => (loaded ??= import('sharp').then(({ default: sharp }) => sharp));
  return {
    async toPng(bytes, { maxPixels }): Promise<ConvertedImage> {
      const sharp = await loadSharp();
      try {
        // limitInputPixels: false here: the header alone is read, and the count is said in Easel's words below.
        const meta = await sharp(bytes, { limitInputPixels: false }).metadata();
        const width = meta.autoOrient?.width ?? meta.width;
        const height = meta.autoOrient?.height ?? meta.height;
        if (!width || !height) return { ok: false, reason: 'unreadable', detail: 'it has no size' };
        if (width * height > maxPixels) return { ok: false, reason: 'too_many_pixels', width, height };
        const { data, info } = await sharp(bytes, { limitInputPixels: maxPixels, failOn: 'error' })
          .rotate() // the EXIF orientation applied: the picture as the user sees it
          .png()
          .toBuffer({ resolveWithObject: true });
        return { ok: true, png: new Uint8Array(data), width: info.width, height: info.height };
      } catch (error) {
        options.logger.warn('a reference image could not be read', { error });
        const detail = error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
        return { ok: false, reason: 'unreadable', detail };
      }
    },
  };
}
