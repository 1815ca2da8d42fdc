import { isChatModelError } from '../../../server/core/errors.ts';
import type { ChatModelError } from '../../../server/core/errors.ts';
import type { ChatChunk, ChatMessage } from '../../../server/core/ports.ts';

export const USER_HI: ChatMessage[] = [{ role: 'user', content: 'a lighthouse at dusk' }];

export async function collectChunks(stream: AsyncIterable<ChatChunk>): Promise<ChatChunk[]> {
  const chunks: ChatChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

export function textOf(chunks: ChatChunk[]): string[] {
  return chunks.flatMap((chunk) => (chunk.type === 'text' ? [chunk.text] : []));
}

/** Runs `action` and returns the ChatModelError it throws; fails the test if it throws nothing else. */
export async function catchChatModelError(action: () => Promise<unknown>): Promise<ChatModelError> {
  try {
    await action();
  } catch (error) {
    if (isChatModelError(error)) return error;
    throw new Error(`expected a ChatModelError, got ${String(error)}`, { cause: error });
  }
  throw new Error('expected a ChatModelError, but nothing was thrown');
}

/** A gate a test opens by hand, for scripted replies that must pause mid-stream. */
export function createGate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
