// The check-and-correct loop at its edges, through the whole app: a batch or a comparison is checked picture by
// picture and never corrected; settings changed, or another picture's suggestion arriving, while a picture is
// checked win over the loop; a corrected picture that cannot be started is said in the log; once the loop is done
// Cancel finds nothing of it, while Cancel ends a check still asking Ollama for its models; and shutdown ends a check
// in flight.
import Database from 'better-sqlite3';
import { createServer, request as forward, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createFakeA1111 } from '../fakes/fake-a1111.ts';
import { createFakeOllama, scriptReply } from '../fakes/fake-ollama.ts';
import { startEaselStage, startTestEasel, useEasel } from '../helpers/easel.ts';
import { replyMeta } from '../helpers/replies.ts';
import { iterateSse, readSse } from '../helpers/sse.ts';

const VISION_MODELS = { models: ['mistral:7b', { name: 'gemma3:4b', capabilities: ['completion', 'vision'] }] };
const STAGE = { a1111: { stepDelayMs: 1 }, flags: ['--vision-model', 'gemma3:4b'], ollama: VISION_MODELS };

interface Conversation {
  prompt: string;
  images: Array<{ id: string; prompt: string; seed: number | null }>;
  checks: Array<{ imageId: string }>;
  suggestion: { imageId?: string } | null;
}

const critique = (revisedPrompt: string, misses = 1) =>
  JSON.stringify({ matches: ['a tabby cat'], misses: Array.from({ length: misses }, () => ({ element: 'a blue wizard hat', evidence: 'no hat' })), revisedPrompt });

const SIZE = { steps: 4, seed: 77, width: 64, height: 64 };

describe('the loop in a running Easel', () => {
  const { fake, a1111, easel } = useEasel('each test', STAGE);

  async function conversation(id: string): Promise<Conversation> {
    return (await (await easel.get(`/api/conversations/${id}`)).json()) as Conversation;
  }

  const visionCalls = () => fake.requests.filter((request) => request.path === '/api/chat' && (request.body as { model?: string }).model === 'gemma3:4b').length;
  const jobs = () => a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').length;

  /** A conversation whose prompt the model wrote ('a tabby cat'), with the loop's settings. */
  async function withLoop(settings: { autoCheck: boolean; autoRefine: number }): Promise<string> {
    const id = await easel.newConversation();
    fake.enqueue(scriptReply('A cat.', replyMeta('a tabby cat', { steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a tabby cat in a blue wizard hat' }));
    expect((await easel.put(`/api/conversations/${id}/settings`, { ...settings, autoGenerate: false })).status).toBe(200);
    return id;
  }

  const generate = async (id: string, body: Record<string, unknown> = {}) => {
    const response = await easel.post(`/api/conversations/${id}/generations`, { settings: SIZE, ...body });
    expect(response.status, await response.clone().text()).toBe(200);
    return readSse(response);
  };

  /** Waits until `checks` checks are stored and the vision model has nothing more to answer. */
  async function settle(id: string, checks: number): Promise<Conversation> {
    await expect.poll(async () => (await conversation(id)).checks.length, { timeout: 10_000 }).toBe(checks);
    await expect.poll(() => fake.pendingReplies).toBe(0);
    // A correction would be started as the last check ends: the image server is asked for nothing more.
    await new Promise((resolve) => setTimeout(resolve, 200));
    return conversation(id);
  }

  it('a batch: each picture is checked, none is made again, whatever the checks missed', async () => {
    const id = await withLoop({ autoCheck: true, autoRefine: 2 });
    fake.enqueue(critique('a tabby cat, blue wizard hat'), critique('a tabby cat, blue wizard hat'));
    await generate(id, { count: 2 });
    const after = await settle(id, 2);
    expect(after.images).toHaveLength(2);
    expect(after.checks.map((check) => check.imageId).sort()).toEqual(after.images.map((image) => image.id).sort());
    expect(jobs()).toBe(1);
    expect(visionCalls()).toBe(2);
  });

  it('a comparison: each side is checked, neither is made again', async () => {
    const id = await withLoop({ autoCheck: false, autoRefine: 0 });
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a tabby cat, wizard hat' })).status).toBe(200);
    expect((await easel.put(`/api/conversations/${id}/settings`, { autoCheck: true, autoRefine: 2 })).status).toBe(200);
    fake.enqueue(critique('a tabby cat, blue wizard hat'), critique('a tabby cat, blue wizard hat'));
    await generate(id, { promptVersions: 'previous' });
    const after = await settle(id, 2);
    expect(after.images.map((image) => image.prompt)).toEqual(['a tabby cat', 'a tabby cat, wizard hat']);
    expect(jobs()).toBe(2);
  });

  it('settings changed while the picture was checked win: nothing is made again', async () => {
    const id = await withLoop({ autoCheck: true, autoRefine: 2 });
    let release!: () => void;
    fake.enqueue({ chunks: [critique('a tabby cat, blue wizard hat')], gate: new Promise<void>((resolve) => (release = resolve)) });
    await generate(id);
    await expect.poll(visionCalls).toBe(1);
    expect((await easel.put(`/api/conversations/${id}/settings`, { steps: 5 })).status).toBe(200);
    release();
    const after = await settle(id, 1);
    expect(after.images).toHaveLength(1);
    expect(jobs()).toBe(1);
  });

  it("another picture's suggestion arriving while a picture waits for its check wins: nothing is made again", async () => {
    const id = await withLoop({ autoCheck: false, autoRefine: 0 });
    const first = String((await generate(id)).find((event) => event.type === 'image')!.data['id']);
    expect((await easel.put(`/api/conversations/${id}/settings`, { autoCheck: true, autoRefine: 2 })).status).toBe(200);
    // The user checks the first picture; the vision model holds its answer.
    let release!: () => void;
    fake.enqueue(
      { chunks: [critique('a tabby cat, blue wizard hat')], gate: new Promise<void>((resolve) => (release = resolve)) },
      // The second picture's check misses something but revises nothing: it leaves the first one's suggestion.
      critique('a tabby cat'),
    );
    const manual = await easel.post(`/api/conversations/${id}/images/${first}/check`, {});
    expect(manual.status).toBe(200);
    const reading = (async () => {
      for await (const _event of iterateSse(manual.body!)) void _event;
    })();
    await expect.poll(visionCalls).toBe(1);
    // A new picture: the loop checks it after the first one's check (one vision call at a time).
    const hangup = new AbortController();
    const followed = iterateSse((await fetch(`${easel.url}/api/conversations/${id}/events`, { signal: hangup.signal })).body as ReadableStream<Uint8Array>);
    const second = String((await generate(id)).find((event) => event.type === 'image')!.data['id']);
    // Its check has begun (the pane as it found it is read) and waits in line.
    for await (const event of followed) if (event.type === 'check_started' && event.data['imageId'] === second) break;
    hangup.abort();
    release();
    await reading;
    const after = await settle(id, 2);
    expect(after.checks.map((check) => check.imageId)).toEqual([first, second]);
    expect(after.suggestion?.imageId).toBe(first);
    expect(after.images).toHaveLength(2);
    expect(jobs()).toBe(2);
  });

  it('once the loop is done, Cancel of the images finds nothing to cancel', async () => {
    const id = await withLoop({ autoCheck: true, autoRefine: 0 });
    fake.enqueue(critique('a tabby cat, blue wizard hat'));
    await generate(id);
    await settle(id, 1);
    const cancelled = await easel.post(`/api/conversations/${id}/images/cancel`, {});
    expect(await cancelled.json()).toEqual({ cancelled: false });
  });

  it('a corrected picture that cannot be started is said in the log, and nothing is made', async () => {
    const id = await withLoop({ autoCheck: true, autoRefine: 2 });
    const db = new Database(join(easel.dataDir, 'easel.db'));
    onTestFinished(() => {
      db.exec('DROP TRIGGER IF EXISTS no_vision_versions');
      db.close();
    });
    // The revised prompt cannot become a version (taken as a suggestion or not): Fix and regenerate is refused before anything is made.
    db.exec(`CREATE TRIGGER no_vision_versions BEFORE INSERT ON prompt_versions WHEN NEW.source = 'vision' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`);
    fake.enqueue(critique('a tabby cat, blue wizard hat'));
    const imageId = String((await generate(id)).find((event) => event.type === 'image')!.data['id']);
    await settle(id, 1);
    expect(jobs()).toBe(1);
    const logged = easel.logs.filter((line) => line.includes('the corrected picture could not be started'));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain(id);
    expect(logged[0]).toContain(imageId);
  });
});

describe('shutdown', () => {
  it('ends a check in flight: the vision model is hung up on and Easel closes', async () => {
    const stage = await startEaselStage({ ...STAGE, ollama: { ...VISION_MODELS, waitTimeoutMs: 3000 } });
    let closed = false;
    onTestFinished(async () => {
      if (!closed) await stage.easel.close();
      await stage.a1111?.close();
      await stage.fake.close();
    });
    const { fake, easel } = stage;
    const id = await easel.newConversation();
    fake.enqueue(scriptReply('A cat.', replyMeta('a tabby cat', { steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a tabby cat' }));
    expect((await easel.put(`/api/conversations/${id}/settings`, { autoCheck: true, autoGenerate: false })).status).toBe(200);
    fake.enqueue({ chunks: [critique('a tabby cat, blue wizard hat')], gate: new Promise<void>(() => {}) });
    await readSse(await easel.post(`/api/conversations/${id}/generations`, { settings: SIZE }));
    await expect.poll(() => fake.chatRequests().filter((body) => body.model === 'gemma3:4b').length).toBe(1);
    closed = true;
    await easel.close();
    await fake.waitForHangup(1);
  });
});

interface SlowListing {
  url: string;
  /** From now on GET /api/tags waits. */
  hold(): void;
  /** How many GET /api/tags have waited. */
  held(): number;
  /** Passes the first waiting one on; the others wait on. */
  releaseOne(): void;
  /** Passes every waiting one on, and every later one at once. */
  release(): void;
  close(): Promise<void>;
}

/**
 * A real HTTP server in front of the fake Ollama that passes everything on, but holds GET /api/tags once told to
 * (until released, or until the client hangs up): Ollama asked for its models, slowly.
 */
async function slowListing(target: string): Promise<SlowListing> {
  let holding = false;
  let held = 0;
  const waiting: Array<() => void> = [];
  const server: Server = createServer((req, res) => {
    const go = () => {
      const out = forward(target + (req.url ?? '/'), { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      out.on('error', () => res.destroy());
      res.on('close', () => out.destroy());
      req.pipe(out);
    };
    if (!holding || !req.url?.startsWith('/api/tags')) return go();
    held++;
    void new Promise<void>((resolve) => {
      waiting.push(resolve);
      res.on('close', resolve);
    }).then(() => (res.destroyed ? undefined : go()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hold: () => void (holding = true),
    held: () => held,
    releaseOne: () => waiting.shift()?.(),
    release: () => {
      holding = false;
      for (const resolve of waiting.splice(0)) resolve();
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('Cancel while a check still asks Ollama for its models', () => {
  /** Easel behind slowListing, a conversation with autoCheck and autoRefine 2, and Ollama's list lacking the vision model. */
  async function stage() {
    const fake = await createFakeOllama(VISION_MODELS);
    const a1111 = await createFakeA1111(STAGE.a1111);
    const listing = await slowListing(fake.url);
    const easel = await startTestEasel({ ollamaUrl: listing.url, flags: ['--image-backend', 'a1111', '--image-url', a1111.url, ...STAGE.flags] });
    const hangup = new AbortController();
    onTestFinished(async () => {
      hangup.abort();
      listing.release();
      await easel.close();
      await listing.close();
      await a1111.close();
      await fake.close();
    });
    const id = await easel.newConversation();
    fake.enqueue(scriptReply('A cat.', replyMeta('a tabby cat', { steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a tabby cat' }));
    expect((await easel.put(`/api/conversations/${id}/settings`, { autoCheck: true, autoRefine: 2, autoGenerate: false })).status).toBe(200);
    // Ollama's list, asked again, lacks the vision model: each check asks for it again before it starts.
    fake.setModels(['mistral:7b']);
    await easel.get('/api/models');
    fake.setModels(VISION_MODELS.models);
    listing.hold();
    const followed = iterateSse((await fetch(`${easel.url}/api/conversations/${id}/events`, { signal: hangup.signal })).body as ReadableStream<Uint8Array>);
    /** How each check ended so far, as every page is told it. */
    const ends: string[] = [];
    void (async () => {
      for await (const event of followed) if (event.type === 'check_failed' || event.type === 'critique') ends.push(event.type);
    })().catch(() => {});
    return { fake, easel, listing, id, ends };
  }

  const visionCalls = (fake: Awaited<ReturnType<typeof stage>>['fake']) => fake.chatRequests().filter((body) => body.model === 'gemma3:4b').length;

  it('ends the check before the vision model is asked anything: Cancel says so', async () => {
    const { fake, easel, listing, id, ends } = await stage();
    fake.enqueue(critique('a tabby cat, blue wizard hat'));
    await readSse(await easel.post(`/api/conversations/${id}/generations`, { settings: SIZE }));
    await expect.poll(listing.held).toBe(1);
    const cancelled = await easel.post(`/api/conversations/${id}/images/cancel`, {});
    expect(await cancelled.json()).toEqual({ cancelled: true });
    listing.release();
    // The check ended there, as its failure tells every page: the vision model was never asked.
    await expect.poll(() => ends).toEqual(['check_failed']);
    const after = (await (await easel.get(`/api/conversations/${id}`)).json()) as Conversation;
    expect(after.checks).toHaveLength(0);
    expect(visionCalls(fake)).toBe(0);
  });

  it("a batch: the first picture's check ending does not hide the second one's from Cancel", async () => {
    const { fake, easel, listing, id, ends } = await stage();
    fake.enqueue(critique('a tabby cat, blue wizard hat'), critique('a tabby cat, blue wizard hat'));
    await readSse(await easel.post(`/api/conversations/${id}/generations`, { settings: SIZE, count: 2 }));
    await expect.poll(listing.held).toBe(2);
    listing.releaseOne();
    await expect.poll(() => ends).toEqual(['critique']);
    const cancelled = await easel.post(`/api/conversations/${id}/images/cancel`, {});
    expect(await cancelled.json()).toEqual({ cancelled: true });
    listing.release();
    await expect.poll(() => ends).toEqual(['critique', 'check_failed']);
    expect(visionCalls(fake)).toBe(1);
  });
});
