// The fake's own rules, checked over raw HTTP: if these drift from Ollama's real API, every
// test built on the fake would lie.
import { connect } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFakeOllama, scriptReply, splitIntoChunks } from '../../fakes/fake-ollama.ts';
import type { FakeOllama } from '../../fakes/fake-ollama.ts';

let fake: FakeOllama;

beforeEach(async () => {
  fake = await createFakeOllama();
});

afterEach(async () => {
  await fake.close();
});

const HI = [{ role: 'user', content: 'hello' }];

function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${fake.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function expectError(response: Response, status: number, error: string | RegExp): Promise<void> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toContain('application/json');
  const body = (await response.json()) as { error: unknown };
  if (typeof error === 'string') expect(body.error).toBe(error);
  else expect(body.error).toMatch(error);
}

/** A POST over a raw socket: the head, the de-chunked body, and how many HTTP chunks carried it. */
async function postRaw(path: string, body: unknown): Promise<{ head: string; body: string; httpChunks: number }> {
  const payload = JSON.stringify(body);
  const socket = connect(fake.port, '127.0.0.1');
  socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`);
  const parts: Buffer[] = [];
  for await (const part of socket) parts.push(part as Buffer);
  const raw = Buffer.concat(parts);
  const headEnd = raw.indexOf('\r\n\r\n');
  const decoded: Buffer[] = [];
  let httpChunks = 0;
  for (let at = headEnd + 4; ; ) {
    const sizeEnd = raw.indexOf('\r\n', at);
    const size = Number.parseInt(raw.subarray(at, sizeEnd).toString('latin1'), 16);
    if (size === 0) break;
    decoded.push(raw.subarray(sizeEnd + 2, sizeEnd + 2 + size));
    httpChunks++;
    at = sizeEnd + 2 + size + 2;
  }
  return { head: raw.subarray(0, headEnd).toString('latin1'), body: Buffer.concat(decoded).toString('utf8'), httpChunks };
}

async function readLines(response: Response): Promise<Array<Record<string, unknown>>> {
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('fake Ollama: model endpoints', () => {
  it('answers /api/version and / like Ollama', async () => {
    const version = await fetch(`${fake.url}/api/version`);
    expect(await version.json()).toEqual({ version: '0.12.6' });
    expect(await (await fetch(`${fake.url}/`)).text()).toBe('Ollama is running');
  });

  it('lists models with tags, digests and details', async () => {
    fake.setModels(['mistral:7b', 'llava']);
    const body = (await (await fetch(`${fake.url}/api/tags`)).json()) as { models: Array<Record<string, unknown>> };

    expect(body.models.map((model) => [model.name, model.model])).toEqual([
      ['mistral:7b', 'mistral:7b'],
      ['llava:latest', 'llava:latest'],
    ]);
    expect(body.models[0]).toMatchObject({
      modified_at: expect.any(String),
      size: expect.any(Number),
      digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      details: { format: 'gguf', family: 'llama', parameter_size: '7.2B', quantization_level: 'Q4_0' },
    });
  });

  it('shows a model, or 404s an unknown one', async () => {
    const shown = (await (await post('/api/show', { model: 'mistral:7b' })).json()) as Record<string, unknown>;
    expect(shown).toMatchObject({
      modelfile: expect.stringContaining('FROM'),
      parameters: expect.any(String),
      template: expect.any(String),
      details: { format: 'gguf' },
      model_info: { 'general.architecture': 'llama' },
      capabilities: ['completion'],
    });
    await expectError(await post('/api/show', { model: 'nope:1b' }), 404, "model 'nope:1b' not found");
  });

  it('answers unknown routes with gin\'s plain-text 404', async () => {
    const response = await fetch(`${fake.url}/api/nothing`);
    expect(response.status).toBe(404);
    expect(await response.text()).toBe('404 page not found');
  });

  it('answers a known route with the wrong method with gin\'s plain-text 405 (HandleMethodNotAllowed)', async () => {
    for (const [method, path] of [['GET', '/api/chat'], ['POST', '/api/tags'], ['DELETE', '/api/ps'], ['GET', '/api/show'], ['GET', '/api/pull']] as const) {
      const response = await fetch(`${fake.url}${path}`, { method });
      expect(response.status, `${method} ${path}`).toBe(405);
      expect(response.headers.get('content-type')).toBe('text/plain');
      expect(await response.text()).toBe('405 method not allowed');
    }
  });
});

describe('fake Ollama: /api/chat validation', () => {
  it('refuses a body that is not JSON', async () => {
    await expectError(await post('/api/chat', '{"model": mistral}'), 400, /^invalid character 'm'/);
    await expectError(await post('/api/chat', ''), 400, 'missing request body');
  });

  it('refuses a missing model name', async () => {
    await expectError(await post('/api/chat', { messages: HI }), 400, 'model is required');
  });

  it('refuses an unknown model with 404', async () => {
    await expectError(await post('/api/chat', { model: 'gemma3', messages: HI }), 404, "model 'gemma3' not found");
  });

  it('accepts any role, as Ollama only lower-cases it', async () => {
    fake.enqueue('hi');
    const messages = [{ role: 'narrator', content: 'x' }, { role: 'USER', content: 'hello' }];
    const lines = await readLines(await post('/api/chat', { model: 'mistral:7b', messages }));
    expect(lines.at(-1)).toMatchObject({ done: true });
    expect(fake.renderedPrompts()).toEqual(['[INST] hello[/INST] ']);
  });

  it('refuses messages that are not an array, and wrongly typed fields', async () => {
    await expectError(
      await post('/api/chat', { model: 'mistral:7b', messages: 'hello' }),
      400,
      'json: cannot unmarshal string into Go struct field ChatRequest.messages of type []api.Message',
    );
    await expectError(await post('/api/chat', { model: 'mistral:7b', messages: HI, stream: 'yes' }), 400, /ChatRequest\.stream/);
    await expectError(
      await post('/api/chat', { model: 'mistral:7b', messages: HI, format: 'yaml' }),
      400,
      'invalid format: expected "json" or a valid JSON schema',
    );
  });

  it('fails loudly when no scripted reply is left', async () => {
    await expectError(await post('/api/chat', { model: 'mistral:7b', messages: HI }), 500, 'fake-ollama: no scripted reply left');
    expect(fake.scriptErrors).toEqual(['fake-ollama: no scripted reply left']);
  });

  it('only loads the model when there are no messages, without using a scripted reply', async () => {
    const response = await post('/api/chat', { model: 'mistral:7b', messages: [] });
    expect(await response.json()).toMatchObject({ model: 'mistral:7b', done: true, done_reason: 'load' });
    expect(fake.unloads).toEqual([]);
  });
});

describe('fake Ollama: /api/chat replies', () => {
  it('streams NDJSON by default, ending with done and the stats', async () => {
    fake.enqueue({ chunks: ['Hel', 'lo'], promptEvalCount: 12 });
    const response = await post('/api/chat', { model: 'mistral:7b', messages: HI });

    expect(response.headers.get('content-type')).toBe('application/x-ndjson');
    const lines = await readLines(response);
    expect(lines).toEqual([
      { model: 'mistral:7b', created_at: expect.any(String), message: { role: 'assistant', content: 'Hel' }, done: false },
      { model: 'mistral:7b', created_at: expect.any(String), message: { role: 'assistant', content: 'lo' }, done: false },
      {
        model: 'mistral:7b',
        created_at: expect.any(String),
        message: { role: 'assistant', content: '' },
        done: true,
        done_reason: 'stop',
        total_duration: expect.any(Number),
        load_duration: expect.any(Number),
        prompt_eval_count: 12,
        prompt_eval_duration: expect.any(Number),
        eval_count: 2,
        eval_duration: expect.any(Number),
      },
    ]);
  });

  it('answers stream:false with one object holding the whole content', async () => {
    fake.enqueue({ chunks: ['Hel', 'lo'], evalCount: 5, doneReason: 'length' });
    const response = await post('/api/chat', { model: 'mistral:7b', messages: HI, stream: false });

    expect(response.headers.get('content-type')).toContain('application/json');
    expect(await response.json()).toMatchObject({
      message: { role: 'assistant', content: 'Hello' },
      done: true,
      done_reason: 'length',
      eval_count: 5,
    });
  });

  it('uses scripted replies in order, calling functions with the request', async () => {
    fake.enqueue('first reply', (request) => `you said ${request.messages?.at(-1)?.content}`);
    const first = await readLines(await post('/api/chat', { model: 'mistral:7b', messages: HI }));
    const second = await readLines(await post('/api/chat', { model: 'mistral:7b', messages: HI }));

    const contentOf = (lines: Array<Record<string, unknown>>): string =>
      lines.map((line) => (line.message as { content: string }).content).join('');
    expect(contentOf(first)).toBe('first reply');
    expect(contentOf(second)).toBe('you said hello');
    expect(first.length).toBeGreaterThan(2);
    expect(fake.pendingReplies).toBe(0);
  });

  it('sends an {"error"} line after some chunks and ends the response', async () => {
    fake.enqueue({ chunks: ['a', 'b', 'c'], errorAfter: { chunks: 2, message: 'llama runner process has terminated' } });
    const lines = await readLines(await post('/api/chat', { model: 'mistral:7b', messages: HI }));

    expect(lines.map((line) => line.error ?? (line.message as { content: string }).content)).toEqual([
      'a',
      'b',
      'llama runner process has terminated',
    ]);
  });

  it('refuses an impossible scripted reply when format is set', async () => {
    const format = { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] };
    fake.enqueue('{"caption": "x"}', 'not json at all', '{"prompt": 3}');

    for (let i = 0; i < 3; i++) {
      await expectError(
        await post('/api/chat', { model: 'mistral:7b', messages: HI, format }),
        500,
        'fake-ollama: scripted reply does not satisfy the requested format',
      );
    }
    expect(fake.scriptErrors).toEqual([
      expect.stringContaining('missing required property "prompt"'),
      expect.stringContaining('not valid JSON'),
      expect.stringContaining('$.prompt is number, expected string'),
    ]);
  });

  it('accepts a reply that satisfies the format, and "json" needs an object', async () => {
    const format = { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'], additionalProperties: true };
    fake.enqueue('{"prompt": "a cat", "extra": 1}', '[1, 2]');

    const ok = await post('/api/chat', { model: 'mistral:7b', messages: HI, format, stream: false });
    expect(await ok.json()).toMatchObject({ message: { content: '{"prompt": "a cat", "extra": 1}' } });
    await expectError(
      await post('/api/chat', { model: 'mistral:7b', messages: HI, format: 'json' }),
      500,
      'fake-ollama: scripted reply does not satisfy the requested format',
    );
  });

  describe('a JSON schema, as llama.cpp\'s json-schema-to-grammar converts it', () => {
    const format = {
      type: 'object',
      properties: {
        note: { type: 'string', maxLength: 5 },
        prompt: { type: 'string' },
        steps: { type: 'integer', minimum: 1, maximum: 150 },
        seed: { type: 'integer', minimum: -1 },
        cfg: { type: 'number', minimum: 0, maximum: 30 },
      },
      required: ['prompt', 'steps', 'seed', 'cfg'],
    };

    async function tryReply(reply: string, schema: object = format): Promise<Response> {
      fake.enqueue(reply);
      return post('/api/chat', { model: 'mistral:7b', messages: HI, format: schema, stream: false });
    }

    it('writes the required keys first, in the order of `properties`, then the optional ones', async () => {
      expect((await tryReply('{"prompt": "a", "steps": 2, "seed": -1, "cfg": 7}')).status).toBe(200);
      expect((await tryReply('{"prompt": "a", "steps": 2, "seed": 5, "cfg": 7, "note": "hi"}')).status).toBe(200);
      await expectError(await tryReply('{"steps": 2, "prompt": "a", "seed": -1, "cfg": 7}'), 500, /does not satisfy/);
      await expectError(await tryReply('{"note": "hi", "prompt": "a", "steps": 2, "seed": -1, "cfg": 7}'), 500, /does not satisfy/);
      expect(fake.scriptErrors).toEqual([expect.stringContaining('"prompt" out of order'), expect.stringContaining('"prompt" out of order')]);
    });

    it('allows no other key unless additionalProperties says so', async () => {
      await expectError(await tryReply('{"prompt": "a", "steps": 2, "seed": -1, "cfg": 7, "mood": "x"}'), 500, /does not satisfy/);
      expect(fake.scriptErrors).toEqual([expect.stringContaining('"mood", which the grammar does not allow')]);
    });

    it('keeps integers within minimum/maximum and strings within maxLength, but numbers unbounded', async () => {
      await expectError(await tryReply('{"prompt": "a", "steps": 151, "seed": -1, "cfg": 7}'), 500, /does not satisfy/);
      await expectError(await tryReply('{"prompt": "a", "steps": 20, "seed": -2, "cfg": 7}'), 500, /does not satisfy/);
      await expectError(await tryReply('{"prompt": "a", "steps": 20, "seed": -1, "cfg": 7, "note": "toolong"}'), 500, /does not satisfy/);
      expect(fake.scriptErrors).toEqual([
        expect.stringContaining('$.steps is 151, outside the grammar\'s range 1..150'),
        expect.stringContaining('$.seed is -2, outside the grammar\'s range -1..'),
        expect.stringContaining('$.note has 7 characters'),
      ]);
      // No range for `number` (json-schema-to-grammar.cpp:952, a TODO): the app's repair has to clamp it.
      expect((await tryReply('{"prompt": "a", "steps": 20, "seed": 4294967295, "cfg": 99}')).status).toBe(200);
    });

    it('refuses an integer bound that overflows the converter\'s 32-bit get<int>()', async () => {
      const overflowing = { type: 'object', properties: { seed: { type: 'integer', minimum: -1, maximum: 4_294_967_295 } }, required: ['seed'] };
      await expectError(await tryReply('{"seed": 1}', overflowing), 500, 'fake-ollama: the format schema has a bound llama.cpp would misread');
      expect(fake.scriptErrors).toEqual([expect.stringContaining('$.properties.seed.maximum is 4294967295, which llama.cpp\'s get<int>() reads as -1')]);
    });
  });

  it('floods the body a paced reply sends, line for line, in far fewer HTTP chunks, telling each line as it leaves', async () => {
    const chunks = Array.from({ length: 5000 }, (_, i) => (i % 7 === 0 ? '\n"é' : ` w${i}`));
    const written: number[] = [];
    fake.enqueue({ chunks, promptEvalCount: 3 }, { chunks, promptEvalCount: 3, flood: true, onLineWritten: (line) => written.push(line) });
    const paced = await postRaw('/api/chat', { model: 'mistral:7b', messages: HI });
    const flood = await postRaw('/api/chat', { model: 'mistral:7b', messages: HI });

    const parse = (body: string) => body.split('\n').filter((line) => line !== '').map((line) => ({ ...(JSON.parse(line) as object), created_at: 'time' }));
    expect(flood.head).toContain('Content-Type: application/x-ndjson');
    expect(parse(flood.body)).toEqual(parse(paced.body));
    expect(parse(flood.body)).toHaveLength(5001);
    expect(paced.httpChunks).toBe(5001);
    expect(flood.httpChunks).toBeLessThan(20);
    expect(written).toEqual(chunks.map((_, i) => i));
  });

  it('refuses a flood with pacing or failure options', async () => {
    fake.enqueue({ chunks: ['a'], flood: true, delayMs: 5 });
    const response = await post('/api/chat', { model: 'mistral:7b', messages: HI });
    await expectError(response, 500, /flood reply takes no pacing/);
    expect(fake.scriptErrors).toEqual(['fake-ollama: a flood reply takes no pacing or failure options']);
  });

  it('tells each paced line as it is handed to the socket', async () => {
    const written: number[] = [];
    fake.enqueue({ chunks: ['a', 'b', 'c'], onLineWritten: (line) => written.push(line) });
    const lines = await readLines(await post('/api/chat', { model: 'mistral:7b', messages: HI }));
    expect(lines).toHaveLength(4);
    expect(written).toEqual([0, 1, 2]);
  });

  it('counts a client hang-up and stops sending', async () => {
    let openGate!: () => void;
    fake.enqueue({ chunks: ['first', 'second'], gate: new Promise<void>((resolve) => (openGate = resolve)) });
    const controller = new AbortController();
    const response = await fetch(`${fake.url}/api/chat`, {
      method: 'POST',
      body: JSON.stringify({ model: 'mistral:7b', messages: HI }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"first"');

    controller.abort();
    await fake.waitForHangup();
    openGate();

    expect(fake.hangups).toBe(1);
    expect(fake.requests[0]?.aborted).toBe(true);
  });
});

describe('fake Ollama: loading, stalls and /api/ps', () => {
  it('sends no headers while "loading", then headers with the first line', async () => {
    fake.enqueue({ chunks: ['hi'], loadMs: 500 });
    let answered = false;
    const response = post('/api/chat', { model: 'mistral:7b', messages: HI }).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(answered).toBe(false);
    expect((await readLines(await response)).map((line) => line.done)).toEqual([false, true]);
  });

  it('answers an error before any line as a JSON status, like streamResponse', async () => {
    fake.enqueue({ chunks: ['a'], errorAfter: { chunks: 0, message: 'model requires more system memory' } });
    await expectError(await post('/api/chat', { model: 'mistral:7b', messages: HI }), 500, 'model requires more system memory');
    fake.enqueue({ chunks: [], errorAfter: { chunks: 0, status: 400, message: 'invalid format' } });
    await expectError(await post('/api/chat', { model: 'mistral:7b', messages: HI }), 400, 'invalid format');
  });

  it('ends an error after content with the {"error"} line and no done line', async () => {
    fake.enqueue({ chunks: ['a', 'b'], errorAfter: { chunks: 1, message: 'runner died' } });
    const response = await post('/api/chat', { model: 'mistral:7b', messages: HI });
    expect(response.status).toBe(200);
    const lines = await readLines(response);
    expect(lines).toEqual([expect.objectContaining({ done: false }), { error: 'runner died' }]);
  });

  it('stalls after `stallAfter` lines until the client hangs up, and says so once they are flushed', async () => {
    fake.enqueue({ chunks: ['one', 'two', 'three'], stallAfter: 2 });
    const controller = new AbortController();
    const response = await fetch(`${fake.url}/api/chat`, { method: 'POST', body: JSON.stringify({ model: 'mistral:7b', messages: HI }), signal: controller.signal });
    await fake.waitForStall();
    const reader = response.body!.getReader();
    let text = '';
    while ((text.match(/\n/g) ?? []).length < 2) text += new TextDecoder().decode((await reader.read()).value);
    expect(text).toContain('"two"');
    expect(text).not.toContain('"three"');
    controller.abort();
    await fake.waitForHangup();
  });

  it('sends `rawLineAfter.line` as is after that many chunks, then the other chunks and the done line', async () => {
    fake.enqueue({ chunks: ['a', 'b', 'c'], rawLineAfter: { chunks: 1, line: '{"message": 42, "done": "maybe"}' } });
    const text = await (await post('/api/chat', { model: 'mistral:7b', messages: HI })).text();
    const lines = text.split('\n');

    expect(lines[1]).toBe('{"message": 42, "done": "maybe"}');
    const others = [lines[0], ...lines.slice(2)].filter((line) => line !== '').map((line) => JSON.parse(line ?? '') as Record<string, unknown>);
    expect(others.map((line) => (line.message as { content: string }).content)).toEqual(['a', 'b', 'c', '']);
    expect(others.at(-1)?.done).toBe(true);
  });

  it('sends an endless line after `endlessLineAfter.chunks` chunks: no newline, up to maxBytes, then the end of the body', async () => {
    let sent: { bytes: number; hungUp: boolean } | undefined;
    fake.enqueue({ chunks: ['a', 'b'], endlessLineAfter: { chunks: 1, maxBytes: 100_000, onEnd: (result) => (sent = result) } });
    const text = await (await post('/api/chat', { model: 'mistral:7b', messages: HI })).text();
    const [first, endless, ...rest] = text.split('\n');

    expect(JSON.parse(first ?? '')).toMatchObject({ message: { content: 'a' }, done: false });
    expect(rest).toEqual([]);
    expect(endless).toMatch(/^\{"model":"mistral:7b","created_at":"[^"]+","message":\{"role":"assistant","content":"a+$/);
    expect(Buffer.byteLength(endless ?? '')).toBe(100_000);
    expect(sent).toEqual({ bytes: 100_000, hungUp: false });
  });

  it('stops an endless line when the client hangs up, with backpressure meanwhile', async () => {
    let sent: { bytes: number; hungUp: boolean } | undefined;
    const ended = new Promise<void>((resolve) => {
      fake.enqueue({ chunks: [], endlessLineAfter: { chunks: 0, onEnd: (result) => ((sent = result), resolve()) } });
    });
    const controller = new AbortController();
    const stream = await fetch(`${fake.url}/api/chat`, {
      method: 'POST',
      body: JSON.stringify({ model: 'mistral:7b', messages: HI }),
      signal: controller.signal,
    });
    const reader = stream.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"content":"');
    controller.abort();
    await ended;

    expect(sent?.hungUp).toBe(true);
    // Not read, so the fake waited on the socket instead of writing its 64 MB default.
    expect(sent?.bytes).toBeLessThan(64 * 1024 * 1024);
    expect(fake.hangups).toBe(1);
  });

  it('lists loaded models in /api/ps like api.ProcessResponse: none at first, then the chatted model until unloaded', async () => {
    const ps = async () => ((await (await fetch(`${fake.url}/api/ps`)).json()) as { models: Array<Record<string, unknown>> }).models;
    expect(await ps()).toEqual([]);
    fake.enqueue('hi');
    await (await post('/api/chat', { model: 'mistral:7b', messages: HI })).text();
    const [entry] = await ps();
    expect(entry).toMatchObject({ name: 'mistral:7b', model: 'mistral:7b', size_vram: expect.any(Number), context_length: expect.any(Number) });
    expect(Date.parse(String(entry?.expires_at))).toBeGreaterThan(Date.now());
    await post('/api/generate', { model: 'mistral:7b', prompt: '', keep_alive: 0 });
    expect(await ps()).toEqual([]);
    fake.setLoaded(['llama3.2']);
    expect((await ps()).map((m) => m.name)).toEqual(['llama3.2:latest']);
  });
});

describe('fake Ollama: control', () => {
  it('records an unload from /api/generate with keep_alive 0', async () => {
    const response = await post('/api/generate', { model: 'mistral:7b', prompt: '', keep_alive: 0 });

    expect(await response.json()).toMatchObject({
      model: 'mistral:7b',
      response: '',
      done: true,
      done_reason: 'unload',
    });
    expect(fake.unloads).toEqual(['mistral:7b']);
  });

  it('drops every connection while down, and serves again once up', async () => {
    fake.setDown(true);
    await expect(fetch(`${fake.url}/api/version`)).rejects.toThrow('fetch failed');

    fake.setDown(false);
    expect((await fetch(`${fake.url}/api/version`)).status).toBe(200);
  });

  it('waits for requests and records them with parsed bodies', async () => {
    const waiting = fake.waitForRequests(2, '/api/show');
    await post('/api/show', { model: 'mistral:7b' });
    await post('/api/show', { model: 'mistral:7b' });
    await waiting;

    expect(fake.requests).toMatchObject([
      { method: 'POST', path: '/api/show', body: { model: 'mistral:7b' }, aborted: false },
      { method: 'POST', path: '/api/show', body: { model: 'mistral:7b' }, aborted: false },
    ]);
    expect(fake.requests[0]?.receivedAt).toEqual(expect.any(Number));
  });
});

describe('fake Ollama: models described one by one, and /api/pull', () => {
  it('lists and shows each model with its own details, capabilities and context length', async () => {
    fake.setModels(['mistral:7b', { name: 'qwen3:8b', family: 'qwen3', capabilities: ['completion', 'tools'], contextLength: 40_960, sizeBytes: 5_225_376_047, parameterSize: '8.2B', quantization: 'Q4_K_M' }]);

    const tags = (await (await fetch(`${fake.url}/api/tags`)).json()) as { models: Array<Record<string, unknown>> };
    expect(tags.models[1]).toMatchObject({ name: 'qwen3:8b', size: 5_225_376_047, details: { family: 'qwen3', families: ['qwen3'], parameter_size: '8.2B', quantization_level: 'Q4_K_M' } });
    const shown = (await (await post('/api/show', { model: 'qwen3:8b' })).json()) as Record<string, unknown>;
    expect(shown).toMatchObject({ capabilities: ['completion', 'tools'], model_info: { 'general.architecture': 'qwen3', 'qwen3.context_length': 40_960 } });
    expect(shown.model_info).not.toHaveProperty('llama.context_length');
  });

  it('leaves out empty capabilities and a null context length, and fails a show on request', async () => {
    fake.setModels([{ name: 'odd:1b', capabilities: [], contextLength: null }, { name: 'broken:1b', showError: { message: 'bad manifest' } }]);

    const shown = (await (await post('/api/show', { model: 'odd:1b' })).json()) as Record<string, unknown>;
    expect(shown).not.toHaveProperty('capabilities');
    expect(shown.model_info).not.toHaveProperty('llama.context_length');
    await expectError(await post('/api/show', { model: 'broken:1b' }), 500, 'bad manifest');
  });

  it('streams a pullable name\'s progress (taking `name` as ollama-js sends it), then installs it', async () => {
    fake.setPullable({ tinyllama: { totalBytes: 1000, steps: 2 } });

    const response = await post('/api/pull', { name: 'tinyllama', stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/x-ndjson');
    const lines = await readLines(response);

    const digest = lines[1]?.digest as string;
    expect(lines[0]).toEqual({ status: 'pulling manifest' });
    expect(lines.slice(1, 4)).toEqual([
      { status: `pulling ${digest.slice(7, 19)}`, digest, total: 1000 },
      { status: `pulling ${digest.slice(7, 19)}`, digest, total: 1000, completed: 500 },
      { status: `pulling ${digest.slice(7, 19)}`, digest, total: 1000, completed: 1000 },
    ]);
    // The small layers (template, license, params, config), each reported whole.
    for (const line of lines.slice(4, 8)) {
      expect(line).toMatchObject({ status: `pulling ${(line.digest as string).slice(7, 19)}`, digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
      expect(line.completed).toBe(line.total);
    }
    expect(lines.slice(8)).toEqual([{ status: 'verifying sha256 digest' }, { status: 'writing manifest' }, { status: 'success' }]);
    const tags = (await (await fetch(`${fake.url}/api/tags`)).json()) as { models: Array<{ name: string }> };
    expect(tags.models.map((model) => model.name)).toEqual(['mistral:7b', 'tinyllama:latest']);
  });

  it('streams Ollama\'s error line for an unknown name, answers stream:false with one object, and 400s no name', async () => {
    const unknown = await post('/api/pull', { model: 'nope:1b' });
    expect(unknown.status).toBe(200);
    expect(await readLines(unknown)).toEqual([{ status: 'pulling manifest' }, { error: 'pull model manifest: file does not exist' }]);

    await expectError(await post('/api/pull', { model: 'nope:1b', stream: false }), 500, 'pull model manifest: file does not exist');
    fake.setPullable({ 'tinyllama:latest': {} });
    expect(await (await post('/api/pull', { model: 'tinyllama', stream: false })).json()).toEqual({ status: 'success' });
    await expectError(await post('/api/pull', { model: '' }), 400, 'invalid model name');
    expect(fake.pullsCancelled).toEqual([]);
  });

  it('records a hang-up mid-pull as a cancel and does not install the model', async () => {
    fake.setPullable({ tinyllama: { durationMs: 5000, steps: 5 } });
    const response = await post('/api/pull', { model: 'tinyllama' });
    const reader = response.body!.getReader();
    await reader.read();
    await reader.cancel();

    await fake.waitForPullCancelled();
    expect(fake.pullsCancelled).toEqual(['tinyllama:latest']);
    const tags = (await (await fetch(`${fake.url}/api/tags`)).json()) as { models: Array<{ name: string }> };
    expect(tags.models.map((model) => model.name)).toEqual(['mistral:7b']);
  });
});

describe('scriptReply and splitIntoChunks', () => {
  it('builds prose, a --- line and the metadata JSON, in small chunks', () => {
    const reply = scriptReply('A cat.', { steps: 20 }, { doneReason: 'stop' });

    expect(reply.chunks.join('')).toBe('A cat.\n---\n{"steps":20}');
    expect(reply.doneReason).toBe('stop');
    expect(reply.chunks.every((chunk) => chunk.length >= 1 && chunk.length <= 6)).toBe(true);
  });

  it('never splits a surrogate pair', () => {
    const chunks = splitIntoChunks('🐱🐱🐱🐱🐱🐱🐱');
    expect(chunks.join('')).toBe('🐱🐱🐱🐱🐱🐱🐱');
    expect(chunks.every((chunk) => Array.from(chunk).every((c) => c === '🐱'))).toBe(true);
  });
});
