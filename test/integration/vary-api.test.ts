// Vary (image-to-image) through the whole app, against each image server's fake as its real source shows it: the
// request the server got (the stored PNG as its starting image, the strength), the record's `source`, the PNG's
// "Denoising strength", a server that cannot vary refused in its own words, and an unknown image.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseA1111Parameters, readPngText } from '../../server/png/index.ts';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../fakes/fake-comfyui.ts';
import { createFakeLocalAi } from '../fakes/fake-localai.ts';
import { createFakeOpenAiImages } from '../fakes/fake-openai-images.ts';
import { createFakeSdServer } from '../fakes/fake-sd-server.ts';
import { decodeSolidPng } from '../fakes/png-bytes.ts';
import { closeAfterEachTest, type TestEasel } from '../helpers/easel.ts';
import { partials } from '../helpers/html.ts';
import { sendForm } from '../helpers/page-stage.ts';
import { readSse, readSseFrames, type SseEvent } from '../helpers/sse.ts';

const { track, startEasel: easelWith } = closeAfterEachTest();

interface Made {
  events: SseEvent[];
  image: Record<string, unknown>;
  png: Uint8Array;
  parameters: string;
}

/** POST …/generations and read the stream to its end: the image event, its PNG and the PNG's parameters text. */
async function generate(easel: TestEasel, conversation: string, body: Record<string, unknown>): Promise<Made> {
  const response = await easel.post(`/api/conversations/${conversation}/generations`, body);
  expect(response.status, await response.clone().text()).toBe(200);
  const events = await readSse(response);
  const image = events.find((event) => event.type === 'image')?.data;
  if (image === undefined) throw new Error(`no image: ${JSON.stringify(events)}`);
  const png = new Uint8Array(await (await easel.get(String(image['url']))).arrayBuffer());
  return { events, image, png, parameters: readPngText(png)['parameters'] ?? '' };
}

async function imagesOf(easel: TestEasel, conversation: string): Promise<Record<string, unknown>[]> {
  return ((await (await easel.get(`/api/conversations/${conversation}`)).json()) as { images: Record<string, unknown>[] }).images;
}

const FIRST = { prompt: 'a red fox', settings: { steps: 10, cfg: 7, seed: 42, width: 64, height: 96 } };

describe('AUTOMATIC1111', () => {
  it('sends the stored PNG to /sdapi/v1/img2img with the strength, and records where the image came from', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const mine = await easel.newConversation();
    const first = await generate(easel, mine, FIRST);
    // Another conversation varies it: an image of any conversation is a starting point.
    const other = await easel.newConversation();
    const varied = await generate(easel, other, { prompt: 'a red fox in the snow', settings: { seed: 7 }, from: { imageId: first.image['id'], strength: 0.35 } });

    const sent = a1111.requests.filter((request) => request.path === '/sdapi/v1/img2img');
    expect(sent).toHaveLength(1);
    const body = sent[0]!.body as Record<string, unknown>;
    // The size is the starting image's, as no size was asked.
    expect(body).toMatchObject({ prompt: 'a red fox in the snow', denoising_strength: 0.35, seed: 7, width: 64, height: 96, resize_mode: 1 });
    // The starting image is the stored file, byte for byte.
    expect(Buffer.from(String((body['init_images'] as string[])[0]), 'base64').equals(Buffer.from(first.png))).toBe(true);

    expect(varied.image['source']).toEqual({ imageId: first.image['id'], strength: 0.35 });
    expect((await imagesOf(easel, other))[0]).toMatchObject({ id: varied.image['id'], source: { imageId: first.image['id'], strength: 0.35 } });
    // An image made from the prompt alone has none.
    expect((await imagesOf(easel, mine))[0]).toMatchObject({ id: first.image['id'], source: null });
    // A1111's own text already says it: kept as it came.
    expect(varied.parameters).toContain('Denoising strength: 0.35, Version: v1.10.1');
    expect(parseA1111Parameters(varied.parameters).denoisingStrength).toBe(0.35);
    // The fake keeps 65 % of the starting colour: the image really started from the stored one.
    const start = decodeSolidPng(first.png).rgb;
    expect(decodeSolidPng(varied.png).rgb[0]).toBe(Math.round(start[0] * 0.65 + 7 * 0.35));
  });

  it('refuses an unknown image with 422 and a clear message, and sends nothing', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const id = await easel.newConversation();
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a fox', from: { imageId: 'f'.repeat(32), strength: 0.35 } });
    expect(response.status).toBe(422);
    const body = (await response.json()) as { error: string };
    expect(body.error).toBe(`There is no image "${'f'.repeat(32)}" to vary: it was deleted, or the id is wrong (GET a conversation to see its images' ids).`);
    const bad = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a fox', from: { imageId: 'f'.repeat(32), strength: 1.5 } });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { error: string }).error).toMatch(/^from must be \{ "imageId": the id of a stored image, "strength": a number from 0.05 to 1 \}/);
    expect(a1111.requests.filter((request) => request.method === 'POST')).toEqual([]);
  });
});


describe("stable-diffusion.cpp's sd-server", () => {
  it('through /sdapi/v1/img2img: the init image and denoising_strength, and a Denoising strength added to its own text', async () => {
    const sd = await track(createFakeSdServer({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', sd.url]);
    const id = await easel.newConversation();
    const first = await generate(easel, id, FIRST);
    const varied = await generate(easel, id, { prompt: 'a red fox, winter', settings: { seed: 9 }, from: { imageId: first.image['id'], strength: 0.65 } });
    const run = sd.runs.at(-1)!;
    expect(run).toMatchObject({ route: '/sdapi/v1/img2img', strength: 0.65, init: decodeSolidPng(first.png).rgb, width: 64, height: 96, seed: 9 });
    expect(varied.image['source']).toEqual({ imageId: first.image['id'], strength: 0.65 });
    // sd.cpp names no img2img strength in its text (get_image_params): Easel adds it before Version, the rest kept.
    expect(varied.parameters).toMatch(/, Denoising strength: 0\.65, Version: stable-diffusion\.cpp, SDCPP: \{/);
    expect(parseA1111Parameters(varied.parameters)).toMatchObject({ denoisingStrength: 0.65, seed: 9 });
  });

  it('through the OpenAI-style /v1/images/edits: the image as image[], the strength in <sd_cpp_extra_args>', async () => {
    const sd = await track(createFakeSdServer({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'openai', '--image-url', sd.url]);
    const id = await easel.newConversation();
    const first = await generate(easel, id, FIRST);
    const varied = await generate(easel, id, { prompt: 'a red fox, winter', settings: { seed: 9 }, from: { imageId: first.image['id'], strength: 0.35 } });
    const edit = sd.requests.find((request) => request.path === '/v1/images/edits');
    expect(edit).toBeDefined();
    const fields = edit!.body as Record<string, unknown[]>;
    expect(String(fields['prompt']![0])).toMatch(/^<sd_cpp_extra_args>\{.*"strength":0\.35\}<\/sd_cpp_extra_args>a red fox, winter$/);
    expect(fields['size']).toEqual(['64x96']);
    expect(sd.runs.at(-1)).toMatchObject({ route: '/v1/images/edits', strength: 0.35, init: decodeSolidPng(first.png).rgb, seed: 9 });
    expect(varied.image['source']).toEqual({ imageId: first.image['id'], strength: 0.35 });
    expect(parseA1111Parameters(varied.parameters).denoisingStrength).toBe(0.35);
  });
});

describe('ComfyUI', () => {
  it('uploads the image into its input folder and runs the image-to-image graph with denoise', async () => {
    const comfy = await track(createFakeComfyUi({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'comfyui', '--image-url', comfy.url]);
    const id = await easel.newConversation();
    const first = await generate(easel, id, FIRST);
    const varied = await generate(easel, id, { prompt: 'a red fox, winter', settings: { seed: 9 }, from: { imageId: first.image['id'], strength: 0.35 } });
    const upload = comfy.requests.find((request) => request.path === '/upload/image');
    expect(upload?.body).toMatchObject({ type: ['input'], subfolder: ['easel'], overwrite: ['true'] });
    const [name] = [...comfy.inputFiles.keys()];
    expect(name).toMatch(/^easel\/easel-[0-9a-f]{32}\.png$/);
    expect(Buffer.from(comfy.inputFiles.get(name!)!).equals(Buffer.from(first.png))).toBe(true);
    const graph = comfy.workflows.at(-1) as Record<string, { class_type: string; inputs: Record<string, unknown> }>;
    const node = (type: string) => Object.values(graph).find((candidate) => candidate.class_type === type)!;
    expect(node('LoadImage').inputs['image']).toBe(name);
    expect(node('KSampler').inputs).toMatchObject({ denoise: 0.35, seed: 9 });
    expect(node('ImageScale').inputs).toMatchObject({ width: 64, height: 96 });
    expect(varied.image['source']).toEqual({ imageId: first.image['id'], strength: 0.35 });
    // ComfyUI writes no parameters text: Easel's, with the strength where A1111 puts it.
    expect(varied.parameters).toMatch(/, Denoising strength: 0\.35, Version: Easel /);
    const start = decodeSolidPng(first.png).rgb;
    expect(decodeSolidPng(varied.png)).toMatchObject({ width: 64, height: 96 });
    expect(decodeSolidPng(varied.png).rgb[0]).toBe(Math.round(start[0] * 0.65 + 9 * 0.35));
  });
});

describe('servers that cannot vary', () => {
  it('LocalAI: refused with 422 in its own words, nothing sent', async () => {
    const localai = await track(createFakeLocalAi());
    const easel = await easelWith(['--image-backend', 'localai', '--image-url', localai.url]);
    const id = await easel.newConversation();
    const first = await generate(easel, id, { prompt: 'a fox', settings: { seed: 5, width: 64, height: 64 } });
    const sent = localai.requests.length;
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a fox', from: { imageId: first.image['id'], strength: 0.35 } });
    expect(response.status).toBe(422);
    expect(((await response.json()) as { error: string }).error).toBe(
      'LocalAI cannot vary an image by a chosen strength: its image API takes a starting image but no strength (its stable-diffusion.cpp backend always changes it by 0.75), so Easel does not offer it.',
    );
    expect(localai.requests).toHaveLength(sent);
  });

  it("an OpenAI-style server: said once it is known not to be sd-server (an error event before that), nothing sent", async () => {
    const openai = await track(createFakeOpenAiImages());
    const easel = await easelWith(['--image-backend', 'openai', '--image-url', openai.url]);
    const id = await easel.newConversation();
    const first = await generate(easel, id, { prompt: 'a fox', settings: { width: 64, height: 64 } });
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a fox', from: { imageId: first.image['id'], strength: 0.35 } });
    expect(response.status).toBe(422);
    expect(((await response.json()) as { error: string }).error).toMatch(/^This server speaks OpenAI's Images API, whose edits take no strength/);
    expect(openai.requests.filter((request) => request.path === '/v1/images/edits')).toEqual([]);
  });
});

describe("the page's Vary", () => {
  it("posts the page's generations route with from=<imageId>:<strength>: the starting image's size, the screen's prompt", async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const id = await easel.newConversation();
    const first = await generate(easel, id, FIRST);
    const fields = { prompt: 'a red fox, dusk', steps: '8', cfg: '7', seed: '3', width: '512', height: '512', negativePrompt: '', from: `${String(first.image['id'])}:0.65`, sendKey: randomUUID() };
    const response = await sendForm(easel, 'POST', `/c/${id}/generations`, fields);
    expect(response.status).toBe(200);
    const frames = await readSseFrames(response);
    // The new image's thumbnail offers Vary in its turn.
    expect(frames.some((frame) => frame.data.includes('Vary (subtle)'))).toBe(true);
    const body = a1111.requests.filter((request) => request.path === '/sdapi/v1/img2img')[0]?.body as Record<string, unknown>;
    // The pane's 512 × 512 is Generate's: a variation keeps its starting image's shape.
    expect(body).toMatchObject({ prompt: 'a red fox, dusk', denoising_strength: 0.65, steps: 8, seed: 3, width: 64, height: 96 });
    const images = await imagesOf(easel, id);
    expect(images.at(-1)).toMatchObject({ source: { imageId: first.image['id'], strength: 0.65 } });
  });

  it('a refusal is said in the image area: an unknown image, and a value that is no Vary', async () => {
    const a1111 = await track(createFakeA1111({ stepDelayMs: 1 }));
    const easel = await easelWith(['--image-backend', 'a1111', '--image-url', a1111.url]);
    const id = await easel.newConversation();
    await generate(easel, id, FIRST);
    const unknown = await sendForm(easel, 'POST', `/c/${id}/generations`, { prompt: 'a fox', from: `${'e'.repeat(32)}:0.35`, sendKey: randomUUID() });
    expect(unknown.status).toBe(422);
    expect(partials(await unknown.text()).find((partial) => partial.target === '#image-error')?.text).toContain(`There is no image "${'e'.repeat(32)}" to vary`);
    const odd = await sendForm(easel, 'POST', `/c/${id}/generations`, { prompt: 'a fox', from: 'nonsense', sendKey: randomUUID() });
    expect(odd.status).toBe(422);
    expect(a1111.requests.filter((request) => request.path === '/sdapi/v1/img2img')).toEqual([]);
  });
});
