// PNG chunk reading/writing and AUTOMATIC1111-style "parameters" text, with no dependencies.
export {
  describeImageBytes,
  encodePng,
  encodePngChunk,
  hasPngSignature,
  isPngError,
  PNG_SIGNATURE,
  PngError,
  readPngChunks,
  readPngSize,
} from './chunks.ts';
export type { PngChunk, PngErrorCode, PngResult } from './chunks.ts';
export { checkPngImage, DEFAULT_MAX_PNG_PIXELS, expectedImageDataBytes, MAX_PNG_SIDE } from './check-image.ts';
export type { CheckPngOptions, PngImageInfo } from './check-image.ts';
export { readPngText, writePngText } from './text.ts';
export { addDenoisingStrength, formatA1111Parameters, parseA1111Parameters } from './a1111-parameters.ts';
export type { A1111Parameters, ParsedA1111Parameters } from './a1111-parameters.ts';
