// What the A1111 adapter sends to /sdapi/v1/txt2img, and at which address.
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { readPngSize } from '../../../server/png/index.ts';
import { decodeSolidPng } from '../../fakes/png-bytes.ts';
import { REQUEST, a1111Answer, run, serveRoutes, startFakeA1111 } from './helpers.ts';

describe('what the A1111 adapter sends', () => {
  it('generates a real PNG of the requested size and reports what A1111 says it used', async () => {
    const fake = await startFakeA1111();
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const result = await backend.generate(REQUEST, run());

    const size = readPngSize(result.png);
    expect(size).toEqual({ ok: true, value: { width: 64, height: 96 } });
    expect(decodeSolidPng(result.png).width).toBe(64);
    expect(result).toMatchObject({ seed: REQUEST.seed, steps: 6, cfg: 7.5, sampler: 'Euler', model: 'v1-5-pruned-emaonly' });
    const call = fake.requests.find((request) => request.path === '/sdapi/v1/txt2img');
    expect(call?.body).toEqual({
      prompt: REQUEST.prompt,
      negative_prompt: REQUEST.negativePrompt,
      steps: 6,
      cfg_scale: 7.5,
      seed: REQUEST.seed,
      width: 64,
      height: 96,
      batch_size: 1,
      n_iter: 1,
    });
  });

  it('takes an address with trailing slashes as the server itself', async () => {
    const server = await serveRoutes({ '/sdapi/v1/txt2img': a1111Answer({}) });
    const backend = createA1111Backend({ url: `${server.url}//`, pollIntervalMs: 3_600_000 });

    await backend.generate(REQUEST, run());

    expect(backend.url).toBe(server.url);
    expect(server.requests.map((request) => request.path)).toEqual(['/sdapi/v1/txt2img']);
  });
});
