import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOllamaChatModel } from '../../../server/ollama/index.ts';
import type { ChatChunk } from '../../../server/core/ports.ts';
import { createFakeOllama } from '../../fakes/fake-ollama.ts';
import type { FakeOllama } from '../../fakes/fake-ollama.ts';
import { USER_HI, catchChatModelError, collectChunks, createGate, textOf } from './helpers.ts';

let fake: FakeOllama;

beforeEach(async () => {
  fake = await createFakeOllama();
});

afterEach(async () => {
  await fake.close();
});

describe('chat streaming', () => {
  it('streams text chunks in order and ends with the stats', async () => {
    // Paced, so each line arrives in a network read of its own.
    fake.enqueue({ chunks: ['A light', 'house ', '', 'at dusk'], delayMs: 15, evalCount: 9, promptEvalCount: 42 });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const chunks = await collectChunks(model.chat({ messages: USER_HI }));

    // A line without text (a thinking model's thoughts) still proves the model is working: 'alive'.
    expect(chunks).toEqual([
      { type: 'text', text: 'A light' },
      { type: 'text', text: 'house ' },
      { type: 'alive' },
      { type: 'text', text: 'at dusk' },
      { type: 'end', doneReason: 'stop', evalCount: 9, evalDurationNs: expect.any(Number), promptEvalCount: 42 },
    ]);
    expect((chunks[4] as Extract<ChatChunk, { type: 'end' }>).evalDurationNs).toBeGreaterThan(0);
  });

  it('reports done_reason "length" when the reply was cut at num_predict', async () => {
    fake.enqueue({ chunks: ['{"prompt": "a ligh'], doneReason: 'length' });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const chunks = await collectChunks(
      model.chat({ messages: USER_HI, format: { type: 'object' }, options: { num_predict: 4 } }),
    );

    expect(chunks.at(-1)).toMatchObject({ type: 'end', doneReason: 'length', evalCount: 1 });
  });

  it('passes messages, format, options, seed, num_ctx and keep_alive through, streaming', async () => {
    const format = { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] };
    fake.enqueue('{"prompt": "a lighthouse"}');
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b', seed: 7, numCtx: 8192, keepAlive: '10m' });

    await collectChunks(
      model.chat({
        messages: [{ role: 'system', content: 'be brief' }, ...USER_HI],
        format,
        options: { temperature: 0.2, seed: 99 },
      }),
    );

    expect(fake.chatRequests()).toEqual([
      {
        model: 'mistral:7b',
        messages: [{ role: 'system', content: 'be brief' }, ...USER_HI],
        stream: true,
        format,
        options: { seed: 99, num_ctx: 8192, temperature: 0.2 },
        keep_alive: '10m',
      },
    ]);
  });

  it('keeps the factory seed when the request leaves it undefined, and sends no empty extras', async () => {
    fake.enqueue('hi', 'hi');
    const seeded = createOllamaChatModel({ host: fake.url, model: 'mistral:7b', seed: 7 });
    const plain = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    await collectChunks(seeded.chat({ messages: USER_HI, options: { seed: undefined, temperature: 1 } }));
    await collectChunks(plain.chat({ messages: USER_HI }));

    const [first, second] = fake.chatRequests();
    expect(first?.options).toEqual({ seed: 7, temperature: 1 });
    expect(second).toEqual({ model: 'mistral:7b', messages: USER_HI, stream: true });
  });
});

describe('chat cancellation', () => {
  it('aborting the signal mid-stream hangs up on Ollama and throws "aborted"', async () => {
    const gate = createGate();
    fake.enqueue({ chunks: ['first', 'never sent'], gate: gate.promise });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    const controller = new AbortController();
    const received: string[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI, signal: controller.signal })) {
        if (chunk.type === 'text') received.push(chunk.text);
        controller.abort();
      }
    });

    expect(error.code).toBe('aborted');
    expect(received).toEqual(['first']);
    await fake.waitForHangup();
    expect(fake.hangups).toBe(1);
    expect(fake.requests[0]?.aborted).toBe(true);
    gate.open();
  });

  it('an already aborted signal throws "aborted" without calling Ollama', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() =>
      collectChunks(model.chat({ messages: USER_HI, signal: AbortSignal.abort() })),
    );

    expect(error.code).toBe('aborted');
    expect(fake.requests).toHaveLength(0);
  });

  it('stopping the iteration early also hangs up, so Ollama stops generating', async () => {
    const gate = createGate();
    fake.enqueue({ chunks: ['first', 'second'], gate: gate.promise });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    for await (const chunk of model.chat({ messages: USER_HI })) {
      expect(chunk).toEqual({ type: 'text', text: 'first' });
      break;
    }

    await fake.waitForHangup();
    expect(fake.hangups).toBe(1);
    gate.open();
  });

  it('aborting one of two concurrent chats leaves the other intact', async () => {
    const gateA = createGate();
    const gateB = createGate();
    fake.enqueue({ chunks: ['a1', 'a2'], gate: gateA.promise }, { chunks: ['b1', 'b2', 'b3'], gate: gateB.promise });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    const controllerA = new AbortController();

    const iteratorA = model.chat({ messages: USER_HI, signal: controllerA.signal })[Symbol.asyncIterator]();
    expect(await iteratorA.next()).toEqual({ done: false, value: { type: 'text', text: 'a1' } });
    const chatB = collectChunks(model.chat({ messages: USER_HI, signal: new AbortController().signal }));
    await fake.waitForRequests(2, '/api/chat');

    controllerA.abort();
    const errorA = await catchChatModelError(() => iteratorA.next());
    await fake.waitForHangup();
    gateB.open();
    const chunksB = await chatB;

    expect(errorA.code).toBe('aborted');
    expect(textOf(chunksB).join('')).toBe('b1b2b3');
    expect(chunksB.at(-1)).toMatchObject({ type: 'end', doneReason: 'stop' });
    expect(fake.hangups).toBe(1);
    expect(fake.requests.map((request) => request.aborted)).toEqual([true, false]);
    gateA.open();
  });
});

describe('chat errors', () => {
  it('says how to start Ollama when nothing listens on the port', async () => {
    const { url } = fake;
    await fake.close();
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => collectChunks(model.chat({ messages: USER_HI })));

    expect(error.code).toBe('unreachable');
    expect(error.message).toBe(`Ollama is not reachable at ${url}. Start it with \`ollama serve\` (or set --ollama-url).`);
    expect(error.cause).toBeInstanceOf(Error);
  });

  it('treats a server that drops every connection as unreachable', async () => {
    fake.setDown(true);
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => collectChunks(model.chat({ messages: USER_HI })));

    expect(error.code).toBe('unreachable');
  });

  it('says which model to pull when Ollama does not have it', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'llava:13b' });

    const error = await catchChatModelError(() => collectChunks(model.chat({ messages: USER_HI })));

    expect(error.code).toBe('model_not_found');
    expect(error.message).toBe('The model "llava:13b" is not pulled in Ollama. Run `ollama pull llava:13b`.');
    expect(error.cause).toMatchObject({ status_code: 404 });
  });

  it('turns an {"error"} line mid-stream into "stream_failed" with Ollama\'s words', async () => {
    fake.enqueue({ chunks: ['partial ', 'never'], errorAfter: { chunks: 1, message: 'CUDA error: out of memory' } });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    const received: string[] = [];

    const error = await catchChatModelError(async () => {
      for await (const chunk of model.chat({ messages: USER_HI })) {
        if (chunk.type === 'text') received.push(chunk.text);
      }
    });

    expect(received).toEqual(['partial ']);
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain('CUDA error: out of memory');
  });

  it('turns a connection dropped mid-stream into "stream_failed"', async () => {
    fake.enqueue({ chunks: ['one ', 'two ', 'three'], dropAfter: 2 });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => collectChunks(model.chat({ messages: USER_HI })));

    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain(fake.url);
    expect(fake.hangups).toBe(0);
  });

  it('reports other HTTP errors as "bad_response" with the status and Ollama\'s text', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => collectChunks(model.chat({ messages: USER_HI })));

    expect(error.code).toBe('bad_response');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('fake-ollama: no scripted reply left');
  });
});
