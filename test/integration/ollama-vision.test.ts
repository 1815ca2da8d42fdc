// Images to an Ollama vision model: the real adapter (createOllamaChatModel, with the real `ollama` client)
// against the fake on loopback, which decodes `images` as Ollama's Go server does and refuses them as it does.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOllamaChatModel } from '../../server/ollama/index.ts';
import type { ChatChunk } from '../../server/core/ports.ts';
import { createFakeOllama } from '../fakes/fake-ollama.ts';
import type { FakeChatRequestBody, FakeOllama } from '../fakes/fake-ollama.ts';
import { encodeRgbPng, makePng } from '../fakes/png-bytes.ts';
import { catchChatModelError, collectChunks, textOf } from '../unit/ollama/helpers.ts';

const VISION = { name: 'gemma3:4b', capabilities: ['completion', 'vision'] };
const FORMAT = {
  type: 'object',
  properties: { prompt: { type: 'string' }, steps: { type: 'integer', minimum: 1, maximum: 150 } },
  required: ['prompt', 'steps'],
};
const REPLY = '{"prompt": "a red lighthouse on a cliff at dusk", "steps": 30}';
/** A PNG whose pixels make every byte value likely to appear, so no encoding slip goes unseen. */
const PNG = encodeRgbPng(23, 17, (x, y) => [(x * 11 + y * 7) & 0xff, (x * y * 13) & 0xff, (255 - x * 5 - y * 3) & 0xff]);
const SECOND_PNG = makePng(4, 3, [10, 200, 30]);
const LLAMA_SERVER_REFUSAL = JSON.stringify({
  error: {
    code: 400,
    message: 'Multimodal data provided, but model does not support multimodal requests.',
    type: 'invalid_request_error',
  },
});

let fake: FakeOllama;

beforeEach(async () => {
  fake = await createFakeOllama({ models: ['mistral:7b', VISION] });
});

afterEach(async () => {
  await fake.close();
});

async function postChat(body: unknown): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${fake.url}/api/chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

describe('images to a vision model', () => {
  it('arrive byte for byte with a format schema, and the reply streams', async () => {
    let seen: FakeChatRequestBody | undefined;
    fake.enqueue((request) => {
      seen = request;
      return { chunks: [REPLY.slice(0, 20), REPLY.slice(20, 45), REPLY.slice(45)], delayMs: 10 };
    });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const chunks = await collectChunks(
      model.chat({
        model: 'gemma3:4b',
        messages: [
          { role: 'system', content: 'Describe the picture as an image prompt.' },
          { role: 'user', content: 'make this one', images: [PNG, SECOND_PNG] },
        ],
        format: FORMAT,
      }),
    );

    expect(textOf(chunks).join('')).toBe(REPLY);
    expect(textOf(chunks).length).toBeGreaterThan(1);
    expect(chunks.at(-1)).toMatchObject<Partial<ChatChunk>>({ type: 'end', doneReason: 'stop' });
    // Decoded as Ollama decodes api.ImageData: per message, the exact bytes, in order.
    const [images] = fake.chatImages();
    expect(images?.map((list) => list.map((bytes) => Buffer.from(bytes).toString('hex')))).toEqual([
      [],
      [Buffer.from(PNG).toString('hex'), Buffer.from(SECOND_PNG).toString('hex')],
    ]);
    // On the wire: standard padded base64 in the user message only, with the schema beside it.
    const [body] = fake.chatRequests();
    expect(body?.format).toEqual(FORMAT);
    expect(body?.messages?.[0]).not.toHaveProperty('images');
    expect(body?.messages?.[1]?.images).toEqual([Buffer.from(PNG).toString('base64'), Buffer.from(SECOND_PNG).toString('base64')]);
    // A scripted reply sees them too.
    expect(seen?.messages?.[1]?.images?.[0]).toBe(Buffer.from(PNG).toString('base64'));
    expect(fake.scriptErrors).toEqual([]);
  });
});

describe('images to a model that cannot see them', () => {
  it('are refused as Ollama refuses them, and the error says which model and what to do', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() =>
      collectChunks(model.chat({ messages: [{ role: 'user', content: 'make this one', images: [PNG] }], format: FORMAT })),
    );

    expect(error.code).toBe('bad_response');
    expect(error.message).toContain('"mistral:7b" cannot see images');
    expect(error.message).toMatch(/gemma3 or llava/);
    expect(error.message).toContain('`ollama pull gemma3`');
    // Ollama's answer: llama-server's status, and its JSON body as the error text.
    expect(error.cause).toMatchObject({ status_code: 400, error: LLAMA_SERVER_REFUSAL });
    expect(fake.scriptErrors).toEqual([]);
    // The same model still chats without a picture.
    fake.enqueue('a lighthouse');
    const chunks = await collectChunks(model.chat({ messages: [{ role: 'user', content: 'make this one' }] }));
    expect(textOf(chunks).join('')).toBe('a lighthouse');
  });

  it('the fake answers 400 with llama-server JSON, after loading the model', async () => {
    const reply = await postChat({
      model: 'mistral:7b',
      messages: [{ role: 'user', content: 'hi', images: [Buffer.from(PNG).toString('base64')] }],
    });

    expect(reply).toEqual({ status: 400, body: { error: LLAMA_SERVER_REFUSAL } });
    const loaded = (await (await fetch(`${fake.url}/api/ps`)).json()) as { models: Array<{ name: string }> };
    expect(loaded.models.map((entry) => entry.name)).toEqual(['mistral:7b']);
  });

  it("Ollama 0.12.6's refusal (a model without its vision weights) reads the same", async () => {
    const message = 'Failed to create new sequence: failed to process inputs: this model is missing data required for image input';
    fake.enqueue({ chunks: ['never'], errorAfter: { chunks: 0, status: 500, message } });
    const model = createOllamaChatModel({ host: fake.url, model: 'gemma3:4b' });

    const error = await catchChatModelError(() =>
      collectChunks(model.chat({ messages: [{ role: 'user', content: 'make this one', images: [PNG] }] })),
    );

    expect(error.code).toBe('bad_response');
    expect(error.message).toContain('"gemma3:4b" cannot see images');
    expect(error.message).toContain('`ollama pull gemma3`');
  });
});

describe('images that are not base64', () => {
  it.each([
    ['a byte outside the alphabet', 'not base64!', 3],
    ['no padding', 'YWJjZA', 4],
    ['too little padding', 'YQ=', 3],
    ['padding too early', 'Y===', 1],
    ['data after the padding', 'YQ==YQ==', 4],
    ['URL-safe characters', 'ab-_', 2],
    ['a data: URL', `data:image/png;base64,${Buffer.from(PNG).toString('base64')}`, 4],
  ])('%s: 400 "illegal base64 data at input byte N", as gin binding api.ChatRequest answers', async (_, image, at) => {
    // An unknown model: ShouldBindJSON fails before the model is looked up (server/routes.go:2444-2450).
    const reply = await postChat({ model: 'nowhere:1b', messages: [{ role: 'user', content: 'hi', images: [image] }] });

    expect(reply).toEqual({ status: 400, body: { error: `illegal base64 data at input byte ${at}` } });
    expect(fake.chatImages()).toEqual([]);
  });

  it('images that are not strings are a type error of api.ImageData', async () => {
    expect(await postChat({ model: 'gemma3:4b', messages: [{ role: 'user', content: 'hi', images: [42] }] })).toEqual({
      status: 400,
      body: { error: 'json: cannot unmarshal number into Go struct field Alias.images of type api.ImageData' },
    });
    expect(await postChat({ model: 'gemma3:4b', messages: [{ role: 'user', content: 'hi', images: 'aGk=' }] })).toEqual({
      status: 400,
      body: { error: 'json: cannot unmarshal string into Go struct field Alias.images of type []api.ImageData' },
    });
  });

  it('line breaks inside the base64 are skipped, as Go skips them', async () => {
    fake.enqueue('seen');
    const encoded = Buffer.from(PNG).toString('base64');
    const wrapped = encoded.replace(/(.{60})/g, '$1\r\n');

    const reply = await fetch(`${fake.url}/api/chat`, {
      method: 'POST',
      body: JSON.stringify({ model: 'gemma3:4b', stream: false, messages: [{ role: 'user', content: 'hi', images: [wrapped] }] }),
    });

    expect(reply.status).toBe(200);
    expect(Buffer.from(fake.chatImages()[0]?.[0]?.[0] ?? []).equals(Buffer.from(PNG))).toBe(true);
  });
});
