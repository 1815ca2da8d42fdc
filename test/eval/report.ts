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
export function renderProgressBar(done: number, total: number, width = 30): string {
  const fraction = total > 0 ? Math.min(1, Math.max(0, done / total)) : 1;
  const filled = Math.round(fraction * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} turns`;
}
