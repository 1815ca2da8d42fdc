// The vision model's commands at their edges, through the whole app against the fake Ollama and the fake
// AUTOMATIC1111: what each request carries besides the picture, the words of a cancel and of a model error, a
// check waiting its turn and cancelled, what Cancel still reaches once a check ended, which suggestion waits and
// which one Fix and regenerate takes, a picture or conversation gone while the model looked, storage failing
// under it, the model a conversation may use, and the prompt made right for the family within the length a prompt
// may have. The guards for a conversation deleted before its stream is read drive the service itself: through
// HTTP a stream is read as soon as it is made.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createA1111Backend } from '../../server/a1111/index.ts';
import { silentLogger, type TurnEvent } from '../../server/core/index.ts';
import { FAMILY_STYLES } from '../../server/protocol/index.ts';
import { createImageConverter } from '../../server/sharp/index.ts';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { createFakeOllama } from '../fakes/fake-ollama.ts';
import { makePng } from '../fakes/png-bytes.ts';
import { startEaselStage, useEasel, type TestEasel } from '../helpers/easel.ts';
import { buildService, newConversationId } from '../helpers/service.ts';
import { iterateSse, readSse, type SseEvent } from '../helpers/sse.ts';
import { collectAll } from '../helpers/streams.ts';
import { CAT_PROMPT, makePictureOfACat } from '../helpers/vision.ts';

const VISION = { name: 'gemma3:4b', capabilities: ['completion', 'vision'] };
const STAGE = {
  a1111: { stepDelayMs: 1 },
  flags: ['--vision-model', 'gemma3:4b'],
  ollama: { models: ['mistral:7b', VISION] },
};
const { fake, easel } = useEasel('each test', STAGE);

interface Conversation {
  prompt: string;
  suggestion: { prompt: string; turnId: number | null; imageId?: string } | null;
  promptVersions: Array<{ prompt: string; source: string }>;
  checks: Array<{ imageId: string; revisedPrompt: string }>;
}

const critique = (revisedPrompt: string, misses = 1) =>
  JSON.stringify({ matches: ['a tabby cat'], misses: Array.from({ length: misses }, () => ({ element: 'a blue wizard hat', evidence: 'no hat' })), revisedPrompt });
const HAT = 'a tabby cat wearing a blue wizard hat, sitting on a stack of old books';

const conversationOf = async (on: TestEasel, id: string) => (await (await on.get(`/api/conversations/${id}`)).json()) as Conversation;
const conversation = (id: string) => conversationOf(easel, id);
const check = (id: string, imageId: string) => easel.post(`/api/conversations/${id}/images/${imageId}/check`, {});
const describePng = (on: TestEasel, id: string, png = makePng(8, 8)) =>
  on.post(`/api/conversations/${id}/describe`, undefined, { headers: { 'content-type': 'image/png' }, body: png as BodyInit });
const cancelChecks = async (id: string) => (await (await easel.post(`/api/conversations/${id}/checks/cancel`, {})).json()) as { cancelled: boolean };
const visionRequests = () => fake.chatRequests().filter((body) => body.model === 'gemma3:4b');
const gated = () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  return { gate, release };
};
/** Follows the conversation's events until `count` of `type` came (the check joined the line, say). */
async function follow(id: string): Promise<{ until(type: string, count?: number): Promise<SseEvent>; stop(): void }> {
  const hangup = new AbortController();
  const events = iterateSse((await fetch(`${easel.url}/api/conversations/${id}/events`, { signal: hangup.signal })).body as ReadableStream<Uint8Array>);
  onTestFinished(() => hangup.abort());
  return {
    async until(type, count = 1) {
      let seen = 0;
      for await (const event of events) if (event.type === type && ++seen === count) return event;
      throw new Error(`the feed ended before ${count} ${type}`);
    },
    stop: () => hangup.abort(),
  };
}

describe('what a vision request carries', () => {
  it('the first request holds the system text and the picture alone, at temperature 0; a retry carries the unreadable answer word for word, and it is logged', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    const cut = '{"matches": ["a tabby cat"], "misses": [{"element": "a blue';
    fake.enqueue({ chunks: [cut], doneReason: 'length' }, critique(HAT));
    const events = await readSse(await check(id, imageId));
    expect(events.at(-1)).toEqual({ type: 'done', data: expect.objectContaining({ attempts: 2, level: 'reminder', repairs: [] }) });
    const [first, retry] = visionRequests();
    expect(first?.messages?.map((message) => message.role)).toEqual(['system', 'user']);
    expect(first?.options).toMatchObject({ temperature: 0 });
    expect(retry?.messages?.map((message) => message.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(retry?.messages?.[2]?.content).toBe(cut);
    const warned = easel.logs.filter((line) => line.includes('the vision model answered in a shape Easel cannot read'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('"model":"gemma3:4b","attempt":1');
  });

  it('a model that fails is vision_failed, naming the model and saying what Ollama said', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    fake.enqueue({ chunks: [], errorAfter: { chunks: 0, message: 'model runner has unexpectedly stopped' } });
    const events = await readSse(await check(id, imageId));
    expect(events.map((event) => event.type)).toEqual(['error', 'done']);
    expect(events[0]?.data['code']).toBe('vision_failed');
    expect(String(events[0]?.data['message'])).toMatch(/^The vision model gemma3:4b could not answer: .*model runner has unexpectedly stopped/);
  });
});

describe('Cancel', () => {
  it('says which was cancelled: "The check was cancelled." and "The description was cancelled.", each stopped', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    fake.enqueue({ chunks: [critique(HAT)], gate: new Promise(() => {}) }, { chunks: [JSON.stringify({ prompt: 'a red fox', subject: 'a fox' })], gate: new Promise(() => {}) });
    const asks: Array<[() => Promise<Response>, string]> = [
      [() => check(id, imageId), 'The check was cancelled.'],
      [() => describePng(easel, id), 'The description was cancelled.'],
    ];
    for (const [index, [ask, words]] of asks.entries()) {
      const answered = ask().then(readSse);
      await expect.poll(() => visionRequests().length).toBe(index + 1);
      expect(await cancelChecks(id)).toEqual({ cancelled: true });
      expect((await answered).map((event) => [event.type, event.data['message'] ?? event.data['level']])).toEqual([
        ['error', words],
        ['done', 'stopped'],
      ]);
    }
  });

  it('ends a check waiting its turn at once: nothing is asked of the model for it, while the check before it goes on', async () => {
    const first = await makePictureOfACat(fake, easel);
    const second = await makePictureOfACat(fake, easel);
    const { gate, release } = gated();
    onTestFinished(release);
    fake.enqueue({ chunks: [critique(HAT)], gate });
    const checkingFirst = check(first.id, first.imageId).then(readSse);
    await expect.poll(() => visionRequests().length).toBe(1);
    const feed = await follow(second.id);
    const waiting = check(second.id, second.imageId).then(readSse);
    await feed.until('check_started');
    expect(await cancelChecks(second.id)).toEqual({ cancelled: true });
    // Read before the first check may end: the cancelled one does not wait for it.
    const cancelled = await waiting;
    expect(cancelled.map((event) => event.type)).toEqual(['error', 'done']);
    expect(cancelled[0]?.data).toEqual({ code: 'vision_cancelled', message: 'The check was cancelled.' });
    expect(cancelled[1]?.data).toMatchObject({ attempts: 0, level: 'stopped' });
    release();
    expect((await checkingFirst).map((event) => event.type)).toEqual(['critique', 'pane', 'done']);
    expect(visionRequests()).toHaveLength(1);
  });

  it('reaches only what still runs: nothing once a check ended, the second of two checks while it runs', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    fake.enqueue(critique(HAT));
    await readSse(await check(id, imageId));
    expect(await cancelChecks(id)).toEqual({ cancelled: false });

    const { gate, release } = gated();
    onTestFinished(release);
    fake.enqueue({ chunks: [critique(HAT)], gate }, { chunks: [critique(HAT)], gate: new Promise(() => {}) });
    const feed = await follow(id);
    const firstCheck = check(id, imageId).then(readSse);
    const secondCheck = check(id, imageId).then(readSse);
    // Both have joined the line before the first ends.
    await feed.until('check_started', 2);
    release();
    expect((await firstCheck).map((event) => event.type)).toContain('critique');
    await expect.poll(() => visionRequests().length).toBe(3);
    expect(await cancelChecks(id)).toEqual({ cancelled: true });
    expect((await secondCheck)[0]?.data).toMatchObject({ code: 'vision_cancelled' });
    expect(await cancelChecks(id)).toEqual({ cancelled: false });
  });
});

describe('the suggestion a check leaves', () => {
  it('none when the revised prompt is the prompt already, even with misses', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    fake.enqueue(critique(CAT_PROMPT));
    expect((await readSse(await check(id, imageId))).map((event) => event.type)).toEqual(['critique', 'done']);
    expect((await conversation(id)).suggestion).toBeNull();
  });

  it("a later check's revised prompt replaces an earlier check's suggestion", async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    fake.enqueue(critique(HAT), critique(`${HAT}, candlelight`));
    await readSse(await check(id, imageId));
    expect((await readSse(await check(id, imageId))).map((event) => event.type)).toEqual(['critique', 'pane', 'done']);
    expect((await conversation(id)).suggestion).toEqual({ prompt: `${HAT}, candlelight`, turnId: null, imageId });
  });

  it('none when it cannot be stored: the critique is kept, no pane follows', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    const db = new Database(join(easel.dataDir, 'easel.db'));
    onTestFinished(() => void db.close());
    db.exec(`CREATE TRIGGER no_suggestion BEFORE UPDATE OF suggestion ON conversations BEGIN SELECT RAISE(ABORT, 'injected failure'); END`);
    onTestFinished(() => void db.exec('DROP TRIGGER IF EXISTS no_suggestion'));
    fake.enqueue(critique(HAT));
    expect((await readSse(await check(id, imageId))).map((event) => event.type)).toEqual(['critique', 'done']);
    const after = await conversation(id);
    expect(after.checks).toHaveLength(1);
    expect(after.suggestion).toBeNull();
  });
});

describe('Fix and regenerate (generate with fix)', () => {
  const generations = (id: string, body: unknown) => easel.post(`/api/conversations/${id}/generations`, body);

  it('refuses a conversation that does not exist (404) and a picture of another conversation (422, saying so under fix)', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    fake.enqueue(critique(HAT));
    await readSse(await check(id, imageId));
    expect((await generations(randomUUID(), { fix: imageId })).status).toBe(404);
    const other = await easel.newConversation();
    const refused = await generations(other, { fix: imageId });
    expect(refused.status).toBe(422);
    const body = (await refused.json()) as { error: string; fields?: Record<string, string> };
    expect(body.error).toContain('fix must be the id of a picture of this conversation');
    expect(body.fields?.['fix']).toBe(body.error);
  });

  it("takes the picture's own latest check, not the latest check of the conversation", async () => {
    const first = await makePictureOfACat(fake, easel);
    const made = await readSse(await generations(first.id, { settings: { steps: 4, seed: 5, width: 64, height: 64 } }));
    const secondImage = String(made.find((event) => event.type === 'image')?.data['id']);
    fake.enqueue(critique(HAT), critique('a tabby cat on a red cushion'));
    await readSse(await check(first.id, first.imageId));
    await readSse(await check(first.id, secondImage));
    const fixed = await readSse(await generations(first.id, { fix: first.imageId }));
    expect(fixed.find((event) => event.type === 'image')?.data).toMatchObject({ prompt: HAT, seed: 77 });
  });

  it('writes no version when the revised prompt is the prompt already', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    fake.enqueue(critique(CAT_PROMPT, 0));
    await readSse(await check(id, imageId));
    const before = (await conversation(id)).promptVersions.length;
    expect((await generations(id, { fix: imageId })).status).toBe(200);
    expect((await conversation(id)).promptVersions).toHaveLength(before);
  });

  it("takes the waiting suggestion only when it is this picture's and says the same; else the revised prompt is a new version", async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    // A second check finds nothing missed: its revised prompt is not the suggestion still waiting from the first.
    fake.enqueue(critique(HAT), critique(`${HAT}, candlelight`, 0));
    await readSse(await check(id, imageId));
    await readSse(await check(id, imageId));
    await readSse(await generations(id, { fix: imageId }));
    const fixed = await conversation(id);
    expect(fixed.prompt).toBe(`${HAT}, candlelight`);
    expect(fixed.suggestion).toEqual({ prompt: HAT, turnId: null, imageId });

    // Another picture's suggestion saying the same stays: it is that picture's.
    const made = await readSse(await generations(id, { settings: { steps: 4, seed: 5, width: 64, height: 64 } }));
    const other = String(made.find((event) => event.type === 'image')?.data['id']);
    fake.enqueue(critique('a tabby cat in a red hat'), critique('a tabby cat in a red hat'));
    await readSse(await check(id, other));
    await readSse(await check(id, imageId));
    expect((await conversation(id)).suggestion).toEqual({ prompt: 'a tabby cat in a red hat', turnId: null, imageId });
    await readSse(await generations(id, { fix: other }));
    const after = await conversation(id);
    expect(after.prompt).toBe('a tabby cat in a red hat');
    expect(after.suggestion).toEqual({ prompt: 'a tabby cat in a red hat', turnId: null, imageId });
  });
});

describe('a picture or conversation gone while the model looked', () => {
  it('a picture deleted while it was checked: not_found, its check not kept', async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    const { gate, release } = gated();
    onTestFinished(release);
    fake.enqueue({ chunks: [critique(HAT)], gate });
    const checking = check(id, imageId).then(readSse);
    await expect.poll(() => visionRequests().length).toBe(1);
    expect((await fetch(`${easel.url}/api/images/${imageId}`, { method: 'DELETE' })).status).toBe(204);
    release();
    const events = await checking;
    expect(events.map((event) => event.type)).toEqual(['error', 'done']);
    expect(events[0]?.data['code']).toBe('not_found');
    expect(String(events[0]?.data['message'])).toContain('The picture was deleted while it was checked');
    expect((await conversation(id)).checks).toEqual([]);
  });

  it('a conversation removed from the database while its picture was described: not_found, nothing written', async () => {
    const id = await easel.newConversation();
    const { gate, release } = gated();
    onTestFinished(release);
    fake.enqueue({ chunks: [JSON.stringify({ prompt: 'a red fox in the snow', subject: 'a fox' })], gate });
    const describing = describePng(easel, id).then(readSse);
    await expect.poll(() => visionRequests().length).toBe(1);
    const db = new Database(join(easel.dataDir, 'easel.db'));
    onTestFinished(() => void db.close());
    db.prepare('DELETE FROM conversations WHERE id = ?').run(id);
    release();
    const events = await describing;
    expect(events.map((event) => event.type)).toEqual(['error', 'done']);
    expect(events[0]?.data['code']).toBe('not_found');
    expect(String(events[0]?.data['message'])).toContain('deleted while the picture was described');
  });

  it('describe via the API on a conversation that does not exist is 404 and makes none', async () => {
    const id = randomUUID();
    expect((await describePng(easel, id)).status).toBe(404);
    expect((await easel.get(`/api/conversations/${id}`)).status).toBe(404);
    expect(visionRequests()).toHaveLength(0);
  });

  it('a check of no such picture is 404 saying so', async () => {
    const id = await easel.newConversation();
    const refused = await check(id, 'no-such-image');
    expect(refused.status).toBe(404);
    expect(await refused.text()).toContain('There is no image no-such-image in this conversation.');
  });
});

describe('storage failing under the vision model', () => {
  it("a picture whose file cannot be read is refused before the model is asked, naming the file, and logged", async () => {
    const { id, imageId } = await makePictureOfACat(fake, easel);
    const db = new Database(join(easel.dataDir, 'easel.db'), { readonly: true });
    const { file } = db.prepare('SELECT file FROM images WHERE id = ?').get(imageId) as { file: string };
    db.close();
    unlinkSync(join(easel.dataDir, 'images', file));
    const refused = await check(id, imageId);
    expect(refused.status).toBe(503);
    const { error } = (await refused.json()) as { error: string };
    expect(error).toContain(`The picture's file (${file}) could not be read from the images folder`);
    const logged = easel.logs.filter((line) => line.includes('a picture to check could not be read'));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain(imageId);
    expect(visionRequests()).toHaveLength(0);
  });

  it('a description that cannot be stored is storage_failed, the prompt unchanged', async () => {
    const id = await easel.newConversation();
    const db = new Database(join(easel.dataDir, 'easel.db'));
    onTestFinished(() => void db.close());
    db.exec(`CREATE TRIGGER no_version BEFORE INSERT ON prompt_versions BEGIN SELECT RAISE(ABORT, 'injected failure'); END`);
    onTestFinished(() => void db.exec('DROP TRIGGER IF EXISTS no_version'));
    fake.enqueue(JSON.stringify({ prompt: 'a red fox in the snow', subject: 'a fox' }));
    const events = await readSse(await describePng(easel, id));
    expect(events.map((event) => event.type)).toEqual(['description', 'error', 'done']);
    expect(events[1]?.data['code']).toBe('storage_failed');
    expect((await conversation(id)).prompt).toBe('');
  });
});

describe('the vision model a conversation may use', () => {
  const bare = useEasel('each test', { a1111: { stepDelayMs: 1 }, flags: ['--vision-model', 'moondream:1.8b'], ollama: { models: ['mistral:7b'] } });

  it('one not pulled is 422; Ollama not answering is 503; pulled since, it is found when asked again', async () => {
    const id = await bare.easel.newConversation();
    const missing = await describePng(bare.easel, id);
    expect(missing.status).toBe(422);
    expect(await missing.text()).toContain('Ollama has no model moondream:1.8b');

    bare.fake.setDown(true);
    const down = await describePng(bare.easel, id);
    bare.fake.setDown(false);
    expect(down.status).toBe(503);
    expect(await down.text()).toContain('could not ask Ollama for its models');

    bare.fake.setModels(['mistral:7b', { name: 'moondream:1.8b', capabilities: ['completion', 'vision'] }]);
    bare.fake.enqueue(JSON.stringify({ prompt: 'a red fox in the snow', subject: 'a fox' }));
    const described = await describePng(bare.easel, id);
    expect(described.status, await described.clone().text()).toBe(200);
    expect((await readSse(described)).map((event) => event.type)).toEqual(['description', 'pane', 'done']);
  });
});

describe('the prompt made right for the family', () => {
  it("is written for the image server's checkpoint when the conversation names none", async () => {
    const stage = await startEaselStage({ ...STAGE, a1111: { stepDelayMs: 1, modelName: 'ponyDiffusionV6XL_v6StartWithThisOne' } });
    onTestFinished(() => stage.close());
    // The image server's checkpoints are listed (the page's Settings ask so).
    expect((await stage.easel.get('/api/models')).status).toBe(200);
    const id = await stage.easel.newConversation();
    stage.fake.enqueue(JSON.stringify({ prompt: 'a red fox in the snow', subject: 'a fox' }));
    const events = await readSse(await describePng(stage.easel, id));
    expect(events[0]?.data['prompt']).toBe(`${FAMILY_STYLES.pony.qualityTags}, a red fox in the snow`);
  });

  it('only while that keeps it within 2000 characters: one more, and the prompt stays as the model wrote it', async () => {
    const id = await easel.newConversation();
    expect((await easel.put(`/api/conversations/${id}/settings`, { family: 'pony' })).status).toBe(200);
    const added = `${FAMILY_STYLES.pony.qualityTags}, `.length;
    const words = (length: number) => 'a red fox in the snow, '.repeat(100).slice(0, length - 1) + 'x';
    const fits = words(2000 - added);
    const over = words(2001 - added);
    fake.enqueue(JSON.stringify({ prompt: fits, subject: 'a fox' }), JSON.stringify({ prompt: over, subject: 'a fox' }));
    const fitted = (await readSse(await describePng(easel, id)))[0]?.data['prompt'];
    expect(fitted).toBe(`${FAMILY_STYLES.pony.qualityTags}, ${fits}`);
    expect(String(fitted)).toHaveLength(2000);
    expect((await readSse(await describePng(easel, id)))[0]?.data['prompt']).toBe(over);
  });
});

describe('the service itself: a stream read after its conversation was deleted', () => {
  async function serviceWithVision() {
    const ollama = await createFakeOllama({ models: ['mistral:7b', VISION] });
    const a1111 = await createFakeA1111({ stepDelayMs: 1 });
    const dir = mkdtempSync(join(tmpdir(), 'easel-vision-edges-'));
    const built = buildService({ ollamaUrl: ollama.url, imagesDir: dir, visionModel: 'gemma3:4b', converter: createImageConverter({ logger: silentLogger }), backend: createA1111Backend({ url: a1111.url, pollIntervalMs: 20 }) });
    onTestFinished(async () => {
      built.realStore.close();
      await a1111.close();
      await ollama.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return { ...built, ollama, id: newConversationId(built.service) };
  }
  const signal = () => new AbortController().signal;
  const visible = (events: TurnEvent[]) => events.map((event) => (event.type === 'error' ? `${event.code}: ${event.message}` : event.type));

  it('a check: not_found, the model never asked', async () => {
    const { service, ollama, id } = await serviceWithVision();
    const made = service.generate(id, { prompt: 'a red fox', settings: { steps: 4, width: 64, height: 64 } }, signal());
    if (!made.ok) throw new Error(made.error.message);
    const image = (await collectAll(made.value)).find((event) => event.type === 'image');
    if (image?.type !== 'image') throw new Error('no image');
    const checked = await service.checkImage(id, image.id, { signal: signal() });
    if (!checked.ok) throw new Error(checked.error.message);
    expect((await service.deleteConversation(id)).ok).toBe(true);
    expect(visible(await collectAll(checked.value))).toEqual(['not_found: The conversation was deleted before its picture was checked.', 'done']);
    expect(ollama.chatRequests()).toHaveLength(0);
  });

  it('a description: not_found, the model never asked', async () => {
    const { service, ollama, id } = await serviceWithVision();
    const described = await service.describePicture(id, makePng(8, 8), 'image/png', { signal: signal() });
    if (!described.ok) throw new Error(described.error.message);
    expect((await service.deleteConversation(id)).ok).toBe(true);
    expect(visible(await collectAll(described.value))).toEqual(['not_found: The conversation was deleted before the picture was described.', 'done']);
    expect(ollama.chatRequests()).toHaveLength(0);
  });

  it('two pictures described at the same moment on the empty page make one conversation, both described', async () => {
    // Each waits for the model list and the conversion before the conversation is made: the second joins the first's.
    const { service, ollama } = await serviceWithVision();
    const id = '0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c';
    ollama.enqueue(...[1, 2].map(() => JSON.stringify({ prompt: 'a red fox', subject: 'a fox' })));
    const described = await Promise.all([1, 2].map(() => service.describePicture(id, makePng(8, 8), 'image/png', { signal: signal(), create: {} })));
    expect(described.map((result) => (result.ok ? 'described' : result.error.message))).toEqual(['described', 'described']);
    for (const result of described) if (result.ok) await collectAll(result.value);
    expect(service.listConversations().filter((listed) => listed.id === id)).toHaveLength(1);
  });

  it('a prompt on the empty page that is no prompt is refused under prompt, and makes no conversation', async () => {
    const { service, ollama } = await serviceWithVision();
    const id = '0b6f4c1e-9a3d-4f5e-8c2b-1d7e6f5a4b3c';
    const refused = await service.describePicture(id, makePng(8, 8), 'image/png', { signal: signal(), create: { prompt: 5 } });
    expect(refused.ok ? 'described' : refused.error).toMatchObject({ code: 'invalid', fields: { prompt: expect.stringContaining('must be a string') } });
    expect(service.getConversation(id)).toBeUndefined();
    expect(ollama.chatRequests()).toHaveLength(0);
  });

  it('a type that is no picture is refused before a vision model is looked for (the API and the page refuse it sooner)', async () => {
    const { service, realStore } = buildService();
    onTestFinished(() => realStore.close());
    const refused = await service.describePicture(newConversationId(service), new TextEncoder().encode('hello'), 'text/plain', { signal: signal() });
    expect(refused.ok ? 'described' : refused.error.code).toBe('invalid');
    expect(refused.ok ? '' : refused.error.message).toContain('Send a PNG, JPEG or WebP picture');
  });
});
