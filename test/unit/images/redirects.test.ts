// No image adapter follows a redirect (server/image-backend/): a 3xx from an image server, or from a proxy in
// front of it, is refused where it arrives and reported as a redirect, naming where it pointed. The other
// listener stands for the host a misconfigured proxy or a compromised server would steer Easel to.
import { describe, expect, it } from 'vitest';
import { createA1111Backend } from '../../../server/a1111/index.ts';
import { createComfyUiBackend } from '../../../server/comfyui/index.ts';
import { createImageServerFetch } from '../../../server/image-backend/index.ts';
import { probeImageServer } from '../../../server/image-probe/index.ts';
import { createOpenAiImagesBackend } from '../../../server/openai-images/index.ts';
import { createFakeA1111 } from '../../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../../fakes/fake-comfyui.ts';
import { createFakeLocalAi } from '../../fakes/fake-localai.ts';
import { createFakeOpenAiImages } from '../../fakes/fake-openai-images.ts';
import { REQUEST, closeAfterTest, expectBackendError, findClosedUrl, run, serveRoutes } from './helpers.ts';
import { loadShippedWorkflow } from './comfyui-helpers.ts';

/** The one sentence every adapter says after naming the server, the request and where the redirect pointed. */
const RULE = 'Easel follows no redirect of an image server, so it sent nothing there. Set --image-url to the address the server really answers at.';

function redirected(label: string, url: string, request: string, status: number, where: string): string {
  return `${label} at ${url} answered ${request} with a redirect (HTTP ${status}${where === 'no Location' ? ', ' : ' '}${where}). ${RULE}`;
}

describe('createImageServerFetch', () => {
  it('refuses 301, 302, 303, 307 and 308 without following them, naming the status and the Location', async () => {
    const other = await serveRoutes({});
    for (const status of [301, 302, 303, 307, 308]) {
      const server = await serveRoutes({}, { notFound: { status, headers: { location: `${other.url}/elsewhere` } } });
      const fetchImage = createImageServerFetch(fetch, { label: 'The image server', url: server.url });
      const error = await expectBackendError(fetchImage(`${server.url}/v1/models`, { method: 'POST', body: '{}' }), 'bad_response');
      expect(error.message).toBe(redirected('The image server', server.url, 'POST /v1/models', status, `to ${other.url}/elsewhere`));
    }
    expect(other.requests).toEqual([]);
  });

  it('resolves a relative Location against the request, says when there is none, and quotes one that is no address', async () => {
    const relative = await serveRoutes({}, { notFound: { status: 302, headers: { location: '../login?next=%2F' } } });
    const bare = await serveRoutes({}, { notFound: { status: 307 } });
    const broken = await serveRoutes({}, { notFound: { status: 301, headers: { location: 'http://[nope' } } });
    const fetchImage = (url: string) => createImageServerFetch(fetch, { label: () => 'ComfyUI', url })(`${url}/api/system_stats`);

    expect((await expectBackendError(fetchImage(relative.url), 'bad_response')).message).toBe(redirected('ComfyUI', relative.url, 'GET /api/system_stats', 302, `to ${relative.url}/login?next=%2F`));
    expect((await expectBackendError(fetchImage(bare.url), 'bad_response')).message).toBe(redirected('ComfyUI', bare.url, 'GET /api/system_stats', 307, 'no Location'));
    expect((await expectBackendError(fetchImage(broken.url), 'bad_response')).message).toBe(redirected('ComfyUI', broken.url, 'GET /api/system_stats', 301, 'to "http://[nope", which is no address'));
  });

  it('an empty Location is no Location; a long one that is no address is quoted to its first 200 characters', async () => {
    const empty = await serveRoutes({}, { notFound: { status: 302, headers: { location: '' } } });
    const long = 'http://[' + 'x'.repeat(300);
    const broken = await serveRoutes({}, { notFound: { status: 301, headers: { location: long } } });
    const fetchImage = (url: string) => createImageServerFetch(fetch, { label: () => 'ComfyUI', url })(`${url}/api/system_stats`);
    expect((await expectBackendError(fetchImage(empty.url), 'bad_response')).message).toBe(redirected('ComfyUI', empty.url, 'GET /api/system_stats', 302, 'no Location'));
    expect((await expectBackendError(fetchImage(broken.url), 'bad_response')).message).toBe(redirected('ComfyUI', broken.url, 'GET /api/system_stats', 301, `to "${long.slice(0, 200)}", which is no address`));
  });

  it('hands every other answer back as it came, and follows no redirect even when the caller asks it to', async () => {
    const other = await serveRoutes({});
    const server = await serveRoutes({ '/ok': { json: { fine: true } }, '/moved': { status: 302, headers: { location: `${other.url}/x` } } }, { notFound: { status: 404, text: 'nope' } });
    const fetchImage = createImageServerFetch(fetch, { label: 'LocalAI', url: server.url });

    expect(await (await fetchImage(`${server.url}/ok`)).json()).toEqual({ fine: true });
    const missing = await fetchImage(`${server.url}/missing`);
    expect([missing.status, await missing.text()]).toEqual([404, 'nope']);
    await expectBackendError(fetchImage(`${server.url}/moved`, { redirect: 'follow' }), 'bad_response');
    expect(other.requests).toEqual([]);
  });
});

describe('AUTOMATIC1111 (and sd-server) behind a redirect', () => {
  it('a redirect to another listener is not followed: generate and checkHealth say where it pointed', async () => {
    const other = await serveRoutes({});
    const a1111 = await closeAfterTest(createFakeA1111({ redirect: { status: 302, location: `${other.url}/elsewhere` } }));
    const backend = createA1111Backend({ url: a1111.url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(redirected('AUTOMATIC1111', a1111.url, 'POST /sdapi/v1/txt2img', 302, `to ${other.url}/elsewhere`));
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: redirected('AUTOMATIC1111', a1111.url, 'GET /sdapi/v1/options', 302, `to ${other.url}/elsewhere`) });
    expect(other.requests).toEqual([]);
  });

  it('a redirect to a dead port is a redirect, not "not answering"', async () => {
    const dead = await findClosedUrl();
    const a1111 = await closeAfterTest(createFakeA1111({ redirect: { status: 307, location: `${dead}/sdapi/v1/txt2img` } }));
    const backend = createA1111Backend({ url: a1111.url, pollIntervalMs: 5 });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(redirected('AUTOMATIC1111', a1111.url, 'POST /sdapi/v1/txt2img', 307, `to ${dead}/sdapi/v1/txt2img`));
    const health = await backend.checkHealth();
    expect(health).toEqual({ reachable: true, detail: expect.stringContaining(`with a redirect (HTTP 307 to ${dead}/sdapi/v1/txt2img)`) });
    expect(health.detail).not.toContain('not answering');
  });
});

describe('ComfyUI behind a redirect', () => {
  async function comfyBackend(url: string) {
    return createComfyUiBackend({ url, workflow: await loadShippedWorkflow() });
  }

  it('a redirect of the WebSocket handshake and of /system_stats is not followed, and says where it pointed', async () => {
    const other = await serveRoutes({});
    const comfy = await closeAfterTest(createFakeComfyUi({ redirect: { status: 301, location: `${other.url}/elsewhere` } }));
    const backend = await comfyBackend(comfy.url);

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(redirected('ComfyUI', comfy.url, 'GET /ws', 301, `to ${other.url}/elsewhere`));
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: redirected('ComfyUI', comfy.url, 'GET /system_stats', 301, `to ${other.url}/elsewhere`) });
    expect(other.requests).toEqual([]);
  });

  it('a /view redirected to another listener fetches nothing there, after the prompt ran', async () => {
    const other = await serveRoutes({});
    const comfy = await closeAfterTest(createFakeComfyUi({ stepDelayMs: 1, redirectView: { status: 302, location: `${other.url}/bucket/image.png` } }));
    const backend = await comfyBackend(comfy.url);

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(redirected('ComfyUI', comfy.url, 'GET /view', 302, `to ${other.url}/bucket/image.png`));
    expect(comfy.outcomes).toEqual({ [comfy.promptIds[0]!]: 'success' });
    expect(other.requests).toEqual([]);
  });

  it('a redirect to a dead port is a redirect, not "not answering"', async () => {
    const dead = await findClosedUrl();
    const comfy = await closeAfterTest(createFakeComfyUi({ redirect: { status: 308, location: dead } }));
    const backend = await comfyBackend(comfy.url);

    expect((await expectBackendError(backend.generate(REQUEST, run()), 'bad_response')).message).toBe(redirected('ComfyUI', comfy.url, 'GET /ws', 308, `to ${dead}/`));
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: redirected('ComfyUI', comfy.url, 'GET /system_stats', 308, `to ${dead}/`) });
  });
});

describe('OpenAI-compatible servers and LocalAI behind a redirect', () => {
  it('openai: a redirect to another listener is not followed: generate and checkHealth say where it pointed', async () => {
    const other = await serveRoutes({});
    const server = await closeAfterTest(createFakeOpenAiImages({ redirect: { status: 303, location: `${other.url}/v1/images/generations` } }));
    const backend = createOpenAiImagesBackend({ url: server.url });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(redirected('The image server', server.url, 'POST /v1/images/generations', 303, `to ${other.url}/v1/images/generations`));
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: redirected('The image server', server.url, 'GET /v1/models', 303, `to ${other.url}/v1/images/generations`) });
    expect(other.requests).toEqual([]);
  });

  it('openai: a linked image redirected elsewhere is refused by the same rule', async () => {
    const other = await serveRoutes({});
    const server = await closeAfterTest(createFakeOpenAiImages({ forceUrl: true, redirectImagesTo: other.url }));
    const backend = createOpenAiImagesBackend({ url: server.url });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    expect(error.message).toMatch(new RegExp(`^The image server at ${server.url} answered GET /generated-images/[\\w-]+\\.png with a redirect \\(HTTP 302 to ${other.url}/generated-images/[\\w-]+\\.png\\)\\. Easel follows no redirect`));
    expect(other.requests).toEqual([]);
  });

  it('localai: a redirect to a dead port is a redirect, not "not answering", in generate and checkHealth', async () => {
    const dead = await findClosedUrl();
    const localai = await closeAfterTest(createFakeLocalAi({ redirect: { status: 302, location: `${dead}/v1/images/generations` } }));
    const backend = createOpenAiImagesBackend({ url: localai.url, dialect: 'localai' });

    const error = await expectBackendError(backend.generate(REQUEST, run()), 'bad_response');
    expect(error.message).toBe(redirected('LocalAI', localai.url, 'POST /v1/images/generations', 302, `to ${dead}/v1/images/generations`));
    expect(await backend.checkHealth()).toEqual({ reachable: true, detail: redirected('LocalAI', localai.url, 'GET /v1/models', 302, `to ${dead}/v1/images/generations`) });
  });
});

describe('--image-backend auto behind a redirect', () => {
  it('probeImageServer says a server answered with a redirect, naming where, and follows it nowhere', async () => {
    const other = await serveRoutes({});
    const redirecting = await closeAfterTest(createFakeA1111({ redirect: { status: 302, location: `${other.url}/elsewhere` } }));
    expect(await probeImageServer(redirecting.url)).toEqual({
      found: null,
      reachable: true,
      detail: redirected('The server', redirecting.url, 'GET /sdcpp/v1/capabilities', 302, `to ${other.url}/elsewhere`),
    });
    expect(other.requests).toEqual([]);
  });

  it('a redirect to a dead port is a server that redirects, not "Nothing answers"', async () => {
    const dead = await findClosedUrl();
    const redirecting = await closeAfterTest(createFakeLocalAi({ redirect: { status: 307, location: `${dead}/` } }));
    const result = await probeImageServer(redirecting.url);
    expect(result).toEqual({ found: null, reachable: true, detail: redirected('The server', redirecting.url, 'GET /sdcpp/v1/capabilities', 307, `to ${dead}/`) });
  });
});
