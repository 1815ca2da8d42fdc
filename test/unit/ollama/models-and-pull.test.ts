// The adapter's model list (GET /api/tags + POST /api/show), pulls (POST /api/pull) and per-request model,
// against the fake Ollama on loopback.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo, Server as TcpServer, Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { PullProgress } from '../../../server/core/ports.ts';
import { createOllamaChatModel, SHOW_CONCURRENCY } from '../../../server/ollama/index.ts';
import { createFakeOllama } from '../../fakes/fake-ollama.ts';
import type { FakeOllama } from '../../fakes/fake-ollama.ts';
import { USER_HI, catchChatModelError, collectChunks, createGate, textOf } from './helpers.ts';

let fake: FakeOllama;
const extraServers: Array<Server | TcpServer> = [];
const openSockets: Socket[] = [];

beforeEach(async () => {
  fake = await createFakeOllama({ models: ['mistral:7b'] });
});

afterEach(async () => {
  await fake.close();
  for (const socket of openSockets.splice(0)) socket.destroy();
  await Promise.all(extraServers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Something at the Ollama URL that answers /api/pull with `body` as NDJSON: not Ollama, or a broken one. */
async function serveRawPull(body: string): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
    res.end(body);
  });
  extraServers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function collectPull(stream: AsyncIterable<PullProgress>, seen: PullProgress[] = []): Promise<PullProgress[]> {
  for await (const progress of stream) seen.push(progress);
  return seen;
}

const QWEN = {
  totalBytes: 522_653_952,
  steps: 4,
  capabilities: ['completion', 'tools', 'thinking'],
  contextLength: 40_960,
  family: 'qwen3',
  parameterSize: '751.63M',
  quantization: 'Q4_K_M',
};

describe('listModels', () => {
  it('lists every model with its own details, capabilities and context length', async () => {
    fake.setModels([
      'mistral:7b',
      { name: 'llava:13b', capabilities: ['completion', 'vision'], contextLength: 4096, sizeBytes: 8_011_256_494, parameterSize: '13B', quantization: 'Q4_0', family: 'llama' },
      { name: 'nomic-embed-text', capabilities: ['embedding'], contextLength: 2048, sizeBytes: 274_302_450, parameterSize: '137M', quantization: 'F16', family: 'nomic-bert' },
    ]);
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect(await model.listModels()).toEqual([
      { name: 'mistral:7b', sizeBytes: 4_372_824_384, parameterSize: '7.2B', quantization: 'Q4_0', family: 'llama', capabilities: ['completion'], contextLength: 32_768 },
      { name: 'llava:13b', sizeBytes: 8_011_256_494, parameterSize: '13B', quantization: 'Q4_0', family: 'llama', capabilities: ['completion', 'vision'], contextLength: 4096 },
      { name: 'nomic-embed-text:latest', sizeBytes: 274_302_450, parameterSize: '137M', quantization: 'F16', family: 'nomic-bert', capabilities: ['embedding'], contextLength: 2048 },
    ]);
    const asked = fake.requests.map((request) => [request.path, (request.body as { model?: string } | undefined)?.model]);
    expect(asked[0]).toEqual(['/api/tags', undefined]);
    expect(asked.slice(1).sort()).toEqual([
      ['/api/show', 'llava:13b'],
      ['/api/show', 'mistral:7b'],
      ['/api/show', 'nomic-embed-text:latest'],
    ]);
  });

  it('says unknown when Ollama reports no capabilities or context length', async () => {
    fake.setModels([{ name: 'odd:1b', capabilities: [], contextLength: null }]);
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect(await model.listModels()).toMatchObject([{ name: 'odd:1b', capabilities: [], contextLength: null }]);
  });

  it('keeps a model whose /api/show fails, with its capabilities and context length unknown', async () => {
    fake.setModels([
      'mistral:7b',
      { name: 'broken:1b', capabilities: ['completion'], showError: { message: 'open /usr/share/ollama/.ollama/models/blobs/sha256-1: no such file or directory' } },
    ]);
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const listed = await model.listModels();

    expect(listed.map(({ name, capabilities, contextLength }) => ({ name, capabilities, contextLength }))).toEqual([
      { name: 'mistral:7b', capabilities: ['completion'], contextLength: 32_768 },
      { name: 'broken:1b', capabilities: [], contextLength: null },
    ]);
    expect(listed[1]).toMatchObject({ sizeBytes: 4_372_824_384, parameterSize: '7.2B', family: 'llama' });
  });

  it('asks /api/show in parallel, at most SHOW_CONCURRENCY at a time', async () => {
    fake.setModels(Array.from({ length: 10 }, (_, index) => `model${index}:1b`));
    let inFlight = 0;
    let most = 0;
    const counting: typeof fetch = async (input, init) => {
      const isShow = String(input instanceof Request ? input.url : input).endsWith('/api/show');
      if (isShow) most = Math.max(most, ++inFlight);
      try {
        return await fetch(input, init);
      } finally {
        if (isShow) inFlight--;
      }
    };
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b', fetch: counting });

    expect(await model.listModels()).toHaveLength(10);
    expect(most).toBe(SHOW_CONCURRENCY);
  });

  it('gives up after the health timeout when Ollama accepts but never answers', async () => {
    const silent = createTcpServer((socket) => openSockets.push(socket));
    extraServers.push(silent);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const host = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const model = createOllamaChatModel({ host, model: 'mistral:7b', healthTimeoutMs: 100 });

    const error = await catchChatModelError(() => model.listModels());

    expect(error.code).toBe('unreachable');
    expect(error.message).toBe(`Ollama at ${host} did not answer within 0.1 s; restart it with \`ollama serve\`.`);
  });

  it('throws an unreachable ChatModelError in the adapter\'s words when Ollama is not running', async () => {
    await fake.close();
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => model.listModels());

    expect(error.code).toBe('unreachable');
    expect(error.message).toBe(`Ollama is not reachable at ${fake.url}. Start it with \`ollama serve\` (or set --ollama-url).`);
  });
});

describe('pull', () => {
  it('streams Ollama\'s progress lines until success, then the model is listed', async () => {
    fake.setPullable({ 'qwen3:0.6b': QWEN });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const progress = await collectPull(model.pull('qwen3:0.6b', new AbortController().signal));

    expect(fake.requests.find((request) => request.path === '/api/pull')?.body).toEqual({ model: 'qwen3:0.6b', stream: true });
    const weights = progress[1]?.digest ?? '';
    expect(weights).toMatch(/^sha256:[0-9a-f]{64}$/);
    const pulling = `pulling ${weights.slice(7, 19)}`;
    expect(progress.slice(0, 6)).toEqual([
      { status: 'pulling manifest' },
      { status: pulling, digest: weights, total: 522_653_952 },
      { status: pulling, digest: weights, total: 522_653_952, completed: 130_663_488 },
      { status: pulling, digest: weights, total: 522_653_952, completed: 261_326_976 },
      { status: pulling, digest: weights, total: 522_653_952, completed: 391_990_464 },
      { status: pulling, digest: weights, total: 522_653_952, completed: 522_653_952 },
    ]);
    // The template, license, params and config layers, each whole at once.
    expect(progress.slice(6, 10).every((line) => line.digest !== undefined && line.completed === line.total)).toBe(true);
    expect(progress.slice(10).map((line) => line.status)).toEqual(['verifying sha256 digest', 'writing manifest', 'success']);

    expect((await model.listModels()).find((listed) => listed.name === 'qwen3:0.6b')).toEqual({
      name: 'qwen3:0.6b',
      sizeBytes: 522_653_952,
      parameterSize: '751.63M',
      quantization: 'Q4_K_M',
      family: 'qwen3',
      capabilities: ['completion', 'tools', 'thinking'],
      contextLength: 40_960,
    });
    expect(fake.pullsCancelled).toEqual([]);
  });

  it('throws a ChatModelError with Ollama\'s own words for a name the registry does not have', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    const seen: PullProgress[] = [];

    const error = await catchChatModelError(() => collectPull(model.pull('mistrall:7b', new AbortController().signal), seen));

    expect(seen).toEqual([{ status: 'pulling manifest' }]);
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain('pull model manifest: file does not exist');
    expect(error.message).toContain('"mistrall:7b"');
    expect((await model.listModels()).map((listed) => listed.name)).toEqual(['mistral:7b']);
  });

  it('throws with Ollama\'s words when a download fails part way', async () => {
    fake.setPullable({ 'qwen3:0.6b': { ...QWEN, errorAfter: { steps: 2, message: 'max retries exceeded: unexpected EOF' } } });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    const seen: PullProgress[] = [];

    const error = await catchChatModelError(() => collectPull(model.pull('qwen3:0.6b', new AbortController().signal), seen));

    expect(seen.at(-1)).toMatchObject({ completed: 261_326_976 });
    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain('max retries exceeded: unexpected EOF');
  });

  it('refuses with Ollama\'s words when Ollama rejects the request', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => collectPull(model.pull('', new AbortController().signal)));

    expect(error.code).toBe('bad_response');
    expect(error.message).toContain('HTTP 400: invalid model name');
  });

  it('hangs up when aborted mid-pull: Ollama sees the cancel and the model is not installed', async () => {
    const gate = createGate();
    fake.setPullable({ 'qwen3:0.6b': { ...QWEN, gate: gate.promise } });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    const controller = new AbortController();
    const seen: PullProgress[] = [];

    const error = await catchChatModelError(async () => {
      for await (const progress of model.pull('qwen3:0.6b', controller.signal)) {
        seen.push(progress);
        if (progress.digest !== undefined) controller.abort();
      }
    });

    expect(error.code).toBe('aborted');
    expect(error.message).toContain('"qwen3:0.6b"');
    await fake.waitForPullCancelled();
    expect(fake.pullsCancelled).toEqual(['qwen3:0.6b']);
    gate.open();
    expect(seen).toHaveLength(2);
    expect((await model.listModels()).map((listed) => listed.name)).toEqual(['mistral:7b']);
  });

  it('hangs up when the caller stops reading early', async () => {
    fake.setPullable({ 'qwen3:0.6b': { ...QWEN, durationMs: 2000 } });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    for await (const progress of model.pull('qwen3:0.6b', new AbortController().signal)) {
      if (progress.digest !== undefined) break;
    }

    await fake.waitForPullCancelled();
    expect(fake.pullsCancelled).toEqual(['qwen3:0.6b']);
  });

  it('says the connection broke when Ollama goes away mid-pull', async () => {
    const gate = createGate();
    fake.setPullable({ 'qwen3:0.6b': { ...QWEN, gate: gate.promise } });
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(async () => {
      for await (const progress of model.pull('qwen3:0.6b', new AbortController().signal)) {
        if (progress.digest !== undefined) fake.setDown(true);
      }
    });

    expect(error.code).toBe('stream_failed');
    expect(error.message).toContain(`The connection to Ollama at ${fake.url} broke in the middle of the pull of "qwen3:0.6b"`);
    expect(fake.pullsCancelled).toEqual([]);
  });

  it('fails a stream that ends without success, or sends a line that is no progress', async () => {
    const ended = createOllamaChatModel({ host: await serveRawPull('{"status":"pulling manifest"}\n'), model: 'mistral:7b' });
    const endedError = await catchChatModelError(() => collectPull(ended.pull('qwen3:0.6b', new AbortController().signal)));
    expect(endedError.code).toBe('stream_failed');
    expect(endedError.message).toContain('ended the pull of "qwen3:0.6b" before saying it succeeded');

    const garbled = createOllamaChatModel({ host: await serveRawPull('{"status":"pulling manifest"}\n<html>\n'), model: 'mistral:7b' });
    const garbledError = await catchChatModelError(() => collectPull(garbled.pull('qwen3:0.6b', new AbortController().signal)));
    expect(garbledError.code).toBe('stream_failed');
    expect(garbledError.message).toContain('sent a pull progress line Easel cannot read (it is not JSON): "<html>"');
  });

  it('says Ollama is not reachable when nothing listens', async () => {
    await fake.close();
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => collectPull(model.pull('qwen3:0.6b', new AbortController().signal)));

    expect(error.code).toBe('unreachable');
    expect(error.message).toContain(`Ollama is not reachable at ${fake.url}`);
  });
});

describe('a model per request', () => {
  beforeEach(() => {
    fake.setModels(['mistral:7b', 'llama3.2']);
  });

  it('chats with request.model when given, else the default', async () => {
    fake.enqueue('from llama', 'from mistral');
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect(textOf(await collectChunks(model.chat({ messages: USER_HI, model: 'llama3.2' }))).join('')).toBe('from llama');
    expect(textOf(await collectChunks(model.chat({ messages: USER_HI }))).join('')).toBe('from mistral');

    expect(fake.chatRequests().map((request) => request.model)).toEqual(['llama3.2', 'mistral:7b']);
  });

  it('names the requested model when it is not pulled', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const error = await catchChatModelError(() => collectChunks(model.chat({ messages: USER_HI, model: 'gemma3:1b' })));

    expect(error.code).toBe('model_not_found');
    expect(error.message).toBe('The model "gemma3:1b" is not pulled in Ollama. Run `ollama pull gemma3:1b`.');
  });

  it('checks the health of the given model, or of the default', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect(await model.checkHealth(undefined, 'llama3.2')).toEqual({ reachable: true, version: '0.12.6', model: 'llama3.2', modelAvailable: true });
    expect(await model.checkHealth(undefined, 'gemma3:1b')).toMatchObject({
      model: 'gemma3:1b',
      modelAvailable: false,
      remedy: 'ollama pull gemma3:1b',
      problem: expect.stringContaining('The model "gemma3:1b" is not pulled in Ollama. Run `ollama pull gemma3:1b`, or choose one it has ('),
    });
    expect(await model.checkHealth()).toMatchObject({ model: 'mistral:7b', modelAvailable: true });
  });

  it('tells whether the given model is loaded, and unloads the given model', async () => {
    fake.setLoaded(['llama3.2']);
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect(await model.isLoaded(undefined, 'llama3.2')).toBe(true);
    expect(await model.isLoaded()).toBe(false);
    await model.unload(undefined, 'llama3.2');
    expect(fake.unloads).toEqual(['llama3.2']);
    expect(await model.isLoaded(undefined, 'llama3.2')).toBe(false);

    const error = await catchChatModelError(() => model.unload(undefined, 'gemma3:1b'));
    expect(error.message).toContain('"gemma3:1b"');
  });
});
