// A reference picture's bounds and the words of each refusal: at most 64 MB as sent (exactly 64 MB is taken), not
// empty, a Content-Type said, bytes the converter can read as the type named, no more pixels than
// --max-image-pixels (the count said). Through the API where it reaches them; the service itself for what the
// API's body limit or the real converter stops sooner.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { MAX_REFERENCE_BYTES, silentLogger, type ImageConverter } from '../../server/core/index.ts';
import { createImageConverter } from '../../server/sharp/index.ts';
import { makePng } from '../fakes/png-bytes.ts';
import { closeAfterEachTest, type TestEasel } from '../helpers/easel.ts';
import { buildService, newConversationId, type TestServiceOptions } from '../helpers/service.ts';

const { startEasel } = closeAfterEachTest();

function sendReference(easel: TestEasel, conversation: string, body: Uint8Array, type?: string): Promise<Response> {
  return easel.post(`/api/conversations/${conversation}/references`, undefined, { headers: type === undefined ? {} : { 'content-type': type }, body: body as BodyInit });
}

async function errorOf(response: Response): Promise<string> {
  return ((await response.json()) as { error: string }).error;
}

describe('POST /api/conversations/:id/references: bounds and refusals', () => {
  it('takes a picture of exactly 64 MB, the bound itself', async () => {
    const easel = await startEasel([]);
    const id = await easel.newConversation();
    // A PNG followed by padding up to the bound: the bytes after its end are not part of the picture.
    const body = new Uint8Array(MAX_REFERENCE_BYTES);
    body.set(makePng(8, 8));
    const response = await sendReference(easel, id, body, 'image/png');
    expect(response.status, await response.clone().text()).toBe(201);
    expect(await response.json()).toMatchObject({ width: 8, height: 8 });
  });

  it('refuses an empty body, asking for the picture itself, and stores nothing', async () => {
    const easel = await startEasel([]);
    const id = await easel.newConversation();
    const response = await sendReference(easel, id, new Uint8Array(0), 'image/png');
    expect(response.status).toBe(422);
    expect(await errorOf(response)).toContain('The body is empty: send the picture itself');
    expect(readdirSync(join(easel.dataDir, 'images'))).toEqual([]);
  });

  it('refuses a body with no Content-Type with 415, saying it has none', async () => {
    const easel = await startEasel([]);
    const id = await easel.newConversation();
    const response = await sendReference(easel, id, makePng(8, 8));
    expect(response.status).toBe(415);
    expect(await errorOf(response)).toContain('(this body has no Content-Type)');
  });

  it('names the type it could not read the bytes as', async () => {
    const easel = await startEasel([]);
    const id = await easel.newConversation();
    const response = await sendReference(easel, id, new TextEncoder().encode('not a picture'), 'image/jpeg');
    expect(response.status).toBe(422);
    expect(await errorOf(response)).toContain('The body cannot be read as a JPEG picture (');
  });

  it('says how many pixels a picture over --max-image-pixels has, and the bound', async () => {
    const easel = await startEasel(['--max-image-pixels', '4096']);
    const id = await easel.newConversation();
    const response = await sendReference(easel, id, makePng(128, 64), 'image/png');
    expect(response.status).toBe(422);
    expect(await errorOf(response)).toContain('The picture is 128×64 pixels (8192), more than the 4096 Easel accepts');
  });
});

describe('the service: the refusals the API and the real converter reach sooner', () => {
  function serviceWith(options: TestServiceOptions = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'easel-reference-bounds-'));
    const built = buildService({ imagesDir: dir, ...options });
    onTestFinished(() => {
      built.realStore.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return { ...built, dir, id: newConversationId(built.service) };
  }
  const converter = () => createImageConverter({ logger: silentLogger });

  it('refuses a picture over 64 MB, saying both sizes in MB', async () => {
    const { service, id, dir } = serviceWith({ converter: converter() });
    const refused = await service.addReference(id, new Uint8Array(MAX_REFERENCE_BYTES + 1), 'image/png');
    expect(refused.ok ? 'added' : refused.error.code).toBe('too_large');
    // One byte over 64 MB is said as 65 MB (rounded up): the user reads both numbers.
    expect(refused.ok ? '' : refused.error.message).toBe('The picture is 65 MB; Easel takes pictures of at most 64 MB.');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses every picture when it has no image converter, saying so', async () => {
    const { service, id } = serviceWith();
    const refused = await service.addReference(id, makePng(8, 8), 'image/png');
    expect(refused.ok ? 'added' : refused.error.code).toBe('unavailable');
    expect(refused.ok ? '' : refused.error.message).toContain('cannot read pictures (no image converter)');
  });

  it('checks the PNG a converter gives against --max-image-pixels too, like an image a backend sends', async () => {
    // A converter that ignores the bound it is given: the core does not take its word for it.
    const real = converter();
    const lax: ImageConverter = { toPng: (bytes) => real.toPng(bytes, { maxPixels: Number.MAX_SAFE_INTEGER }) };
    const { service, id, dir } = serviceWith({ converter: lax, maxImagePixels: 4096 });
    const refused = await service.addReference(id, makePng(128, 64), 'image/png');
    expect(refused.ok ? 'added' : refused.error.code).toBe('invalid');
    expect(refused.ok ? '' : refused.error.message).toContain('128×64 pixels');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses a type that is no picture as such, before looking for the conversation (the API and the page refuse it sooner)', async () => {
    const { service, id, dir } = serviceWith({ converter: converter() });
    const text = new TextEncoder().encode('hello');
    for (const conversation of [id, 'f'.repeat(8)]) {
      const refused = await service.addReference(conversation, text, 'text/plain');
      expect(refused.ok ? 'added' : refused.error.code).toBe('invalid');
      expect(refused.ok ? '' : refused.error.message).toContain('Send a PNG, JPEG or WebP picture as the body');
    }
    expect(readdirSync(dir)).toEqual([]);
  });
});
