// The check part of the report card run whole: the real Easel, the fake AUTOMATIC1111 painting each case, and the
// fake Ollama's vision model answering by script. No real model is here, so what is proven is the plumbing: every
// number comes from what the API said, not how good a model is. (It starts the server, like the integration suite:
// test/integration/eval.test.ts runs the chat part the same way.)
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { critiqueJsonSchema, describeJsonSchema } from '../../server/protocol/index.ts';
import { CHECK_CASES, renderCase, type CheckCase } from '../eval/checks.ts';
import { EVAL_CONVERSATIONS } from '../eval/conversations.ts';
import type { CheckRecord } from '../eval/report.ts';
import { runEval } from '../eval/run-eval.ts';
import { createFakeOllama, scriptReply, type FakeOllama } from '../fakes/fake-ollama.ts';

const VISION = { name: 'gemma3:4b', capabilities: ['completion', 'vision'] };

/** The RGB pixels of a PNG, to compare two encodings of one picture. */
async function pixels(png: Uint8Array): Promise<Buffer> {
  return sharp(png).removeAlpha().raw().toBuffer();
}

/** Whether two PNGs hold the same pixels (a Buffer compared whole: a deep equality of 786 432 bytes is slow). */
async function samePicture(a: Uint8Array, b: Uint8Array): Promise<boolean> {
  return (await pixels(a)).equals(await pixels(b));
}

function caseNamed(name: string): CheckCase {
  const found = CHECK_CASES.find((check) => check.name === name);
  if (!found) throw new Error(`no case ${name}`);
  return found;
}

describe('runEval with a vision model: the check part against the fake Ollama', () => {
  let fake: FakeOllama;
  beforeEach(async () => {
    fake = await createFakeOllama({ models: ['mistral:7b', VISION, 'llama3.2'] });
  });
  afterEach(async () => {
    await fake.close();
  });

  const visionRequests = () => fake.requests.filter((request) => request.path === '/api/chat' && (request.body as { model: string }).model === VISION.name);

  it('makes each picture, checks it, describes it and counts what the API said, exactly', async () => {
    const [nothingMissing, leftOut, wrongColour] = [caseNamed('a red circle, nothing missing'), caseNamed('the green triangle left out'), caseNamed('the square in the wrong colour')];
    fake.enqueue(
      // 1: read at once, with a false miss (the circle is there); slow, so its time shows.
      { chunks: [JSON.stringify({ matches: ['white background'], misses: [{ element: 'a red circle', evidence: 'too small' }], revisedPrompt: 'a big red circle, white background' })], loadMs: 400 },
      JSON.stringify({ prompt: 'a red circle, white background, flat', subject: 'a red circle' }),
      // 2: cut short, then read after the reminder: the triangle found, the revised prompt naming it.
      { chunks: ['{"matches": ["red circle"], "misses": [{"element": "green'], doneReason: 'length' },
      JSON.stringify({ matches: ['red circle'], misses: [{ element: 'green triangle', evidence: 'only a circle' }], revisedPrompt: 'red circle, (green triangle:1.3), white background' }),
      JSON.stringify({ prompt: 'a red disc on white', subject: 'a red disc' }),
      // 3: unreadable twice (vision_bad_response), and its description too.
      { chunks: ['{"matches": ['], doneReason: 'length' },
      { chunks: ['{"misses": ['], doneReason: 'length' },
      { chunks: ['{"prompt": '], doneReason: 'length' },
      { chunks: ['{"subject": '], doneReason: 'length' },
    );
    const progress: Array<[number, number]> = [];
    const result = await runEval({
      flags: ['--ollama-url', fake.url],
      family: 'sdxl',
      conversations: [],
      checks: { visionModel: VISION.name, cases: [nothingMissing, leftOut, wrongColour], onCheck: (done, total) => progress.push([done, total]) },
    });
    if (!result.ok) throw new Error(result.reason);
    expect(fake.scriptErrors).toEqual([]);
    expect(fake.pendingReplies).toBe(0);
    expect(progress).toEqual([
      [1, 3],
      [2, 3],
      [3, 3],
    ]);
    // No conversation ran: the chat model was never asked, and the chat report is of no turns.
    expect(fake.chatRequests().filter((request) => request.model !== VISION.name)).toEqual([]);
    expect(result.turns).toEqual([]);
    expect(result.report).toMatchObject({ model: 'mistral:7b', conversations: 0, turns: 0 });

    const records = result.checks as CheckRecord[];
    expect(records.map((record) => [record.case, record.level, record.attempts, record.error, record.describe.level, record.describe.error])).toEqual([
      [nothingMissing.name, 'clean', 1, undefined, 'clean', undefined],
      [leftOut.name, 'reminder', 2, undefined, 'clean', undefined],
      [wrongColour.name, 'error', 2, 'vision_bad_response', 'error', 'vision_bad_response'],
    ]);
    expect(records[1]).toMatchObject({ misses: [{ element: 'green triangle', evidence: 'only a circle' }], revisedPrompt: 'red circle, (green triangle:1.3), white background' });
    expect(records[0]!.describe).toMatchObject({ prompt: 'a red circle, white background, flat', subject: 'a red circle' });
    expect(records[0]!.ms).toBeGreaterThanOrEqual(400);
    expect(result.checkReport).toEqual({
      visionModel: VISION.name,
      ollamaUrl: fake.url,
      checks: 3,
      format: { clean: 1, reminder: 1, failed: 1, errors: { vision_bad_response: 1 } },
      planted: { total: 2, found: 1 },
      misses: 2,
      falseMisses: 1,
      revised: { withPlanted: 2, namingEvery: 1 },
      secondsPerCheck: { p50: expect.any(Number), p95: records[0]!.ms / 1000 },
      describe: { runs: 3, described: 2, errors: { vision_bad_response: 1 }, namingShape: 1 },
    });

    // What the vision model was sent: each case's own picture, made by the fake image server from the request
    // (the check) and sent as the body (the description), each with its schema, the request quoted in the check.
    const sent = visionRequests();
    const kindOf = (format: unknown) => (JSON.stringify(format) === JSON.stringify(critiqueJsonSchema) ? 'check' : JSON.stringify(format) === JSON.stringify(describeJsonSchema) ? 'describe' : 'other');
    expect(sent.map((request) => kindOf((request.body as { format?: unknown }).format))).toEqual([
      'check',
      'describe',
      'check',
      'check',
      'describe',
      'check',
      'check',
      'describe',
      'describe',
    ]);
    const firstOfEach = [0, 1, 2, 4, 5, 7];
    const expected = [nothingMissing, nothingMissing, leftOut, leftOut, wrongColour, wrongColour];
    for (const [index, request] of firstOfEach.entries()) {
      const images = sent[request]!.images!.flat();
      expect(images).toHaveLength(1);
      expect(await samePicture(images[0]!, await renderCase(expected[index]!)), `request ${request}`).toBe(true);
    }
    const checkText = (sent[2]!.body as { messages: Array<{ role: string; content: string }> }).messages.find((message) => message.role === 'user')!.content;
    expect(checkText).toContain(JSON.stringify(leftOut.request));
  });

  it('runs the conversations first as before, then the checks', async () => {
    const ready = { prompt: 'a tabby cat in a blue wizard hat', generate_image: true, steps: 20, cfg: 7, seed: -1 };
    const asking = { ...ready, prompt: '', generate_image: false };
    fake.enqueue(
      scriptReply('A cat in a hat!', asking),
      scriptReply('A tabby.', asking),
      scriptReply('Making it.', ready),
      JSON.stringify({ matches: ['red circle'], misses: [], revisedPrompt: 'red circle, white background' }),
      JSON.stringify({ prompt: 'red circle', subject: 'a red circle' }),
    );
    const result = await runEval({
      flags: ['--ollama-url', fake.url],
      family: 'sdxl',
      conversations: EVAL_CONVERSATIONS.slice(0, 1),
      checks: { visionModel: VISION.name, cases: [caseNamed('a red circle, nothing missing')] },
    });
    if (!result.ok) throw new Error(result.reason);
    expect(fake.pendingReplies).toBe(0);
    expect(result.report).toMatchObject({ conversations: 1, turns: 3, clean: 3 });
    expect(result.checkReport).toMatchObject({ checks: 1, format: { clean: 1 }, misses: 0, planted: { total: 0 }, describe: { namingShape: 1 } });
    expect(fake.chatRequests().map((request) => request.model)).toEqual(['mistral:7b', 'mistral:7b', 'mistral:7b', VISION.name, VISION.name]);
  });

  it('stops, saying what to do, at a vision model not pulled or one that cannot see, and skips when no Ollama answers', async () => {
    const cases = CHECK_CASES.slice(0, 1);
    const missing = await runEval({ flags: ['--ollama-url', fake.url], family: 'sdxl', conversations: [], checks: { visionModel: 'qwen2.5vl:7b', cases } });
    expect(missing).toEqual({ ok: false, skip: false, reason: 'qwen2.5vl:7b is not pulled: run `ollama pull qwen2.5vl:7b`' });
    const blind = await runEval({ flags: ['--ollama-url', fake.url], family: 'sdxl', conversations: [], checks: { visionModel: 'llama3.2', cases } });
    expect(blind).toMatchObject({ ok: false, skip: false, reason: expect.stringContaining('llama3.2 cannot see images') });
    // Only the checks run: the chat model need not be pulled.
    fake.setModels([VISION]);
    fake.enqueue(JSON.stringify({ matches: ['red circle'], misses: [], revisedPrompt: 'red circle' }), JSON.stringify({ prompt: 'red circle', subject: 'a circle' }));
    expect(await runEval({ flags: ['--ollama-url', fake.url], family: 'sdxl', conversations: [], checks: { visionModel: VISION.name, cases } })).toMatchObject({ ok: true });
    expect(fake.chatRequests()).toHaveLength(2);
    await fake.close();
    const down = await runEval({ flags: ['--ollama-url', fake.url], family: 'sdxl', conversations: [], checks: { visionModel: VISION.name, cases } });
    expect(down).toMatchObject({ ok: false, skip: true, reason: expect.stringContaining('ollama serve') });
  });
});

describe('npm run eval -- --vision-model NAME', () => {
  let fake: FakeOllama;
  beforeEach(async () => {
    fake = await createFakeOllama({ models: ['mistral:7b', VISION] });
  });
  afterEach(async () => {
    await fake.close();
  });

  function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(process.execPath, ['--import', 'tsx', 'test/eval/run.ts', ...args], { env: { PATH: process.env.PATH ?? '' } }, (error, stdout, stderr) => {
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
      });
    });
  }

  it('--checks-only prints the check table alone and writes it as JSON', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'easel-eval-checks-'));
    try {
      for (const check of CHECK_CASES) {
        fake.enqueue(
          JSON.stringify({ matches: check.present, misses: check.planted.map((keyword) => ({ element: keyword, evidence: 'not there' })), revisedPrompt: check.request }),
          JSON.stringify({ prompt: `a ${check.shape}`, subject: `a ${check.shape}` }),
        );
      }
      const out = join(dir, 'checks.json');
      const { code, stdout, stderr } = await runCli(['--ollama-url', fake.url, '--model', 'mistral:7b', '--vision-model', VISION.name, '--checks-only', '--out', out]);
      expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
      expect(stdout.split('\n')[0]).toBe(`gemma3:4b via ${fake.url}: ${CHECK_CASES.length} checks, ${CHECK_CASES.length} descriptions`);
      expect(stdout).not.toContain('turns');
      const planted = CHECK_CASES.reduce((sum, check) => sum + check.planted.length, 0);
      expect(stdout).toMatch(new RegExp(`^format kept first time\\s+${CHECK_CASES.length}\\s+100\\.0 %$`, 'm'));
      expect(stdout).toMatch(new RegExp(`^ {2}found\\s+${planted}\\s+100\\.0 %$`, 'm'));
      expect(stdout).toMatch(/^ {2}naming the main shape\s+\d+\s+100\.0 %$/m);
      const written = JSON.parse(readFileSync(out, 'utf8')) as { report?: unknown; checkReport: { checks: number }; checks: unknown[] };
      expect(written.report).toBeUndefined();
      expect(written.checkReport.checks).toBe(CHECK_CASES.length);
      expect(written.checks).toHaveLength(CHECK_CASES.length);
      expect(fake.chatRequests().every((request) => request.model === VISION.name)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses --checks-only without a vision model, and says so in --help', async () => {
    const bad = await runCli(['--checks-only']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--checks-only needs --vision-model NAME');
    const help = await runCli(['--help']);
    expect(help.stdout).toMatch(/--vision-model NAME {2,}also check and describe/);
    expect(help.stdout).toMatch(/--checks-only {2,}with --vision-model/);
  });
});
