// Vary's record of where an image came from, through an export and an import: a starting image exported with it
// is named by its position (an import gives it a new id), one of another conversation keeps its id, and an export
// made before Vary imports with no source.
import { describe, expect, it } from 'vitest';
import { buildArchiveFiles, readArchiveFiles, type ArchiveSource } from '../../../server/core/archive.ts';
import { DEFAULT_SETTINGS } from '../../../server/core/index.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { makeImageRecord } from '../../helpers/records.ts';

const AT = '2026-11-26T10:00:00.000Z';
const png = makePng(8, 8);
const OUTSIDE = 'c'.repeat(32);

const source: ArchiveSource = {
  title: 'Fox',
  createdAt: AT,
  updatedAt: AT,
  prompt: 'a fox',
  settings: DEFAULT_SETTINGS,
  turns: [],
  context: [],
  images: [
    makeImageRecord({ id: 'a'.repeat(32), file: 'a.png' }),
    makeImageRecord({ id: 'b'.repeat(32), file: 'b.png', source: { imageId: 'a'.repeat(32), strength: 0.35 } }),
    makeImageRecord({ id: 'd'.repeat(32), file: 'd.png', source: { imageId: OUTSIDE, strength: 0.65 } }),
  ],
  promptVersions: [{ id: 1, parentId: null, prompt: 'a fox', source: 'user', turnId: null, createdAt: AT }],
  promptVersion: 1,
  suggestion: null,
  pinned: [],
  settingSuggestions: {},
};

async function exported(): Promise<Map<string, Uint8Array>> {
  return buildArchiveFiles(source, { exportedAt: AT, readImage: async () => png });
}

function manifestOf(files: ReadonlyMap<string, Uint8Array>): Record<string, unknown> & { images: Array<Record<string, unknown>> } {
  return JSON.parse(new TextDecoder().decode(files.get('conversation.json'))) as Record<string, unknown> & { images: Array<Record<string, unknown>> };
}

function counter(): () => string {
  let next = 0;
  return () => `new${++next}`;
}

describe("an image's source in an export", () => {
  it('is written with the position of a starting image exported with it, and the id of one that is not', async () => {
    const images = manifestOf(await exported()).images;
    expect(images.map((image) => image['source'])).toEqual([null, { imageId: 'a'.repeat(32), strength: 0.35, image: 0 }, { imageId: OUTSIDE, strength: 0.65, image: null }]);
  });

  it('comes back naming the imported starting image by its new id, and another one by the id it had', async () => {
    const read = await readArchiveFiles(await exported(), { conversationId: 'copy', newImageId: counter() });
    if (!read.ok) throw new Error(read.error.message);
    expect(read.value.conversation.images.map((image) => [image.id, image.source])).toEqual([
      ['new1', null],
      ['new2', { imageId: 'new1', strength: 0.35 }],
      ['new3', { imageId: OUTSIDE, strength: 0.65 }],
    ]);
  });

  it('an export made before Vary has none, and imports with null', async () => {
    const files = await exported();
    const manifest = manifestOf(files);
    const older = manifest.images.map(({ source: _source, ...image }) => image);
    const read = await readArchiveFiles(new Map([...files, ['conversation.json', new TextEncoder().encode(JSON.stringify({ ...manifest, images: older }))]]), { conversationId: 'copy', newImageId: counter() });
    if (!read.ok) throw new Error(read.error.message);
    expect(read.value.conversation.images.map((image) => image.source)).toEqual([null, null, null]);
  });

  it('refuses a position that names no exported image, and a strength out of range', async () => {
    const files = await exported();
    const manifest = manifestOf(files);
    const withSource = (value: unknown) => new Map([...files, ['conversation.json', new TextEncoder().encode(JSON.stringify({ ...manifest, images: manifest.images.map((image, index) => (index === 1 ? { ...image, source: value } : image)) }))]]);
    const far = await readArchiveFiles(withSource({ imageId: 'x', strength: 0.35, image: 7 }), { conversationId: 'copy', newImageId: counter() });
    expect(far).toEqual({ ok: false, error: { code: 'invalid', message: 'conversation.json does not describe a conversation Easel can import: images.1.source.image is 7, but there are 3 images.' } });
    const strong = await readArchiveFiles(withSource({ imageId: 'x', strength: 3, image: null }), { conversationId: 'copy', newImageId: counter() });
    expect(strong.ok).toBe(false);
    if (!strong.ok) expect(strong.error.message).toMatch(/^conversation\.json does not describe a conversation Easel can import: images\.1\.source\.strength: /);
  });
});
