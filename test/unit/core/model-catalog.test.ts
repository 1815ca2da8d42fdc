// The catalog keeps what the servers last listed: a cancelled, failed or overtaken asking never empties it, so the
// family of the checkpoint that paints and the checks of a choice stand while a server is slow once.
import { describe, expect, it } from 'vitest';
import { createLogger, createModelCatalog, ImageBackendError, type ChatModel, type ImageGenerator, type ImageModelOptions } from '../../../server/core/index.ts';

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

const llm = { model: 'mistral:7b', listModels: async () => [] } as unknown as ChatModel;
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
  });

  it('a failed asking keeps the lists and says why a name it does not know cannot be chosen', async () => {
    const { images, answer } = scriptedImages();
    const catalog = createModelCatalog({ llm, images, logger });
    const first = catalog.list();
    answer(0, options('sd_xl_base_1.0'));
    await first;
    const second = catalog.list();
    answer(1, new ImageBackendError('timeout', 'AUTOMATIC1111 did not list its models within 3 s.'));
    await second;
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
});
