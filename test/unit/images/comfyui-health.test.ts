// What the ComfyUI adapter's checkHealth says: the version and device ComfyUI gives, another server at the
// address, nothing listening, and no answer in time.
import { describe, expect, it } from 'vitest';
import { createComfyUiBackend } from '../../../server/comfyui/index.ts';
import { findClosedUrl, startFakeComfyUi } from './helpers.ts';
import { loadShippedWorkflow, serveComfy } from './comfyui-helpers.ts';

const workflow = await loadShippedWorkflow();

describe('ComfyUI checkHealth', () => {
  it('checkHealth: reachable with the version when ComfyUI answers', async () => {
    const fake = await startFakeComfyUi();
    const health = await createComfyUiBackend({ url: fake.url, workflow }).checkHealth();
    expect(health.reachable).toBe(true);
    expect(health.detail).toContain('0.3.64');
    expect(fake.requests.map((request) => request.path)).toEqual(['/system_stats']);
  });

  it('checkHealth: unreachable when nothing listens, without throwing', async () => {
    const url = await findClosedUrl();
    const health = await createComfyUiBackend({ url, workflow }).checkHealth();
    expect(health.reachable).toBe(false);
    expect(health.detail).toContain(url);
  });

  it('names the version and the first device, without a trailing slash of the address', async () => {
    const fake = await startFakeComfyUi();
    const health = await createComfyUiBackend({ url: `${fake.url}//`, workflow }).checkHealth();
    expect(health).toEqual({ reachable: true, detail: `ComfyUI 0.3.64 answers at ${fake.url} on cuda:0 NVIDIA GeForce RTX 3060 : cudaMallocAsync.` });
    expect(fake.requests.map((request) => request.path)).toEqual(['/system_stats']);
  });

  it('leaves out a version or device name the server does not give', async () => {
    // Older ComfyUI has no comfyui_version in /system_stats.
    const answers = [{ system: { os: 'posix' }, devices: [{ type: 'cpu', index: null }] }, { system: { comfyui_version: 7 } }];
    let next = 0;
    const server = await serveComfy({ routes: { '/system_stats': () => ({ json: answers[next++] }) } });
    const backend = createComfyUiBackend({ url: server.url, workflow });
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: `ComfyUI answers at ${server.url}.` });
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: `ComfyUI answers at ${server.url}.` });
  });

  it('another server (404 on /system_stats): reachable, and says to check the address', async () => {
    const server = await serveComfy();
    expect(await createComfyUiBackend({ url: server.url, workflow }).checkHealth()).toEqual({
      reachable: true,
      detail: `The server at ${server.url} answers /system_stats with HTTP 404; check that --image-url points to ComfyUI.`,
    });
  });

  it('nothing listening: not answering, with the code and how to start ComfyUI', async () => {
    const url = await findClosedUrl();
    expect(await createComfyUiBackend({ url, workflow }).checkHealth()).toEqual({
      reachable: false,
      detail: `ComfyUI at ${url} is not answering (ECONNREFUSED). Start ComfyUI (python main.py, port 8188 by default), or set --image-url to where it runs.`,
    });
  });

  it('a server that does not answer: within the health timeout, or at once when the caller cancels', async () => {
    const server = await serveComfy({ routes: { '/system_stats': 'hang' } });
    expect(await createComfyUiBackend({ url: server.url, workflow, healthTimeoutMs: 50 }).checkHealth()).toEqual({
      reachable: false,
      slow: true,
      detail: `ComfyUI at ${server.url} did not answer within 50 ms; it may be busy starting up.`,
    });

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 30);
    expect(await createComfyUiBackend({ url: server.url, workflow, healthTimeoutMs: 60_000 }).checkHealth(controller.signal)).toEqual({
      reachable: false,
      detail: 'The health check was cancelled.',
    });
  }, 2_000);
});
