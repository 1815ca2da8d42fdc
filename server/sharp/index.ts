// The Thumbnailer (server/core/thumbnails.ts) on sharp: the gallery's thumbnails, made off the event loop; and the
// ImageConverter (server/core/reference-commands.ts): a reference image made a PNG.
export { createImageConverter } from './converter.ts';
export { createThumbnailer, THUMBNAIL_MAX_BYTES, type SharpThumbnailer, type ThumbnailerOptions } from './thumbnailer.ts';
