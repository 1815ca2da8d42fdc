// A pull that fails is logged with the model's name and Ollama's words, for whoever reads the log later; a pull
// the user cancelled is not a failure and logs nothing. The catalog pulls through the real Ollama adapter.
import { describe, expect, it } from 'vitest';
import { createLogger, createModelCatalog, type ImageGenerator, type ModelCatalog, type PullEvent } from '../../../server/core/index.ts';
import { createOllamaChatModel } from '../../../server/ollama/index.ts';
import { useFakeOllama } from '../../helpers/easel.ts';

const fake = useFakeOllama('all tests');

function catalogLogging(logs: string[]): ModelCatalog {
  return createModelCatalog({
    llm: createOllamaChatModel({ host: fake.url, model: 'mistral:7b', numCtx: 8192 }),
    // A pull never asks the image side.
    images: {} as ImageGenerator,
    logger: createLogger({ level: 'debug', write: (line) => logs.push(line) }),
  });
}

describe('the log of a model pull', () => {
  it('a pull Ollama fails is logged as a warning with the name and the error', async () => {
    const logs: string[] = [];
    const events: PullEvent[] = [];
    for await (const event of catalogLogging(logs).pull('nosuchmodel:1b', new AbortController().signal)) events.push(event);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'pull_failed' });
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(/WARN +a model pull failed \{"name":"nosuchmodel:1b","error":.*file does not exist/);
  });

  it('a pull the user cancels ends with its error event and logs nothing', async () => {
    let release!: () => void;
    fake.setPullable({ 'big:70b': { totalBytes: 40e9, steps: 10, gate: new Promise<void>((resolve) => (release = resolve)) } });
    const logs: string[] = [];
    const controller = new AbortController();
    const events: PullEvent[] = [];
    for await (const event of catalogLogging(logs).pull('big:70b', controller.signal)) {
      events.push(event);
      if (event.type === 'progress') controller.abort();
    }
    release();
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'pull_failed' });
    expect(logs).toEqual([]);
  });
});
