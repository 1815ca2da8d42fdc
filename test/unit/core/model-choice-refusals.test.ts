// What a refused model choice tells the user: the name chosen, why it cannot be taken (not installed, cannot do its
// job, no server, nothing listed) and what to do instead. The catalog asks the real Ollama and AUTOMATIC1111
// adapters, against their fakes.
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { createImageGenerator, createModelCatalog, silentLogger, type ImageBackend, type ModelCatalog } from '../../../server/core/index.ts';
import { createOllamaChatModel } from '../../../server/ollama/index.ts';
import { useFakeOllama } from '../../helpers/easel.ts';
import { startFakeA1111 } from '../images/helpers.ts';

const fake = useFakeOllama('all tests');

/** The catalog as Easel wires it; only listing is asked of the image side, so nothing is ever stored. */
function catalogWith(backend: ImageBackend | null): ModelCatalog {
  return createModelCatalog({
    llm: createOllamaChatModel({ host: fake.url, model: 'mistral:7b', numCtx: 8192 }),
    images: createImageGenerator({ backend, store: {} as never, logger: silentLogger, clock: Date, saveFile: async () => {} }),
    logger: silentLogger,
  });
}

/** The refusal's words, or '(taken)'. */
function refusal(catalog: ModelCatalog, choice: Parameters<ModelCatalog['checkChoice']>[0]): string {
  const checked = catalog.checkChoice(choice);
  return checked.ok ? '(taken)' : checked.error.message;
}

describe('an Ollama model that cannot be taken', () => {
  it('before Ollama has answered, the name is refused as not heard of yet, not as missing', () => {
    const message = refusal(catalogWith(null), { chatModel: 'qwen2.5:7b' });
    expect(message).toContain('has not heard from Ollama yet, so qwen2.5:7b cannot be chosen now');
  });

  it('a vision model must list vision: the refusal says what it can do, and names vision models', async () => {
    fake.setModels(['mistral:7b', { name: 'qwen2.5:7b', capabilities: ['completion', 'tools'] }, { name: 'llama2:7b', capabilities: [] }]);
    const catalog = catalogWith(null);
    await catalog.list();
    const blind = refusal(catalog, { visionModel: 'qwen2.5:7b' });
    expect(blind).toContain('qwen2.5:7b cannot see images (it can: completion, tools)');
    expect(blind).toContain('pick a vision model such as gemma3, llava or qwen2.5vl');
    // An old Ollama tells no capabilities: nothing to list, and still no vision.
    expect(refusal(catalog, { visionModel: 'llama2:7b' })).toContain('llama2:7b cannot see images; pick a vision model');
  });

  it('a chat model whose capabilities Ollama does not tell is taken; one that cannot chat is told to pick a chat model', async () => {
    fake.setModels(['mistral:7b', { name: 'llama2:7b', capabilities: [] }, { name: 'nomic-embed-text', capabilities: ['embedding'] }]);
    const catalog = catalogWith(null);
    await catalog.list();
    expect(refusal(catalog, { chatModel: 'llama2:7b' })).toBe('(taken)');
    expect(refusal(catalog, { chatModel: 'nomic-embed-text' })).toContain('nomic-embed-text:latest cannot chat (it can: embedding); pick a chat model.');
  });
});

describe('a checkpoint, sampler or scheduler that cannot be taken', () => {
  it('one the image server does not list is named, with what kind of choice it is', async () => {
    const a1111 = await startFakeA1111();
    const catalog = catalogWith(createA1111Backend({ url: a1111.url }));
    await catalog.list();
    expect(refusal(catalog, { checkpoint: 'nothere' })).toContain('The image server has no checkpoint "nothere"; pick one it lists');
    expect(refusal(catalog, { sampler: 'Nope' })).toContain('The image server has no sampler "Nope"');
    expect(refusal(catalog, { scheduler: 'nope' })).toContain('The image server has no scheduler "nope"');
  });

  it('a server that lists none of that kind (A1111 before 1.9 has no schedulers) says to leave it at the default', async () => {
    const a1111 = await startFakeA1111({ release: 'v1.8.0' });
    const catalog = catalogWith(createA1111Backend({ url: a1111.url }));
    await catalog.list();
    expect(refusal(catalog, { scheduler: 'karras' })).toContain("The image server offers no scheduler to choose; leave it at the server's default");
  });

  it('with no image server configured, says how to configure one', async () => {
    const catalog = catalogWith(null);
    await catalog.list();
    expect(refusal(catalog, { checkpoint: 'sd_xl_base_1.0' })).toContain('No image server is configured, so there is no checkpoint to choose; start Easel with --image-url.');
  });
});
