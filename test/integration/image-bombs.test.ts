// Decompression bombs within the byte limits: a 2 MB PNG whose IHDR says 16384×16384 16-bit RGBA (2 GiB of
// pixels) from a compromised image server or in a doctored export. The pixel cap (--max-image-pixels) refuses
// it from its header, before inflating anything, and nothing of it is stored or served.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unzipSync, zipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { createFakeA1111, type FakeA1111Options } from '../fakes/fake-a1111.ts';
import { createFakeComfyUi } from '../fakes/fake-comfyui.ts';
import { makePngBomb } from '../fakes/png-bytes.ts';
import { closeAfterEachTest, type TestEasel } from '../helpers/easel.ts';
import { readSse } from '../helpers/sse.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const BOMB_SIZE = 'The PNG says it is 16384×16384 pixels (268 million), more than the 67 million (8192×8192) Easel accepts; raise --max-image-pixels to allow it.';

const { track, startEasel: easelWith } = closeAfterEachTest();

function startEasel(imageFlags: string[], extra: string[] = []): Promise<TestEasel> {
  return easelWith([...imageFlags, ...extra]);
}

async function withA1111(options: FakeA1111Options, extra: string[] = []) {
  const a1111 = await track(createFakeA1111({ stepDelayMs: 1, ...options }));
  return { a1111, easel: await startEasel(['--image-backend', 'a1111', '--image-url', a1111.url], extra) };
}

async function generate(easel: TestEasel, settings: Record<string, unknown> = {}) {
  const id = await easel.newConversation();
  const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a lighthouse', settings: { steps: 2, ...settings } }));
  return { id, error: events.find((e) => e.type === 'error')?.data, image: events.find((e) => e.type === 'image')?.data };
}

async function expectNothingStored(easel: TestEasel, id: string): Promise<void> {
  expect(readdirSync(join(easel.dataDir, 'images'))).toEqual([]);
  const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { images: unknown[] };
  expect(conversation.images).toEqual([]);
}

function importZip(easel: TestEasel, bytes: Uint8Array): Promise<Response> {
  return fetch(`${easel.url}/api/conversations/import`, { method: 'POST', headers: { 'content-type': 'application/zip' }, body: bytes as Uint8Array<ArrayBuffer> });
}

/** A real export of one conversation with one 128×128 image: its files, and the name of the image in it. */
async function exportOneImage(easel: TestEasel): Promise<{ files: Record<string, Uint8Array>; image: string }> {
  const { id, image } = await generate(easel, { width: 128, height: 128 });
  expect(image).toMatchObject({ width: 128, height: 128 });
  const files = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer()));
  return { files, image: Object.keys(files).find((name) => name.startsWith('images/'))! };
}

async function listIds(easel: TestEasel): Promise<string[]> {
  return ((await (await easel.get('/api/conversations')).json()) as { conversations: Array<{ id: string }> }).conversations.map((c) => c.id);
}

describe('a bomb from the image backend is refused from its header, and nothing is stored', () => {
  it('AUTOMATIC1111 sends a 2 MB, 16384×16384 16-bit RGBA PNG: image_bad_response naming its size', async () => {
    const { a1111, easel } = await withA1111({ image: makePngBomb() });
    const started = performance.now();
    const { id, error, image } = await generate(easel);
    expect(image).toBeUndefined();
    expect(error).toEqual({
      code: 'image_bad_response',
      message: `AUTOMATIC1111 at ${a1111.url} sent an image Easel cannot use: ${BOMB_SIZE} Nothing was saved; try again, and check the backend's console if it happens again. The prompt is kept: press Generate to try again.`,
    });
    // Inflating the 2 GiB took 2.5 s; the header alone is read at once.
    expect(performance.now() - started).toBeLessThan(2000);
    await expectNothingStored(easel, id);
  });

  it('ComfyUI serves the bomb from /view: the same refusal', async () => {
    const comfy = await track(createFakeComfyUi({ stepDelayMs: 1, image: makePngBomb() }));
    const easel = await startEasel(['--image-backend', 'comfyui', '--image-url', comfy.url]);
    const { id, error } = await generate(easel, { width: 64, height: 64 });
    expect(error).toMatchObject({ code: 'image_bad_response', message: expect.stringContaining(`ComfyUI at ${comfy.url} sent an image Easel cannot use: ${BOMB_SIZE}`) });
    await expectNothingStored(easel, id);
  });

  it('--max-image-pixels sets the cap for generated images: 4096 refuses an ordinary 128×128 image', async () => {
    const { easel } = await withA1111({}, ['--max-image-pixels', '4096']);
    const { id, error } = await generate(easel, { width: 128, height: 128 });
    expect(error).toMatchObject({
      code: 'image_bad_response',
      message: expect.stringContaining('The PNG says it is 128×128 pixels (16384), more than the 4096 (64×64) Easel accepts; raise --max-image-pixels to allow it.'),
    });
    await expectNothingStored(easel, id);
  });
});

describe('a bomb in an imported conversation is refused from its header, and nothing is stored', () => {
  it('an export whose image was swapped for the bomb: 422 naming the file and the size', async () => {
    const { easel } = await withA1111({});
    const { files, image } = await exportOneImage(easel);
    const before = { ids: await listIds(easel), images: readdirSync(join(easel.dataDir, 'images')) };

    const response = await importZip(easel, zipSync({ ...files, [image]: makePngBomb() }));
    expect(response.status).toBe(422);
    expect(((await response.json()) as { error: string }).error).toBe(`${image} is not an image Easel can use: ${BOMB_SIZE}`);
    expect(await listIds(easel)).toEqual(before.ids);
    expect(readdirSync(join(easel.dataDir, 'images'))).toEqual(before.images);
    // The same export, untouched, imports: only the bomb was refused.
    expect((await importZip(easel, zipSync(files))).status).toBe(201);
  });

  it('--max-image-pixels sets the cap for imports too: 4096 refuses an export holding a 128×128 image', async () => {
    const { files, image } = await exportOneImage((await withA1111({})).easel);
    const strict = await startEasel(['--image-backend', 'none'], ['--max-image-pixels', '4096']);

    const response = await importZip(strict, zipSync(files));
    expect(response.status).toBe(422);
    expect(((await response.json()) as { error: string }).error).toBe(
      `${image} is not an image Easel can use: The PNG says it is 128×128 pixels (16384), more than the 4096 (64×64) Easel accepts; raise --max-image-pixels to allow it.`,
    );
    expect(await listIds(strict)).toEqual([]);
    expect(readdirSync(join(strict.dataDir, 'images'))).toEqual([]);
  });
});

describe('--max-image-pixels at start', () => {
  it('a value out of range: exit code 2 and one line naming the flag and its range', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts', '--port', '0', '--max-image-pixels', '100'], {
      cwd: REPO,
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 30_000,
    });
    let stderr = '';
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    const status = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(status).toBe(2);
    expect(stderr).toBe('easel: --max-image-pixels must be a whole number from 4096 to 268435456 (got "100").\n');
  });
});
