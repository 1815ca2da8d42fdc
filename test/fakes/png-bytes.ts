// A real, minimal PNG encoder for the fake backends, written independently of server/png so
// a bug there cannot hide behind the same bug here.
import { deflateSync, inflateSync } from 'node:zlib';

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
