// Image faults end to end: the real server on a loopback port, real adapters, fake backends.
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readPngSize, readPngText } from '../../server/png/index.ts';
import { createFakeA1111, type FakeA1111Options } from '../fakes/fake-a1111.ts';
import { createFakeComfyUi, type FakeComfyUiOptions } from '../fakes/fake-comfyui.ts';
import { createFakeLocalAi } from '../fakes/fake-localai.ts';
import { createFakeOpenAiImages, type FakeOpenAiImagesOptions } from '../fakes/fake-openai-images.ts';
import { BROKEN_PNGS, makeInterlacedPng } from '../fakes/png-bytes.ts';
import { closeAfterEachTest, type TestEasel } from '../helpers/easel.ts';
import { iterateSse, readSse, type SseEvent } from '../helpers/sse.ts';
import { findClosedPort } from '../helpers/ports.ts';

const MB = 1024 * 1024;

const { track, startEasel } = closeAfterEachTest();

async function withA1111(options: FakeA1111Options = {}) {
  const a1111 = await track(createFakeA1111({ stepDelayMs: 5, ...options }));
  return { a1111, easel: await startEasel(['--image-backend', 'a1111', '--image-url', a1111.url]) };
}

async function withComfyUi(options: FakeComfyUiOptions = {}) {
  const comfy = await track(createFakeComfyUi({ stepDelayMs: 5, ...options }));
  return { comfy, easel: await startEasel(['--image-backend', 'comfyui', '--image-url', comfy.url]) };
}

async function withOpenAi(options: FakeOpenAiImagesOptions = {}) {
  const openai = await track(createFakeOpenAiImages(options));
  return { openai, easel: await startEasel(['--image-backend', 'openai', '--image-url', openai.url]) };
}

function of(events: SseEvent[], type: string) {
  return events.filter((event) => event.type === type).map((event) => event.data);
}

async function generate(easel: TestEasel, settings: Record<string, unknown> = {}, id?: string) {
  const conversation = id ?? (await easel.newConversation());
  const events = await readSse(await easel.post(`/api/conversations/${conversation}/generations`, { prompt: 'a lighthouse', settings }));
  return { id: conversation, events, error: of(events, 'error')[0], image: of(events, 'image')[0] };
}

/** Nothing of the refused image reached the disk or the conversation. */
async function expectNothingKept(easel: TestEasel, id: string): Promise<void> {
  expect(readdirSync(join(easel.dataDir, 'images'))).toEqual([]);
  const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: unknown[]; prompt: string };
  expect(conversation.images).toEqual([]);
  expect(conversation.prompt).toBe('');
}

describe('the image queue: one image at a time per backend, always', () => {
  it('cancelling the queued middle one of three never starts the third beside the running first', async () => {
    const { a1111, easel } = await withA1111({ stepDelayMs: 30 });
    const [a, b, c] = [await easel.newConversation(), await easel.newConversation(), await easel.newConversation()];
    const post = (id: string) => easel.post(`/api/conversations/${id}/generations`, { prompt: `job ${id}`, settings: { steps: 20 } });

    const first = iterateSse((await post(a)).body!);
    const firstEvents: SseEvent[] = [];
    // Wait until the first job really runs on the backend.
    for (let next = await first.next(); !next.done; next = await first.next()) {
      firstEvents.push(next.value);
      if (next.value.type === 'progress') break;
    }
    const second = post(b).then(readSse);
    const thirdResponse = await post(c);
    const third = iterateSse(thirdResponse.body!);
    expect((await third.next()).value).toMatchObject({ type: 'generation', data: { queued: true } });
    await expect.poll(() => easel.post(`/api/conversations/${b}/stop`, {}).then((r) => r.json())).toMatchObject({ stopped: true });

    const secondEvents = await second;
    expect(of(secondEvents, 'error')[0]).toMatchObject({ code: 'image_cancelled' });
    for await (const event of first) firstEvents.push(event);
    const thirdEvents: SseEvent[] = [];
    for await (const event of third) thirdEvents.push(event);

    expect(of(firstEvents, 'image')).toHaveLength(1);
    expect(of(thirdEvents, 'image')).toHaveLength(1);
    expect(a1111.maxConcurrentTxt2Img).toBe(1);
    const prompts = a1111.requests.filter((r) => r.path === '/sdapi/v1/txt2img').map((r) => (r.body as { prompt: string }).prompt);
    expect(prompts).toEqual([`job ${a}`, `job ${c}`]);
  });
});

describe('broken images are refused, naming the backend, and nothing is written', () => {
  it('AUTOMATIC1111: IDAT cut short', async () => {
    const { easel } = await withA1111({ image: BROKEN_PNGS.truncatedIdat() });
    const { id, error, image } = await generate(easel);
    expect(image).toBeUndefined();
    expect(error).toMatchObject({ code: 'image_bad_response', message: expect.stringMatching(/^AUTOMATIC1111 at http:\/\/127\.0\.0\.1:\d+ sent an image Easel cannot use: .*does not decompress.*Nothing was saved/) });
    await expectNothingKept(easel, id);
  });

  it('ComfyUI: pixel data of the wrong size', async () => {
    const { easel } = await withComfyUi({ image: BROKEN_PNGS.wrongDimensions() });
    const { id, error } = await generate(easel);
    expect(error).toMatchObject({ code: 'image_bad_response', message: expect.stringMatching(/^ComfyUI at .* 64×64 header promises/) });
    await expectNothingKept(easel, id);
  });

  it('OpenAI-compatible: zero width, and 20000 px', async () => {
    for (const [png, words] of [
      [BROKEN_PNGS.zeroWidth(), '0×8 pixels'],
      [BROKEN_PNGS.tooWide(), 'more than the 16384 per side'],
    ] as const) {
      const { easel } = await withOpenAi({ image: png });
      const { id, error } = await generate(easel);
      expect(error).toMatchObject({ code: 'image_bad_response', message: expect.stringContaining(words) });
      expect(String(error?.message)).toMatch(/^The OpenAI-compatible image server at /);
      await expectNothingKept(easel, id);
    }
  });

  it('a good interlaced PNG passes and is saved with its parameters', async () => {
    const { easel } = await withA1111({ image: makeInterlacedPng(64, 48) });
    const { image } = await generate(easel, { width: 512, height: 512 });
    expect(image).toMatchObject({ width: 64, height: 48 });
    const png = new Uint8Array(await (await easel.get(String(image!.url))).arrayBuffer());
    expect(readPngSize(png)).toEqual({ ok: true, value: { width: 64, height: 48 } });
    expect(readPngText(png).parameters).toContain('Size: 64x48');
  });
});

describe('size caps: an answer over 64 MB is refused without being read whole', () => {
  it('AUTOMATIC1111: a 150 MB JSON answer is refused at its Content-Length', async () => {
    const { a1111, easel } = await withA1111({ hugeAnswer: { bytes: 150 * MB, contentLength: true } });
    const { id, error } = await generate(easel);
    expect(error).toMatchObject({ code: 'image_too_large', message: expect.stringMatching(/AUTOMATIC1111 at .* sent an answer of 150 MB, more than Easel accepts for one image \(64 MB of PNG\)/) });
    // Only what loopback socket buffers hold was ever sent: Easel read none of it.
    expect(a1111.hugeBytesSent).toBeLessThan(32 * MB);
    await expectNothingKept(easel, id);
  });

  it('OpenAI-compatible: a 150 MB linked file without Content-Length is cut off just past 64 MB', async () => {
    const { openai, easel } = await withOpenAi({ forceUrl: true, hugeAnswer: { bytes: 150 * MB, contentLength: false } });
    const { id, error } = await generate(easel);
    expect(error).toMatchObject({ code: 'image_too_large', message: expect.stringContaining('an answer of more than 64 MB') });
    expect(openai.hugeBytesSent).toBeGreaterThan(64 * MB);
    expect(openai.hugeBytesSent).toBeLessThan(100 * MB);
    await expectNothingKept(easel, id);
  });

  it('ComfyUI: a 150 MB /view file is refused at its Content-Length', async () => {
    const { comfy, easel } = await withComfyUi({ hugeViewBytes: 150 * MB });
    const { id, error } = await generate(easel);
    expect(error).toMatchObject({ code: 'image_too_large', message: expect.stringMatching(/ComfyUI at .* as an answer of 150 MB, more than the 64 MB/) });
    expect(error?.message).toContain('Lower the image size or upscale less in the workflow.');
    expect(comfy.hugeBytesSent).toBeLessThan(32 * MB);
    await expectNothingKept(easel, id);
  });
});

describe('OpenAI-compatible image links are fetched only from the backend itself', () => {
  it('a link to another server is refused and that server gets no request', async () => {
    const other = await track(createFakeOpenAiImages());
    const { openai, easel } = await withOpenAi({ forceUrl: true, urlBase: other.url });
    const { id, error } = await generate(easel);
    expect(error).toMatchObject({ code: 'image_bad_response', message: expect.stringContaining(`linked its image on another server (${other.url})`) });
    expect(String(error?.message)).toContain(`only downloads images from ${openai.url} itself`);
    expect(other.requests).toEqual([]);
    await expectNothingKept(easel, id);
  });

  it('a link on the backend itself works, but a redirect from it to another server is not followed', async () => {
    const { easel } = await withOpenAi({ forceUrl: true });
    expect((await generate(easel, { width: 256, height: 256 })).image).toMatchObject({ width: 256, height: 256 });

    const other = await track(createFakeOpenAiImages());
    const redirecting = await withOpenAi({ forceUrl: true, redirectImagesTo: other.url });
    const { error } = await generate(redirecting.easel);
    expect(error).toMatchObject({ code: 'image_bad_response', message: expect.stringMatching(/answered GET \/generated-images\/\S+ with a redirect \(HTTP 302 to http:\/\/127\.0\.0\.1:\d+\/generated-images\//) });
    expect(String(error?.message)).toContain(`with a redirect (HTTP 302 to ${other.url}/generated-images/`);
    expect(other.requests).toEqual([]);
  });
});

describe('no image server is followed through a redirect (a misconfigured proxy, a compromised server)', () => {
  const RULE = 'Easel follows no redirect of an image server, so it sent nothing there. Set --image-url to the address the server really answers at.';

  /** Another loopback listener: it records every request a followed redirect would have brought it. */
  async function startOtherListener() {
    return track(createFakeOpenAiImages());
  }

  async function health(easel: TestEasel): Promise<Record<string, unknown>> {
    return ((await (await easel.get('/api/health')).json()) as { images: Record<string, unknown> }).images;
  }

  it('AUTOMATIC1111 redirecting to another listener: image_bad_response naming where, nothing sent there, health says so', async () => {
    const other = await startOtherListener();
    const { a1111, easel } = await withA1111({ redirect: { status: 302, location: `${other.url}/elsewhere` } });
    const { id, error } = await generate(easel);
    expect(error).toEqual({
      code: 'image_bad_response',
      message: `AUTOMATIC1111 at ${a1111.url} answered POST /sdapi/v1/txt2img with a redirect (HTTP 302 to ${other.url}/elsewhere). ${RULE} The prompt is kept: press Generate to try again.`,
    });
    expect(await health(easel)).toMatchObject({ reachable: true, detail: `AUTOMATIC1111 at ${a1111.url} answered GET /sdapi/v1/options with a redirect (HTTP 302 to ${other.url}/elsewhere). ${RULE}` });
    expect(other.requests).toEqual([]);
    await expectNothingKept(easel, id);
  });

  it('AUTOMATIC1111 redirecting to a dead port: a redirect, not "not answering. Start AUTOMATIC1111"', async () => {
    const dead = `http://127.0.0.1:${await findClosedPort()}`;
    const { easel } = await withA1111({ redirect: { status: 307, location: `${dead}/sdapi/v1/txt2img` } });
    const { error } = await generate(easel);
    expect(error).toMatchObject({ code: 'image_bad_response', message: expect.stringContaining(`with a redirect (HTTP 307 to ${dead}/sdapi/v1/txt2img)`) });
    expect(String(error?.message)).not.toMatch(/not answering|Start AUTOMATIC1111/);
    const images = await health(easel);
    expect(images).toMatchObject({ reachable: true, detail: expect.stringContaining(`with a redirect (HTTP 307 to ${dead}/sdapi/v1/txt2img)`) });
    expect(String(images['detail'])).not.toContain('not answering');
  });

  it('ComfyUI and LocalAI redirecting to another listener: the same error and health, nothing sent there', async () => {
    const other = await startOtherListener();
    const comfy = await withComfyUi({ redirect: { status: 301, location: `${other.url}/elsewhere` } });
    const comfyRun = await generate(comfy.easel);
    expect(comfyRun.error).toMatchObject({ code: 'image_bad_response', message: expect.stringContaining(`ComfyUI at ${comfy.comfy.url} answered GET /ws with a redirect (HTTP 301 to ${other.url}/elsewhere). ${RULE}`) });
    expect(await health(comfy.easel)).toMatchObject({ reachable: true, detail: expect.stringContaining('answered GET /system_stats with a redirect (HTTP 301') });
    await expectNothingKept(comfy.easel, comfyRun.id);

    const localai = await track(createFakeLocalAi({ redirect: { status: 308, location: `${other.url}/elsewhere` } }));
    const easel = await startEasel(['--image-backend', 'localai', '--image-url', localai.url]);
    const localRun = await generate(easel);
    expect(localRun.error).toMatchObject({ code: 'image_bad_response', message: expect.stringContaining(`LocalAI at ${localai.url} answered POST /v1/images/generations with a redirect (HTTP 308 to ${other.url}/elsewhere). ${RULE}`) });
    expect(await health(easel)).toMatchObject({ reachable: true, detail: expect.stringContaining('answered GET /v1/models with a redirect (HTTP 308') });
    await expectNothingKept(easel, localRun.id);
    expect(other.requests).toEqual([]);
  });

  it('--image-backend auto at a redirecting address: health says it answered with a redirect, naming where', async () => {
    const other = await startOtherListener();
    const redirecting = await track(createFakeA1111({ redirect: { status: 302, location: `${other.url}/login` } }));
    const easel = await startEasel(['--image-url', redirecting.url]);
    const images = await health(easel);
    expect(images).toMatchObject({ backend: 'auto', reachable: true, detail: expect.stringContaining(`The server at ${redirecting.url} answered GET /sdcpp/v1/capabilities with a redirect (HTTP 302 to ${other.url}/login). ${RULE}`) });
    expect(String(images['detail'])).not.toContain('Nothing answers');
    expect(other.requests).toEqual([]);
  });
});

describe('a failed write leaves no file and says what to do', () => {
  it('a file in place of the images folder: image_save_failed, nothing written, the prompt kept', async () => {
    const { easel } = await withA1111();
    const images = join(easel.dataDir, 'images');
    rmSync(images, { recursive: true });
    writeFileSync(images, '');
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'kept prompt' });
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, {}));
    expect(of(events, 'error')[0]).toMatchObject({
      code: 'image_save_failed',
      message: expect.stringMatching(/could not be saved in .*images \(ENOTDIR\), and nothing was written\. Check that this folder exists and that Easel may write to it/),
    });
    expect(readdirSync(easel.dataDir).filter((name) => !name.startsWith('easel.db'))).toEqual(['images']);
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: unknown[]; prompt: string };
    expect(conversation).toMatchObject({ images: [], prompt: 'kept prompt' });
  });
});

describe('shutdown interrupts the image backend', () => {
  it('ComfyUI mid-generation: close() sends /interrupt and ends the stream with an error', async () => {
    const { comfy, easel } = await withComfyUi({ stepDelayMs: 50 });
    const id = await easel.newConversation();
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'slow', settings: { steps: 150 } });
    expect(response.status).toBe(200);
    const events: SseEvent[] = [];
    let progressed!: () => void;
    const firstProgress = new Promise<void>((resolve) => (progressed = resolve));
    // Read on without hanging up: a hang-up would cancel the image by itself.
    const reading = (async () => {
      for await (const event of iterateSse(response.body!)) {
        events.push(event);
        if (event.type === 'progress') progressed();
      }
    })().catch(() => {});
    await firstProgress;
    const started = performance.now();
    await easel.close();
    expect(performance.now() - started).toBeLessThan(5000);
    expect(comfy.interrupts).toBeGreaterThanOrEqual(1);
    await reading;
    expect(events.map((e) => e.type)).toContain('error');
    expect(events.at(-1)).toMatchObject({ type: 'done' });
    expect(of(events, 'error')[0]).toMatchObject({ code: 'image_cancelled' });
    expect(comfy.requests.find((r) => r.path === '/interrupt')?.body).toEqual({ prompt_id: comfy.promptIds[0] });
  });

  it('close() waits for the interrupt of a stream its client just abandoned to be answered', async () => {
    const { comfy, easel } = await withComfyUi({ stepDelayMs: 50, interruptDelayMs: 300 });
    const id = await easel.newConversation();
    const response = await easel.post(`/api/conversations/${id}/generations`, { prompt: 'slow', settings: { steps: 150 } });
    expect(response.status).toBe(200);
    for await (const event of iterateSse(response.body!)) if (event.type === 'progress') break; // hangs up
    // The hang-up alone sends the interrupt; the stream is no longer tracked, its backend job still is.
    await expect.poll(() => comfy.interrupts).toBeGreaterThanOrEqual(1);
    await easel.close();
    expect(comfy.interruptsAnswered).toBeGreaterThanOrEqual(1);
  });
});
