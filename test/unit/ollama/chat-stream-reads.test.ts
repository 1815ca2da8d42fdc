import { createServer } from 'node:http';
import fc from 'fast-check';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createOllamaChatModel } from '../../../server/ollama/index.ts';
import type { ChatChunk } from '../../../server/core/ports.ts';
import { createFakeOllama } from '../../fakes/fake-ollama.ts';
import type { FakeOllama } from '../../fakes/fake-ollama.ts';
import { USER_HI, catchChatModelError, collectChunks, textOf } from './helpers.ts';

// The adapter reads Ollama's NDJSON body itself and hands on one text chunk per network read (issue 12),
// keeping the ollama client's rules for lines (ollama-js src/utils.ts parseJSON, AbortableAsyncIterator).

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

  it('joins a line and a character split across reads, skips a line that is not JSON with a warning, and ends at an unterminated done line', async () => {
    const cafe = Buffer.from(line('café'));
    const split = cafe.indexOf(0xa9); // the second byte of "é"
    const url = await serveRawBody([
      cafe.subarray(0, split),
      Buffer.concat([cafe.subarray(split), Buffer.from(`not json\n\n${line(' au lait')}{"model":"mistral:7b","mes`)]),
      'sage":{"role":"assistant","content":""},"done":true,"done_reason":"stop","eval_count":3}',
    ]);
    const warnings: string[] = [];
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b', warn: (message) => warnings.push(message) });

    const chunks = await collectChunks(model.chat({ messages: USER_HI }));

    expect(textOf(chunks).join('')).toBe('café au lait');
    expect(textOf(chunks).some((text) => text.includes('\uFFFD'))).toBe(false);
    expect(chunks.at(-1)).toEqual({ type: 'end', doneReason: 'stop', evalCount: 3, evalDurationNs: 0, promptEvalCount: 0 });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('not json');
  });

  it('gives the text before an {"error"} line of the same read, then the error; nothing after it', async () => {
    const url = await serveRawBody([`${line('partial ')}{"error":"CUDA error: out of memory"}\n${line('never')}`]);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b', warn: () => undefined });
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
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b', warn: () => undefined });
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
          const model = createOllamaChatModel({ host: url, model: 'mistral:7b', warn: () => undefined });
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
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b', warn: () => undefined });

    const chunks = await collectChunks(model.chat({ messages: USER_HI }));

    expect(chunks[0]).toEqual({ type: 'alive' });
    expect(textOf(chunks)).toEqual(['a boat']);
  });
});
