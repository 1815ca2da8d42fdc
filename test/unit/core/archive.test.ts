// The archive's rules without HTTP or zip (server/core/archive.ts): a conversation with every kind of turn,
// version, suggestion, image and context entry goes out as conversation.json and comes back as it was;
// each refusal is word for word; file names at their bounds. The whole path through the API and a real
// zip is in integration/library-api.test.ts.
import { describe, expect, it } from 'vitest';
import { buildArchiveFiles, IMPORT_LIMITS, nameArchive, readArchiveFiles, type ArchiveSource } from '../../../server/core/archive.ts';
import { DEFAULT_SETTINGS, nameImageDownload, type ImageRecord, type TranscriptTurn } from '../../../server/core/index.ts';
import { makePng } from '../../fakes/png-bytes.ts';
import { makeImageRecord } from '../../helpers/records.ts';

const AT = '2026-11-26T10:00:00.000Z';
const META = { prompt: 'a fox', generate_image: true, steps: 20, cfg: 7, seed: 5 };
const png = makePng(8, 8);

const turn = (id: number, over: Partial<TranscriptTurn>): TranscriptTurn => ({ id, role: 'user', text: `t${id}`, status: 'ok', images: [], createdAt: AT, ...over });
const image = (over: Partial<ImageRecord>): ImageRecord => makeImageRecord({ turnId: 12, promptVersion: 31, ...over });

const source: ArchiveSource = {
  title: 'Fox',
  createdAt: AT,
  updatedAt: AT,
  prompt: 'a fox',
  settings: DEFAULT_SETTINGS,
  turns: [
    turn(11, { text: 'a fox' }),
    turn(12, { role: 'assistant', text: 'Here.', metadata: META, notices: ['steps clamped'], imageNote: { reason: 'auto_off', message: 'Press Generate.' } }),
    turn(13, { text: 'and snow' }),
    turn(14, { role: 'assistant', text: 'Cut', status: 'error', error: { code: 'ollama_unreachable', message: 'Ollama stopped.' } }),
    turn(15, { role: 'assistant', text: 'Half a rep', status: 'running' }),
  ],
  context: [
    { kind: 'user', text: 'a fox', note: '[The user edited the prompt to: a fox]' },
    { kind: 'assistant', text: 'Here.', metadata: { ...META, negative_prompt: 'blurry' } },
    { kind: 'user', text: 'and snow' },
    { kind: 'assistant', text: 'Here.', metadata: META },
  ],
  images: [image({ sampler: 'DPM++ 2M', scheduler: 'Karras' }), image({ id: 'gone', file: 'gone.png', turnId: null, promptVersion: null })],
  promptVersions: [
    { id: 30, parentId: null, prompt: 'a fox', source: 'model', turnId: 12, createdAt: AT },
    { id: 31, parentId: 30, prompt: 'a fox', source: 'user', turnId: null, createdAt: AT },
  ],
  promptVersion: 31,
  suggestion: { prompt: 'a fox in snow', turnId: 14 },
  pinned: ['steps'],
  settingSuggestions: { steps: 25 },
};

/** The transcript of `source` as an export writes it and an import reads it back. */
const TRANSCRIPT = [
  { role: 'user', text: 'a fox', status: 'ok', createdAt: AT },
  { role: 'assistant', text: 'Here.', status: 'ok', metadata: META, notices: ['steps clamped'], imageNote: { reason: 'auto_off', message: 'Press Generate.' }, createdAt: AT },
  { role: 'user', text: 'and snow', status: 'ok', createdAt: AT },
  { role: 'assistant', text: 'Cut', status: 'error', error: { code: 'ollama_unreachable', message: 'Ollama stopped.' }, createdAt: AT },
  { role: 'assistant', text: 'Half a rep', status: 'interrupted', createdAt: AT },
];

async function exportSource(from: ArchiveSource = source) {
  return buildArchiveFiles(from, { exportedAt: AT, readImage: async (file) => (file === 'img.png' ? png : undefined) });
}

function manifestOf(files: ReadonlyMap<string, Uint8Array>): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(files.get('conversation.json'))) as Record<string, unknown>;
}

const ids = { conversationId: 'copy', newImageId: () => 'new-image' };

/** How many turns of the event loop other work got while `work` ran. */
async function turnsGivenDuring(work: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  let done = false;
  const tick = () => {
    if (done) return;
    turns += 1;
    setImmediate(tick);
  };
  setImmediate(tick);
  await work();
  done = true;
  return turns;
}

describe('an export', () => {
  it('writes every turn as shown, a reply still running as interrupted, turns and versions by position', async () => {
    const files = await exportSource();
    expect([...files.keys()]).toEqual(['conversation.json', 'images/01-a-fox-seed-5.png']);
    const manifest = manifestOf(files);
    expect(manifest.transcript).toEqual(TRANSCRIPT);
    expect(manifest.promptVersions).toEqual([
      { parent: null, prompt: 'a fox', source: 'model', turn: 1, createdAt: AT },
      { parent: 0, prompt: 'a fox', source: 'user', turn: null, createdAt: AT },
    ]);
    expect(manifest).toMatchObject({ promptVersion: 1, suggestion: { prompt: 'a fox in snow', turn: 3 }, pinned: ['steps'], settingSuggestions: { steps: 25 } });
    // The image whose file is gone is left out; the other keeps its turn and version by position.
    expect(manifest.images).toEqual([
      { file: 'images/01-a-fox-seed-5.png', turn: 1, prompt: 'a fox', negativePrompt: '', steps: 20, cfg: 7, seed: 5, sampler: 'DPM++ 2M', scheduler: 'Karras', width: 8, height: 8, model: null, promptVersion: 1, source: null, createdAt: AT },
    ]);
  });

  it('a suggestion whose turn is gone is not exported, and an image of a turn not there has none', async () => {
    const files = await exportSource({ ...source, suggestion: { prompt: 'x', turnId: 99 }, images: [image({ turnId: 99 })] });
    const manifest = manifestOf(files);
    expect(manifest.suggestion).toBeNull();
    expect((manifest.images as Array<{ turn: unknown }>)[0]?.turn).toBeNull();
  });
});

describe('an import', () => {
  it('keeps a comparison\'s side with each of its images', async () => {
    const files = await exportSource({ ...source, images: [image({ compareSide: 'b' })] });
    expect((manifestOf(files).images as Array<Record<string, unknown>>)[0]?.['compareSide']).toBe('b');
    const read = await readArchiveFiles(files, ids);
    if (!read.ok) throw new Error(read.error.message);
    expect(read.value.conversation.images.map((stored) => stored.compareSide)).toEqual(['b']);
  });

  it('gives back every record of the export: turns, their errors, notices and notes, the context as the model saw it', async () => {
    const read = await readArchiveFiles(await exportSource(), ids);
    if (!read.ok) throw new Error(read.error.message);
    const { conversation, files } = read.value;
    expect(files).toEqual([{ name: 'new-image.png', bytes: png }]);
    expect(conversation.turns).toEqual(TRANSCRIPT);
    // toStrictEqual: a key holding undefined (a note, a negative prompt) is not the same entry.
    expect(conversation.context).toStrictEqual(source.context);
    expect(conversation.images).toEqual([
      { id: 'new-image', file: 'new-image.png', turn: 1, prompt: 'a fox', negativePrompt: '', steps: 20, cfg: 7, seed: 5, sampler: 'DPM++ 2M', scheduler: 'Karras', width: 8, height: 8, model: null, promptVersion: 1, source: null, compareSide: null, createdAt: AT },
    ]);
    expect(conversation.pane).toEqual({
      versions: [
        { parent: null, prompt: 'a fox', source: 'model', turn: 1, createdAt: AT },
        { parent: 0, prompt: 'a fox', source: 'user', turn: null, createdAt: AT },
      ],
      current: 1,
      suggestion: { prompt: 'a fox in snow', turn: 3 },
      pinned: ['steps'],
      settingSuggestions: { steps: 25 },
    });
  });

  it('an image exported before the scheduler (or the sampler) was recorded imports with null for it', async () => {
    const files = await exportSource();
    const manifest = manifestOf(files);
    const [exported] = manifest.images as Array<Record<string, unknown>>;
    const { scheduler: _scheduler, sampler: _sampler, ...older } = exported!;
    const read = await readArchiveFiles(new Map([...files, ['conversation.json', new TextEncoder().encode(JSON.stringify({ ...manifest, images: [older] }))]]), ids);
    if (!read.ok) throw new Error(read.error.message);
    expect(read.value.conversation.images).toEqual([expect.objectContaining({ id: 'new-image', seed: 5, sampler: null, scheduler: null })]);
  });

  it('an empty notices list is not kept', async () => {
    const files = await exportSource({ ...source, turns: [turn(11, { notices: [] })], suggestion: null, images: [], promptVersions: [], promptVersion: null, prompt: '' });
    const read = await readArchiveFiles(files, ids);
    if (!read.ok) throw new Error(read.error.message);
    expect(read.value.conversation.turns).toStrictEqual([{ role: 'user', text: 't11', status: 'ok', createdAt: AT }]);
  });

  async function refusal(change: (manifest: Record<string, unknown>) => Record<string, unknown>, extra: Array<[string, Uint8Array]> = []): Promise<string> {
    const files = await exportSource();
    const manifest = change(manifestOf(files));
    const edited = new Map([...files, ['conversation.json', new TextEncoder().encode(JSON.stringify(manifest))], ...extra]);
    const read = await readArchiveFiles(edited, ids);
    if (read.ok) throw new Error('imported');
    return read.error.message;
  }

  const PREFIX = 'conversation.json does not describe a conversation Easel can import: ';

  it('refuses references to turns and versions that are not there, naming them', async () => {
    expect(await refusal((m) => ({ ...m, promptVersions: [{ ...(m.promptVersions as object[])[0], turn: 5 }, (m.promptVersions as object[])[1]] }))).toBe(
      `${PREFIX}promptVersions.0.turn is 5, but the transcript has 5 turns.`,
    );
    expect(await refusal((m) => ({ ...m, promptVersion: null }))).toBe(`${PREFIX}promptVersion is null, but the prompt is not empty (its current version must be listed).`);
    expect(await refusal((m) => ({ ...m, suggestion: { prompt: 'x', turn: 5 } }))).toBe(`${PREFIX}suggestion.turn is 5, but the transcript has 5 turns.`);
    expect(await refusal((m) => ({ ...m, images: [{ ...(m.images as object[])[0], promptVersion: 2 }] }))).toBe(`${PREFIX}images.0.promptVersion is 2, but there are 2 prompt versions.`);
    expect(await refusal((m) => ({ ...m, images: [{ ...(m.images as object[])[0], turn: 5 }] }))).toBe(
      'Image 1 (images/01-a-fox-seed-5.png) belongs to turn 6, but the transcript has 5.',
    );
    expect(await refusal((m) => ({ ...m, images: [(m.images as object[])[0], (m.images as object[])[0]] }))).toBe('images/01-a-fox-seed-5.png is listed twice.');
    // A Vary's starting image one past the last exported one.
    expect(await refusal((m) => ({ ...m, images: [{ ...(m.images as object[])[0], source: { imageId: 'start', strength: 0.5, image: 1 } }] }))).toBe(
      `${PREFIX}images.0.source.image is 1, but there are 1 images.`,
    );
  });

  it('accepts references to the last turn and version', async () => {
    const files = await exportSource();
    const manifest = manifestOf(files);
    const last = { ...manifest, suggestion: { prompt: 'x', turn: 4 }, promptVersions: [(manifest.promptVersions as object[])[0], { ...(manifest.promptVersions as object[])[1], turn: 4 }] };
    const read = await readArchiveFiles(new Map([...files, ['conversation.json', new TextEncoder().encode(JSON.stringify(last))]]), ids);
    expect(read.ok).toBe(true);
  });

  it('refuses another format, a manifest that is not an object, bytes that are not UTF-8, and other files, word for word', async () => {
    expect(await refusal((m) => ({ ...m, format: 'other' }))).toBe('conversation.json is not an Easel conversation (its "format" is not "easel-conversation").');
    const notObject = new Map([['conversation.json', new TextEncoder().encode('[1]')]]);
    expect(await readArchiveFiles(notObject, ids)).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'conversation.json is not an Easel conversation (its "format" is not "easel-conversation").' },
    });
    const latin1 = new Map([['conversation.json', new Uint8Array([0x7b, 0x22, 0xe9, 0x22, 0x3a, 0x31, 0x7d])]]);
    expect(await readArchiveFiles(latin1, ids)).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'conversation.json is not UTF-8 text: the file is damaged or was edited by hand.' },
    });
    const broken = new Map([['conversation.json', new TextEncoder().encode('{"format": ')]]);
    expect(await readArchiveFiles(broken, ids)).toEqual({
      ok: false,
      error: { code: 'invalid', message: 'conversation.json is not valid JSON: the file is damaged or was edited by hand.' },
    });
    const nested = await readArchiveFiles(new Map([...(await exportSource()), ['x/images/a.png', png]]), ids);
    expect(nested.ok || nested.error.message).toBe(
      'The file holds "x/images/a.png", which is not part of an Easel export (only conversation.json and images/*.png are).',
    );
    // Refused as a file outside the layout, not only as one the manifest does not list.
    const notPng = await readArchiveFiles(new Map([...(await exportSource()), ['images/a.png.txt', png]]), ids);
    expect(notPng.ok || notPng.error.message).toBe(
      'The file holds "images/a.png.txt", which is not part of an Easel export (only conversation.json and images/*.png are).',
    );
  });

  it('a manifest that is wrong says where, or "its contents" when it is the whole of it', async () => {
    expect(await refusal((m) => ({ ...m, title: 5 }))).toBe(`${PREFIX}title: title must be a string.`);
    expect(await refusal((m) => ({ ...m, extra: 1 }))).toBe(`${PREFIX}its contents: Unrecognized key: "extra".`);
    // The format is right and the version missing: the version is named, not the format.
    expect(await refusal(({ version: _version, ...m }) => m)).toBe(`${PREFIX}version: Invalid discriminator value. Expected '1' | '2'.`);
    // A message that ends with its own full stop keeps one.
    expect(await refusal((m) => ({ ...m, transcript: [{ ...(m.transcript as object[])[0], text: 'a fox\u0007' }, ...(m.transcript as object[]).slice(1)] }))).toBe(
      `${PREFIX}transcript.0.text: The message contains an invisible control character (U+0007) at character 6; remove it and try again.`,
    );
  });

  it('a user\'s line breaks become LF, as the API stores them; the model\'s words stay as it wrote them', async () => {
    const files = await exportSource({
      ...source,
      turns: [turn(11, { text: 'a fox\r\nin snow\rat dawn' }), turn(12, { role: 'assistant', text: 'Here\r\nit is\r' })],
      suggestion: null,
      images: [],
      promptVersions: [],
      promptVersion: null,
      prompt: '',
    });
    const read = await readArchiveFiles(files, ids);
    if (!read.ok) throw new Error(read.error.message);
    expect(read.value.conversation.turns.map((imported) => imported.text)).toEqual(['a fox\nin snow\nat dawn', 'Here\r\nit is\r']);
  });

  it('a long manifest is checked in batches, giving other work turns of the event loop meanwhile', async () => {
    const withTurns = (count: number) =>
      exportSource({ ...source, turns: Array.from({ length: count }, (_, index) => turn(100 + index, {})), suggestion: null, images: [], promptVersions: [], promptVersion: null, prompt: '' });
    const one = await withTurns(1);
    const many = await withTurns(2000);
    const extra = (await turnsGivenDuring(() => readArchiveFiles(many, ids))) - (await turnsGivenDuring(() => readArchiveFiles(one, ids)));
    expect(extra).toBeGreaterThanOrEqual(2);
    // Not one per element: each turn of the loop costs the import a wait.
    expect(extra).toBeLessThan(2000 / 10);
  });

  it('a folder with a file beside it is not taken for an enclosing folder', async () => {
    const exported = await exportSource();
    const inFolder = [...exported].map(([name, bytes]): [string, Uint8Array] => [`easel-fox/${name}`, bytes]);
    // Whatever its name (even the folder's with one more character), a file at the top means the zip is not one folder.
    for (const beside of ['notes.txt', 'easel-fox~']) {
      const read = await readArchiveFiles(new Map([...inFolder, [beside, png]]), ids);
      expect(read.ok || read.error.message).toBe('The file holds no conversation.json: it is not a conversation exported by Easel.');
    }
  });

  it('the export\'s own images folder is never taken for an enclosing one, even holding a conversation.json', async () => {
    const exported = await exportSource();
    const read = await readArchiveFiles(new Map([...exported].map(([name, bytes]) => [name.startsWith('images/') ? name : `images/${name}`, bytes])), ids);
    expect(read.ok || read.error.message).toBe('The file holds no conversation.json: it is not a conversation exported by Easel.');
  });
});

describe('limits and names', () => {
  it('reads conversation.json under its own bound and each image under the image bound', () => {
    expect(IMPORT_LIMITS.maxFileBytes('conversation.json')).toBe(32 * 1024 * 1024);
    expect(IMPORT_LIMITS.maxFileBytes('images/01-a.png')).toBe(64 * 1024 * 1024);
    // An export zipped again in a folder by a file manager.
    expect(IMPORT_LIMITS.maxFileBytes('easel-a-fox/conversation.json')).toBe(32 * 1024 * 1024);
  });

  it('names a download by seed and prompt, and an archive by title, with words when there are none', () => {
    expect(nameImageDownload({ prompt: 'A Red Fox!', seed: 42 })).toBe('easel-42-a-red-fox.png');
    expect(nameImageDownload({ prompt: 'A Red Fox!', seed: null })).toBe('easel-a-red-fox.png');
    expect(nameImageDownload({ prompt: '日本', seed: 0 })).toBe('easel-0-image.png');
    expect(nameArchive('Fox études', '2026-11-26T10:00:00.000Z')).toBe('easel-fox-etudes-2026-11-26.zip');
    expect(nameArchive('日本', '2026-11-26T10:00:00.000Z')).toBe('easel-conversation-2026-11-26.zip');
  });

  it('cuts a long name at the last word within 40 characters, or inside one word longer than that', () => {
    const forty = 'aaaa-'.repeat(8).slice(0, 40);
    expect(nameArchive('--' + forty.replace(/-/g, ' ') + '--', AT)).toBe(`easel-${forty.replace(/-+$/, '')}-2026-11-26.zip`);
    expect(nameArchive('word '.repeat(12), AT)).toBe(`easel-${'word-'.repeat(7)}word-2026-11-26.zip`);
    expect(nameArchive('x'.repeat(50), AT)).toBe(`easel-${'x'.repeat(40)}-2026-11-26.zip`);
    expect(nameArchive('words '.repeat(10), AT)).toBe(`easel-${'words-'.repeat(5)}words-2026-11-26.zip`);
    // Exactly 40 characters is kept whole.
    expect(nameArchive(`${'a'.repeat(19)} ${'b'.repeat(20)}`, AT)).toBe(`easel-${'a'.repeat(19)}-${'b'.repeat(20)}-2026-11-26.zip`);
  });
});
