import { createServer } from 'node:http';
import fc from 'fast-check';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createOllamaChatModel, MAX_OLLAMA_LINE_CHARS } from '../../../server/ollama/index.ts';
import type { ChatChunk } from '../../../server/core/ports.ts';
import { createFakeOllama } from '../../fakes/fake-ollama.ts';
import type { FakeOllama } from '../../fakes/fake-ollama.ts';
import { USER_HI, catchChatModelError, collectChunks, textOf } from './helpers.ts';

// The adapter reads Ollama's NDJSON body itself and hands on one text chunk per network read (issue 12),
// with the rules of Ollama's own Go client for lines (api/client.go stream, Chat): a line that is not a chat
// chunk fails the chat, as does a line past MAX_OLLAMA_LINE_CHARS (issue 21).

let fake: FakeOllama | undefined;
let raw: Server | undefined;

afterEach(async () => {
  await fake?.close();
  fake = undefined;
  raw?.closeAllConnections();
  if (raw) await new Promise((resolve) => raw?.close(resolve));
  raw = undefined;
});

/** A server that answers /api/chat with exactly these body pieces, each written after a pause. */
async function serveRawBody(pieces: (string | Buffer)[]): Promise<string> {
  raw = createServer((req, res) => {
    req.resume();
    req.on('end', () => void writePieces(res, pieces));
  });
  await new Promise<void>((resolve) => raw?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(raw.address() as AddressInfo).port}`;
}

async function writePieces(res: ServerResponse, pieces: (string | Buffer)[]): Promise<void> {
  // Real Ollama: 200 with application/x-ndjson, one line per write (server/routes.go streamResponse).
  res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
  for (const piece of pieces) {
    res.write(piece);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  res.end();
}

const line = (content: string, extra: object = { done: false }) =>
  `${JSON.stringify({ model: 'mistral:7b', message: { role: 'assistant', content }, ...extra })}\n`;

/** A fetch that counts the body bytes its caller pulls (give or take a read the pipe holds ahead). */
function countBodyBytes(): { fetch: typeof fetch; bytes: () => number } {
  let bytes = 0;
  const counting: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (response.body === null) return response;
    const body = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          bytes += chunk.byteLength;
          controller.enqueue(chunk);
        },
      }),
    );
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  return { fetch: counting, bytes: () => bytes };
}

/** Content that makes `line(content)` exactly `length` characters long, its newline left out. */
function lineContentFor(length: number): string {
  return 'x'.repeat(length - (line('').length - 1));
}

describe('the chat stream, a network read at a time', () => {
  it('hands on the text of every line one read brought as one chunk, in order', async () => {
    fake = await createFakeOllama();
    const tokens = Array.from({ length: 200 }, (_, index) => `t${index} `);
    // Unpaced: the fake writes every line in one go, so a few reads carry them all.
    fake.enqueue({ chunks: tokens });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const chunks = await collectChunks(model.chat({ messages: USER_HI }));

    expect(textOf(chunks).join('')).toBe(tokens.join(''));
    expect(textOf(chunks).length).toBeLessThanOrEqual(5);
    expect(chunks.at(-1)).toMatchObject({ type: 'end', doneReason: 'stop' });
  });

  it('joins a line and a character split across reads, skips a blank line, and ends at an unterminated done line', async () => {
    const cafe = Buffer.from(line('café'));
    const split = cafe.indexOf(0xa9); // the second byte of "é"
    const url = await serveRawBody([
      cafe.subarray(0, split),
      Buffer.concat([cafe.subarray(split), Buffer.from(`\n${line(' au lait')}{"model":"mistral:7b","mes`)]),
      'sage":{"role":"assistant","content":""},"done":true,"done_reason":"stop","eval_count":3}',
    ]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });

    const chunks = await collectChunks(model.chat({ messages: USER_HI }));

    expect(textOf(chunks).join('')).toBe('café au lait');
    expect(textOf(chunks).some((text) => text.includes('\uFFFD'))).toBe(false);
    expect(chunks.at(-1)).toEqual({ type: 'end', doneReason: 'stop', evalCount: 3, evalDurationNs: 0, promptEvalCount: 0 });
  });

  it('fails the chat on a line that is not JSON, after handing on the text before it, as Ollama\'s Go client does', async () => {
    const url = await serveRawBody([line('café'), `not json\n${line(' au lait')}`, line('', { done: true })]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });
    const received: ChatChunk[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI })) received.push(chunk);
    });

    expect(textOf(received)).toEqual(['café']);
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain(`sent a reply line Easel cannot read (it is not JSON): "not json"`);
    expect(error.message).toContain('the text shown so far is kept');
    expect(error.message).toContain('--ollama-url');
    expect(error.message).not.toMatch(/connection|broke/);
  });

  it('fails the chat on a line of the wrong types instead of taking it for the end', async () => {
    const url = await serveRawBody([`${line('a lighthouse')}{"message": 42, "done": "maybe"}\n${line(' at dusk')}`, line('', { done: true })]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });
    const received: ChatChunk[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI })) received.push(chunk);
    });

    expect(textOf(received)).toEqual(['a lighthouse']);
    expect(received.some((chunk) => chunk.type === 'end')).toBe(false);
    expect(error.code).toBe('stream_failed');
    expect(error.message).toMatch(/cannot read \(("message" is a number, not an object|"done" is a string, not a boolean)\)/);
    expect(error.message).toContain(JSON.stringify('{"message": 42, "done": "maybe"}'));
  });

  it('takes "done": "true" (a string) for an unreadable line, not for the end', async () => {
    const url = await serveRawBody([line('a boat'), line('', { done: 'true', done_reason: 'stop' }), line(' and more')]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });
    const received: ChatChunk[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI })) received.push(chunk);
    });

    expect(textOf(received)).toEqual(['a boat']);
    expect(received.some((chunk) => chunk.type === 'end')).toBe(false);
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain('"done" is a string, not a boolean');
  });

  it('quotes at most 200 characters of an unreadable line, escaped', async () => {
    const url = await serveRawBody([`<html>${'\u0007x'.repeat(300)}\n`]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => collectChunks(model.chat({ messages: USER_HI })));

    expect(error.message).toContain(`${JSON.stringify(`<html>${'\u0007x'.repeat(97)}`)}…`);
    expect(error.message).not.toContain('\u0007');
  });

  it('stops reading a line that never ends past MAX_OLLAMA_LINE_CHARS and hangs up, after the text before it', async () => {
    fake = await createFakeOllama();
    let sent: { bytes: number; hungUp: boolean } | undefined;
    const ended = new Promise<void>((resolve) => {
      // The fake's own stop, far past what a bounded reader lets through.
      fake?.enqueue({
        chunks: ['a lighthouse', ' at dusk'],
        endlessLineAfter: { chunks: 2, maxBytes: 16 * 1024 * 1024, onEnd: (result) => ((sent = result), resolve()) },
      });
    });
    const counted = countBodyBytes();
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b', fetch: counted.fetch });
    const received: ChatChunk[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI })) received.push(chunk);
    });
    await ended;

    expect(MAX_OLLAMA_LINE_CHARS).toBe(65_536);
    expect(textOf(received).join('')).toBe('a lighthouse at dusk');
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain('sent a reply line longer than 65,536 characters without ending it');
    expect(error.message).toContain('--ollama-url');
    // Easel read the cap and about one network read more, then hung up; the fake never reached its stop
    // (what it wrote beyond Easel's reads sat in the loopback socket buffers, a few MB).
    expect(counted.bytes()).toBeLessThan(1024 * 1024);
    expect(sent?.hungUp).toBe(true);
    expect(sent?.bytes).toBeLessThan(16 * 1024 * 1024);
    expect(fake.hangups).toBe(1);
  });

  it('reads a line exactly MAX_OLLAMA_LINE_CHARS long', async () => {
    const content = lineContentFor(MAX_OLLAMA_LINE_CHARS);
    const url = await serveRawBody([line(content), line('', { done: true })]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });

    const chunks = await collectChunks(model.chat({ messages: USER_HI }));

    expect(textOf(chunks).join('')).toBe(content);
    expect(chunks.at(-1)).toMatchObject({ type: 'end' });
  });

  it('fails on a complete line one character past the cap, although no read left it open past the cap', async () => {
    const long = line(lineContentFor(MAX_OLLAMA_LINE_CHARS + 1));
    // Open at 60 000 characters (under the cap) after one read, ended by the next: only the complete line is long.
    const url = await serveRawBody([line('before '), long.slice(0, 60_000), `${long.slice(60_000)}${line('after')}`]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });
    const received: ChatChunk[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI })) received.push(chunk);
    });

    expect(textOf(received)).toEqual(['before ']);
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain('sent a reply line longer than 65,536 characters;');
    expect(error.message).not.toContain('without ending it');
  });

  it('gives the text before an {"error"} line of the same read, then the error; nothing after it', async () => {
    const url = await serveRawBody([`${line('partial ')}{"error":"CUDA error: out of memory"}\n${line('never')}`]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });
    const received: ChatChunk[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI })) received.push(chunk);
    });

    expect(textOf(received)).toEqual(['partial ']);
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain('CUDA error: out of memory');
  });

  it('calls a body that ends without a done line a broken reply, after handing on its text', async () => {
    const url = await serveRawBody([line('a lighthouse'), line(' at dusk')]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });
    const received: ChatChunk[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI })) received.push(chunk);
    });

    expect(textOf(received).join('')).toBe('a lighthouse at dusk');
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain('ended the reply before saying it was done');
  });

  it('reads any content the way JSON.parse would, ordinary lines and others alike (property)', async () => {
    // Lines as Ollama's encoder writes them (api/types.go field order), with the fields that make a line
    // leave the common shape: thinking, a cloud model's remote_model, tool calls.
    const lineArb = fc.record({
      content: fc.string({ unit: 'grapheme', maxLength: 12 }),
      extra: fc.constantFrom('none', 'thinking', 'remote', 'tools'),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(lineArb, { minLength: 1, maxLength: 8 }), async (lines) => {
        const body = lines.map(({ content, extra }) => {
          const message: Record<string, unknown> = { role: 'assistant', content };
          if (extra === 'thinking') message.thinking = 'hmm';
          if (extra === 'tools') message.tool_calls = [{ function: { name: 'f', arguments: {} } }];
          const head = extra === 'remote' ? { model: 'm', remote_model: 'r' } : { model: 'mistral:7b' };
          return `${JSON.stringify({ ...head, created_at: '2026-11-24T06:20:45.78Z', message, done: false })}\n`;
        });
        body.push(line('', { done: true, done_reason: 'stop' }));
        const url = await serveRawBody([body.join('')]);
        try {
          const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });
          const chunks = await collectChunks(model.chat({ messages: USER_HI }));
          expect(textOf(chunks).join('')).toBe(lines.map((entry) => entry.content).join(''));
          expect(chunks.at(-1)).toMatchObject({ type: 'end' });
        } finally {
          raw?.closeAllConnections();
          await new Promise((resolve) => raw?.close(resolve));
          raw = undefined;
        }
      }),
      { numRuns: 60 },
    );
  });

  it('reports a line without text (a thinking model) as alive when its read has no text', async () => {
    const url = await serveRawBody([
      line('', { done: false, message: { role: 'assistant', content: '', thinking: 'hmm' } }),
      line('a boat'),
      line('', { done: true, done_reason: 'stop' }),
    ]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });

    const chunks = await collectChunks(model.chat({ messages: USER_HI }));

    expect(chunks[0]).toEqual({ type: 'alive' });
    expect(textOf(chunks)).toEqual(['a boat']);
  });
});
