// The PNG tests' shared pieces: PNGs built chunk by chunk (any header field, any chunk order), and what a
// reading, a check or a write made of them.
import { deflateSync } from 'node:zlib';
import { expect } from 'vitest';
import { checkPngImage, encodePng, isPngError, readPngChunks } from '../../../server/png/index.ts';
import type { PngChunk } from '../../../server/png/index.ts';
import { computeCrc32 } from '../../fakes/png-bytes.ts';

export interface HeaderFields {
  bitDepth?: number;
  colorType?: number;
  compression?: number;
  filter?: number;
  interlace?: number;
}

/** An IHDR chunk with every field settable, including the ones assemblePng always writes as 0. */
export function header(width: number, height: number, fields: HeaderFields = {}): PngChunk {
  const data = Buffer.alloc(13);
  data.writeUInt32BE(width, 0);
  data.writeUInt32BE(height, 4);
  data[8] = fields.bitDepth ?? 8;
  data[9] = fields.colorType ?? 2;
  data[10] = fields.compression ?? 0;
  data[11] = fields.filter ?? 0;
  data[12] = fields.interlace ?? 0;
  return { type: 'IHDR', data };
}

export const IEND: PngChunk = { type: 'IEND', data: new Uint8Array(0) };

/** Deflated, all-zero scanlines of an 8-bit RGB image: exactly what a width × height header promises. */
export function rgbImageData(width: number, height: number): PngChunk {
  return { type: 'IDAT', data: deflateSync(Buffer.alloc(height * (1 + width * 3))) };
}

/** A chunk of `type` whose data is the parts one after another (strings as Latin-1). */
export function chunk(type: string, ...parts: (string | number[] | Uint8Array)[]): PngChunk {
  const data = Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'latin1') : Buffer.from(part))));
  return { type, data };
}

/** A valid 1×1 RGB PNG with `extra` chunks between IHDR and IDAT. */
export function pngWith(...extra: PngChunk[]): Uint8Array {
  return encodePng([header(1, 1), ...extra, rgbImageData(1, 1), IEND]);
}

export function bytes(latin1: string): Uint8Array {
  return new Uint8Array(Buffer.from(latin1, 'latin1'));
}

/** The chunk types of a PNG that must read, in order. */
export function chunkTypes(png: Uint8Array): string[] {
  const chunks = readPngChunks(png);
  if (!chunks.ok) throw new Error(chunks.error.message);
  return chunks.value.map((chunk) => chunk.type);
}

/** Checks every chunk CRC with the independent table implementation from the fakes. */
export function hasValidCrcs(png: Uint8Array): boolean {
  const bytes = Buffer.from(png);
  for (let offset = 8; offset < bytes.length; ) {
    const length = bytes.readUInt32BE(offset);
    if (computeCrc32(bytes.subarray(offset + 4, offset + 8 + length)) !== bytes.readUInt32BE(offset + 8 + length)) return false;
    offset += 12 + length;
  }
  return true;
}

export function thrownBy(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('nothing was thrown');
}

export function expectPngError(action: () => unknown, code: string): void {
  try {
    action();
  } catch (error) {
    expect(isPngError(error) ? error.code : String(error)).toBe(code);
    return;
  }
  throw new Error(`expected PngError ${code}, nothing was thrown`);
}

/** What checkPngImage says of a PNG: 'ok', or the code of its refusal. */
export async function codeOf(png: Uint8Array): Promise<string> {
  const result = await checkPngImage(png);
  return result.ok ? 'ok' : result.error.code;
}

/** What checkPngImage says of a PNG: 'ok', or the code and the words of its refusal. */
export async function messageOf(png: Uint8Array): Promise<string> {
  const result = await checkPngImage(png);
  return result.ok ? 'ok' : `${result.error.code}: ${result.error.message}`;
}
