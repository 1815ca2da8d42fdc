import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo, Server as TcpServer, Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOllamaChatModel } from '../../../server/ollama/index.ts';
import { createFakeOllama } from '../../fakes/fake-ollama.ts';
import type { FakeOllama } from '../../fakes/fake-ollama.ts';
import { catchChatModelError } from './helpers.ts';

let fake: FakeOllama;
const extraServers: Array<Server | TcpServer> = [];
const openSockets: Socket[] = [];

beforeEach(async () => {
  fake = await createFakeOllama({ models: ['mistral:7b', 'llama3.2:latest'], version: '0.12.6' });
});

afterEach(async () => {
  await fake.close();
  for (const socket of openSockets.splice(0)) socket.destroy();
  await Promise.all(
    extraServers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))),
  );
});

async function listen<T extends Server | TcpServer>(server: T): Promise<string> {
  extraServers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('checkHealth', () => {
  it('is healthy when Ollama answers and has the model', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect(await model.checkHealth()).toEqual({
      reachable: true,
      version: '0.12.6',
      model: 'mistral:7b',
      modelAvailable: true,
    });
    expect(fake.requests.map((request) => request.path)).toEqual(['/api/version', '/api/tags']);
  });

  it('says to pull the configured model when Ollama lacks it, or to choose one it has', async () => {
    fake.setModels(['llama3.2:latest']);
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect(await model.checkHealth()).toEqual({
      reachable: true,
      version: '0.12.6',
      model: 'mistral:7b',
      modelAvailable: false,
      remedy: 'ollama pull mistral:7b',
      problem: 'The model "mistral:7b" is not pulled in Ollama. Run `ollama pull mistral:7b`, or choose one it has (llama3.2:latest) in Settings → Models or with --model.',
      installed: ['llama3.2:latest'],
    });
    fake.setModels([]);
    expect(await model.checkHealth()).toMatchObject({ problem: 'The model "mistral:7b" is not pulled in Ollama. Run `ollama pull mistral:7b`.', installed: [] });
  });

  it('says to start Ollama when nothing listens', async () => {
    const { url } = fake;
    await fake.close();
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });

    const health = await model.checkHealth();

    expect(health).toMatchObject({ reachable: false, version: null, modelAvailable: false, remedy: 'ollama serve' });
    expect(health.problem).toContain(url);
  });

  it('reads a model name without a tag as ":latest", both ways', async () => {
    fake.setModels(['mistral:latest']);
    const untagged = createOllamaChatModel({ host: fake.url, model: 'mistral' });
    const otherTag = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect((await untagged.checkHealth()).modelAvailable).toBe(true);
    expect((await otherTag.checkHealth()).modelAvailable).toBe(false);

    fake.setModels(['mistral']);
    const tagged = createOllamaChatModel({ host: fake.url, model: 'mistral:latest' });
    expect((await tagged.checkHealth()).modelAvailable).toBe(true);
  });

  it('gives up on an Ollama that accepts connections but never answers', async () => {
    const silent = createTcpServer((socket) => openSockets.push(socket));
    const url = await listen(silent);
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b', healthTimeoutMs: 100 });

    const health = await model.checkHealth();

    expect(health).toMatchObject({ reachable: false, remedy: 'ollama serve' });
    expect(health.problem).toContain('did not answer');
  });

  it('recognises a server at the URL that is not Ollama', async () => {
    const url = await listen(
      createServer((_req, res) => {
        res.writeHead(404, { 'Content-Type': 'text/html' });
        res.end('<h1>Not Found</h1>');
      }),
    );
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });

    const health = await model.checkHealth();

    expect(health).toMatchObject({ reachable: false, remedy: 'ollama serve' });
    expect(health.problem).toContain('not Ollama');
  });

  it('does not throw when the caller cancels it', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    const health = await model.checkHealth(AbortSignal.abort());

    expect(health).toMatchObject({ reachable: false, modelAvailable: false });
    expect(health.problem).toContain('cancelled');
  });
});

describe('isLoaded', () => {
  it('reads /api/ps: false until Ollama has the model in memory, then true', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    expect(await model.isLoaded()).toBe(false);
    fake.setLoaded(['llama3.2:latest', 'mistral:7b']);
    expect(await model.isLoaded()).toBe(true);
    expect(fake.requests.map((request) => request.path)).toEqual(['/api/ps', '/api/ps']);
  });

  it('is undefined, without throwing, when Ollama cannot tell (down, silent, cancelled)', async () => {
    const silent = createTcpServer((socket) => openSockets.push(socket));
    const silentUrl = await listen(silent);
    expect(await createOllamaChatModel({ host: silentUrl, model: 'mistral:7b', healthTimeoutMs: 100 }).isLoaded()).toBeUndefined();
    expect(await createOllamaChatModel({ host: fake.url, model: 'mistral:7b' }).isLoaded(AbortSignal.abort())).toBeUndefined();
    const { url } = fake;
    await fake.close();
    expect(await createOllamaChatModel({ host: url, model: 'mistral:7b' }).isLoaded()).toBeUndefined();
  });
});

describe('unload', () => {
  it('asks Ollama to unload the model with keep_alive 0', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b', keepAlive: '30m' });

    await model.unload();

    expect(fake.unloads).toEqual(['mistral:7b']);
    expect(fake.requests).toMatchObject([
      { path: '/api/generate', body: { model: 'mistral:7b', prompt: '', keep_alive: 0, stream: false } },
    ]);
  });

  it('throws "unreachable" when Ollama is not running', async () => {
    const { url } = fake;
    await fake.close();
    const model = createOllamaChatModel({ host: url, model: 'mistral:7b' });

    expect((await catchChatModelError(() => model.unload())).code).toBe('unreachable');
  });

  it('throws "model_not_found" for a model Ollama does not have', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'phi3:mini' });

    const error = await catchChatModelError(() => model.unload());

    expect(error.code).toBe('model_not_found');
    expect(error.message).toContain('ollama pull phi3:mini');
  });
});

describe('unloadAll', () => {
  it('unloads every model /api/ps lists, whichever conversation loaded it, and says which', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    fake.setLoaded(['llama3.2', 'mistral:7b']);

    expect(await model.unloadAll()).toEqual(['llama3.2:latest', 'mistral:7b']);

    expect(fake.unloads).toEqual(['llama3.2:latest', 'mistral:7b']);
    expect(fake.requests).toMatchObject([
      { path: '/api/ps' },
      { path: '/api/generate', body: { model: 'llama3.2:latest', prompt: '', keep_alive: 0, stream: false } },
      { path: '/api/generate', body: { model: 'mistral:7b', prompt: '', keep_alive: 0, stream: false } },
    ]);
    expect(await model.isLoaded(undefined, 'llama3.2')).toBe(false);
    expect(await model.isLoaded()).toBe(false);
  });

  it('asks for nothing more when nothing is in memory', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });

    expect(await model.unloadAll()).toEqual([]);

    expect(fake.requests.map((request) => request.path)).toEqual(['/api/ps']);
  });

  it('still unloads the others when one will not, then throws its error', async () => {
    const model = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
    fake.setLoaded(['phi3:mini', 'mistral:7b']);

    const error = await catchChatModelError(() => model.unloadAll());

    expect(error.code).toBe('model_not_found');
    expect(fake.unloads).toEqual(['mistral:7b']);
  });

  it('throws "unreachable" when Ollama is not running, and "aborted" when cancelled', async () => {
    expect((await catchChatModelError(() => createOllamaChatModel({ host: fake.url, model: 'mistral:7b' }).unloadAll(AbortSignal.abort()))).code).toBe('aborted');
    const { url } = fake;
    await fake.close();
    expect((await catchChatModelError(() => createOllamaChatModel({ host: url, model: 'mistral:7b' }).unloadAll())).code).toBe('unreachable');
  });
});
