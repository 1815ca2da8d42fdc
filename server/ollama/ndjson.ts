// Ollama answers a streamed request (a chat, a pull) as NDJSON: one JSON object a line. Both are read here, as
// they arrive, never rescanned: each network read's complete lines come as one batch (a chat shows a batch's
// text at once), the unfinished line waits in the buffer, and the end flushes a last line without its newline.

export interface LineLimit {
  /** The longest line read: a longer one that has not ended throws `overlong()`, checked at every read. */
  maxLineChars: number;
  overlong(): Error;
}

/** The complete lines of each read, in order (empty lines included; the caller skips them). */
export async function* readLineBatches(body: ReadableStream<Uint8Array>, limit: LineLimit): AsyncGenerator<string[]> {
  const decoder = new TextDecoder('utf-8');
  const reader = body.getReader();
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      // The final flush: bytes of an unfinished character, and a last line without its newline.
      buffer += done ? `${decoder.decode()}\n` : decoder.decode(value, { stream: true });
      const lastNewline = buffer.lastIndexOf('\n');
      if (lastNewline !== -1) {
        const lines = buffer.slice(0, lastNewline).split('\n');
        buffer = buffer.slice(lastNewline + 1);
        yield lines;
      }
      // The line not ended yet: the buffer never holds much more than the cap.
      if (buffer.length > limit.maxLineChars) throw limit.overlong();
      if (done) return;
    }
  } finally {
    reader.releaseLock();
  }
}
