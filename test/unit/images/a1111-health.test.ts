// What the A1111 adapter's checkHealth says: the model of A1111 or of sd-server, another server at the address,
// nothing listening, an error answer, and no answer in time.
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import { createFakeSdServer } from '../../fakes/fake-sd-server.ts';
import { closeAfterTest, findClosedUrl, serveRoutes, startFakeA1111, startStatusServer } from './helpers.ts';

describe('A1111 checkHealth', () => {
  it('checkHealth: reachable with the model name when A1111 answers', async () => {
    const fake = await startFakeA1111();
    const health = await createA1111Backend({ url: fake.url }).checkHealth();
    expect(health).toMatchObject({ reachable: true, server: 'AUTOMATIC1111' });
    expect(health.detail).toContain('v1-5-pruned-emaonly');
  });

  it('checkHealth: a server without /sdapi/v1/options answers, but is told to need --api (sd-server has that route now)', async () => {
    const other = await closeAfterTest(startStatusServer(404));
    const health = await createA1111Backend({ url: other.url }).checkHealth();
    expect(health).toEqual({ reachable: true, detail: expect.stringContaining('--api') });
    expect(health.detail).not.toContain('sd-server');
  });

  it('checkHealth: unreachable when nothing listens, without throwing', async () => {
    const url = await findClosedUrl();
    const health = await createA1111Backend({ url }).checkHealth();
    expect(health.reachable).toBe(false);
    expect(health.detail).toContain(url);
  });

  it('names the model of sd-server and of A1111, and no model when none is named', async () => {
    const sdServer = await closeAfterTest(createFakeSdServer());
    const sdHealth = await createA1111Backend({ url: sdServer.url }).checkHealth();
    const capabilities = (await (await fetch(`${sdServer.url}/sdcpp/v1/capabilities`)).json()) as { model: { name: string } };
    expect(sdHealth).toEqual({
      reachable: true,
      server: 'stable-diffusion.cpp sd-server',
      detail: `stable-diffusion.cpp's sd-server answers at ${sdServer.url} with model ${capabilities.model.name}. It reports no progress and cannot stop an image once it runs.`,
    });

    const unnamedSd = await serveRoutes({ '/sdcpp/v1/capabilities': { json: { model: { name: '' } } }, '/sdapi/v1/options': { json: {} } });
    expect((await createA1111Backend({ url: unnamedSd.url }).checkHealth()).detail).toBe(
      `stable-diffusion.cpp's sd-server answers at ${unnamedSd.url}. It reports no progress and cannot stop an image once it runs.`,
    );

    const a1111 = await closeAfterTest(createFakeA1111({ modelName: 'dreamshaper_8' }));
    const options = (await (await fetch(`${a1111.url}/sdapi/v1/options`)).json()) as { sd_model_checkpoint: string };
    expect(options.sd_model_checkpoint).toMatch(/^dreamshaper_8/);
    expect(await createA1111Backend({ url: a1111.url }).checkHealth()).toEqual({
      reachable: true,
      server: 'AUTOMATIC1111',
      detail: `AUTOMATIC1111 answers at ${a1111.url} with model ${options.sd_model_checkpoint}.`,
    });

    const unnamed = await serveRoutes({ '/sdapi/v1/options': { json: { sd_model_checkpoint: '' } } });
    expect((await createA1111Backend({ url: unnamed.url }).checkHealth()).detail).toBe(`AUTOMATIC1111 answers at ${unnamed.url}.`);

    // No name at all, on either server.
    const noModelSd = await serveRoutes({ '/sdcpp/v1/capabilities': { json: { model: {} } }, '/sdapi/v1/options': { json: {} } });
    expect((await createA1111Backend({ url: noModelSd.url }).checkHealth()).detail).toBe(
      `stable-diffusion.cpp's sd-server answers at ${noModelSd.url}. It reports no progress and cannot stop an image once it runs.`,
    );
    const noModel = await serveRoutes({ '/sdapi/v1/options': { json: {} } });
    expect((await createA1111Backend({ url: noModel.url }).checkHealth()).detail).toBe(`AUTOMATIC1111 answers at ${noModel.url}.`);
  });

  it('nothing listening is "not answering" with its code, not a timeout', async () => {
    const closed = await findClosedUrl();

    expect(await createA1111Backend({ url: closed }).checkHealth()).toEqual({
      reachable: false,
      detail: `The image backend at ${closed} is not answering (ECONNREFUSED). Start AUTOMATIC1111 / Forge / SD.Next with --api (or stable-diffusion.cpp's sd-server), or set --image-url to where it runs.`,
    });
  });

  it('quotes an answer that is neither 200 nor 404', async () => {
    const server = await serveRoutes({ '/sdapi/v1/options': { status: 500, json: { error: 'RuntimeError', detail: '', body: '', errors: 'boom' } } });

    expect(await createA1111Backend({ url: server.url }).checkHealth()).toEqual({
      reachable: true,
      detail: `The server at ${server.url} answers /sdapi/v1/options with HTTP 500: RuntimeError: boom.`,
    });
  });

  it('a check that gets no answer in time says so; a cancelled one says it was cancelled', { timeout: 5_000 }, async () => {
    const silent = await serveRoutes({ '/sdapi/v1/options': 'hang', '/sdcpp/v1/capabilities': 'hang' });
    expect(await createA1111Backend({ url: silent.url, healthTimeoutMs: 150 }).checkHealth()).toEqual({
      reachable: false,
      slow: true,
      detail: `The image backend at ${silent.url} did not answer within 150 ms; it may be busy loading a model.`,
    });

    const controller = new AbortController();
    const check = createA1111Backend({ url: silent.url, healthTimeoutMs: 3_600_000 }).checkHealth(controller.signal);
    setTimeout(() => controller.abort(), 20);
    expect(await check).toEqual({ reachable: false, detail: 'The health check was cancelled.' });
  });

  it('a capabilities route that breaks leaves A1111 found; one that hangs ends with the timeout', { timeout: 5_000 }, async () => {
    const breaking = await serveRoutes({ '/sdcpp/v1/capabilities': 'cut', '/sdapi/v1/options': { json: { sd_model_checkpoint: 'm' } } });
    expect(await createA1111Backend({ url: breaking.url }).checkHealth()).toEqual({ reachable: true, server: 'AUTOMATIC1111', detail: `AUTOMATIC1111 answers at ${breaking.url} with model m.` });

    const hanging = await serveRoutes({ '/sdcpp/v1/capabilities': 'hang', '/sdapi/v1/options': { json: { sd_model_checkpoint: 'm' } } });
    expect(await createA1111Backend({ url: hanging.url, healthTimeoutMs: 150 }).checkHealth()).toMatchObject({ reachable: false });
  });
});
