// Story 010's integration test: 10 multi-turn conversations with mistral:7b through the real server.
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEasel, type TestEasel } from '../helpers/easel.ts';
import { readSse, shownText, type SseEvent } from '../helpers/sse.ts';
import { LIVE_CONVERSATIONS } from '../eval/conversations.ts';

const OLLAMA = process.env.OLLAMA_HOST ? normalise(process.env.OLLAMA_HOST) : 'http://127.0.0.1:11434';
const MODEL = process.env.EASEL_MODEL ?? 'mistral:7b';

const CONVERSATIONS = LIVE_CONVERSATIONS;

interface Reachability {
  ok: boolean;
  reason: string;
}

async function checkOllama(): Promise<Reachability> {
  try {
    const response = await fetch(`${OLLAMA}/api/tags`, { signal: AbortSignal.timeout(3000) });
    const tags = (await response.json()) as { models?: Array<{ name: string }> };
    const names = (tags.models ?? []).map((m) => m.name);
    if (!names.includes(MODEL)) return { ok: false, reason: `Ollama at ${OLLAMA} has no ${MODEL}: run \`ollama pull ${MODEL}\`` };
    return { ok: true, reason: '' };
  } catch (error) {
    return { ok: false, reason: `no Ollama reachable at ${OLLAMA} (${(error as Error).message}): start it with \`ollama serve\`` };
  }
}

const reachability = await checkOllama();
if (!reachability.ok) console.warn(`\n[live] skipped: ${reachability.reason}\n`);

describe.skipIf(!reachability.ok)(`live: ${MODEL} via Ollama at ${OLLAMA}`, () => {
  let easel: TestEasel;
  beforeAll(async () => {
    easel = await startTestEasel({ ollamaUrl: OLLAMA, flags: ['--model', MODEL, '--llm-seed', '42'] });
  });
  afterAll(async () => easel?.close());

  async function send(id: string, text: string): Promise<SseEvent[]> {
    const response = await easel.post(`/api/conversations/${id}/messages`, { text });
    expect(response.status).toBe(200);
    return readSse(response);
  }

  it('10 multi-turn conversations keep the format, withhold the JSON and extract prompts', async () => {
    const levels: string[] = [];
    let promptsExtracted = 0;
    for (const messages of CONVERSATIONS) {
      const id = await easel.newConversation();
      for (const text of messages) {
        const events = await send(id, text);
        const done = events.find((e) => e.type === 'done')!.data;
        levels.push(String(done.level));
        const shown = shownText(events);
        expect(shown).not.toMatch(/^\s*---\s*$/m);
        expect(shown).not.toMatch(/"prompt"\s*:|generate_image/);
        const metadata = events.find((e) => e.type === 'metadata')?.data;
        expect(metadata, `no metadata for "${text}" (level ${done.level})`).toBeDefined();
        if (metadata?.generate_image && metadata.prompt) {
          promptsExtracted++;
          const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as { prompt: string };
          expect(conversation.prompt).toBe(metadata.prompt);
        }
      }
    }
    const clean = levels.filter((l) => l === 'clean').length;
    console.info(`[live] ${levels.length} turns: ${clean} clean, ${levels.filter((l) => l === 'reminder').length} reminder, ${levels.filter((l) => l === 'compaction').length} compaction, ${levels.filter((l) => l === 'reset').length} reset; ${promptsExtracted} prompts extracted`);
    expect(levels).not.toContain('reset');
    expect(promptsExtracted).toBeGreaterThanOrEqual(5);
  });

  it('a prompt the user edited is kept by the model in its next prompt', async () => {
    const id = await easel.newConversation();
    await send(id, 'a cat in a hat, tabby, blue wizard hat; write the prompt now');
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a black dog wearing a red fez, studio photo' });
    const events = await send(id, 'make it a night scene');
    const metadata = events.find((e) => e.type === 'metadata')?.data;
    expect(String(metadata?.prompt)).toMatch(/dog/i);
    expect(String(metadata?.prompt)).toMatch(/fez/i);
  });

  it('the metadata-only step recovers a reply whose metadata was lost, keeping its text (simulated format error)', async () => {
    // A proxy in front of Ollama cuts the metadata off the first reply, as a drifting model would.
    const proxy = await startCuttingProxy(OLLAMA);
    const lossy = await startTestEasel({ ollamaUrl: proxy.url, flags: ['--model', MODEL, '--llm-seed', '42'] });
    try {
      const id = await lossy.newConversation();
      const response = await lossy.post(`/api/conversations/${id}/messages`, { text: 'a lighthouse in a storm, write the prompt' });
      const events = await readSse(response);
      const done = events.find((e) => e.type === 'done')!.data;
      // The text arrived whole, so only the metadata is asked for (grammar-constrained); the ladder goes on if that fails.
      expect(events.some((e) => e.type === 'metadata_retry')).toBe(true);
      expect(['metadata', 'reminder', 'compaction']).toContain(done.level);
      expect(events.find((e) => e.type === 'metadata')).toBeDefined();
    } finally {
      await lossy.close();
      await new Promise<void>((resolve) => proxy.server.close(() => resolve()));
    }
  });
});

/** Forwards to Ollama; the FIRST /api/chat reply loses every line from `---` on. */
async function startCuttingProxy(target: string): Promise<{ url: string; server: Server }> {
  let cut = false;
  const server = createServer((req, res) => {
    const upstream = new URL(req.url ?? '/', target);
    const forward = httpRequest(upstream, { method: req.method, headers: req.headers }, (answer) => {
      const cutThis = req.url === '/api/chat' && !cut;
      if (cutThis) cut = true;
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      if (!cutThis) return void answer.pipe(res);
      // Everything from the first line that starts the metadata (---, a fence or a `{`) is dropped.
      let dropping = false;
      let seen = '';
      let buffer = '';
      answer.on('data', (chunk: Buffer) => {
        buffer += chunk.toString('utf8');
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          const message = JSON.parse(line) as { done: boolean; message?: { content: string } };
          if (!message.done && message.message) {
            const before = seen.length;
            seen += message.message.content;
            const start = dropping ? -1 : seen.search(/(^|\n)[ \t]*(-{2,}|\{|```)/);
            if (start >= 0) {
              dropping = true;
              message.message.content = seen.slice(before, Math.max(before, start));
            } else if (dropping) message.message.content = '';
          }
          res.write(`${JSON.stringify(message)}\n`);
        }
      });
      answer.on('end', () => res.end(buffer));
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

function normalise(host: string): string {
  const value = host.trim();
  const url = new URL(/^https?:\/\//.test(value) ? value : `http://${value}`);
  if (url.hostname === '0.0.0.0') url.hostname = '127.0.0.1';
  if (!/^https?:\/\//.test(value) && !url.port) url.port = '11434';
  return url.origin;
}
