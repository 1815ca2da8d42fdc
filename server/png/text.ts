import { inflateSync } from 'node:zlib';
import { encodePng, PngError, readPngChunks } from './chunks.ts';
import type { PngChunk } from './chunks.ts';

const TEXT_CHUNK_TYPES = new Set(['tEXt', 'zTXt', 'iTXt']);
// PNG keywords: 1–79 printable Latin-1 characters, no leading, trailing or doubled spaces.
const VALID_KEYWORD = /^(?! )(?!.* {2})(?!.* $)[\x20-\x7e\xa1-\xff]{1,79}$/;
const LATIN1_ONLY = /^[\x00-\xff]*$/;

function decodeLatin1(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('latin1');
}

function decodeUtf8(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('utf8');
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * tEXt and zTXt are Latin-1 by the PNG spec, but stable-diffusion.cpp copies its UTF-8 prompt into tEXt
 * verbatim (thirdparty/stb_image_write.h:1208-1217). Bytes that are valid UTF-8 are read as UTF-8; anything
 * else is Latin-1, which any byte sequence is. Easel itself writes Latin-1 tEXt and UTF-8 iTXt, as the spec
 * says; a Latin-1 text that is also valid UTF-8 needs a letter like "Ã" right before a symbol like "©".
 */
function decodeLegacyText(bytes: Uint8Array): string {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    return decodeLatin1(bytes);
  }
}

function readChunkKeyword(chunk: PngChunk): string {
  const end = chunk.data.indexOf(0);
  // Stryker disable next-line EqualityOperator: a keyword that starts with NUL is only compared with a valid one (1–79 characters), which equals neither
  return decodeLatin1(end < 0 ? chunk.data : chunk.data.subarray(0, end));
}

/** keyword → text of one tEXt, zTXt or iTXt chunk, or null when the chunk is malformed. */
function decodeTextChunk(chunk: PngChunk): { keyword: string; text: string } | null {
  const data = chunk.data;
  const keywordEnd = data.indexOf(0);
  if (keywordEnd < 1) return null;
  const keyword = decodeLatin1(data.subarray(0, keywordEnd));
  try {
    if (chunk.type === 'tEXt') return { keyword, text: decodeLegacyText(data.subarray(keywordEnd + 1)) };
    if (chunk.type === 'zTXt') {
      if (data[keywordEnd + 1] !== 0) return null;
      return { keyword, text: decodeLegacyText(inflateSync(data.subarray(keywordEnd + 2))) };
    }
    // iTXt: keyword 0 flag method language 0 translated-keyword 0 text
    const compressed = data[keywordEnd + 1] === 1;
    const languageEnd = data.indexOf(0, keywordEnd + 3);
    // Stryker disable next-line EqualityOperator: the search starts at index 4 or later, so it gives −1 or at least 4, never 0
    if (languageEnd < 0) return null;
    const translatedEnd = data.indexOf(0, languageEnd + 1);
    // Stryker disable next-line EqualityOperator: the search starts at index 4 or later, so it gives −1 or at least 4, never 0
    if (translatedEnd < 0) return null;
    const body = data.subarray(translatedEnd + 1);
    return { keyword, text: decodeUtf8(compressed ? inflateSync(body) : body) };
  } catch {
    // A damaged compressed stream only loses that one entry.
    return null;
  }
}

/**
 * Every text entry (tEXt, zTXt, iTXt; compressed or not) by keyword; a later duplicate wins,
 * as in Pillow. Bytes that are not a valid PNG give {} — call readPngChunks to learn why.
 */
export function readPngText(png: Uint8Array): Record<string, string> {
  const chunks = readPngChunks(png);
  const entries: Record<string, string> = {};
  if (!chunks.ok) return entries;
  for (const chunk of chunks.value) {
    if (!TEXT_CHUNK_TYPES.has(chunk.type)) continue;
    const entry = decodeTextChunk(chunk);
    if (entry !== null) entries[entry.keyword] = entry.text;
  }
  return entries;
}

function encodeTextChunk(keyword: string, text: string): PngChunk {
  const keywordBytes = Buffer.from(keyword, 'latin1');
  if (LATIN1_ONLY.test(text)) {
    return { type: 'tEXt', data: Buffer.concat([keywordBytes, Buffer.of(0), Buffer.from(text, 'latin1')]) };
  }
  // Uncompressed, no language tag, no translated keyword: what Pillow writes for non-Latin-1 text.
  return {
    type: 'iTXt',
    data: Buffer.concat([keywordBytes, Buffer.of(0, 0, 0, 0, 0), Buffer.from(text, 'utf8')]),
  };
}

/**
 * Returns a copy of `png` whose `keyword` entry is `text`: any earlier tEXt/zTXt/iTXt entry
 * with that keyword is removed and the new chunk goes just before the first IDAT, where A1111
 * (through Pillow) writes it and where readers find it without decoding the image. Latin-1 text is
 * stored as tEXt, anything else as UTF-8 iTXt. Throws PngError on bytes that are not a PNG,
 * an invalid keyword, or text containing NUL.
 */
export function writePngText(png: Uint8Array, keyword: string, text: string): Uint8Array {
  if (!VALID_KEYWORD.test(keyword)) {
    throw new PngError(
      'invalid_keyword',
      `"${keyword}" cannot be a PNG text keyword: use 1–79 Latin-1 letters without leading, trailing or double spaces.`,
    );
  }
  if (text.includes('\0')) {
    throw new PngError('invalid_text', `The "${keyword}" text contains a NUL character, which PNG text cannot hold; remove it first.`);
  }
  const chunks = readPngChunks(png);
  if (!chunks.ok) throw new PngError(chunks.error.code, chunks.error.message);
  const kept = chunks.value.filter(
    (chunk) => !(TEXT_CHUNK_TYPES.has(chunk.type) && readChunkKeyword(chunk) === keyword),
  );
  // Stryker disable next-line ConditionalExpression,StringLiteral: with no IDAT, splice(-1, 0, …) inserts before the last chunk, always IEND: the same place
  const firstData = kept.findIndex((chunk) => chunk.type === 'IDAT' || chunk.type === 'IEND');
  kept.splice(firstData, 0, encodeTextChunk(keyword, text));
  return encodePng(kept);
}
