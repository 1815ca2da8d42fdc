// Small helpers the adapters (and main.ts) share. Not an adapter itself: adapters may import it,
// and it imports nothing of ours.

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON.parse that answers undefined instead of throwing: a server's error body may be anything. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Node wraps socket errors (`fetch failed` → cause ECONNREFUSED…): the first `code` down the cause chain. */
export function readErrorCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Codes meaning nothing is listening there (as opposed to a connection that broke midway). */
export const NOT_LISTENING_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

const MAX_QUOTED_CHARS = 400;

/** A server's words, trimmed to a length that fits in one message. */
export function truncate(text: string): string {
  const flat = text.trim();
  return flat.length > MAX_QUOTED_CHARS ? `${flat.slice(0, MAX_QUOTED_CHARS)}…` : flat;
}

export function formatDuration(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} minute${ms === 60_000 ? '' : 's'}`;
  return ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`;
}

export { describeTooLarge, formatBytes, readCappedBytes, readCappedText, readTextPrefix } from './read-capped.ts';
export type { BodyTooLarge, CappedBody } from './read-capped.ts';
export { temporaryNameFor, writeFileAtomically } from './write-file-atomically.ts';
export type { AtomicWriteFs } from './write-file-atomically.ts';
export { createImageFiles, isImageFileName } from './image-files.ts';
export { mergeStreams } from './merge-streams.ts';
