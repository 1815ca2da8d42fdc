// How the OpenAI-compatible adapter reads an answer: the image as b64_json (also as a data: URL) or as a link on
// the server's own address, and the answers it cannot use, each said as what it is.
import { describe, expect, it } from 'vitest';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { readPngChunks, readPngSize } from '../../../server/png/index.ts';
import { REQUEST, expectBackendError, run, serveRoutes, startFakeOpenAiImages } from './helpers.ts';

// The first bytes of a JPEG (SOI, APP0 "JFIF"): what a server set to JPEG answers.
const JPEG_BASE64 = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00]).toString('base64');
const reasonOf = (bytes: Uint8Array) => {
  const read = readPngChunks(bytes);
  return read.ok ? 'none' : read.error.message;
};

describe('the image in an answer', () => {
  it('falls back to downloading the image when the server answers with a url', async () => {
    const fake = await startFakeOpenAiImages();
    const urlFormatFetch: typeof fetch = (input, init) =>
      typeof init?.body === 'string'
        ? fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(init.body), response_format: 'url' }) })
        : fetch(input, init);
    const backend = createOpenAiImagesBackend({ url: fake.url, fetch: urlFormatFetch });

    const result = await backend.generate(REQUEST, run());

    expect(readPngSize(result.png)).toEqual({ ok: true, value: { width: 64, height: 96 } });
    expect(fake.requests.some((request) => request.path.startsWith('/generated-images/'))).toBe(true);
  });

  it('reads b64_json sent as a data: URL, takes an empty b64_json as no image, and quotes an answer without one', async () => {
    const good = await startFakeOpenAiImages();
    const png = (await createOpenAiImagesBackend({ url: good.url }).generate(REQUEST, run())).png;
    const dataUrl = await startFakeOpenAiImages({
      failWith: { status: 200, body: { created: 1, data: [{ b64_json: `data:image/png;base64,${Buffer.from(png).toString('base64')}` }] } },
    });
    expect((await createOpenAiImagesBackend({ url: dataUrl.url }).generate(REQUEST, run())).png).toEqual(png);

    const empty = await startFakeOpenAiImages({ failWith: { status: 200, body: { created: 1, data: [{ b64_json: '', url: '' }] } } });
    const error = await expectBackendError(createOpenAiImagesBackend({ url: empty.url }).generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(
      `The image server at ${empty.url} answered without an image ({"created":1,"data":[{"b64_json":"","url":""}]}). Check that it serves an image model.`,
    );
  });
});

describe('answers the OpenAI-compatible adapter cannot use', () => {
  it('rejects with bad_response when the answer holds no image', async () => {
    const fake = await startFakeOpenAiImages({ failWith: { status: 200, body: { created: 1, data: [] } } });
    const backend = createOpenAiImagesBackend({ url: fake.url });

    await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
  });

  it('a JPEG says to configure PNG', async () => {
    const fake = await startFakeOpenAiImages({ failWith: { status: 200, body: { created: 1, data: [{ b64_json: JPEG_BASE64 }] } } });

    const error = await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run()), 'bad_response');

    expect(error.message).toContain('Configure the server to return PNG.');
  });

  it('a link it cannot serve, and a link that is no URL, are said as such', async () => {
    const fake = await startFakeOpenAiImages({ failWith: { status: 200, body: { created: 1, data: [{ url: '/generated-images/missing.png' }] } } });
    const notServed = await expectBackendError(createOpenAiImagesBackend({ url: fake.url }).generate(REQUEST, run()), 'backend_error');
    expect(notServed.message).toContain('could not serve the image it made (HTTP 404)');

    const unreadable = await startFakeOpenAiImages({ failWith: { status: 200, body: { created: 1, data: [{ url: 'http://[not a host' }] } } });
    const bad = await expectBackendError(createOpenAiImagesBackend({ url: unreadable.url }).generate(REQUEST, run()), 'bad_response');
    expect(bad.message).toContain('answered with an image link Easel cannot read (http://[not a host)');
  });

  it('a link it cannot read is quoted to 120 characters; a link to a file: URL names its scheme', async () => {
    const unreadable = `http://[${'x'.repeat(300)}`;
    const links = [unreadable, 'file:///etc/passwd'];
    let next = 0;
    const server = await serveRoutes({ '/v1/images/generations': () => ({ json: { created: 1, data: [{ url: links[next++] }] } }) });
    const backend = createOpenAiImagesBackend({ url: server.url });

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} answered with an image link Easel cannot read (${unreadable.slice(0, 120)}).`,
    );
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} linked its image on another server (file:); Easel only downloads images from ${server.url} itself, so it fetched nothing. Configure the server to answer with b64_json, or to link its images on its own address.`,
    );
  });

  it('a link answered with 300 is a redirect; one answered with 400 is an image the server could not serve', async () => {
    const statuses = [300, 400];
    const server = await serveRoutes({
      '/v1/images/generations': { json: { created: 1, data: [{ url: '/files/a.png' }] } },
      '/files/a.png': () => ({ status: statuses.shift() ?? 500, text: '' }),
    });
    const backend = createOpenAiImagesBackend({ url: server.url });

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} answered GET /files/a.png with a redirect (HTTP 300, no Location). Easel follows no redirect of an image server, so it sent nothing there. Set --image-url to the address the server really answers at.`,
    );
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'backend_error')).message).toBe(
      `The image server at ${server.url} could not serve the image it made (HTTP 400).`,
    );
  });

  it('a WebP image is refused with what to configure; an image of a kind no setting gives, without', async () => {
    const webp = new Uint8Array(Buffer.concat([Buffer.from('RIFF'), Buffer.from([26, 0, 0, 0]), Buffer.from('WEBPVP8 '), Buffer.alloc(14)]));
    const gif = new Uint8Array(Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1'));
    const images = [webp, gif];
    let next = 0;
    const server = await serveRoutes({ '/v1/images/generations': () => ({ json: { created: 1, data: [{ b64_json: Buffer.from(images[next++] ?? gif).toString('base64') }] } }) });
    const backend = createOpenAiImagesBackend({ url: server.url });

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} sent an image Easel cannot use: ${reasonOf(webp)} Configure the server to return PNG.`,
    );
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(
      `The image server at ${server.url} sent an image Easel cannot use: ${reasonOf(gif)}`,
    );
  });

  it('an empty answer and a long one are "without an image", quoting at most 120 characters', async () => {
    const long = { created: 1, data: [], note: 'x'.repeat(500) };
    const answers = [{ text: '' }, { json: long }];
    let next = 0;
    const server = await serveRoutes({ '/v1/images/generations': () => answers[next++] ?? 'cut' });
    const backend = createOpenAiImagesBackend({ url: server.url });
    const words = (quote: string) => `The image server at ${server.url} answered without an image (${quote}). Check that it serves an image model.`;

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words('empty answer'));
    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(words(JSON.stringify(long).slice(0, 120)));
  });
});
