// Checks that a PNG really holds the picture its header promises, before anything is written:
// sane dimensions, a valid IHDR, and IDAT that inflates to exactly the bytes the header implies.
// Inflating streams and stops at the first byte too many, so a zlib bomb costs nothing.
import { createInflate } from 'node:zlib';
import { readPngChunks } from './chunks.ts';
import type { PngChunk, PngResult } from './chunks.ts';

/** The largest width or height accepted: beyond any Stable Diffusion output, and it bounds the inflate work. */
export const MAX_PNG_SIDE = 16_384;

/**
 * The most pixels accepted unless told otherwise (--max-image-pixels): a 2 MB PNG within the per-side cap may
 * still hold 16384×16384 16-bit RGBA, 2 GiB to inflate; the pixel count is read from IHDR before any of it is.
 */
export const DEFAULT_MAX_PNG_PIXELS = 8192 * 8192;

export interface CheckPngOptions {
  /** The most pixels (width × height) accepted; default DEFAULT_MAX_PNG_PIXELS. */
  maxPixels?: number;
}

export interface PngImageInfo {
  width: number;
  height: number;
  bitDepth: number;
  colorType: number;
  interlaced: boolean;
}

// Colour type → [samples per pixel, allowed bit depths] (PNG spec, table 11.1).
const COLOR_TYPES: ReadonlyMap<number, readonly [number, readonly number[]]> = new Map([
  [0, [1, [1, 2, 4, 8, 16]]],
  [2, [3, [8, 16]]],
  [3, [1, [1, 2, 4, 8]]],
  [4, [2, [8, 16]]],
  [6, [4, [8, 16]]],
]);

// Adam7: [first column, first row, column step, row step] of each of the seven passes.
const ADAM7: readonly (readonly [number, number, number, number])[] = [
  [0, 0, 8, 8],
  [4, 0, 8, 8],
  [0, 4, 4, 8],
  [2, 0, 4, 4],
  [0, 2, 2, 4],
  [1, 0, 2, 2],
  [0, 1, 1, 2],
];

function fail<T>(code: 'bad_header' | 'bad_dimensions' | 'bad_image_data', message: string): PngResult<T> {
  return { ok: false, error: { code, message } };
}

/** Bytes of one filtered scanline: the filter-type byte plus the packed samples. */
function scanlineBytes(width: number, bitsPerPixel: number): number {
  return 1 + Math.ceil((width * bitsPerPixel) / 8);
}

/** The exact length of the inflated IDAT stream for this header. Empty passes of Adam7 hold no bytes at all. */
export function expectedImageDataBytes(info: PngImageInfo): number {
  const samples = COLOR_TYPES.get(info.colorType)?.[0] ?? 0;
  const bitsPerPixel = samples * info.bitDepth;
  if (!info.interlaced) return info.height * scanlineBytes(info.width, bitsPerPixel);
  let total = 0;
  for (const [x0, y0, dx, dy] of ADAM7) {
    const passWidth = Math.ceil(Math.max(0, info.width - x0) / dx);
    const passHeight = Math.ceil(Math.max(0, info.height - y0) / dy);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: an empty pass adds 0 bytes, and the height is never negative (Math.max(0, …))
    if (passWidth > 0 && passHeight > 0) total += passHeight * scanlineBytes(passWidth, bitsPerPixel);
  }
  return total;
}

/** A pixel count for a person: "268 million", or every digit when that is needed to tell two counts apart. */
function formatPixels(count: number, other: number): string {
  const rounded = (n: number) => (n >= 1_000_000 ? `${Math.round(n / 1_000_000)} million` : String(n));
  return rounded(count) === rounded(other) ? String(count) : rounded(count);
}

function describePixelCap(width: number, height: number, maxPixels: number): string {
  const side = Math.sqrt(maxPixels);
  const square = Number.isInteger(side) ? ` (${side}×${side})` : '';
  const count = width * height;
  return `The PNG says it is ${width}×${height} pixels (${formatPixels(count, maxPixels)}), more than the ${formatPixels(maxPixels, count)}${square} Easel accepts; raise --max-image-pixels to allow it.`;
}

function readHeader(header: PngChunk, maxPixels: number): PngResult<PngImageInfo> {
  const view = new DataView(header.data.buffer, header.data.byteOffset, header.data.byteLength);
  const width = view.getUint32(0);
  const height = view.getUint32(4);
  const [bitDepth, colorType, compression, filter, interlace] = [8, 9, 10, 11, 12].map((index) => view.getUint8(index)) as [
    number,
    number,
    number,
    number,
    number,
  ];
  if (width === 0 || height === 0) {
    return fail('bad_dimensions', `The PNG says it is ${width}×${height} pixels; an image needs at least one pixel each way.`);
  }
  if (width > MAX_PNG_SIDE || height > MAX_PNG_SIDE) {
    return fail('bad_dimensions', `The PNG says it is ${width}×${height} pixels, more than the ${MAX_PNG_SIDE} per side Easel accepts.`);
  }
  if (width * height > maxPixels) return fail('bad_dimensions', describePixelCap(width, height, maxPixels));
  const colour = COLOR_TYPES.get(colorType);
  if (colour === undefined) return fail('bad_header', `The PNG header names colour type ${colorType}, which PNG does not define; the file is damaged.`);
  if (!colour[1].includes(bitDepth)) {
    return fail('bad_header', `The PNG header pairs colour type ${colorType} with bit depth ${bitDepth}, which PNG does not allow; the file is damaged.`);
  }
  if (compression !== 0 || filter !== 0 || interlace > 1) {
    return fail('bad_header', 'The PNG header names a compression, filter or interlace method PNG does not define; the file is damaged.');
  }
  return { ok: true, value: { width, height, bitDepth, colorType, interlaced: interlace === 1 } };
}

/** Inflates the IDAT stream, counting bytes and stopping at the first one past `expected`. */
function inflateAndCount(idat: readonly Uint8Array[], expected: number): Promise<{ bytes: number; tooMany: boolean; error?: string }> {
  return new Promise((resolve) => {
    const inflate = createInflate({ chunkSize: 64 * 1024 });
    let bytes = 0;
    let settled = false;
    const finish = (result: { bytes: number; tooMany: boolean; error?: string }) => {
      // Stryker disable next-line ConditionalExpression: a second finish destroys the stream again and resolves a settled promise: the first result wins
      if (settled) return;
      // Stryker disable next-line BooleanLiteral: a second finish destroys the stream again and resolves a settled promise: the first result wins
      settled = true;
      inflate.destroy();
      resolve(result);
    };
    inflate.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > expected) finish({ bytes, tooMany: true });
    });
    // Stryker disable next-line BooleanLiteral: an error is read first, and a zlib error always has a message
    inflate.on('error', (error: Error) => finish({ bytes, tooMany: false, error: error.message }));
    inflate.on('end', () => finish({ bytes, tooMany: false }));
    for (const part of idat) inflate.write(part);
    inflate.end();
  });
}

/**
 * Checks a PNG for real: chunk structure and every CRC (readPngChunks), a valid IHDR with 1…16384 pixels
 * per side and at most `maxPixels` in all (nothing is inflated before), a palette where one is needed,
 * consecutive IDAT chunks, and image data that inflates to exactly the size the header promises (Adam7
 * interlacing included). Never throws.
 */
export async function checkPngImage(png: Uint8Array, options: CheckPngOptions = {}): Promise<PngResult<PngImageInfo>> {
  const chunks = readPngChunks(png);
  if (!chunks.ok) return chunks;
  const header = chunks.value[0];
  // Stryker disable next-line StringLiteral: unreachable: the first chunk is always IHDR after readPngChunks succeeds
  if (header === undefined) return fail('bad_header', 'The PNG has no IHDR chunk; the file is damaged.');
  const info = readHeader(header, options.maxPixels ?? DEFAULT_MAX_PNG_PIXELS);
  if (!info.ok) return info;

  const types = chunks.value.map((chunk) => chunk.type);
  const firstData = types.indexOf('IDAT');
  // Stryker disable next-line EqualityOperator: index 0 is always IHDR, so the first IDAT is at −1 or at least 1
  if (firstData < 0) return fail('bad_image_data', 'The PNG has no image data (no IDAT chunk); the file is incomplete.');
  const lastData = types.lastIndexOf('IDAT');
  if (types.slice(firstData, lastData + 1).some((type) => type !== 'IDAT')) {
    return fail('bad_image_data', 'The PNG has other chunks between its IDAT chunks, which PNG forbids; the file is damaged.');
  }
  if (info.value.colorType === 3 && !types.slice(0, firstData).includes('PLTE')) {
    return fail('bad_image_data', 'The PNG uses a palette but has no PLTE chunk before its image data; the file is damaged.');
  }

  const expected = expectedImageDataBytes(info.value);
  const idat = chunks.value.filter((chunk) => chunk.type === 'IDAT').map((chunk) => chunk.data);
  const inflated = await inflateAndCount(idat, expected);
  const size = `${info.value.width}×${info.value.height}${info.value.interlaced ? ' interlaced' : ''}`;
  if (inflated.error !== undefined) {
    return fail('bad_image_data', `The PNG's image data does not decompress (${inflated.error}); the file is damaged or cut short.`);
  }
  if (inflated.tooMany) {
    return fail('bad_image_data', `The PNG's image data holds more than the ${expected} bytes its ${size} header promises; the file is damaged.`);
  }
  if (inflated.bytes !== expected) {
    return fail('bad_image_data', `The PNG's image data holds ${inflated.bytes} bytes where its ${size} header promises ${expected}; the image is cut short or damaged.`);
  }
  return info;
}
