import type { LogLevel } from '../config/index.ts';

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** One line per entry: time, level, message, then the fields as JSON (easy to grep and to read). */
export function createLogger(options: { level: LogLevel; write: (line: string) => void; now?: () => Date }): Logger {
  const now = options.now ?? (() => new Date());
  const log = (level: LogLevel) => (message: string, fields?: Record<string, unknown>) => {
    if (ORDER[level] < ORDER[options.level]) return;
    const extra = fields && Object.keys(fields).length > 0 ? ` ${safeJson(fields)}` : '';
    options.write(`${now().toISOString()} ${level.toUpperCase().padEnd(5)} ${message}${extra}`);
  };
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

function safeJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v instanceof Error ? { name: v.name, message: v.message, cause: v.cause instanceof Error ? v.cause.message : v.cause } : v,
  );
}
