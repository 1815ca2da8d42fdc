// The catalog keeps what the servers last listed: a cancelled, failed or overtaken asking never empties it, so the
// family of the checkpoint that paints and the checks of a choice stand while a server is slow once.
import { describe, expect, it } from 'vitest';
import {
  ChatModelError,
  createLogger,
  createModelCatalog,
  ImageBackendError,
  type ChatModel,
  type ImageGenerator,
  type ImageModelOptions,
  type InstalledChatModel,
} from '../../../server/core/index.ts';

type Answer = ImageModelOptions | Error;

/** An image generator whose listings answer, in turn, what the test releases. */
function scriptedImages() {
  const waiting: Array<(answer: Answer) => void> = [];
  const images = {
    configured: true,
    listModels: (signal: AbortSignal) =>
      new Promise((resolve, reject) => {
        signal.addEventListener('abort', () => reject(new ImageBackendError('cancelled', 'Listing the models was cancelled.')), { once: true });
        waiting.push((answer) => (answer instanceof Error ? reject(answer) : resolve({ backend: 'a1111', options: answer })));
      }),
  } as unknown as ImageGenerator;
  return { images, answer: (index: number, answer: Answer) => waiting[index]?.(answer), asked: () => waiting.length };
}

/** A chat model whose listings answer, in turn, what the test releases: installed names, or an error. */
function scriptedChat() {
  const waiting: Array<(answer: string[] | Error) => void> = [];
  const llm = {
    model: 'mistral:7b',
    listModels: (signal?: AbortSignal) =>
      new Promise<InstalledChatModel[]>((resolve, reject) => {
        signal?.addEventListener('abort', () => reject(new ChatModelError('aborted', 'Listing the models was cancelled.')), { once: true });
        waiting.push((answer) => (answer instanceof Error ? reject(answer) : resolve(answer.map(installed))));
      }),
  } as unknown as ChatModel;
  return { llm, answer: (index: number, answer: string[] | Error) => waiting[index]?.(answer) };
}

const installed = (name: string): InstalledChatModel => ({ name, sizeBytes: 1, parameterSize: null, quantization: null, family: null, capabilities: ['completion', 'vision'], contextLength: null });
const noImages = { configured: false, listModels: async () => null } as unknown as ImageGenerator;
const llm = { model: 'mistral:7b', listModels: async () => [] } as unknown as ChatModel;
const refusal = (checked: { ok: boolean; error?: { message: string } }) => (checked.ok ? '(taken)' : (checked.error?.message ?? ''));
const logger = createLogger({ level: 'error', write: () => {} });
const options = (current: string): ImageModelOptions => ({ checkpoints: ['sd_xl_base_1.0', 'v1-5-pruned-emaonly'], current, samplers: ['Euler'], schedulers: [] });

describe('the model catalog', () => {
  it('a cancelled asking keeps the last answer', async () => {
    const { images, answer } = scriptedImages();
    const catalog = createModelCatalog({ llm, images, logger });
    const first = catalog.list();
    answer(0, options('sd_xl_base_1.0'));
    await first;
    const controller = new AbortController();
    const second = catalog.list(controller.signal);
    controller.abort();
    expect((await second).image.problem).toContain('cancelled');
    expect(catalog.serverCheckpoint()).toBe('sd_xl_base_1.0');
    expect(catalog.checkChoice({ checkpoint: 'v1-5-pruned-emaonly' }).ok).toBe(true);
    // The cancel is no news of the server: a name it lacks is refused as missing, not as "could not ask".
    expect(refusal(catalog.checkChoice({ checkpoint: 'other' }))).toContain('has no checkpoint "other"');
  });

  it('a failed asking keeps the lists and says why a name it does not know cannot be chosen', async () => {
    const { images, answer } = scriptedImages();
    const catalog = createModelCatalog({ llm, images, logger });
    const first = catalog.list();
    answer(0, options('sd_xl_base_1.0'));
    await first;
    const second = catalog.list();
    answer(1, new ImageBackendError('timeout', 'AUTOMATIC1111 did not list its models within 3 s.'));
    // The failed answer itself lists nothing: the page shows the problem, not a stale or made-up list.
    expect((await second).image).toMatchObject({ checkpoints: [], current: null, samplers: [], schedulers: [] });
    expect(catalog.serverCheckpoint()).toBe('sd_xl_base_1.0');
    expect(catalog.checkChoice({ checkpoint: 'v1-5-pruned-emaonly' }).ok).toBe(true);
    const refused = catalog.checkChoice({ checkpoint: 'other' });
    expect(refused.ok ? '' : refused.error.message).toContain('did not list its models within 3 s');
  });

  it('an older asking that answers last does not overwrite a newer one', async () => {
    const { images, answer } = scriptedImages();
    const catalog = createModelCatalog({ llm, images, logger });
    const older = catalog.list();
    const newer = catalog.list();
    answer(1, options('v1-5-pruned-emaonly'));
    await newer;
    answer(0, options('sd_xl_base_1.0'));
    await older;
    expect(catalog.serverCheckpoint()).toBe('v1-5-pruned-emaonly');
  });

  it('before any answer a choice is refused as not heard of yet, not as "no server"', () => {
    const { images } = scriptedImages();
    const catalog = createModelCatalog({ llm, images, logger });
    const refused = catalog.checkChoice({ checkpoint: 'sd_xl_base_1.0' });
    expect(refused.ok ? '' : refused.error.message).toContain('has not heard from the image server yet');
  });

  it('an older Ollama listing that answers last does not overwrite a newer one', async () => {
    const { llm: chatModel, answer } = scriptedChat();
    const catalog = createModelCatalog({ llm: chatModel, images: noImages, logger });
    const older = catalog.list();
    const newer = catalog.list();
    answer(1, ['mistral:7b', 'llava:7b']);
    await newer;
    answer(0, ['mistral:7b']);
    await older;
    expect(catalog.checkChoice({ visionModel: 'llava:7b' }).ok).toBe(true);
  });

  it('a cancelled Ollama listing keeps the models and reports no problem; a failed one keeps the models and says why', async () => {
    const { llm: chatModel, answer } = scriptedChat();
    const catalog = createModelCatalog({ llm: chatModel, images: noImages, logger });
    const first = catalog.list();
    answer(0, ['mistral:7b']);
    await first;
    const controller = new AbortController();
    const cancelled = catalog.list(controller.signal);
    controller.abort();
    expect((await cancelled).chat.problem).toContain('cancelled');
    expect(catalog.chatProblem()).toBeNull();
    const failed = catalog.list();
    answer(2, new ChatModelError('unreachable', 'Easel cannot reach Ollama at http://127.0.0.1:11434.'));
    await failed;
    expect(catalog.chatProblem()).toContain('cannot reach Ollama');
    expect(catalog.checkChoice({ chatModel: 'mistral:7b' }).ok).toBe(true);
  });

  it('a chat model without its own rule for names takes a name only as listed', async () => {
    const { llm: chatModel, answer } = scriptedChat();
    const catalog = createModelCatalog({ llm: chatModel, images: noImages, logger });
    const listing = catalog.list();
    answer(0, ['mistral:7b', 'llava:7b']);
    await listing;
    expect(catalog.checkChoice({ chatModel: 'llava:7b' })).toEqual({ ok: true, value: { chatModel: 'llava:7b' } });
    expect(refusal(catalog.checkChoice({ chatModel: 'mistral' }))).toContain('Ollama has no model mistral:');
  });
});
