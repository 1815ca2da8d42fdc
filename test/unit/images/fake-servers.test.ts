// The fakes answer as the real servers do where the adapters' tests rely on it: their refusals, the fields they
// ignore or read, the endpoints they lack.
import { describe, expect, it } from 'vitest';
import { createComfyUiBackend } from '../../../server/comfyui/index.ts';
import { readPngText } from '../../../server/png/index.ts';
import type { FakeLocalAi } from '../../fakes/fake-localai.ts';
import { REQUEST, run, startFakeA1111, startFakeComfyUi, startFakeLocalAi, startFakeOpenAiImages, startFakeSdServer } from './helpers.ts';
import { loadShippedWorkflow } from './comfyui-helpers.ts';

const workflow = await loadShippedWorkflow();

describe('fake A1111 fidelity', () => {
  it('answers a body that is not a JSON object with a FastAPI 422 detail list', async () => {
    const fake = await startFakeA1111();
    const response = await fetch(`${fake.url}/sdapi/v1/txt2img`, { method: 'POST', body: '[1, 2]' });
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({ detail: [{ loc: ['body'], msg: 'value is not a valid dict', type: 'type_error.dict' }] });
  });

  it('reads the body as JSON only without a content type or with application/json, as FastAPI does', async () => {
    const fake = await startFakeA1111();
    const body = JSON.stringify({ prompt: 'x', steps: 1, width: 8, height: 8 });
    const asText = await fetch(`${fake.url}/sdapi/v1/txt2img`, { method: 'POST', headers: { 'content-type': 'text/plain;charset=UTF-8' }, body });
    expect(asText.status).toBe(422);
    expect(await asText.json()).toEqual({ detail: [{ loc: ['body'], msg: 'value is not a valid dict', type: 'type_error.dict' }] });
    const asJson = await fetch(`${fake.url}/sdapi/v1/txt2img`, { method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8' }, body });
    expect(asJson.status).toBe(200);
  });

  it('uses a random seed when -1 is sent and reports it in info', async () => {
    const fake = await startFakeA1111();
    const response = await fetch(`${fake.url}/sdapi/v1/txt2img`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'x', seed: -1, steps: 1, width: 8, height: 8 }),
    });
    const body = (await response.json()) as { info: string };
    const info = JSON.parse(body.info) as { seed: number; all_seeds: number[] };
    expect(info.seed).toBeGreaterThanOrEqual(0);
    expect(info.all_seeds).toEqual([info.seed]);
  });
});

describe('fake sd-server fidelity', () => {
  it('has no progress or interrupt endpoint: 404 with an empty body, as cpp-httplib answers', async () => {
    const fake = await startFakeSdServer();
    for (const [method, path] of [['GET', '/sdapi/v1/progress'], ['POST', '/sdapi/v1/interrupt']] as const) {
      const response = await fetch(`${fake.url}${path}`, { method });
      expect(response.status).toBe(404);
      expect(await response.text()).toBe('');
    }
  });

  it('answers /sdapi/v1/options with its two keys only', async () => {
    const fake = await startFakeSdServer();
    expect(await (await fetch(`${fake.url}/sdapi/v1/options`)).json()).toEqual({ samples_format: 'png', sd_model_checkpoint: 'v1-5-pruned-emaonly' });
  });

  it('/v1/images/generations ignores seed, steps, negative_prompt and cfg_scale, using seed 42 and 20 steps', async () => {
    const fake = await startFakeSdServer();
    const response = await fetch(`${fake.url}/v1/images/generations`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'a fox', size: '64x64', seed: 7, steps: 9, negative_prompt: 'blur', cfg_scale: 3, response_format: 'url' }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ data: [{ b64_json: expect.any(String) }], output_format: 'png' });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a fox', seed: 42, steps: 20, cfg: 7, negativePrompt: '' })]);
  });

  it('reads seed, negative prompt, steps and cfg from <sd_cpp_extra_args>, with steps and cfg nested', async () => {
    const fake = await startFakeSdServer();
    const extra = JSON.stringify({ seed: 5, negative_prompt: 'blur', steps: 3, sample_params: { sample_steps: 130, guidance: { txt_cfg: 4.5 } } });
    await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', body: JSON.stringify({ prompt: `<sd_cpp_extra_args>${extra}</sd_cpp_extra_args>a fox`, size: '64x64' }) });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a fox', seed: 5, steps: 100, cfg: 4.5, negativePrompt: 'blur' })]);
  });

  it('cannot cancel a job of its own queue once it generates: 409', async () => {
    const fake = await startFakeSdServer({ stepDelayMs: 30 });
    const queued = (await (await fetch(`${fake.url}/sdcpp/v1/img_gen`, { method: 'POST', body: JSON.stringify({ prompt: 'a fox', sample_params: { sample_steps: 20 } }) })).json()) as { id: string };
    await expect.poll(async () => ((await (await fetch(`${fake.url}/sdcpp/v1/jobs/${queued.id}`)).json()) as { status: string }).status).toBe('generating');
    const cancel = await fetch(`${fake.url}/sdcpp/v1/jobs/${queued.id}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(409);
    expect(await cancel.json()).toEqual({ error: 'job is currently generating and cannot be interrupted yet' });
  });
});

describe('fake ComfyUI fidelity', () => {
  it('refuses a node without class_type like ComfyUI', async () => {
    const fake = await startFakeComfyUi();
    const response = await fetch(`${fake.url}/prompt`, { method: 'POST', body: JSON.stringify({ prompt: { '1': { inputs: {} } } }) });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { type: 'invalid_prompt', details: "Node ID '#1'" } });
  });

  it('refuses an unfilled placeholder in a number input', async () => {
    const fake = await startFakeComfyUi();
    const response = await fetch(`${fake.url}/prompt`, { method: 'POST', body: JSON.stringify({ prompt: workflow }) });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { node_errors: Record<string, { errors: { type: string }[] }> };
    expect(body.node_errors['3']?.errors[0]?.type).toBe('invalid_input_type');
  });

  it('sends no binary preview frame unless started with a preview method', async () => {
    const fake = await startFakeComfyUi({});
    await createComfyUiBackend({ url: fake.url, workflow }).generate(REQUEST, run());
    expect(fake.binaryFrames).toBe(0);
  });

  it('answers /interrupt and /queue with an empty 200, and refuses a prompt_id that is no canonical UUID when newer', async () => {
    const fake = await startFakeComfyUi({ clientPromptIds: 'uuid' });
    for (const path of ['/interrupt', '/queue']) {
      const response = await fetch(`${fake.url}${path}`, { method: 'POST', body: '{}' });
      expect([response.status, await response.text()]).toEqual([200, '']);
    }
    const refused = await fetch(`${fake.url}/prompt`, { method: 'POST', body: JSON.stringify({ prompt: {}, prompt_id: 'ABC' }) });
    expect(refused.status).toBe(400);
  });
});

describe('fake OpenAI images fidelity', () => {
  it('refuses a size that is not WIDTHxHEIGHT in the OpenAI error shape', async () => {
    const fake = await startFakeOpenAiImages();
    const response = await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', body: JSON.stringify({ prompt: 'x', size: 'big' }) });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { param: 'size', code: 'invalid_value', type: 'invalid_request_error' } });
  });

  it('refuses an unknown response_format', async () => {
    const fake = await startFakeOpenAiImages();
    const response = await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', body: JSON.stringify({ prompt: 'x', response_format: 'png' }) });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { param: 'response_format' } });
  });
});

describe('fake LocalAI fidelity', () => {
  async function post(fake: FakeLocalAi, body: unknown) {
    const response = await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it('ignores steps, negative_prompt and cfg_scale (15 steps, no negative), and answers a url unless b64_json is asked', async () => {
    const fake = await startFakeLocalAi();
    const { body } = await post(fake, { prompt: 'a fox', steps: 30, negative_prompt: 'blur', cfg_scale: 2, size: '64x64' });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a fox', negativePrompt: '', steps: 15, cfg: 7 })]);
    expect(body['data']).toEqual([{ index: 0, url: expect.stringMatching(/\/generated-images\/b64\w+\.png$/) }]);
  });

  it('splits the prompt at "|" and drops what follows a second one', async () => {
    const fake = await startFakeLocalAi();
    await post(fake, { prompt: 'a fox|blur|lost words', size: '64x64' });
    expect(fake.runs).toEqual([expect.objectContaining({ prompt: 'a fox', negativePrompt: 'blur' })]);
  });

  it('keeps 32 bits of the seed: above 2147483647 it turns negative, which is random', async () => {
    const fake = await startFakeLocalAi();
    await post(fake, { prompt: 'a fox', seed: 3_000_000_000, size: '64x64' });
    expect(fake.runs[0]).toMatchObject({ seedReceived: 3_000_000_000 - 4_294_967_296, random: true });
    const diffusers = await startFakeLocalAi({ backend: 'diffusers' });
    await post(diffusers, { prompt: 'a fox', seed: 0, size: '64x64' });
    expect(diffusers.runs[0]).toMatchObject({ seedReceived: 0, random: true });
  });

  it('answers errors as {error: {code, message, type}} and writes no text into its PNG', async () => {
    const fake = await startFakeLocalAi();
    expect(await post(fake, { prompt: 'a fox', size: 'axb' })).toEqual({ status: 500, body: { error: { code: 500, message: "invalid value for 'size'", type: '' } } });
    const { body } = await post(fake, { prompt: 'a fox', size: '64x64', response_format: 'b64_json' });
    const png = new Uint8Array(Buffer.from((body['data'] as { b64_json: string }[])[0]!.b64_json, 'base64'));
    expect(readPngText(png)).toEqual({});
  });

  it('reads a body only when it is sent as application/json, as Echo binds it', async () => {
    const fake = await startFakeLocalAi();
    const response = await fetch(`${fake.url}/v1/images/generations`, { method: 'POST', headers: { 'content-type': 'text/plain;charset=UTF-8' }, body: '{"prompt": "a fox"}' });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: { code: 400, message: 'failed parsing request body: code=415, message=Unsupported Media Type', type: '' } });
    expect(fake.runs).toEqual([]);
  });
});
