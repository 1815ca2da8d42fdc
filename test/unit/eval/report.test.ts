// The report card's arithmetic, on hand-made turns with known answers.
import { describe, expect, it } from 'vitest';
import { countTurns, DEFAULT_CONVERSATIONS, EVAL_CONVERSATIONS, LIVE_CONVERSATIONS } from '../../eval/conversations.ts';
import {
  formatCheckReport,
  formatReport,
  isFalseMiss,
  isPlantedMiss,
  mentions,
  quantile,
  renderProgressBar,
  summariseChecks,
  summariseTurns,
  type CheckRecord,
  type TurnRecord,
} from '../../eval/report.ts';

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

function checked(planted: string[], present: string[], extra: Partial<CheckRecord> = {}): CheckRecord {
  return {
    case: 'c',
    request: 'r',
    present,
    planted,
    shape: 'circle',
    level: 'clean',
    attempts: 1,
    matches: [],
    misses: [],
    revisedPrompt: '',
    ms: 1000,
    describe: { level: 'clean', attempts: 1, prompt: 'a red circle', subject: 'a circle', ms: 500 },
    ...extra,
  };
}

const miss = (element: string) => ({ element, evidence: 'not there' });
const VISION = { visionModel: 'gemma3:4b', ollamaUrl: 'http://127.0.0.1:11434' };

describe('the check part of the report card: which miss names what', () => {
  it('mentions a keyword as a word, its plural too, in any case; not inside another word', () => {
    expect(mentions('a green Triangle', 'triangle')).toBe(true);
    expect(mentions('two circles', 'circle')).toBe(true);
    expect(mentions('three boxes', 'box')).toBe(true);
    expect(mentions('a semicircle', 'circle')).toBe(false);
    expect(mentions('circled', 'circle')).toBe(false);
    expect(mentions('a reddish glow', 'red')).toBe(false);
    // A keyword is taken literally, not as a pattern.
    expect(mentions('a red dot', 'r.d')).toBe(false);
    expect(mentions('a r.d dot', 'r.d')).toBe(true);
  });

  it('a miss is found when it names a planted keyword, false when it names only what the picture shows', () => {
    const check = { planted: ['triangle'], present: ['red', 'circle'] };
    expect(isPlantedMiss('green triangle', check)).toBe(true);
    expect(isFalseMiss('green triangle', check)).toBe(false);
    // Naming a shown element beside the planted one is still the planted miss.
    expect(isFalseMiss('a triangle beside the red circle', check)).toBe(false);
    expect(isPlantedMiss('red circle', check)).toBe(false);
    expect(isFalseMiss('red circle', check)).toBe(true);
    // Naming neither is neither.
    expect(isPlantedMiss('soft shadows', check)).toBe(false);
    expect(isFalseMiss('soft shadows', check)).toBe(false);
  });
});

describe('summariseChecks', () => {
  const records: CheckRecord[] = [
    // Nothing planted; one false miss (the circle is there) and one naming nothing known.
    checked([], ['red', 'circle'], { misses: [miss('the red circle'), miss('soft shadows')], revisedPrompt: 'red circle', ms: 4000 }),
    // The triangle found after a reminder; the revised prompt names it.
    checked(['triangle'], ['red', 'circle'], { level: 'reminder', attempts: 2, misses: [miss('green triangle')], revisedPrompt: 'red circle, green triangle', ms: 1000 }),
    // Two planted, one found; the revised prompt names only one; the description names another shape.
    checked(['circle', 'yellow'], ['blue', 'square'], {
      misses: [miss('yellow circle'), miss('blue square')],
      revisedPrompt: 'blue square, round shape, yellow',
      ms: 3000,
      shape: 'square',
      describe: { level: 'clean', attempts: 1, prompt: 'a blue box', subject: 'a box', ms: 100 },
    }),
    // The critique unreadable twice; the description failed too.
    checked(['blue'], ['square'], {
      level: 'error',
      attempts: 2,
      error: 'vision_bad_response',
      misses: undefined,
      matches: undefined,
      revisedPrompt: undefined,
      ms: 2000,
      describe: { level: 'error', attempts: 2, error: 'vision_bad_response', ms: 100 },
    }),
    // Ollama failed; the description names the shape in its subject alone, after a reminder.
    checked(['three'], ['purple', 'square'], {
      level: 'error',
      attempts: 1,
      error: 'vision_failed',
      misses: undefined,
      revisedPrompt: undefined,
      ms: 5000,
      shape: 'square',
      describe: { level: 'reminder', attempts: 2, prompt: 'purple', subject: 'two purple squares', ms: 100 },
    }),
    // Stopped without an error code; the description was cancelled.
    checked([], ['green', 'triangle'], { level: 'stopped', attempts: 0, misses: undefined, revisedPrompt: undefined, ms: 6000, describe: { level: 'stopped', attempts: 0, error: 'vision_cancelled', ms: 100 } }),
  ];

  it('counts the format kept, the planted misses found, the false misses, the revised prompts and the time', () => {
    const report = summariseChecks(records, VISION);
    expect(report).toEqual({
      ...VISION,
      checks: 6,
      format: { clean: 2, reminder: 1, failed: 3, errors: { vision_bad_response: 1, vision_failed: 1, stopped: 1 } },
      // triangle (found), circle (found), yellow (found in 'yellow circle'), blue, three: 5 planted, 3 found.
      planted: { total: 5, found: 3 },
      misses: 5,
      // 'the red circle' (case 1) and 'blue square' (case 3): only what the picture shows.
      falseMisses: 2,
      // Four checks planted something; only the triangle's revised prompt names all of its case's.
      revised: { withPlanted: 4, namingEvery: 1 },
      // 1, 2, 3, 4, 5, 6 s: p50 the 3rd, p95 the 6th.
      secondsPerCheck: { p50: 3, p95: 6 },
      // Read: cases 1, 2, 3, 5; naming: 'a red circle' (1, 2) and 'two purple squares' (5); 'a box' is not a square.
      describe: { runs: 6, described: 4, errors: { vision_bad_response: 1, vision_cancelled: 1 }, namingShape: 3 },
    });
  });

  it('says "none" rather than dividing by zero', () => {
    const report = summariseChecks([], VISION);
    expect(report).toMatchObject({ checks: 0, planted: { total: 0, found: 0 }, revised: { withPlanted: 0, namingEvery: 0 }, secondsPerCheck: null });
    const table = formatCheckReport(report);
    expect(table).toMatch(/^seconds per check p50 \/ p95\s+–$/m);
    expect(table).toMatch(/^format kept first time\s+0$/m);
    expect(table).toMatch(/^ {2}found\s+0$/m);
  });

  it('prints a second table in the first one\'s style: one row per measure with its share', () => {
    const table = formatCheckReport(summariseChecks(records, VISION));
    const lines = table.split('\n');
    expect(lines[0]).toBe('gemma3:4b via http://127.0.0.1:11434: 6 checks, 6 descriptions');
    expect(lines[1]).toBe('');
    expect(table).toMatch(/^checks\s+6$/m);
    expect(table).toMatch(/^format kept first time\s+2\s+33\.3 %$/m);
    expect(table).toMatch(/^format kept after a reminder\s+1\s+16\.7 %$/m);
    expect(table).toMatch(/^failed\s+3\s+50\.0 %$/m);
    expect(table).toMatch(/^ {2}vision_bad_response\s+1$/m);
    expect(table).toMatch(/^ {2}stopped\s+1$/m);
    expect(table).toMatch(/^planted misses\s+5$/m);
    expect(table).toMatch(/^ {2}found\s+3\s+60\.0 %$/m);
    expect(table).toMatch(/^misses named\s+5$/m);
    expect(table).toMatch(/^ {2}false: only what the picture shows\s+2\s+40\.0 %$/m);
    expect(table).toMatch(/^revised prompts naming every planted miss\s+1\s+25\.0 %$/m);
    expect(table).toMatch(/^seconds per check p50 \/ p95\s+3\.0 s \/ 6\.0 s$/m);
    expect(table).toMatch(/^descriptions\s+6$/m);
    expect(table).toMatch(/^ {2}naming the main shape\s+3\s+50\.0 %$/m);
    expect(table).toMatch(/^ {2}failed\s+2\s+33\.3 %$/m);
    expect(table).toMatch(/^ {4}vision_cancelled\s+1$/m);
    // The values line up in one column, as in the first table.
    const valueEnds = lines.slice(2).map((line) => line.replace(/\s+\d+\.\d %$/, '').length);
    expect(new Set(valueEnds).size).toBe(1);
    expect(summariseChecks(records.slice(0, 1), VISION).checks).toBe(1);
    expect(formatCheckReport(summariseChecks(records.slice(0, 1), VISION)).split('\n')[0]).toBe('gemma3:4b via http://127.0.0.1:11434: 1 check, 1 description');
  });

  it('the progress bar names what it counts', () => {
    expect(renderProgressBar(3, 8, 8, 'checks')).toBe('[###.....] 3/8 checks');
  });
});
