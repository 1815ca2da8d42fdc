// --image-backend auto: which server answers, against the real fakes of each, and the backend that becomes it.
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger, type ImageBackend } from '../../../server/core/index.ts';
import { createAutoImageBackend, probeImageServer, type FoundImageServer } from '../../../server/image-probe/index.ts';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../../fakes/fake-comfyui.ts';
import { createFakeLocalAi } from '../../fakes/fake-localai.ts';
import { createFakeOpenAiImages } from '../../fakes/fake-openai-images.ts';
import { createFakeSdServer } from '../../fakes/fake-sd-server.ts';
import { REQUEST, expectBackendError, findClosedUrl, startStatusServer } from './helpers.ts';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function track<T extends { close(): Promise<void> }>(fake: Promise<T>): Promise<T> {
  const started = await fake;
  cleanups.push(() => started.close());
  return started;
}

describe('probeImageServer', () => {
  const cases: Array<[string, () => Promise<{ url: string; close(): Promise<void> }>, Partial<FoundImageServer>]> = [
    ["stable-diffusion.cpp's sd-server (which answers /sdapi/v1/options and /v1/models too)", () => createFakeSdServer(), { backend: 'a1111', server: 'stable-diffusion.cpp sd-server', evidence: 'GET /sdcpp/v1/capabilities' }],
    ['AUTOMATIC1111', () => createFakeA1111(), { backend: 'a1111', server: 'AUTOMATIC1111', evidence: 'GET /sdapi/v1/options' }],
    ['ComfyUI', () => createFakeComfyUi(), { backend: 'comfyui', server: 'ComfyUI 0.3.64', evidence: 'GET /system_stats' }],
    ['LocalAI (which answers /v1/models too)', () => createFakeLocalAi(), { backend: 'localai', server: 'LocalAI', evidence: 'GET /readyz' }],
    ['LocalAI while it preloads (503 starting)', () => createFakeLocalAi({ starting: true }), { backend: 'localai' }],
    ['a server with OpenAI’s API', () => createFakeOpenAiImages(), { backend: 'openai', evidence: 'GET /v1/models' }],
  ];
  for (const [name, start, expected] of cases) {
    it(`finds ${name}`, async () => {
      const fake = await track(start());
      expect(await probeImageServer(`${fake.url}/`)).toEqual({ found: { url: fake.url, backend: expect.any(String), server: expect.any(String), evidence: expect.any(String), ...expected } });
    });
  }

  it('says when something answers that is no image server Easel knows, and when nothing answers', async () => {
    const other = await track(startStatusServer(404));
    expect(await probeImageServer(other.url)).toEqual({ found: null, reachable: true, detail: expect.stringContaining('not like any image server Easel knows') });
    const closed = await findClosedUrl();
    expect(await probeImageServer(closed)).toEqual({ found: null, reachable: false, detail: `Nothing answers at ${closed} (ECONNREFUSED).` });
  });
});

describe('createAutoImageBackend', () => {
  function makeLogger() {
    const lines: string[] = [];
    return { lines, logger: createLogger({ level: 'info', write: (line) => lines.push(line) }) };
  }

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

    const localai = await track(createFakeLocalAi());
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
    const error = await expectBackendError(auto.generate(REQUEST, { signal: new AbortController().signal, onProgress: () => {} }), 'unreachable');
    expect(error.message).toContain(`Nothing answers at ${url}`);
    expect(error.message).toContain('--image-url');
  });

  it('without --image-url it tries each default address in turn and takes the first that answers', async () => {
    const closed = await findClosedUrl();
    const comfy = await track(createFakeComfyUi());
    const a1111 = await track(createFakeA1111());
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
});
