// A real, minimal PNG encoder for the fake backends, written independently of server/png so
// a bug there cannot hide behind the same bug here.
import { constants as zlibConstants, deflateRawSync, deflateSync, inflateSync } from 'node:zlib';

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

export function computeCrc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = (CRC_TABLE[(crc ^ byte) & 0xff] ?? 0) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  out.set(data, 8);
  out.writeUInt32BE(computeCrc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** An 8-bit RGB PNG of one solid colour: IHDR, one zlib IDAT, IEND, all CRCs correct. */
export function makePng(width: number, height: number, rgb: [number, number, number] = [200, 120, 40]): Uint8Array {
  return encodeRgbPng(width, height, () => rgb);
}

/** An 8-bit RGB PNG whose pixel colours come from `paint(x, y)` (filter 0, one zlib IDAT, correct CRCs). */
export function encodeRgbPng(width: number, height: number, paint: (x: number, y: number) => readonly [number, number, number]): Uint8Array {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // colour type: truecolour
  const row = 1 + width * 3; // filter byte 0, then pixels
  const raw = Buffer.alloc(row * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) raw.set(paint(x, y).map((v) => Math.max(0, Math.min(255, Math.round(v)))), y * row + 1 + x * 3);
  }
  const signature = Buffer.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
  return new Uint8Array(
    Buffer.concat([signature, chunk('IHDR', header), chunk('IDAT', deflateSync(raw)), chunk('IEND', new Uint8Array(0))]),
  );
}

/** Decodes what makePng writes (8-bit RGB, filter 0): size and the colour of the first pixel. */
export function decodeSolidPng(png: Uint8Array): { width: number; height: number; rgb: [number, number, number] } {
  const bytes = Buffer.from(png);
  let offset = 8;
  let width = 0;
  let height = 0;
  const idat: Buffer[] = [];
  while (offset < bytes.length) {
    const length = bytes.readUInt32BE(offset);
    const type = bytes.toString('latin1', offset + 4, offset + 8);
    const data = bytes.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
    }
    if (type === 'IDAT') idat.push(data);
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  if (raw.length !== height * (1 + width * 3)) throw new Error(`IDAT holds ${raw.length} bytes, expected ${height * (1 + width * 3)}`);
  return { width, height, rgb: [raw[1] ?? -1, raw[2] ?? -1, raw[3] ?? -1] };
}

export interface PngHeaderFields {
  width: number;
  height: number;
  bitDepth?: number;
  colorType?: number;
  interlace?: 0 | 1;
}

/** A PNG from a header and already-deflated IDAT bytes, with correct CRCs: the way to build broken images. */
export function assemblePng(header: PngHeaderFields, idat: Uint8Array, extraChunks: { type: string; data: Uint8Array }[] = []): Uint8Array {
  const fields = Buffer.alloc(13);
  fields.writeUInt32BE(header.width, 0);
  fields.writeUInt32BE(header.height, 4);
  fields[8] = header.bitDepth ?? 8;
  fields[9] = header.colorType ?? 2;
  fields[12] = header.interlace ?? 0;
  const signature = Buffer.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
  return new Uint8Array(
    Buffer.concat([
      signature,
      chunk('IHDR', fields),
      ...extraChunks.map((extra) => chunk(extra.type, extra.data)),
      chunk('IDAT', idat),
      chunk('IEND', new Uint8Array(0)),
    ]),
  );
}

/** Filtered 8-bit RGB scanlines (filter byte 0) for a width × height image of one colour. */
function solidScanlines(width: number, height: number, rgb: readonly [number, number, number]): Buffer {
  const row = 1 + width * 3;
  const raw = Buffer.alloc(row * height);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) raw.set(rgb, y * row + 1 + x * 3);
  return raw;
}

/**
 * An Adam7-interlaced 8-bit RGB PNG of one colour: the scanlines of the seven passes one after another,
 * each pass (x0, y0, dx, dy) only when it holds at least one pixel (PNG spec, 8.2).
 */
export function makeInterlacedPng(width: number, height: number, rgb: [number, number, number] = [30, 140, 220]): Uint8Array {
  const passes = [
    [0, 0, 8, 8],
    [4, 0, 8, 8],
    [0, 4, 4, 8],
    [2, 0, 4, 4],
    [0, 2, 2, 4],
    [1, 0, 2, 2],
    [0, 1, 1, 2],
  ] as const;
  const parts: Buffer[] = [];
  for (const [x0, y0, dx, dy] of passes) {
    const passWidth = Math.ceil(Math.max(0, width - x0) / dx);
    const passHeight = Math.ceil(Math.max(0, height - y0) / dy);
    if (passWidth > 0 && passHeight > 0) parts.push(solidScanlines(passWidth, passHeight, rgb));
  }
  return assemblePng({ width, height, interlace: 1 }, deflateSync(Buffer.concat(parts)));
}

/** Broken PNGs a backend might send, each with valid chunk CRCs so only a real check finds the fault. */
export const BROKEN_PNGS = {
  /** The zlib stream of IDAT is cut in half (a download that stopped), CRC recomputed. */
  truncatedIdat: () => {
    const full = deflateSync(solidScanlines(64, 64, [10, 20, 30]));
    return assemblePng({ width: 64, height: 64 }, full.subarray(0, Math.floor(full.length / 2)));
  },
  /** The header says 64×64 but the pixel data is a whole 32×32 image. */
  wrongDimensions: () => assemblePng({ width: 64, height: 64 }, deflateSync(solidScanlines(32, 32, [10, 20, 30]))),
  /** Width 0, pixel data for a 0-wide image (one filter byte a row). */
  zeroWidth: () => assemblePng({ width: 0, height: 8 }, deflateSync(Buffer.alloc(8))),
  /** 20000 px wide: over the 16384 per side Easel accepts, though the data matches. */
  tooWide: () => assemblePng({ width: 20_000, height: 1 }, deflateSync(solidScanlines(20_000, 1, [1, 2, 3]))),
  /** A non-interlaced header over interlaced data: the sizes differ, so it must be refused. */
  interlaceMismatch: () => {
    const interlaced = makeInterlacedPng(9, 7);
    return assemblePng({ width: 9, height: 7 }, idatOf(interlaced));
  },
};

/** The IDAT data of a PNG written by this module (one IDAT chunk). */
export function idatOf(png: Uint8Array): Uint8Array {
  const bytes = Buffer.from(png);
  for (let offset = 8; offset < bytes.length; ) {
    const length = bytes.readUInt32BE(offset);
    if (bytes.toString('latin1', offset + 4, offset + 8) === 'IDAT') return bytes.subarray(offset + 8, offset + 8 + length);
    offset += 12 + length;
  }
  throw new Error('no IDAT');
}

/**
 * `png` with one text chunk inserted right after IHDR, written the way a given server writes it:
 * - `pillow`: Pillow's PngInfo.add_text (A1111's encode_pil_to_base64): tEXt when the text is Latin-1,
 *   otherwise an uncompressed iTXt (`value.encode('latin-1', 'strict')` … `except UnicodeError: add_itxt`).
 * - `raw-utf8`: stable-diffusion.cpp's stb_image_write, which copies the string's UTF-8 bytes into tEXt
 *   whatever they are (thirdparty/stb_image_write.h:1208-1217).
 */
export function insertTextChunk(png: Uint8Array, keyword: string, text: string, writer: 'pillow' | 'raw-utf8'): Uint8Array {
  const bytes = Buffer.from(png);
  const afterHeader = 8 + 12 + bytes.readUInt32BE(8);
  const isLatin1 = /^[\x00-\xff]*$/.test(text);
  const data =
    writer === 'raw-utf8' || isLatin1
      ? Buffer.concat([Buffer.from(`${keyword}\0`, 'latin1'), Buffer.from(text, writer === 'raw-utf8' ? 'utf8' : 'latin1')])
      : Buffer.concat([Buffer.from(`${keyword}\0`, 'latin1'), Buffer.of(0, 0, 0, 0), Buffer.from(text, 'utf8')]);
  const type = writer === 'raw-utf8' || isLatin1 ? 'tEXt' : 'iTXt';
  return new Uint8Array(Buffer.concat([bytes.subarray(0, afterHeader), chunk(type, data), bytes.subarray(afterHeader)]));
}

export interface PngBombOptions {
  /** Default 16384×16384, the per-side cap: within it, the pixel count is what makes the bomb. */
  width?: number;
  height?: number;
  /** Default 16-bit RGBA (colour type 6): 8 bytes a pixel, 2 GiB at 16384×16384. */
  bitDepth?: number;
  colorType?: 0 | 2 | 4 | 6;
  /** `zeros` (default): a valid image of zeros, every byte the header promises; `garbage`: IDAT that is no zlib at all. */
  idat?: 'zeros' | 'garbage';
}

/**
 * A decompression bomb, as a compromised server or a doctored export sends it: a small, valid PNG whose IHDR
 * promises a huge image. The default is 16384×16384 16-bit RGBA, about 2 MB that inflates to 2 GiB. The zlib
 * stream repeats one row deflated on its own (a full flush makes it self-contained and byte-aligned), so it
 * is built in milliseconds without ever holding the 2 GiB.
 */
export function makePngBomb(options: PngBombOptions = {}): Uint8Array {
  const { width = 16_384, height = 16_384, bitDepth = 16, colorType = 6, idat = 'zeros' } = options;
  const samples = { 0: 1, 2: 3, 4: 2, 6: 4 }[colorType];
  const row = 1 + Math.ceil((width * samples * bitDepth) / 8); // filter byte 0, then zero samples
  const header = { width, height, bitDepth, colorType };
  if (idat === 'garbage') return assemblePng(header, Buffer.from('this is no zlib stream at all, only text where IDAT belongs'));
  const oneRow = deflateRawSync(Buffer.alloc(row), { finishFlush: zlibConstants.Z_FULL_FLUSH });
  const total = row * height;
  // adler32 of `total` zero bytes: a stays 1, b adds 1 per byte.
  const adler = Buffer.alloc(4);
  adler.writeUInt32BE((((total % 65_521) << 16) | 1) >>> 0);
  const stream = Buffer.concat([Buffer.of(0x78, 0x9c), ...Array.from({ length: height }, () => oneRow), Buffer.of(0x03, 0x00), adler]);
  return assemblePng(header, stream);
}
