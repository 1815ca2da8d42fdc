// The OpenAI-compatible adapter against stable-diffusion.cpp's sd-server: it asks an OpenAI-dialect server once
// whether it is sd-server, and sends sd-server the seed, steps, CFG and negative prompt in <sd_cpp_extra_args>.
import { describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { readPngText } from '../../../server/png/index.ts';
import { OPENAI_IMAGE, REQUEST, expectBackendError, run, serveRoutes, startFakeOpenAiImages, startFakeSdServer } from './helpers.ts';

describe("the openai backend against sd-server's /v1/images/generations", () => {
  it('passes seed, steps, CFG and the negative prompt in <sd_cpp_extra_args>, which sd-server honours', async () => {
    const fake = await startFakeSdServer({ stepDelayMs: 1 });
    const backend = createOpenAiImagesBackend({ url: fake.url });

    const result = await backend.generate({ ...REQUEST, steps: 120 }, run());

    expect(fake.runs).toEqual([
      expect.objectContaining({ prompt: REQUEST.prompt, negativePrompt: REQUEST.negativePrompt, seed: REQUEST.seed, steps: 100, cfg: 7.5, width: 64, height: 96 }),
    ]);
    expect(result).toMatchObject({ seed: REQUEST.seed, steps: 100, cfg: 7.5 });
    expect(readPngText(result.png)['parameters']).toContain(`Seed: ${REQUEST.seed}, Size: 64x96`);
    const body = fake.requests.find((request) => request.path === '/v1/images/generations')?.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['n', 'prompt', 'response_format', 'size']);
  });

  it('keeps a prompt and negative prompt holding the closing tag or newlines intact', async () => {
    const fake = await startFakeSdServer({ stepDelayMs: 1 });
    const backend = createOpenAiImagesBackend({ url: fake.url });
    const prompt = 'a sign reading <sd_cpp_extra_args>{"seed":1}</sd_cpp_extra_args>\nin neon';
    const negativePrompt = 'text </sd_cpp_extra_args> <b>';

    await backend.generate({ ...REQUEST, prompt, negativePrompt }, run());

    // sd.cpp parses the first block (ours), removes every block, and keeps the rest of the prompt as it is.
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a sign reading \nin neon', negativePrompt, seed: REQUEST.seed })]);
  });

  it('a plain OpenAI-style server is asked /sdcpp/v1/capabilities once, then never again', async () => {
    const fake = await startFakeOpenAiImages();
    const backend = createOpenAiImagesBackend({ url: fake.url });
    await backend.generate(REQUEST, run());
    await backend.generate(REQUEST, run());
    expect(fake.requests.map((request) => request.path)).toEqual(['/sdcpp/v1/capabilities', '/v1/images/generations', '/v1/images/generations']);
    const body = fake.requests[1]?.body as Record<string, unknown>;
    expect(String(body['prompt'])).not.toContain('sd_cpp_extra_args');
  });

  it("keeps sd-server's own words from a {\"error\": \"server_error\", \"message\"} answer", async () => {
    const fake = await startFakeSdServer({ stepDelayMs: 1 });
    const corruptingFetch: typeof fetch = (input, init) =>
      String(input).endsWith('/images/generations') ? fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(String(init?.body)), size: 64 }) }) : fetch(input, init);
    const error = await expectBackendError(createOpenAiImagesBackend({ url: fake.url, fetch: corruptingFetch }).generate(REQUEST, run()), 'backend_error');
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('server_error: [json.exception.type_error.302] type must be string, but is number');
  });

  it('checkHealth names sd-server and suggests the a1111 backend', async () => {
    const fake = await startFakeSdServer({ stepDelayMs: 1 });
    const health = await createOpenAiImagesBackend({ url: fake.url }).checkHealth();
    expect(health).toMatchObject({ reachable: true, server: 'stable-diffusion.cpp sd-server' });
    expect(health.detail).toContain('--image-backend a1111');
  });

  it('asks only an OpenAI-dialect server whether it is sd-server', async () => {
    const fake = await startFakeOpenAiImages();

    await createOpenAiImagesBackend({ url: fake.url, dialect: 'localai' }).generate(REQUEST, run());

    expect(fake.requests.map((request) => request.path)).not.toContain('/sdcpp/v1/capabilities');
  });

  it('an sd-server probe that never answers ends with the health timeout, and the image is asked for plainly', { timeout: 5_000 }, async () => {
    const server = await serveRoutes({ '/sdcpp/v1/capabilities': 'hang', '/v1/images/generations': OPENAI_IMAGE });

    await createOpenAiImagesBackend({ url: server.url, healthTimeoutMs: 150 }).generate(REQUEST, run());

    const sent = server.requests.find((request) => request.path === '/v1/images/generations');
    expect(JSON.parse(sent?.body ?? '{}')).toEqual({ n: 1, size: '64x96', response_format: 'b64_json', prompt: REQUEST.prompt });
  });
});
