// The model report card against the fake Ollama scripted to drift: every kind of turn once, so each
// number of the report is known in advance. Then the command itself, as a person runs it.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EVAL_CONVERSATIONS } from '../eval/conversations.ts';
import { quantile } from '../eval/report.ts';
import { runEval } from '../eval/run-eval.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { useFakeOllama } from '../helpers/easel.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const READY = { prompt: 'a tabby cat in a blue wizard hat', generate_image: true, steps: 20, cfg: 7, seed: -1 };
const JSON_READY = JSON.stringify(READY);
/** The metadata-only answer cut by its num_predict cap: the ladder goes on. */
const METADATA_CUT = { chunks: ['{"prompt": "a cat'], doneReason: 'length' };

const fake = useFakeOllama('each test');

describe('runEval: the real engine, counted', () => {
  it('reports each kind of turn, the calls per accepted turn and the speed exactly', async () => {
    // The first three conversations: "a cat in a hat" (3 turns), the prompt edit (3 turns and an edit), "I want a landscape" (3 turns).
    fake.enqueue(
      scriptReply('A cat in a hat! What kind?', ASKING), // 1 clean
      `A tabby it is.\n${JSON_READY}`, // 2 repaired: missing-delimiter
      `Here you go.\n---\n\`\`\`json\n${JSON_READY}\n\`\`\`\nEnjoy!`, // 3 repaired: code-fence, trailing-text
      'A tabby in a blue wizard hat, got it.', // 4 the metadata alone…
      JSON_READY, //   …answered: recovered by the metadata-only step (2 calls)
      'A night scene, sure.', // 5 no JSON…
      METADATA_CUT, //   …the metadata-only answer cut…
      scriptReply('A night scene, sure.', READY), //   …the reminder works (3 calls)
      'Generating!', // 6 no JSON…
      METADATA_CUT,
      'Generating now!', //   …the reminder fails too…
      JSON_READY, //   …compaction works (4 calls)
      'A landscape!', // 7 nothing works: reset (4 calls)
      METADATA_CUT,
      'Mountains?',
      { chunks: ['{"prompt": "a landscape'], doneReason: 'length' },
      { chunks: [], errorAfter: { chunks: 0, message: 'model runner has unexpectedly stopped' } }, // 8 an Ollama error
      scriptReply('Making it.', READY), // 9 clean
    );
    const progress: Array<[number, number]> = [];
    const result = await runEval({
      flags: ['--ollama-url', fake.url],
      family: 'sdxl',
      conversations: EVAL_CONVERSATIONS.slice(0, 3),
      onTurn: (done, total) => progress.push([done, total]),
    });
    if (!result.ok) throw new Error(result.reason);

    expect(fake.pendingReplies).toBe(0);
    expect(fake.scriptErrors).toEqual([]);
    expect(result.turns.map((turn) => [turn.level, turn.attempts])).toEqual([
      ['clean', 1],
      ['clean', 1],
      ['clean', 1],
      ['metadata', 2],
      ['reminder', 3],
      ['compaction', 4],
      ['reset', 4],
      ['error', 1],
      ['clean', 1],
    ]);
    const { report } = result;
    expect(report).toMatchObject({
      model: 'mistral:7b',
      ollamaUrl: fake.url,
      conversations: 3,
      turns: 9,
      clean: 2,
      repaired: 2,
      repairs: { 'missing-delimiter': 1, 'code-fence': 1, 'trailing-text': 1 },
      recovered: { metadata: 1, reminder: 1, compaction: 1 },
      resets: 1,
      errors: 1,
    });
    // 1 + 1 + 1 + 2 + 3 + 4 + 1 calls over the 7 accepted turns (the reset and the error are not accepted).
    expect(report.meanCallsPerAcceptedTurn).toBe(13 / 7);
    // The fake's eval_duration is 20 ms a token: 50 tokens a second, whatever the turn.
    expect(report.tokensPerSecond).toBeCloseTo(50, 9);
    const firstTokens = result.turns.flatMap((turn) => (turn.firstTokenMs === null ? [] : [turn.firstTokenMs]));
    expect(firstTokens).toHaveLength(8);
    expect(report.firstTokenMs).toEqual({ p50: quantile(firstTokens, 0.5), p95: quantile(firstTokens, 0.95) });
    expect(result.turns[7]).toMatchObject({ error: 'ollama_error', firstTokenMs: null });
    expect(progress).toEqual(Array.from({ length: 9 }, (_, i) => [i + 1, 9]));

    // The edit step went through the real API: the model was told of it in the next message.
    const toldEdit = fake.chatRequests().find((request) => request.messages?.at(-1)?.content.startsWith('[The user edited the prompt to: "a black dog wearing a red fez, studio photo"]'));
    expect(toldEdit?.messages?.at(-1)?.content).toMatch(/make it a night scene$/);
  });

  it('skips, saying why, when no Ollama answers, and stops at a model that is not pulled', async () => {
    fake.setModels(['llama3.2']);
    const missing = await runEval({ flags: ['--ollama-url', fake.url], family: 'sdxl', conversations: EVAL_CONVERSATIONS.slice(0, 1) });
    expect(missing).toMatchObject({ ok: false, skip: false, reason: expect.stringContaining('ollama pull mistral:7b') });
    await fake.close();
    const down = await runEval({ flags: ['--ollama-url', fake.url], family: 'sdxl', conversations: EVAL_CONVERSATIONS.slice(0, 1) });
    expect(down).toMatchObject({ ok: false, skip: true, reason: expect.stringContaining('ollama serve') });
  });
});

describe('npm run eval', () => {
  function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(process.execPath, ['--import', 'tsx', 'test/eval/run.ts', ...args], { env: { PATH: process.env.PATH ?? '' } }, (error, stdout, stderr) => {
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
      });
    });
  }

  it('prints the table, writes the JSON, and draws no progress bar when stderr is not a terminal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'easel-eval-cli-'));
    try {
      fake.enqueue(scriptReply('A cat in a hat!', ASKING), scriptReply('A tabby.', ASKING), scriptReply('Making it.', READY));
      const out = join(dir, 'report.json');
      const { code, stdout, stderr } = await runCli(['--ollama-url', fake.url, '--model', 'mistral:7b', '--conversations', '1', '--out', out]);
      expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
      expect(stdout).toContain(`mistral:7b via ${fake.url}: 1 conversation, 3 turns`);
      expect(stdout).toMatch(/^clean\s+3\s+100\.0 %$/m);
      const written = JSON.parse(readFileSync(out, 'utf8')) as { report: { turns: number; clean: number }; turns: unknown[] };
      expect(written.report).toMatchObject({ turns: 3, clean: 3 });
      expect(written.turns).toHaveLength(3);
      // The fixed sampling seed makes runs repeat.
      expect(fake.chatRequests().every((request) => request.options?.seed === 42)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 0 with the reason when no Ollama answers, and 2 on a bad flag', async () => {
    await fake.close();
    const skipped = await runCli(['--ollama-url', fake.url]);
    expect(skipped.code).toBe(0);
    expect(skipped.stdout).toMatch(/^eval skipped: .*ollama serve/);
    const bad = await runCli(['--conversations', '99']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--conversations must be a whole number from 1 to 14, got 99.');
  });
});
