// createAutoImageBackend (--image-backend auto): it looks until a server answers, trying each address in turn,
// then becomes the adapter it found and names it; until then it says what each address said.
import { describe, expect, it } from 'vitest';
import { createLogger, type ImageBackend } from '../../../server/core/index.ts';
import { createAutoImageBackend, probeImageServer, type FoundImageServer, type ProbeResult } from '../../../server/image-probe/index.ts';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../../fakes/fake-comfyui.ts';
import { createFakeLocalAi } from '../../fakes/fake-localai.ts';
import { REQUEST, closeAfterTest, expectBackendError, findClosedUrl, run } from './helpers.ts';

describe('createAutoImageBackend', () => {
  function makeLogger() {
    const lines: string[] = [];
    return { lines, logger: createLogger({ level: 'info', write: (line) => lines.push(line) }) };
  }

  const silent = { debug() {}, info() {}, warn() {}, error() {} };

  /** An adapter standing for the one auto chose: what it answers is what the test sets. */
  const adapterFor = (found: FoundImageServer, server?: string): ImageBackend => ({
    name: found.backend,
    url: found.url,
    generate: () => Promise.reject(new Error('not in this test')),
    checkHealth: () => Promise.resolve({ reachable: true, detail: 'answers', ...(server === undefined ? {} : { server }) }),
  });

  it('looks again until the server has started, then logs what it found and becomes that backend', async () => {
    const url = await findClosedUrl();
    const { lines, logger } = makeLogger();
    const created: FoundImageServer[] = [];
    let target = url;
    const auto = createAutoImageBackend({
      urls: [url],
      probe: () => probeImageServer(target),
      create: (found) => {
        created.push(found);
        return createOpenAiImagesBackend({ url: found.url, dialect: 'localai' });
      },
      logger,
    });
    expect(auto.name).toBe('auto');
    const before = await auto.checkHealth();
    expect(before).toEqual({ reachable: false, detail: expect.stringMatching(/^No image server found: Nothing answers at .*Easel looks again before the next image\.$/) });
    expect(auto.seedRange).toBeUndefined();

    const localai = await closeAfterTest(createFakeLocalAi());
    target = localai.url;
    const health = await auto.checkHealth();
    expect(health).toMatchObject({ reachable: true, server: 'LocalAI' });
    expect(health.found).toBe(`Found LocalAI at ${localai.url} (GET /readyz), so Easel uses --image-backend localai.`);
    expect(health.detail).not.toContain('Found');
    expect(auto).toMatchObject({ name: 'localai', url: localai.url, seedRange: { min: 1, max: 2_147_483_647 }, auto: true });
    expect(lines.join('\n')).toContain(`--image-backend auto: LocalAI answers at ${localai.url} (GET /readyz); using the localai backend.`);
    // Found once: later checks and images ask the adapter only.
    await auto.checkHealth();
    expect(created).toHaveLength(1);
  });

  it('an image before any server answers fails as unreachable, saying what it tried', async () => {
    const url = await findClosedUrl();
    const auto: ImageBackend = createAutoImageBackend({ urls: [url], probe: (u) => probeImageServer(u), create: () => { throw new Error('not reached'); }, logger: makeLogger().logger });
    await auto.prepare?.(new AbortController().signal);
    const error = await expectBackendError(auto.generate(REQUEST, run()), 'unreachable');
    expect(error.message).toContain(`Nothing answers at ${url}`);
    expect(error.message).toContain('--image-url');
  });

  it('without --image-url it tries each default address in turn and takes the first that answers', async () => {
    const closed = await findClosedUrl();
    const comfy = await closeAfterTest(createFakeComfyUi());
    const a1111 = await closeAfterTest(createFakeA1111());
    const probed: string[] = [];
    const auto = createAutoImageBackend({
      urls: [closed, comfy.url, a1111.url],
      probe: (u) => {
        probed.push(u);
        return probeImageServer(u);
      },
      create: (found) => createOpenAiImagesBackend({ url: found.url }),
      logger: makeLogger().logger,
    });
    await auto.prepare?.(new AbortController().signal);
    expect(probed).toEqual([closed, comfy.url]);
    expect(auto.url).toBe(comfy.url);
  });

  it('before it has looked, it is "auto" at the first address; after finding nothing, it says what each address said', async () => {
    const answers: Record<string, ProbeResult> = {
      'http://a': { found: null, reachable: true, detail: 'A server answers at http://a, but not like any image server Easel knows.' },
      'http://b': { found: null, reachable: false, detail: 'Nothing answers at http://b.' },
    };
    const backend = createAutoImageBackend({ urls: ['http://a', 'http://b'], probe: async (url) => answers[url] as ProbeResult, create: (found) => adapterFor(found), logger: silent });
    expect([backend.name, backend.url]).toEqual(['auto', 'http://a']);

    const health = await backend.checkHealth();

    // One address answered: the backend is reachable, just unknown.
    expect(health.reachable).toBe(true);
    expect(health.detail).toBe(
      'No image server found: A server answers at http://a, but not like any image server Easel knows. Nothing answers at http://b. Start one (AUTOMATIC1111 or Forge with --api, ComfyUI, LocalAI, stable-diffusion.cpp\'s sd-server), or set --image-url to where it runs; Easel looks again before the next image.',
    );
    const none = createAutoImageBackend({ urls: ['http://b'], probe: async (url) => answers[url] as ProbeResult, create: (found) => adapterFor(found), logger: silent });
    expect((await none.checkHealth()).reachable).toBe(false);
  });

  it('a probe that throws is reported, not thrown', async () => {
    const backend = createAutoImageBackend({ urls: ['http://a'], probe: () => Promise.reject(new Error('boom')), create: (found) => adapterFor(found), logger: silent });

    expect(await backend.checkHealth()).toEqual({ reachable: false, detail: 'Looking for the image server failed: Error: boom' });
  });

  it('listModels finds the server first, then is the adapter it found', async () => {
    const localai = await closeAfterTest(createFakeLocalAi({ models: ['sd-1.5', 'flux-dev'], chatModels: ['mistral-7b'] }));
    const auto = createAutoImageBackend({
      urls: [localai.url],
      probe: (u) => probeImageServer(u),
      create: (found) => createOpenAiImagesBackend({ url: found.url, dialect: 'localai', model: 'flux-dev' }),
      logger: silent,
    });
    expect(auto.name).toBe('auto');

    expect(await auto.listModels?.()).toEqual({ checkpoints: ['sd-1.5', 'flux-dev'], current: 'flux-dev', samplers: [], schedulers: [] });

    expect(auto.name).toBe('localai');
    localai.models.push('sdxl-turbo');
    expect((await auto.listModels?.())?.checkpoints).toEqual(['sd-1.5', 'flux-dev', 'sdxl-turbo']);
    expect(localai.requests.filter((request) => request.path === '/v1/models/capabilities')).toHaveLength(2);
  });

  it('listModels before any server answers fails as an image would, saying what it tried', async () => {
    const url = await findClosedUrl();
    const auto = createAutoImageBackend({ urls: [url], probe: (u) => probeImageServer(u), create: () => { throw new Error('not reached'); }, logger: silent });

    const listing = await expectBackendError(auto.listModels!(), 'unreachable');
    const image = await expectBackendError(auto.generate(REQUEST, run()), 'unreachable');

    expect(listing.message).toContain(`Nothing answers at ${url}`);
    expect(listing.message).toBe(image.message);
  });

  it('once it found an adapter that cannot list, it cannot either', async () => {
    const found: FoundImageServer = { backend: 'a1111', server: 'AUTOMATIC1111', url: 'http://a', evidence: 'GET /sdapi/v1/options' };
    const auto = createAutoImageBackend({ urls: ['http://a'], probe: async () => ({ found }), create: (f) => adapterFor(f), logger: silent });
    expect(auto.listModels).toBeTypeOf('function');

    const error = await expectBackendError(auto.listModels!(), 'backend_error');

    expect(error.message).toBe('The a1111 backend cannot list the models of http://a.');
    expect(auto.listModels).toBeUndefined();
  });

  it("names the server as the adapter does, or as the probe found it when the adapter says nothing", async () => {
    const found: FoundImageServer = { backend: 'a1111', server: 'AUTOMATIC1111', url: 'http://a', evidence: 'GET /sdapi/v1/options' };
    const named = createAutoImageBackend({ urls: ['http://a'], probe: async () => ({ found }), create: (f) => adapterFor(f, 'Forge'), logger: silent });
    const unnamed = createAutoImageBackend({ urls: ['http://a'], probe: async () => ({ found }), create: (f) => adapterFor(f), logger: silent });

    expect((await named.checkHealth()).server).toBe('Forge');
    expect(await unnamed.checkHealth()).toMatchObject({ server: 'AUTOMATIC1111', found: 'Found AUTOMATIC1111 at http://a (GET /sdapi/v1/options), so Easel uses --image-backend a1111.' });
    expect([unnamed.name, unnamed.url]).toEqual(['a1111', 'http://a']);
  });
});
