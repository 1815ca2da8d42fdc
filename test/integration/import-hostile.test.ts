// Imports made by an attacker: a conversation.json shaped to exhaust memory or the event loop, and records
// that smuggle in text every other write refuses. Each is refused with 422 naming what is wrong; nothing is stored.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { strToU8, unzipSync, zipSync } from 'fflate';
import { Agent } from 'undici';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { makePng } from '../fakes/png-bytes.ts';
import { useEasel } from '../helpers/easel.ts';
import { readSse } from '../helpers/sse.ts';

const { fake, easel } = useEasel('all tests', { a1111: { stepDelayMs: 1 } });
/** A real export: a message, a reply with its prompt, and one image. */
let good: Record<string, Uint8Array>;
let manifest: Record<string, unknown>;
let image: string;

beforeAll(async () => {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply('Here.', { prompt: 'a red fox', generate_image: false, steps: 20, cfg: 7, seed: -1 }));
  await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a red fox' }));
  await readSse(await easel.post(`/api/conversations/${id}/generations`, { prompt: 'a red fox', settings: { steps: 2, seed: 7 } }));
  good = unzipSync(new Uint8Array(await (await easel.get(`/api/conversations/${id}/export`)).arrayBuffer()));
  manifest = JSON.parse(new TextDecoder().decode(good['conversation.json'])) as Record<string, unknown>;
  image = Object.keys(good).find((name) => name.startsWith('images/'))!;
});

/**
 * Each request on a connection of its own: building a hostile zip holds this process for seconds, and a pooled
 * connection idle that long may be closed by the server's keep-alive timer just as the next request goes out on it
 * (ECONNRESET or "other side closed" on a busy machine, seen before the upload and after it).
 */
async function fetchAlone(path: string, init: RequestInit = {}): Promise<Response> {
  const agent = new Agent();
  onTestFinished(() => agent.close());
  return fetch(`${easel.url}${path}`, { ...init, dispatcher: agent } as RequestInit);
}

async function importZip(bytes: Uint8Array): Promise<Response> {
  return fetchAlone('/api/conversations/import', { method: 'POST', headers: { 'content-type': 'application/zip' }, body: bytes as Uint8Array<ArrayBuffer> });
}

async function conversationCount(): Promise<number> {
  return ((await (await fetchAlone('/api/conversations')).json()) as { conversations: unknown[] }).conversations.length;
}

/**
 * The process's peak RSS (VmHWM) since it was last reset: Linux resets it when 5 is written to clear_refs, so
 * each import is measured from its own start, not from whatever an earlier test in this process peaked at.
 */
function resetPeakRss(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}
function readPeakRssMb(): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return match ? Number(match[1]) / 1024 : process.resourceUsage().maxRSS / 1024;
}

/** How long the event loop may be held; a mutation run's instrumented code is several times slower. */
const BLOCK_BOUND_MS = process.env.EASEL_INSTRUMENTED === '1' ? 10_000 : 1000;

/** The answer to an import, with the peak memory it cost and the longest the event loop was blocked meanwhile. */
async function measureImport(zip: Uint8Array): Promise<{ status: number; error: string; rssGrowthMb: number; longestBlockMs: number }> {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const before = process.memoryUsage().rss / 1024 / 1024;
  if (!resetPeakRss()) console.warn('import-hostile: /proc/self/clear_refs cannot be written here, so the peak is the process\'s own since it started');
  delay.enable();
  const response = await importZip(zip);
  const body = (await response.json()) as { error?: string };
  delay.disable();
  return { status: response.status, error: body.error ?? '', rssGrowthMb: readPeakRssMb() - before, longestBlockMs: delay.max / 1e6 };
}

describe('a conversation.json shaped to exhaust Easel', () => {
  // Unbounded, 30 MB of "[" took the server from 107 to 1425 MB and blocked it for 4–6 s; a schema checked
  // whole recorded an issue per bad value (850 MB, 3.4 s). The bounds below are several times the fixed cost
  // (about 30 MB for unzipping 30 MB, tens of ms) and far below the unbounded one.
  const SHAPES: Array<[string, () => Uint8Array, RegExp]> = [
    ['30 MB of "["', () => new Uint8Array(30 * 1024 * 1024).fill(0x5b), /conversation\.json nests deeper than 16 levels \(at byte 17\), more than any conversation Easel exports/],
    ['nested objects', () => strToU8('{"a":'.repeat(3_000_000)), /nests deeper than 16 levels/],
    ['an object of a million members', () => strToU8(`{${Array.from({ length: 1_000_000 }, (_, i) => `"k${i}":1`).join(',')}}`), /an object of more than 64 members/],
    ['a list of a million empty objects', () => strToU8(`[${Array(1_000_000).fill('{}').join(',')}]`), /a list of more than 20000 items/],
    [
      'two million values that each break the schema (a list of 20 000 items, 49 times)',
      () =>
        strToU8(
          JSON.stringify({ ...manifest, context: 'CONTEXT' }).replace(
            '"CONTEXT"',
            `[${Array(49).fill(`{"kind":"summary","userWords":[${Array(19_999).fill('1').join(',')}],"text":""}`).join(',')}]`,
          ),
        ),
      /context\.0\.userWords\.0: /,
    ],
    [
      'fifteen thousand objects of 64 different keys each',
      () => strToU8(`[${Array.from({ length: 15_000 }, (_, o) => `{${Array.from({ length: 64 }, (_, k) => `"k${o}_${k}":1`).join(',')}}`).join(',')}]`),
      /holds more than 256 different keys/,
    ],
    [
      'a million objects in short lists',
      () => strToU8(`{"format":"easel-conversation","context":[${Array(5_000).fill(`{"userWords":[${Array(200).fill('{}').join(',')}]}`).join(',')}]}`),
      /holds more than 250000 objects and lists/,
    ],
  ];

  it.each(SHAPES)('%s: 422 naming the bound, in bounded memory and without blocking other requests', async (_what, build, message) => {
    const before = await conversationCount();
    const zip = zipSync({ 'conversation.json': build() }, { level: 9 });
    expect(zip.byteLength).toBeLessThan(32 * 1024 * 1024);

    const measured = await measureImport(zip);

    expect(measured.status).toBe(422);
    expect(measured.error).toMatch(message);
    expect(measured.rssGrowthMb).toBeLessThan(200);
    expect(measured.longestBlockMs).toBeLessThan(BLOCK_BOUND_MS);
    expect(await conversationCount()).toBe(before);
  });

  it('a large real conversation still imports, within the same bounds', async () => {
    const turns = Array.from({ length: 4_000 }, (_, index) => ({
      role: index % 2 === 0 ? 'user' : 'assistant',
      text: `turn ${index} `.repeat(20),
      status: 'ok',
      ...(index % 2 === 1 ? { metadata: { prompt: `a red fox ${index}`, generate_image: false, steps: 20, cfg: 7, seed: -1 } } : {}),
      createdAt: '2026-11-23T10:00:00.000Z',
    }));
    const large = { ...manifest, transcript: turns, promptVersions: [{ ...(manifest.promptVersions as object[])[0], turn: null }], images: [], suggestion: null, context: [] };
    const measured = await measureImport(zipSync({ 'conversation.json': strToU8(JSON.stringify(large)) }));
    expect(measured.status).toBe(201);
    expect(measured.rssGrowthMb).toBeLessThan(200);
    expect(measured.longestBlockMs).toBeLessThan(BLOCK_BOUND_MS);
  });
});

describe('records that smuggle in what every other write refuses', () => {
  const withManifest = (changes: Record<string, unknown>, extra: Record<string, Uint8Array> = {}) =>
    zipSync({ 'conversation.json': strToU8(JSON.stringify({ ...manifest, ...changes })), [image]: good[image]!, ...extra });
  const transcript = () => manifest.transcript as Array<Record<string, unknown>>;
  const versions = () => manifest.promptVersions as Array<Record<string, unknown>>;
  const images = () => manifest.images as Array<Record<string, unknown>>;

  const CASES: Array<[string, () => Uint8Array, RegExp]> = [
    ['a NUL in the title', () => withManifest({ title: 'fox\u0000' }), /title: A title contains an invisible control character \(U\+0000\) at character 4/],
    ['an ESC in the title', () => withManifest({ title: 'fox\u001b[31m' }), /title: A title contains an invisible control character \(U\+001B\)/],
    ['a line break in the title', () => withManifest({ title: 'fox\nexe' }), /title: A title is one line/],
    ['a right-to-left override in the title', () => withManifest({ title: 'fox\u202Egnp.exe' }), /title: A title contains a right-to-left override character \(U\+202E\) at character 4/],
    ['a C1 control in the title', () => withManifest({ title: 'fox\u0085' }), /title: A title contains an invisible control character \(U\+0085\)/],
    ['a BEL in a message of the transcript', () => withManifest({ transcript: [{ ...transcript()[0], text: 'a red\u0007 fox' }, ...transcript().slice(1)] }), /transcript\.0\.text: The message contains an invisible control character \(U\+0007\)/],
    ['a NUL in the prompt and its version', () => withManifest({ prompt: 'a red\u0000 fox', promptVersions: versions().map((v) => ({ ...v, prompt: 'a red\u0000 fox' })) }), /prompt: The prompt contains an invisible control character \(U\+0000\)/],
    ['a NUL in a prompt version', () => withManifest({ promptVersions: [{ ...versions()[0], prompt: 'x\u0000' }, ...versions().slice(1)] }), /promptVersions\.0\.prompt: The prompt contains/],
    ['a NUL in the prompt the model wrote', () => withManifest({ transcript: transcript().map((t) => (t.metadata ? { ...t, metadata: { ...(t.metadata as object), prompt: 'x\u0000' } } : t)) }), /transcript\.1\.metadata\.prompt: The prompt contains/],
    ['an ESC in an image record', () => withManifest({ images: [{ ...images()[0], prompt: '\u001b]0;pwned\u0007' }] }), /images\.0\.prompt: The prompt contains/],
    ['a NUL in the waiting suggestion', () => withManifest({ suggestion: { prompt: 'x\u0000', turn: 1 } }), /suggestion\.prompt: The prompt contains/],
    ['a NUL in the negative prompt', () => withManifest({ settings: { ...(manifest.settings as object), negativePrompt: 'x\u0000' } }), /settings\.negativePrompt: The negative prompt contains/],
    ['a NUL in the model context', () => withManifest({ context: [{ kind: 'user', text: 'x\u0000' }] }), /context\.0\.text: The message contains/],
    ['an unlisted broken PNG', () => withManifest({}, { 'images/x.png': strToU8('not a png') }), /The file holds images\/x\.png, which conversation\.json does not list/],
    ['an unlisted good PNG', () => withManifest({}, { 'images/x.png': makePng(8, 8) }), /images\/x\.png, which conversation\.json does not list/],
  ];

  it.each(CASES)('%s: 422 naming the field, nothing stored', async (_what, build, message) => {
    const before = await conversationCount();
    const imagesBefore = readdirSync(join(easel.dataDir, 'images')).length;
    const response = await importZip(build());
    expect(response.status).toBe(422);
    expect(((await response.json()) as { error: string }).error).toMatch(message);
    expect(await conversationCount()).toBe(before);
    expect(readdirSync(join(easel.dataDir, 'images')).length).toBe(imagesBefore);
  });

  it('the same title refused by an import is refused by a rename, with the same words', async () => {
    const id = await easel.newConversation();
    const renamed = await fetch(`${easel.url}/api/conversations/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title: 'fox\u202Egnp.exe' }) });
    expect(renamed.status).toBe(422);
    expect(((await renamed.json()) as { fields: Record<string, string> }).fields.title).toBe('A title contains a right-to-left override character (U+202E) at character 4; remove it and try again.');
  });

  it('the model\'s own words keep what it wrote: an export whose reply holds a control character imports', async () => {
    const reply = transcript().map((t) => (t.role === 'assistant' ? { ...t, text: 'Here\u0007.' } : t));
    const response = await importZip(withManifest({ transcript: reply }));
    expect(response.status).toBe(201);
  });
});
