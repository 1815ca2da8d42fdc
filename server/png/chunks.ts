import { crc32 } from 'node:zlib';

export const PNG_SIGNATURE: Uint8Array = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);

export interface PngChunk {
  /** Four ASCII letters, e.g. 'IHDR', 'tEXt'. */
  type: string;
  data: Uint8Array;
}

export type PngErrorCode =
  | 'not_png' // the signature is missing: JPEG, WebP, HTML error page…
  | 'truncated' // the bytes end in the middle of a chunk or before IEND
  | 'bad_crc' // a chunk's checksum does not match its contents
  | 'bad_structure' // IHDR is not first, a chunk type is not four letters, …
  | 'invalid_keyword' // a text keyword PNG does not allow
  | 'invalid_text' // text PNG cannot store (a NUL character)
  | 'bad_header' // IHDR names a colour type, bit depth or method PNG does not define
  | 'bad_dimensions' // 0 pixels, or more than MAX_PNG_SIDE, on a side
  | 'bad_image_data'; // IDAT missing, split, or not inflating to the size IHDR promises

export type PngResult<T> =
  | { ok: true; value: T }
  | { ok: false; error: { code: PngErrorCode; message: string } };

/** Thrown by functions that return bytes directly (writePngText) when given bytes that are not a PNG. */
export class PngError extends Error {
  override readonly name = 'PngError';
  readonly code: PngErrorCode;
  constructor(code: PngErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export function isPngError(error: unknown): error is PngError {
  return error instanceof PngError;
}

export function hasPngSignature(bytes: Uint8Array): boolean {
  // Stryker disable next-line ConditionalExpression: the every() after it reads a byte past the end as undefined, which equals no signature byte
  if (bytes.length < PNG_SIGNATURE.length) return false;
  return PNG_SIGNATURE.every((byte, index) => bytes[index] === byte);
}

/** Names the format of non-PNG bytes so error messages can say what arrived instead. */
export function describeImageBytes(bytes: Uint8Array): string {
  if (hasPngSignature(bytes)) return 'PNG';
  if (bytes[0] === 0xff && bytes[1] === 0xd8) return 'JPEG';
  const head = Buffer.from(bytes.subarray(0, 12)).toString('latin1');
  if (head.startsWith('RIFF') && head.slice(8, 12) === 'WEBP') return 'WebP';
  if (head.startsWith('GIF8')) return 'GIF';
  if (/^\s*[<{[]/.test(head)) return 'text (HTML or JSON)';
  return bytes.length === 0 ? 'nothing (0 bytes)' : 'unknown data';
}

function fail<T>(code: PngErrorCode, message: string): PngResult<T> {
  return { ok: false, error: { code, message } };
}

const CHUNK_TYPE = /^[A-Za-z]{4}$/;

/** Splits a PNG into chunks, checking the signature, every CRC and that it runs IHDR … IEND. */
export function readPngChunks(png: Uint8Array): PngResult<PngChunk[]> {
  if (!hasPngSignature(png)) {
    return fail(
      'not_png',
      `These bytes are not a PNG (they look like ${describeImageBytes(png)}); the image backend must return PNG images.`,
    );
  }
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const chunks: PngChunk[] = [];
  let offset = PNG_SIGNATURE.length;
  while (offset < png.length) {
    if (offset + 12 > png.length) {
      return fail('truncated', `The PNG is cut off at byte ${offset} of ${png.length}; the file is incomplete, generate or download it again.`);
    }
    const length = view.getUint32(offset);
    const type = Buffer.from(png.subarray(offset + 4, offset + 8)).toString('latin1');
    if (!CHUNK_TYPE.test(type)) {
      return fail('bad_structure', `The PNG has a malformed chunk at byte ${offset}; the file is damaged.`);
    }
    if (length > 0x7fffffff) {
      // PNG caps a chunk at 2^31−1 bytes: a larger length is damage, whatever the file's size.
      return fail('bad_structure', `The PNG's ${type} chunk at byte ${offset} claims ${length} bytes, more than PNG allows; the file is damaged.`);
    }
    if (offset + 12 + length > png.length) {
      return fail('truncated', `The PNG's ${type} chunk at byte ${offset} runs past the end of the file; the file is incomplete.`);
    }
    const data = png.subarray(offset + 8, offset + 8 + length);
    const storedCrc = view.getUint32(offset + 8 + length);
    const actualCrc = crc32(png.subarray(offset + 4, offset + 8 + length));
    if (storedCrc !== actualCrc) {
      return fail('bad_crc', `The PNG's ${type} chunk at byte ${offset} fails its CRC check; the file is damaged.`);
    }
    if (chunks.length === 0 && (type !== 'IHDR' || length !== 13)) {
      return fail('bad_structure', 'The PNG does not start with an IHDR header chunk; the file is damaged.');
    }
    chunks.push({ type, data });
    offset += 12 + length;
    // Bytes after IEND are ignored, as browsers and image libraries do.
    if (type === 'IEND') return { ok: true, value: chunks };
  }
  return fail('truncated', 'The PNG has no IEND chunk; the file is incomplete, generate or download it again.');
}

/** Width and height from the IHDR chunk. */
export function readPngSize(png: Uint8Array): PngResult<{ width: number; height: number }> {
  const chunks = readPngChunks(png);
  if (!chunks.ok) return chunks;
  const header = chunks.value[0];
  // Stryker disable next-line StringLiteral: unreachable: readPngChunks succeeds only when the first chunk is a 13-byte IHDR
  if (header === undefined) return fail('bad_structure', 'The PNG has no IHDR chunk; the file is damaged.');
  const view = new DataView(header.data.buffer, header.data.byteOffset, header.data.byteLength);
  return { ok: true, value: { width: view.getUint32(0), height: view.getUint32(4) } };
}

/** Length, type, data and CRC of one chunk, ready to be concatenated. */
export function encodePngChunk(type: string, data: Uint8Array): Uint8Array {
  const bytes = new Uint8Array(12 + data.length);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, data.length);
  bytes.set(Buffer.from(type, 'latin1'), 4);
  bytes.set(data, 8);
  view.setUint32(8 + data.length, crc32(bytes.subarray(4, 8 + data.length)));
  return bytes;
}

export function encodePng(chunks: readonly PngChunk[]): Uint8Array {
  const parts = [PNG_SIGNATURE, ...chunks.map((chunk) => encodePngChunk(chunk.type, chunk.data))];
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return bytes;
}
