// The checkpoints, samplers and schedulers of the /sdapi/v1 servers: what listModels reads from A1111 (v1.10.1,
// and v1.8.0 before schedulers) and sd-server, how a request's choices travel (override_settings, sampler_name,
// scheduler, in that request only), and what the result says was used when the server quietly took another.
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { parseA1111Parameters, readPngText } from '../../../server/png/index.ts';
import { REQUEST, expectBackendError, findClosedUrl, run, serveRoutes, startFakeA1111, startFakeSdServer } from './helpers.ts';

const SD15 = 'v1-5-pruned-emaonly';
const SD15_TITLE = 'v1-5-pruned-emaonly.safetensors [6ce0161689]';
const CHECKPOINTS = ['v1-5-pruned-emaonly.safetensors', 'SDXL/juggernautXL_v9.safetensors', { file: 'dreamshaper_8.safetensors', hashed: false }];

/** The txt2img bodies a fake received. */
const txt2imgBodies = (fake: { requests: { path: string; body: unknown }[] }) => fake.requests.filter((request) => request.path === '/sdapi/v1/txt2img').map((request) => request.body);

describe('listModels on AUTOMATIC1111', () => {
  it('lists checkpoints by model_name, the loaded one as current, every sampler by name and scheduler by label', async () => {
    const fake = await startFakeA1111({ checkpoints: CHECKPOINTS });
    const backend = createA1111Backend({ url: fake.url });

    const options = await backend.listModels?.();

    expect(options).toEqual({
      checkpoints: [SD15, 'SDXL_juggernautXL_v9', 'dreamshaper_8'],
      current: SD15,
      samplers: expect.arrayContaining(['DPM++ 2M', 'Euler a', 'Euler', 'DDIM']),
      schedulers: ['Automatic', 'Uniform', 'Karras', 'Exponential', 'Polyexponential', 'SGM Uniform', 'KL Optimal', 'Align Your Steps', 'Simple', 'Normal', 'DDIM', 'Beta'],
    });
    expect(options?.samplers[0]).toBe('DPM++ 2M');
    // Only reads: nothing is switched on the server to find out.
    expect(fake.requests.map((request) => `${request.method} ${request.path}`).sort()).toEqual([
      'GET /sdapi/v1/options',
      'GET /sdapi/v1/samplers',
      'GET /sdapi/v1/schedulers',
      'GET /sdapi/v1/sd-models',
    ]);
  });

  it("finds the current checkpoint by title, with or without its hash, and says null for one it doesn't list", async () => {
    const fake = await startFakeA1111({ checkpoints: CHECKPOINTS, modelName: 'SDXL_juggernautXL_v9' });
    const backend = createA1111Backend({ url: fake.url });
    expect(fake.optionsCheckpoint).toMatch(/^SDXL\/juggernautXL_v9\.safetensors \[[0-9a-f]{10}\]$/);

    expect((await backend.listModels?.())?.current).toBe('SDXL_juggernautXL_v9');

    const unhashed = await serveRoutes({
      '/sdapi/v1/sd-models': { json: [{ title: 'dreamshaper_8.safetensors', model_name: 'dreamshaper_8', hash: null, sha256: null, filename: '/m/dreamshaper_8.safetensors', config: null }] },
      '/sdapi/v1/options': { json: { sd_model_checkpoint: 'dreamshaper_8.safetensors [879db523c3]' } },
    });
    expect((await createA1111Backend({ url: unhashed.url }).listModels?.())?.current).toBe('dreamshaper_8');

    // The files changed under it: the loaded checkpoint is no longer listed.
    fake.setCheckpoints(['dreamshaper_8.safetensors']);
    expect(await backend.listModels?.()).toMatchObject({ checkpoints: ['dreamshaper_8'], current: null });
  });

  it('an A1111 from before schedulers (404 on /sdapi/v1/schedulers) has none to choose', async () => {
    const fake = await startFakeA1111({ release: 'v1.8.0' });
    const backend = createA1111Backend({ url: fake.url });

    expect(await backend.listModels?.()).toEqual({
      checkpoints: [SD15],
      current: SD15,
      samplers: expect.arrayContaining(['DPM++ 2M Karras', 'Euler a']),
      schedulers: [],
    });
  });

  it('a server without a checkpoint list, an error answer, no server and a silent one each say what went wrong', async () => {
    const empty = await serveRoutes({});
    await expect(createA1111Backend({ url: empty.url }).listModels?.()).rejects.toMatchObject({ code: 'bad_response', message: expect.stringContaining('/sdapi/v1/sd-models (HTTP 404)') });

    const failing = await serveRoutes({ '/sdapi/v1/sd-models': { status: 500, json: { error: 'RuntimeError', detail: '', body: '', errors: 'boom' } } });
    const failure = await expectBackendError(createA1111Backend({ url: failing.url }).listModels?.() ?? Promise.resolve(), 'backend_error');
    expect(failure.message).toContain('GET /sdapi/v1/sd-models, HTTP 500): RuntimeError: boom');

    const closed = await findClosedUrl();
    await expectBackendError(createA1111Backend({ url: closed }).listModels?.() ?? Promise.resolve(), 'unreachable');

    const silent = await serveRoutes({ '/sdapi/v1/sd-models': 'hang' });
    const slow = await expectBackendError(createA1111Backend({ url: silent.url, healthTimeoutMs: 100 }).listModels?.() ?? Promise.resolve(), 'timeout');
    expect(slow.message).toContain('did not list its models within 100 ms');
  });
});

describe("listModels on stable-diffusion.cpp's sd-server", () => {
  it('lists its one model as the only checkpoint and the current one, and the samplers and schedulers it names', async () => {
    const fake = await startFakeSdServer();
    const backend = createA1111Backend({ url: fake.url });

    const options = await backend.listModels?.();

    expect(options).toMatchObject({ checkpoints: [SD15], current: SD15 });
    expect(options?.samplers.slice(0, 3)).toEqual(['default', 'euler', 'euler_a']);
    expect(options?.samplers).toContain('dpm++2m');
    expect(options?.schedulers.slice(0, 4)).toEqual(['default', 'discrete', 'normal', 'karras']);
  });

  it('an sd-server without the sampler and scheduler routes (cpp-httplib: 404, empty) has none to choose', async () => {
    const older = await serveRoutes(
      {
        '/sdapi/v1/sd-models': { json: [{ title: 'flux1-schnell-q4_0', model_name: 'flux1-schnell-q4_0', filename: 'flux1-schnell-q4_0.gguf', hash: '8888888888' }] },
        '/sdapi/v1/options': { json: { samples_format: 'png', sd_model_checkpoint: 'flux1-schnell-q4_0' } },
      },
      { notFound: { status: 404, text: '' } },
    );

    expect(await createA1111Backend({ url: older.url }).listModels?.()).toEqual({ checkpoints: ['flux1-schnell-q4_0'], current: 'flux1-schnell-q4_0', samplers: [], schedulers: [] });
  });
});

describe('a request that chooses its checkpoint, sampler and scheduler', () => {
  it('sends them with this request only (override_settings, restored afterwards) and reports what A1111 used', async () => {
    const fake = await startFakeA1111({ checkpoints: CHECKPOINTS });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate({ ...REQUEST, checkpoint: 'dreamshaper_8', sampler: 'Euler a', scheduler: 'Karras' }, run());

    expect(txt2imgBodies(fake)).toEqual([
      expect.objectContaining({ override_settings: { sd_model_checkpoint: 'dreamshaper_8' }, override_settings_restore_afterwards: true, sampler_name: 'Euler a', scheduler: 'Karras' }),
    ]);
    expect(result).toMatchObject({ model: 'dreamshaper_8', sampler: 'Euler a', scheduler: 'Karras' });
    expect(fake.loadedCheckpoint).toBe('dreamshaper_8');
    // The server's own choice is untouched: no POST /options, and its option is back to what it was.
    expect(fake.requests.some((request) => request.method === 'POST' && request.path === '/sdapi/v1/options')).toBe(false);
    expect(fake.optionsCheckpoint).toBe(SD15_TITLE);
    expect(parseA1111Parameters(readPngText(result.png)['parameters'] ?? '')).toMatchObject({ model: 'dreamshaper_8', sampler: 'Euler a', scheduler: 'Karras' });

    // The next image, asking for nothing, is painted with the server's own checkpoint again.
    const next = await backend.generate(REQUEST, run());
    expect(next.model).toBe(SD15);
  });

  it("sends none of them when none is asked, and still reports A1111's sampler and schedule type", async () => {
    const fake = await startFakeA1111();
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate(REQUEST, run());

    const [body] = txt2imgBodies(fake);
    expect(Object.keys(body as object)).toEqual(['prompt', 'negative_prompt', 'steps', 'cfg_scale', 'seed', 'width', 'height', 'batch_size', 'n_iter']);
    // sampler_index's default, "Euler", whose own default scheduler A1111 calls "Automatic".
    expect(result).toMatchObject({ model: SD15, sampler: 'Euler', scheduler: 'Automatic' });
  });

  it('reports the checkpoint, sampler and scheduler A1111 fell back to, not the ones it was asked for', async () => {
    const fake = await startFakeA1111({ checkpoints: CHECKPOINTS });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate({ ...REQUEST, checkpoint: 'deleted_model', sampler: 'Euler ancestral', scheduler: 'cosine' }, run());

    // A1111 v1.10 drops an override it cannot find and fixes an unknown sampler and scheduler, all without a word.
    expect(txt2imgBodies(fake)).toEqual([expect.objectContaining({ override_settings: { sd_model_checkpoint: 'deleted_model' }, sampler_name: 'Euler ancestral', scheduler: 'cosine' })]);
    expect(result).toMatchObject({ model: SD15, sampler: 'DPM++ 2M', scheduler: 'Automatic' });
    expect(readPngText(result.png)['parameters']).toContain('Sampler: DPM++ 2M, Schedule type: Automatic,');
  });

  it("names a subfolder's checkpoint as A1111 reports it: by its file, without the folder", async () => {
    const fake = await startFakeA1111({ checkpoints: CHECKPOINTS });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate({ ...REQUEST, checkpoint: 'SDXL_juggernautXL_v9' }, run());

    expect(fake.loadedCheckpoint).toBe('SDXL_juggernautXL_v9');
    expect(result.model).toBe('juggernautXL_v9');
  });

  it("an older A1111's refusal of a sampler it does not know is an ImageBackendError in its own words", async () => {
    const fake = await startFakeA1111({ release: 'v1.8.0' });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate({ ...REQUEST, sampler: 'Euler ancestral' }, run()), 'backend_error');

    expect(error.message).toBe(`AUTOMATIC1111 at ${fake.url} refused the image (HTTP 404): HTTPException: Sampler not found. Check its console and the generation settings.`);
    // A sampler it has is taken.
    expect(await backend.generate({ ...REQUEST, sampler: 'DPM++ 2M Karras' }, run())).toMatchObject({ sampler: 'DPM++ 2M Karras' });
  });

  it("sd-server takes sampler_name and scheduler, ignores override_settings, and says what it used", async () => {
    const fake = await startFakeSdServer();
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate({ ...REQUEST, checkpoint: 'another-model', sampler: 'euler_a', scheduler: 'karras' }, run());

    expect(fake.runs).toEqual([expect.objectContaining({ sampler: 'euler_a', scheduler: 'karras' })]);
    expect(result).toMatchObject({ model: 'v1-5-pruned-emaonly.safetensors', sampler: 'euler_a', scheduler: 'karras' });

    // Names it cannot read leave its defaults, which it does not name: nothing is claimed.
    const fallback = await backend.generate({ ...REQUEST, sampler: 'Euler ancestral', scheduler: 'cosine' }, run());
    expect(fallback.sampler).toBeUndefined();
    expect(fallback.scheduler).toBeUndefined();
  });
});

describe('the fake A1111 against the real one', () => {
  it('refuses a global switch to a checkpoint it does not have with a RuntimeError, as set_config does', async () => {
    const fake = await startFakeA1111({ checkpoints: CHECKPOINTS });

    const refused = await fetch(`${fake.url}/sdapi/v1/options`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sd_model_checkpoint: 'nope' }) });
    expect(refused.status).toBe(500);
    expect(await refused.json()).toEqual({ error: 'RuntimeError', detail: '', body: '', errors: "model 'nope' not found" });

    const taken = await fetch(`${fake.url}/sdapi/v1/options`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sd_model_checkpoint: 'dreamshaper_8' }) });
    expect(taken.status).toBe(200);
    expect(fake.optionsCheckpoint).toBe('dreamshaper_8');
  });

  it('keeps the overriding checkpoint as its own when override_settings_restore_afterwards is false', async () => {
    const fake = await startFakeA1111({ checkpoints: CHECKPOINTS });
    const body = { prompt: 'x', steps: 1, width: 8, height: 8, override_settings: { sd_model_checkpoint: 'dreamshaper_8' }, override_settings_restore_afterwards: false };

    const answer = await fetch(`${fake.url}/sdapi/v1/txt2img`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(answer.status).toBe(200);

    // Hashed at load, so its title now carries the hash.
    expect(fake.optionsCheckpoint).toMatch(/^dreamshaper_8\.safetensors \[[0-9a-f]{10}\]$/);
    const models = (await (await fetch(`${fake.url}/sdapi/v1/sd-models`)).json()) as { model_name: string; hash: string | null }[];
    expect(models.find((model) => model.model_name === 'dreamshaper_8')?.hash).toMatch(/^[0-9a-f]{10}$/);
  });
});
