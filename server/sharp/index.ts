// The Thumbnailer (server/core/thumbnails.ts) on sharp: the gallery's thumbnails, made off the event loop.
export { createThumbnailer, THUMBNAIL_MAX_BYTES, type SharpThumbnailer, type ThumbnailerOptions } from './thumbnailer.ts';
