// Reads a V8 .cpuprofile (what `node --cpu-prof` writes) and sums self time per function and per module.

export interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: CpuProfileNode[];
  /** Microseconds. */
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  name: string;
  /** Where: a path inside the repository or a package, or a V8 pseudo-frame's name. */
  where: string;
  selfMs: number;
  /** Share of the busy time (everything but `(idle)`), 0–1. */
  share: number;
}

export interface ProfileSummary {
  /** Sampled time in the window, idle included. */
  totalMs: number;
  busyMs: number;
  functions: SelfTime[];
  modules: SelfTime[];
}

/** Self time per function and per module. A sample lasts until the next one, as Chrome's DevTools counts it. */
export function summariseProfile(profile: CpuProfile, root: string): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  let time = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    time += profile.timeDeltas[i] ?? 0;
    const end = i + 1 < profile.samples.length ? time + (profile.timeDeltas[i + 1] ?? 0) : profile.endTime;
    const id = profile.samples[i] as number;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, end - time));
  }
  const functions = new Map<string, { name: string; where: string; us: number }>();
  const modules = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)?.callFrame;
    if (!frame) continue;
    totalUs += us;
    if (frame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const where = describeLocation(frame, root);
    const name = frame.functionName || '(anonymous)';
    const key = `${name} ${where}`;
    const entry = functions.get(key) ?? { name, where, us: 0 };
    entry.us += us;
    functions.set(key, entry);
    const module = describeModule(frame, root);
    modules.set(module, (modules.get(module) ?? 0) + us);
  }
  const busyUs = totalUs - idleUs;
  const share = (us: number) => (busyUs > 0 ? us / busyUs : 0);
  return {
    totalMs: totalUs / 1000,
    busyMs: busyUs / 1000,
    functions: [...functions.values()]
      .sort((a, b) => b.us - a.us)
      .map((f) => ({ name: f.name, where: f.where, selfMs: f.us / 1000, share: share(f.us) })),
    modules: [...modules.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([name, us]) => ({ name, where: '', selfMs: us / 1000, share: share(us) })),
  };
}

function shortenUrl(url: string, root: string): string {
  const path = url.replace(/^file:\/\//, '');
  const packages = path.lastIndexOf('/node_modules/');
  if (packages !== -1) return path.slice(packages + '/node_modules/'.length);
  return path.startsWith(root) ? path.slice(root.length) : path;
}

function describeLocation(frame: CpuProfileNode['callFrame'], root: string): string {
  if (frame.url === '') return '';
  // lineNumber is 0-based. tsx's transform puts every function of a module on line 0: then it says nothing.
  return frame.lineNumber > 0 ? `${shortenUrl(frame.url, root)}:${frame.lineNumber + 1}` : shortenUrl(frame.url, root);
}

/**
 * A package (`hono`, `@hono/node-server`), Node's own code (`node:internal/streams`, by folder), one of
 * Easel's folders (`server/protocol`), or V8's pseudo-frames: `(garbage collector)`, `(program)`, and
 * `(native)` for frames without a script (built-ins such as JSON.parse or TextEncoder).
 */
export function describeModule(frame: CpuProfileNode['callFrame'], root: string): string {
  if (frame.url === '') return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  const path = shortenUrl(frame.url, root);
  if (frame.url.includes('/node_modules/')) {
    const [first = '', second = ''] = path.split('/');
    return first.startsWith('@') ? `${first}/${second}` : first;
  }
  if (path.startsWith('node:')) {
    const parts = path.split('/');
    return parts.length > 2 ? parts.slice(0, 2).join('/') : path.replace(/\.js$/, '');
  }
  const parts = path.split('/');
  return parts.length > 2 ? parts.slice(0, 2).join('/') : path;
}

/** A Markdown table of the first `count` rows. */
export function formatSelfTimes(rows: readonly SelfTime[], count: number, label: string): string {
  const lines = rows.slice(0, count).map((row, i) => {
    const where = row.where ? ` \`${row.where}\`` : '';
    return `| ${i + 1} | \`${row.name}\`${where} | ${row.selfMs.toFixed(0)} | ${(row.share * 100).toFixed(1)} % |`;
  });
  return [`| # | ${label} | self ms | share of busy CPU |`, '|---:|---|---:|---:|', ...lines].join('\n');
}
