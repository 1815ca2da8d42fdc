// How the A1111 adapter reads a txt2img answer (the image, the settings A1111 says it used, answers it cannot
// use) and /sdapi/v1/progress (only polls that describe our job's sampling, A1111's own fraction and eta).
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { readPngChunks, readPngSize } from '../../../server/png/index.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { REQUEST, a1111Answer, expectBackendError, recordProgress, run, serveRoutes, startFakeA1111 } from './helpers.ts';
import type { RouteAnswer } from './helpers.ts';

describe('what the A1111 adapter reads from an answer', () => {
  it('the seed, steps, cfg, sampler and model the server says it used, else what it was asked', async () => {
    const infos: Record<string, unknown>[] = [
      { seed: 777, steps: 9, cfg_scale: 6.5, sampler_name: 'DPM++ 2M', sd_model_name: 'dreamshaper_8' },
      { all_seeds: [4242] },
      {},
      { sampler_name: 'NONE', sd_model_name: '' },
      { sampler_name: '' },
    ];
    let next = 0;
    const server = await serveRoutes({ '/sdapi/v1/txt2img': () => a1111Answer(infos[next++] ?? {}), '/sdapi/v1/progress': { status: 404, text: '' } });
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    const asked = { seed: REQUEST.seed, steps: REQUEST.steps, cfg: REQUEST.cfg };

    const results = [];
    for (let index = 0; index < infos.length; index++) {
      const { png: _png, ...used } = await backend.generate(REQUEST, run());
      results.push(used);
    }

    // toStrictEqual: a key holding undefined would override what was asked in the stored image.
    expect(results).toStrictEqual([
      { seed: 777, steps: 9, cfg: 6.5, sampler: 'DPM++ 2M', model: 'dreamshaper_8' },
      { ...asked, seed: 4242 },
      asked,
      asked,
      asked,
    ]);
  });

  it('rejects with bad_response when the answer holds no image', async () => {
    const fake = await startFakeA1111({ failWith: { status: 200, body: { images: [], parameters: {}, info: '{}' } } });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
  });

  it('rejects with bad_response, naming the setting, when A1111 sends JPEG', async () => {
    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16]).toString('base64');
    const fake = await startFakeA1111({ failWith: { status: 200, body: { images: [jpeg], parameters: {}, info: '{}' } } });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    expect(error.message).toContain('JPEG');
    expect(error.message).toContain('png');
  });

  it('an answer without an image quotes the start of what came', async () => {
    const fake = await startFakeA1111({ failWith: { status: 200, body: { images: [], parameters: {}, info: '{}' } } });

    const error = await expectBackendError(createA1111Backend({ url: fake.url, pollIntervalMs: 5 }).generate(REQUEST, run()), 'bad_response');

    expect(error.message).toContain(`AUTOMATIC1111 at ${fake.url} answered txt2img without an image ({"images":[],`);
    expect(error.message).toContain('--image-url points to an AUTOMATIC1111-compatible API');
  });

  it('reads an image sent as a data: URL, as some A1111-compatible servers do', async () => {
    const png = makePng(64, 96);
    const fake = await startFakeA1111({
      failWith: { status: 200, body: { images: [`data:image/png;base64,${Buffer.from(png).toString('base64')}`], parameters: {}, info: '{}' } },
    });

    const result = await createA1111Backend({ url: fake.url, pollIntervalMs: 5 }).generate(REQUEST, run());

    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
  });

  it('an empty image, an empty answer and a long answer are "without an image", quoting at most 120 characters', async () => {
    const long = { images: [], note: 'x'.repeat(500) };
    const answers = [{ json: { images: [''], parameters: {}, info: '{}' } }, { text: '' }, { json: long }];
    let next = 0;
    const server = await serveRoutes({ '/sdapi/v1/txt2img': () => answers[next++] ?? 'cut' });
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    const words = (quote: string) =>
      `AUTOMATIC1111 at ${server.url} answered txt2img without an image (${quote}). Check that --image-url points to an AUTOMATIC1111-compatible API.`;

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words('{"images":[""],"parameters":{},"info":"{}"}'));
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words('empty answer'));
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words(JSON.stringify(long).slice(0, 120)));
  });

  it('a WebP image is refused with the setting to change; an image of a kind no setting gives, without', async () => {
    const webp = Buffer.concat([Buffer.from('RIFF'), Buffer.from([26, 0, 0, 0]), Buffer.from('WEBPVP8 '), Buffer.alloc(14)]);
    const gif = Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1');
    const images = [webp, gif];
    let next = 0;
    const server = await serveRoutes({ '/sdapi/v1/txt2img': () => ({ json: { images: [(images[next++] ?? gif).toString('base64')], info: '{}' } }) });
    const backend = createA1111Backend({ url: server.url, pollIntervalMs: 3_600_000 });
    const reason = (bytes: Buffer) => {
      const read = readPngChunks(new Uint8Array(bytes));
      return read.ok ? 'none' : read.error.message;
    };

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `AUTOMATIC1111 at ${server.url} sent an image Easel cannot use: ${reason(webp)} Set Settings → Saving images → File format to png.`,
    );
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `AUTOMATIC1111 at ${server.url} sent an image Easel cannot use: ${reason(gif)}`,
    );
  });
});

describe('A1111 progress', () => {
  it("reports progress step by step by polling /sdapi/v1/progress, with A1111's own fraction", async () => {
    const fake = await startFakeA1111({ stepDelayMs: 40 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate({ ...REQUEST, steps: 8 }, run(undefined, onProgress));

    expect(events.length).toBeGreaterThanOrEqual(2);
    const steps = events.map((event) => event.step ?? -1);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    for (const event of events) {
      expect(event.steps).toBe(8);
      // sampling_step is 0-based: "step 2 of 8" is sampling_step 1, progress 0.01 + 1/8 (api.py:609-614).
      expect(event.step).toBeGreaterThanOrEqual(2);
      expect(event.fraction).toBeCloseTo(0.01 + ((event.step ?? 0) - 1) / 8);
    }
    expect(fake.requests.some((request) => request.path === '/sdapi/v1/progress' && request.query['skip_current_image'] === 'true')).toBe(true);
  });

  it('shows a poll only when it describes our sampling, once per change, and skips failed polls', async () => {
    const state = (fields: Record<string, unknown>) => ({ skipped: false, interrupted: false, job: '', job_no: 0, ...fields });
    const polls: RouteAnswer[] = [
      // The previous job's steps while ours waits (job_count 0), or no job count at all.
      { json: { progress: 0.3, eta_relative: 2, state: state({ job_count: 0, sampling_step: 5, sampling_steps: 30 }) } },
      { json: { progress: 0.3, eta_relative: 2, state: state({ sampling_step: 5, sampling_steps: 30 }) } },
      // A step counter at its end says nothing more than the image will.
      { json: { progress: 0.5, state: state({ job_count: 1, sampling_step: 20, sampling_steps: 20 }) } },
      // No fraction of A1111's own: the step's; a negative eta is no eta.
      { json: { eta_relative: -1, state: state({ job_count: 1, sampling_step: 4, sampling_steps: 10 }) } },
      { json: { eta_relative: -1, state: state({ job_count: 1, sampling_step: 4, sampling_steps: 10 }) } },
      { json: { progress: 0.6, eta_relative: 0, state: state({ job_count: 1, sampling_step: 5, sampling_steps: 10 }) } },
      // A failed poll, whatever its body says.
      { status: 500, json: { progress: 0.7, state: state({ job_count: 1, sampling_step: 6, sampling_steps: 10 }) } },
    ];
    let polled = 0;
    let allPolled: () => void = () => {};
    const done = new Promise<void>((resolve) => (allPolled = resolve));
    const server = await serveRoutes({
      '/sdapi/v1/progress': () => {
        const poll = polls[polled++];
        if (polled >= polls.length) allPolled();
        return poll ?? { json: { progress: 0, state: state({ job_count: 0, sampling_step: 0, sampling_steps: 0 }) } };
      },
      '/sdapi/v1/txt2img': async () => {
        await done;
        return a1111Answer({});
      },
    });
    const { events, onProgress } = recordProgress();

    await createA1111Backend({ url: server.url, pollIntervalMs: 2 }).generate(REQUEST, run(undefined, onProgress));

    expect(events).toStrictEqual([
      { fraction: 0.5, step: 5, steps: 10 },
      { fraction: 0.6, step: 6, steps: 10, etaSeconds: 0 },
    ]);
  });

  it('the image is handed on as soon as it comes: a poll that never answers or a long poll interval does not hold it', { timeout: 5_000 }, async () => {
    const server = await serveRoutes({ '/sdapi/v1/progress': 'hang', '/sdapi/v1/txt2img': { ...a1111Answer({}), delayMs: 50 } });
    await createA1111Backend({ url: server.url, pollIntervalMs: 2, healthTimeoutMs: 3_600_000 }).generate(REQUEST, run());

    const quiet = await serveRoutes({ '/sdapi/v1/txt2img': a1111Answer({}) });
    await createA1111Backend({ url: quiet.url, pollIntervalMs: 3_600_000 }).generate(REQUEST, run());
    expect(quiet.requests.map((request) => request.path)).toEqual(['/sdapi/v1/txt2img']);
  });
});

describe('progress before our job starts', () => {
  it("never reports the previous job's steps from a poll with job_count 0", async () => {
    // The previous job ran 30 steps; ours waits 150 ms for the queue lock, then runs 4.
    const fake = await startFakeA1111({ stepDelayMs: 10, previousJob: { steps: 30 }, startDelayMs: 150 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate({ ...REQUEST, steps: 4 }, run(undefined, onProgress));

    // The stale state was there to be read: several polls saw job_count 0 and 30 steps.
    const polls = fake.requests.filter((request) => request.path === '/sdapi/v1/progress');
    expect(polls.length).toBeGreaterThanOrEqual(5);
    expect(events.length).toBeGreaterThanOrEqual(1);
    for (const event of events) expect(event).toMatchObject({ steps: 4 });
  });
});

describe('progress at the start and the end of our job', () => {
  it('never says "step 0 of N" or 100 % while the job starts (job_count −1, the last job\'s sampling_steps) or finishes (1.0 while saving)', async () => {
    // The last job ran 30 steps; ours spends 150 ms in State.begin() before sampling and 150 ms saving after it.
    const fake = await startFakeA1111({ previousJob: { steps: 30 }, setupDelayMs: 150, finishDelayMs: 150, stepDelayMs: 30 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate({ ...REQUEST, steps: 5 }, run(undefined, onProgress));

    expect(events.length).toBeGreaterThanOrEqual(2);
    for (const event of events) {
      expect(event.steps).toBe(5);
      expect(event.step).toBeGreaterThanOrEqual(1);
      expect(event.fraction).toBeLessThan(1);
    }
  });

  it("shows A1111's eta_relative as the seconds left, once the job samples", async () => {
    const fake = await startFakeA1111({ stepDelayMs: 60 });
    const backend = createA1111Backend({ url: fake.url, pollIntervalMs: 5 });
    const { events, onProgress } = recordProgress();

    await backend.generate({ ...REQUEST, steps: 6 }, run(undefined, onProgress));

    const etas = events.map((event) => event.etaSeconds);
    expect(etas.length).toBeGreaterThanOrEqual(2);
    // Each is an eta_relative A1111 answered (elapsed/progress − elapsed), in whole seconds up: never a guess
    // of our own. (A bound in seconds would be a timing assumption a busy machine breaks.)
    const served = new Set(fake.progressAnswers.filter((answer) => answer.progress > 0).map((answer) => Math.ceil(answer.eta_relative)));
    for (const eta of etas) {
      expect(eta).toEqual(expect.any(Number));
      expect(eta).toBeGreaterThanOrEqual(0);
      expect(served).toContain(eta);
    }
  });
});
