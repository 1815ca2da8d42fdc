// Small statistics and the result table of `npm run bench`.

/** The q-quantile (0–1) of the values, linearly interpolated; NaN for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * Math.min(1, Math.max(0, q));
  const low = Math.floor(at);
  const high = Math.ceil(at);
  const lowValue = sorted[low] as number;
  return lowValue + ((sorted[high] as number) - lowValue) * (at - low);
}

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** A figure of the table: the median of its rounds, judged against its target (none: shown for information). */
export interface Figure {
  name: string;
  /** One value per round; the figure is their median. */
  rounds: number[];
  unit: string;
  /** 'max': the value must be ≤ limit; 'min': ≥ limit; 'range': within [limit, upper]. Undefined: information only. */
  target?: { kind: 'max' | 'min'; limit: number } | { kind: 'range'; limit: number; upper: number };
  /** Said after the target, e.g. why. */
  note?: string;
}

export interface JudgedFigure extends Figure {
  value: number;
  status: 'ok' | 'MISSED' | 'info';
}

export function judge(figure: Figure): JudgedFigure {
  const value = median(figure.rounds);
  const { target } = figure;
  if (!target) return { ...figure, value, status: 'info' };
  const within = target.kind === 'range' ? value >= target.limit && value <= target.upper : target.kind === 'max' ? value <= target.limit : value >= target.limit;
  const ok = Number.isFinite(value) && within;
  return { ...figure, value, status: ok ? 'ok' : 'MISSED' };
}

export function describeTarget(figure: Figure): string {
  const { target, unit } = figure;
  if (!target) return '';
  const u = unit === '×' ? '' : ` ${unit}`;
  if (target.kind === 'range') return `${target.limit}–${target.upper}${u}`;
  return `${target.kind === "max" ? "≤" : "≥"} ${target.limit}${u}`;
}

/** Three significant digits, no exponent; thousands grouped with a thin space. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const magnitude = Math.abs(value);
  const digits = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3;
  const fixed = value.toFixed(digits);
  const [whole = '', fraction] = fixed.split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
  return fraction === undefined ? grouped : `${grouped}.${fraction}`;
}

/** The table: status, figure, median with its unit, the rounds' spread, the target. */
export function formatTable(figures: readonly JudgedFigure[]): string {
  const rows = figures.map((f) => {
    const spread = f.rounds.length > 1 ? `${formatNumber(Math.min(...f.rounds))}–${formatNumber(Math.max(...f.rounds))}` : '';
    return [f.status, f.name, `${formatNumber(f.value)} ${f.unit}`, spread, describeTarget(f) + (f.note ? `  (${f.note})` : '')];
  });
  const header = ['status', 'figure', 'median', `rounds min–max`, 'target'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === 2 || i === 3 ? cell.padStart(widths[i] ?? 0) : i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** The same table as Markdown, for docs/BENCHMARKS.md. */
export function formatMarkdown(figures: readonly JudgedFigure[]): string {
  const rows = figures.map((f) => {
    const spread = f.rounds.length > 1 ? `${formatNumber(Math.min(...f.rounds))}–${formatNumber(Math.max(...f.rounds))}` : '';
    return `| ${f.name} | ${formatNumber(f.value)} ${f.unit} | ${spread} | ${describeTarget(f) || '—'} | ${f.status} |`;
  });
  return ['| figure | median | rounds min–max | target | status |', '|---|---:|---:|---|---|', ...rows].join('\n');
}

/** The least sum of `width` consecutive values (a quiet stretch among per-second readings); NaN when there are fewer. */
export function quietestSum(values: readonly number[], width: number): number {
  let least = Number.NaN;
  for (let start = 0; start + width <= values.length; start++) {
    let sum = 0;
    for (let i = start; i < start + width; i++) sum += values[i] as number;
    if (!(sum >= least)) least = sum;
  }
  return least;
}
