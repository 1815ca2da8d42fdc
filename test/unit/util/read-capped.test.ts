import { describe, expect, it } from 'vitest';
import { describeTooLarge, readCappedBytes, readCappedText, readTextPrefix } from '../../../server/util/index.ts';

/** A body of `pieces` chunks of `size` bytes that counts how many chunks were pulled and whether it was cancelled. */
function countingBody(pieces: number, size: number, headers: Record<string, string> = {}) {
  const state = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (state.pulled === pieces) return controller.close();
        state.pulled++;
        controller.enqueue(new Uint8Array(size).fill(65));
      },
      cancel() {
        state.cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { response: new Response(stream, { headers }), state };
}

describe('readCappedBytes', () => {
  it('reads a body within the limit whole', async () => {
    const { response } = countingBody(3, 10);
    const body = await readCappedBytes(response, 30);
    expect(body.ok && body.value.length).toBe(30);
  });

  it('refuses at the declared Content-Length without reading a byte', async () => {
    const { response, state } = countingBody(1000, 1024, { 'content-length': String(1000 * 1024) });
    expect(await readCappedBytes(response, 64 * 1024)).toEqual({ ok: false, error: { code: 'too_large', limit: 64 * 1024, declared: 1000 * 1024 } });
    expect(state.pulled).toBe(0);
    expect(state.cancelled).toBe(true);
  });

  it('counts bytes when no length is declared, and stops at the first chunk past the limit', async () => {
    const { response, state } = countingBody(1000, 1024);
    expect(await readCappedBytes(response, 64 * 1024)).toEqual({ ok: false, error: { code: 'too_large', limit: 64 * 1024 } });
    expect(state.pulled).toBe(65);
    expect(state.cancelled).toBe(true);
  });

  it('does not trust a Content-Length that understates the body', async () => {
    const { response, state } = countingBody(100, 1024, { 'content-length': '10' });
    expect((await readCappedBytes(response, 4096)).ok).toBe(false);
    expect(state.pulled).toBe(5);
  });
});

describe('readCappedText, readTextPrefix, describeTooLarge', () => {
  it('decodes UTF-8, and quotes only the start of a long error answer', async () => {
    expect(await readCappedText(new Response('größer'), 100)).toEqual({ ok: true, value: 'größer' });
    const { response, state } = countingBody(1000, 1024);
    const prefix = await readTextPrefix(response, 3000);
    expect(prefix).toBe('A'.repeat(3000));
    expect(state.pulled).toBe(3);
    expect(state.cancelled).toBe(true);
  });

  it('says how large, in words', () => {
    expect(describeTooLarge({ code: 'too_large', limit: 64 * 1024 * 1024, declared: 150 * 1024 * 1024 })).toBe('an answer of 150 MB');
    expect(describeTooLarge({ code: 'too_large', limit: 64 * 1024 * 1024 })).toBe('an answer of more than 64 MB');
  });
});
