// The report card's arithmetic, on hand-made turns with known answers.
import { describe, expect, it } from 'vitest';
import { countTurns, DEFAULT_CONVERSATIONS, EVAL_CONVERSATIONS, LIVE_CONVERSATIONS } from '../../eval/conversations.ts';
import { formatReport, quantile, renderProgressBar, summariseTurns, type TurnRecord } from '../../eval/report.ts';

const ABOUT = { model: 'mistral:7b', ollamaUrl: 'http://127.0.0.1:11434', conversations: 2, family: 'sdxl' as const };

function turn(level: string, attempts: number, extra: Partial<TurnRecord> = {}): TurnRecord {
  return { conversation: 'c', text: 't', level, attempts, repairs: [], firstTokenMs: 100, evalCount: 40, tokensPerSecond: 40, ...extra };
}

describe('quantile (nearest rank)', () => {
  it('picks the smallest value with at least p of the values at or below it', () => {
    const values = [50, 10, 40, 20, 30];
    expect(quantile(values, 0.5)).toBe(30);
    expect(quantile(values, 0.95)).toBe(50);
    expect(quantile(values, 0.2)).toBe(10);
    expect(quantile(values, 0.21)).toBe(20);
    expect(quantile([7], 0.95)).toBe(7);
    expect(quantile(Array.from({ length: 20 }, (_, i) => i + 1), 0.95)).toBe(19);
    expect(() => quantile([], 0.5)).toThrow(RangeError);
  });
});

describe('summariseTurns', () => {
  const turns: TurnRecord[] = [
    turn('clean', 1, { firstTokenMs: 100, evalCount: 30, tokensPerSecond: 30 }),
    turn('clean', 1, { repairs: ['missing-delimiter'], firstTokenMs: 300 }),
    turn('clean', 1, { repairs: ['code-fence', 'trailing-text', 'missing-delimiter'], firstTokenMs: 200 }),
    turn('metadata', 2, { firstTokenMs: 400 }),
    turn('reminder', 3, { repairs: ['clamped'], firstTokenMs: 500 }),
    turn('compaction', 4, { firstTokenMs: 600, evalCount: 100, tokensPerSecond: 50 }),
    turn('reset', 4, { firstTokenMs: 700 }),
    turn('error', 1, { error: 'ollama_stream_failed', firstTokenMs: null, evalCount: 0, tokensPerSecond: 0 }),
    turn('stopped', 1, { firstTokenMs: 800, evalCount: 0, tokensPerSecond: 0 }),
  ];

  it('counts each outcome, the repairs of first-call turns by code, and the calls per accepted turn', () => {
    const report = summariseTurns(turns, ABOUT);
    expect(report).toMatchObject({
      model: ABOUT.model,
      ollamaUrl: ABOUT.ollamaUrl,
      conversations: ABOUT.conversations,
      turns: 9,
      clean: 1,
      repaired: 2,
      // In REPAIR_CODES order; the reminder's `clamped` belongs to a recovered turn, not to "repaired".
      repairs: { 'missing-delimiter': 2, 'code-fence': 1, 'trailing-text': 1 },
      recovered: { metadata: 1, reminder: 1, compaction: 1 },
      resets: 1,
      errors: 2,
    });
    expect(Object.keys(report.repairs)).toEqual(['missing-delimiter', 'code-fence', 'trailing-text']);
    // Accepted: 3 first-call turns (1 call each), metadata 2, reminder 3, compaction 4 → 12 calls / 6 turns.
    expect(report.meanCallsPerAcceptedTurn).toBe(2);
    // 8 first-token times 100…800: p50 is the 4th (400), p95 the 8th (800).
    expect(report.firstTokenMs).toEqual({ p50: 400, p95: 800 });
    // Tokens over time: 30 at 30/s (1 s), 5 turns of 40 at 40/s (5 s), 100 at 50/s (2 s) → 330 tokens / 8 s.
    expect(report.tokensPerSecond).toBe(330 / 8);
  });

  it('says "none" rather than dividing by zero', () => {
    const report = summariseTurns([turn('error', 1, { firstTokenMs: null, evalCount: 0, tokensPerSecond: 0 })], ABOUT);
    expect(report).toMatchObject({ turns: 1, errors: 1, meanCallsPerAcceptedTurn: null, firstTokenMs: null, tokensPerSecond: null });
    expect(formatReport(report)).toMatch(/model calls per accepted turn\s+–/);
  });

  it('prints one row per measure with the share of all turns', () => {
    const table = formatReport(summariseTurns(turns, ABOUT));
    expect(table.split('\n')[0]).toBe('mistral:7b via http://127.0.0.1:11434: 2 conversations, 9 turns');
    expect(table).toMatch(/^turns\s+9$/m);
    expect(table).toMatch(/^clean\s+1\s+11\.1 %$/m);
    expect(table).toMatch(/^repaired\s+2\s+22\.2 %$/m);
    expect(table).toMatch(/^ {2}missing-delimiter\s+2$/m);
    expect(table).toMatch(/^recovered: metadata only\s+1\s+11\.1 %$/m);
    expect(table).toMatch(/^resets\s+1\s+11\.1 %$/m);
    expect(table).toMatch(/^errors\s+2\s+22\.2 %$/m);
    expect(table).toMatch(/^model calls per accepted turn\s+2\.00$/m);
    expect(table).toMatch(/^first token p50 \/ p95\s+400 ms \/ 800 ms$/m);
    expect(table).toMatch(/^tokens per second\s+41\.3$/m);
  });
});

describe('the progress bar', () => {
  it('fills in proportion and names the turns', () => {
    expect(renderProgressBar(0, 4, 8)).toBe('[........] 0/4 turns');
    expect(renderProgressBar(1, 4, 8)).toBe('[##......] 1/4 turns');
    expect(renderProgressBar(4, 4, 8)).toBe('[########] 4/4 turns');
  });
});

describe('the conversations', () => {
  it('hold the live suite\'s ten plus four with prompt edits and settings, and the default ten include every kind', () => {
    expect(EVAL_CONVERSATIONS).toHaveLength(14);
    const said = EVAL_CONVERSATIONS.map((c) => JSON.stringify(c.steps.map((step) => ('say' in step ? step.say : step))));
    for (const live of LIVE_CONVERSATIONS) expect(said).toContain(JSON.stringify(live));
    const first = EVAL_CONVERSATIONS.slice(0, DEFAULT_CONVERSATIONS);
    expect(first.some((c) => c.steps.some((step) => 'editPrompt' in step))).toBe(true);
    expect(first.some((c) => c.steps.some((step) => 'settings' in step))).toBe(true);
    expect(first.some((c) => c.steps.some((step) => 'say' in step && /steps/.test(step.say)))).toBe(true);
    expect(countTurns(EVAL_CONVERSATIONS.slice(0, 2))).toBe(3 + 3);
  });
});

describe('the family part of the report card', () => {
  it('counts the prompts in the family’s style and within its encoder’s budget', () => {
    const prompts = [
      'red fox, snow, dawn light, detailed fur',
      'A red fox stands in fresh snow at dawn, its breath visible in the cold air.',
      Array.from({ length: 90 }, (_, index) => `tag${index}`).join(', '),
    ];
    const turns = [...prompts.map((prompt) => turn('clean', 1, { prompt })), turn('clean', 1, { prompt: '' }), turn('clean', 1)];
    const sdxl = summariseTurns(turns, ABOUT);
    // The empty prompt and the turn without one are no prompts; the sentence is not SDXL's style, the 90 tags exceed 75 tokens.
    expect(sdxl.family).toEqual({ id: 'sdxl', prompts: 3, inStyle: 2, withinBudget: 2 });
    const flux = summariseTurns(turns, { ...ABOUT, family: 'flux' });
    expect(flux.family).toEqual({ id: 'flux', prompts: 3, inStyle: 1, withinBudget: 3 });
    expect(formatReport(sdxl)).toMatch(/^prompts written for SDXL\s+3$/m);
    expect(formatReport(sdxl)).toMatch(/^ {2}in its style\s+2\s+66\.7 %$/m);
    expect(formatReport(sdxl)).toMatch(/^ {2}within 75 CLIP tokens\s+2\s+66\.7 %$/m);
  });
});
