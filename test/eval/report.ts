// The report card's arithmetic, kept pure so the test suite can check every number exactly.
import { estimateEncoderTokens, FAMILY_STYLES, isInFamilyStyle, REPAIR_CODES, type ImageFamily } from '../../server/protocol/index.ts';

/** One model turn as the API's `done` event (and any `error`) described it. */
export interface TurnRecord {
  conversation: string;
  /** What the user said. */
  text: string;
  /** done.level: clean, metadata, reminder, compaction, reset, error or stopped. */
  level: string;
  /** done.attempts: model calls this turn. */
  attempts: number;
  repairs: string[];
  firstTokenMs: number | null;
  evalCount: number;
  tokensPerSecond: number;
  /** The `error` event's code, when the turn failed. */
  error?: string;
  /** The prompt of the turn's metadata (after Easel fitted it to the family). */
  prompt?: string;
}

export interface EvalReport {
  model: string;
  ollamaUrl: string;
  conversations: number;
  turns: number;
  /** Accepted at the first call, nothing repaired. */
  clean: number;
  /** Accepted at the first call after lossless repairs. */
  repaired: number;
  /** How many of the repaired turns needed each repair code (a turn may need several). */
  repairs: Record<string, number>;
  recovered: { metadata: number; reminder: number; compaction: number };
  resets: number;
  /** Turns that ended with an error (Ollama failed, a timeout…) or were stopped. */
  errors: number;
  /** Model calls per accepted turn (clean, repaired or recovered); null when none was accepted. */
  meanCallsPerAcceptedTurn: number | null;
  /** Time to the first word of each turn, in ms (nearest-rank percentiles); null when no turn had one. */
  firstTokenMs: { p50: number; p95: number } | null;
  /** All tokens generated over all generation time (done.evalCount ÷ done.tokensPerSecond per turn). */
  tokensPerSecond: number | null;
  /** Whether the prompts were written for the family: of the turns with a prompt, how many in its style and within its encoder's budget. */
  family: { id: ImageFamily; prompts: number; inStyle: number; withinBudget: number };
}

const ACCEPTED_LEVELS = new Set(['clean', 'metadata', 'reminder', 'compaction']);

/** The p-quantile by nearest rank: the smallest value with at least p of the values at or below it. */
export function quantile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new RangeError('quantile of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil(p * sorted.length));
  return sorted[rank - 1] as number;
}

export function summariseTurns(turns: readonly TurnRecord[], about: { model: string; ollamaUrl: string; conversations: number; family: ImageFamily }): EvalReport {
  const style = FAMILY_STYLES[about.family];
  const prompts = turns.flatMap((turn) => (turn.prompt === undefined || turn.prompt.trim() === '' ? [] : [turn.prompt]));
  const firstCall = turns.filter((turn) => turn.level === 'clean');
  const repairedTurns = firstCall.filter((turn) => turn.repairs.length > 0);
  const repairs: Record<string, number> = {};
  // REPAIR_CODES order first (the order repairs are applied in), then any code this version does not know.
  const codes = [...REPAIR_CODES, ...new Set(repairedTurns.flatMap((turn) => turn.repairs))].filter((code, index, all) => all.indexOf(code) === index);
  for (const code of codes) {
    const count = repairedTurns.filter((turn) => turn.repairs.includes(code)).length;
    if (count > 0) repairs[code] = count;
  }
  const count = (level: string) => turns.filter((turn) => turn.level === level).length;
  const accepted = turns.filter((turn) => ACCEPTED_LEVELS.has(turn.level));
  const firstTokens = turns.flatMap((turn) => (turn.firstTokenMs === null ? [] : [turn.firstTokenMs]));
  const timed = turns.filter((turn) => turn.tokensPerSecond > 0 && turn.evalCount > 0);
  const evalSeconds = timed.reduce((sum, turn) => sum + turn.evalCount / turn.tokensPerSecond, 0);
  return {
    ...about,
    turns: turns.length,
    clean: firstCall.length - repairedTurns.length,
    repaired: repairedTurns.length,
    repairs,
    recovered: { metadata: count('metadata'), reminder: count('reminder'), compaction: count('compaction') },
    resets: count('reset'),
    errors: count('error') + count('stopped'),
    meanCallsPerAcceptedTurn: accepted.length === 0 ? null : accepted.reduce((sum, turn) => sum + turn.attempts, 0) / accepted.length,
    firstTokenMs: firstTokens.length === 0 ? null : { p50: quantile(firstTokens, 0.5), p95: quantile(firstTokens, 0.95) },
    tokensPerSecond: evalSeconds > 0 ? timed.reduce((sum, turn) => sum + turn.evalCount, 0) / evalSeconds : null,
    family: {
      id: about.family,
      prompts: prompts.length,
      inStyle: prompts.filter((prompt) => isInFamilyStyle(prompt, style)).length,
      withinBudget: prompts.filter((prompt) => estimateEncoderTokens(prompt, style.encoder) <= style.tokenBudget).length,
    },
  };
}

/** The table `npm run eval` prints: one row per measure, counts with their share of all turns. */
export function formatReport(report: EvalReport): string {
  const share = (count: number) => (report.turns === 0 ? '' : `${((100 * count) / report.turns).toFixed(1).padStart(5)} %`);
  const ofPrompts = (count: number) => (report.family.prompts === 0 ? '' : `${((100 * count) / report.family.prompts).toFixed(1).padStart(5)} %`);
  const rows: Array<[string, string, string]> = [
    ['turns', String(report.turns), ''],
    ['clean', String(report.clean), share(report.clean)],
    ['repaired', String(report.repaired), share(report.repaired)],
    ...Object.entries(report.repairs).map(([code, count]): [string, string, string] => [`  ${code}`, String(count), '']),
    ['recovered: metadata only', String(report.recovered.metadata), share(report.recovered.metadata)],
    ['recovered: reminder', String(report.recovered.reminder), share(report.recovered.reminder)],
    ['recovered: compaction', String(report.recovered.compaction), share(report.recovered.compaction)],
    ['resets', String(report.resets), share(report.resets)],
    ['errors', String(report.errors), share(report.errors)],
    ['model calls per accepted turn', report.meanCallsPerAcceptedTurn === null ? '–' : report.meanCallsPerAcceptedTurn.toFixed(2), ''],
    ['first token p50 / p95', report.firstTokenMs === null ? '–' : `${formatMs(report.firstTokenMs.p50)} / ${formatMs(report.firstTokenMs.p95)}`, ''],
    ['tokens per second', report.tokensPerSecond === null ? '–' : report.tokensPerSecond.toFixed(1), ''],
    [`prompts written for ${FAMILY_STYLES[report.family.id].label}`, String(report.family.prompts), ''],
    ['  in its style', String(report.family.inStyle), ofPrompts(report.family.inStyle)],
    [`  within ${FAMILY_STYLES[report.family.id].tokenBudget} ${FAMILY_STYLES[report.family.id].encoder.toUpperCase()} tokens`, String(report.family.withinBudget), ofPrompts(report.family.withinBudget)],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  const valueWidth = Math.max(...rows.map(([, value]) => value.length));
  const heading = `${report.model} via ${report.ollamaUrl}: ${report.conversations} conversation${report.conversations === 1 ? '' : 's'}, ${report.turns} turns`;
  return [heading, '', ...rows.map(([label, value, percent]) => `${label.padEnd(width)}  ${value.padStart(valueWidth)}${percent ? `  ${percent}` : ''}`.trimEnd())].join('\n');
}

function formatMs(ms: number): string {
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** `[#######.......]  12/40 turns`: the progress line (stderr, only on a terminal). */
export function renderProgressBar(done: number, total: number, width = 30, unit = 'turns'): string {
  const fraction = total > 0 ? Math.min(1, Math.max(0, done / total)) : 1;
  const filled = Math.round(fraction * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} ${unit}`;
}

/** One check case as the vision model answered it: the check's events, its wall time, and the case's description. */
export interface CheckRecord {
  /** The case's name (checks.ts). */
  case: string;
  /** What the user asked for: the prompt the picture was made from. */
  request: string;
  /** The case's keywords: elements shown, elements planted as misses, the picture's main shape. */
  present: string[];
  planted: string[];
  shape: string;
  /** done.level of the check: clean (read at the first answer), reminder (asked again), error or stopped. */
  level: string;
  /** done.attempts: vision model calls. */
  attempts: number;
  /** The `error` event's code, when the check failed. */
  error?: string;
  /** The `critique` event's, when there was one. */
  matches?: string[];
  misses?: Array<{ element: string; evidence: string }>;
  revisedPrompt?: string;
  /** Wall time of the check request, from sending it to the stream's end. */
  ms: number;
  /** The case's picture described (POST …/describe). */
  describe: { level: string; attempts: number; error?: string; prompt?: string; subject?: string; ms: number };
}

export interface CheckReport {
  visionModel: string;
  ollamaUrl: string;
  checks: number;
  /** Checks whose critique was read at the first answer (clean), after a reminder, or not at all (failed, by error code). */
  format: { clean: number; reminder: number; failed: number; errors: Record<string, number> };
  /** Planted misses over all checks, and how many a miss of the critique named (its element mentions the keyword). */
  planted: { total: number; found: number };
  /** All misses the critiques listed, and those naming only elements the picture does show. */
  misses: number;
  falseMisses: number;
  /** Checks with a planted miss, and those whose revised prompt names every planted miss of its case. */
  revised: { withPlanted: number; namingEvery: number };
  /** Wall time per check, nearest-rank; null when no check ran. */
  secondsPerCheck: { p50: number; p95: number } | null;
  /** Descriptions asked for, read (clean or reminder), failed by error code, and those naming the picture's main shape. */
  describe: { runs: number; described: number; errors: Record<string, number>; namingShape: number };
}

/** Whether `text` names `keyword` as a word (a plural too): 'circles' names circle, 'semicircle' does not. */
export function mentions(text: string, keyword: string): boolean {
  const escaped = keyword.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`\\b${escaped}(?:e?s)?\\b`, 'i').test(text);
}

/** Whether a miss names a planted element: it counts as found. */
export function isPlantedMiss(element: string, check: Pick<CheckRecord, 'planted'>): boolean {
  return check.planted.some((keyword) => mentions(element, keyword));
}

/** A false miss: it names an element the picture shows and none that is planted ('circle' when the circle is there). */
export function isFalseMiss(element: string, check: Pick<CheckRecord, 'planted' | 'present'>): boolean {
  return !isPlantedMiss(element, check) && check.present.some((keyword) => mentions(element, keyword));
}

const READ_LEVELS = new Set(['clean', 'reminder']);

function countCodes(records: ReadonlyArray<{ level: string; error?: string }>): Record<string, number> {
  const errors: Record<string, number> = {};
  for (const record of records) {
    if (READ_LEVELS.has(record.level)) continue;
    const code = record.error ?? record.level;
    errors[code] = (errors[code] ?? 0) + 1;
  }
  return errors;
}

export function summariseChecks(records: readonly CheckRecord[], about: { visionModel: string; ollamaUrl: string }): CheckReport {
  const misses = records.flatMap((record) => (record.misses ?? []).map((miss) => ({ record, element: miss.element })));
  const withPlanted = records.filter((record) => record.planted.length > 0);
  const seconds = records.map((record) => record.ms / 1000);
  const read = (level: string) => records.filter((record) => record.level === level).length;
  const describes = records.map((record) => record.describe);
  return {
    ...about,
    checks: records.length,
    format: { clean: read('clean'), reminder: read('reminder'), failed: records.filter((record) => !READ_LEVELS.has(record.level)).length, errors: countCodes(records) },
    planted: {
      total: records.reduce((sum, record) => sum + record.planted.length, 0),
      found: records.reduce((sum, record) => sum + record.planted.filter((keyword) => (record.misses ?? []).some((miss) => mentions(miss.element, keyword))).length, 0),
    },
    misses: misses.length,
    falseMisses: misses.filter(({ record, element }) => isFalseMiss(element, record)).length,
    revised: {
      withPlanted: withPlanted.length,
      namingEvery: withPlanted.filter((record) => record.revisedPrompt !== undefined && record.planted.every((keyword) => mentions(record.revisedPrompt as string, keyword))).length,
    },
    secondsPerCheck: seconds.length === 0 ? null : { p50: quantile(seconds, 0.5), p95: quantile(seconds, 0.95) },
    describe: {
      runs: describes.length,
      described: describes.filter((describe) => READ_LEVELS.has(describe.level)).length,
      errors: countCodes(describes),
      namingShape: records.filter(({ describe, shape }) => READ_LEVELS.has(describe.level) && [describe.prompt ?? '', describe.subject ?? ''].some((text) => mentions(text, shape))).length,
    },
  };
}

/** The second table `npm run eval -- --vision-model NAME` prints, in formatReport's style. */
export function formatCheckReport(report: CheckReport): string {
  const shareOf = (total: number) => (count: number) => (total === 0 ? '' : `${((100 * count) / total).toFixed(1).padStart(5)} %`);
  const ofChecks = shareOf(report.checks);
  const codes = (errors: Record<string, number>, indent: string) => Object.entries(errors).map(([code, count]): [string, string, string] => [`${indent}${code}`, String(count), '']);
  const rows: Array<[string, string, string]> = [
    ['checks', String(report.checks), ''],
    ['format kept first time', String(report.format.clean), ofChecks(report.format.clean)],
    ['format kept after a reminder', String(report.format.reminder), ofChecks(report.format.reminder)],
    ['failed', String(report.format.failed), ofChecks(report.format.failed)],
    ...codes(report.format.errors, '  '),
    ['planted misses', String(report.planted.total), ''],
    ['  found', String(report.planted.found), shareOf(report.planted.total)(report.planted.found)],
    ['misses named', String(report.misses), ''],
    ['  false: only what the picture shows', String(report.falseMisses), shareOf(report.misses)(report.falseMisses)],
    ['revised prompts naming every planted miss', String(report.revised.namingEvery), shareOf(report.revised.withPlanted)(report.revised.namingEvery)],
    ['seconds per check p50 / p95', report.secondsPerCheck === null ? '–' : `${report.secondsPerCheck.p50.toFixed(1)} s / ${report.secondsPerCheck.p95.toFixed(1)} s`, ''],
    ['descriptions', String(report.describe.runs), ''],
    ['  naming the main shape', String(report.describe.namingShape), shareOf(report.describe.runs)(report.describe.namingShape)],
    ['  failed', String(report.describe.runs - report.describe.described), shareOf(report.describe.runs)(report.describe.runs - report.describe.described)],
    ...codes(report.describe.errors, '    '),
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  const valueWidth = Math.max(...rows.map(([, value]) => value.length));
  const heading = `${report.visionModel} via ${report.ollamaUrl}: ${report.checks} check${report.checks === 1 ? '' : 's'}, ${report.describe.runs} description${report.describe.runs === 1 ? '' : 's'}`;
  return [heading, '', ...rows.map(([label, value, percent]) => `${label.padEnd(width)}  ${value.padStart(valueWidth)}${percent ? `  ${percent}` : ''}`.trimEnd())].join('\n');
}
