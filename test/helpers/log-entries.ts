// A logger that keeps what it is told as entries (level, message, fields), for tests that check what was logged
// by its message and fields rather than by a formatted line.
import type { Logger } from '../../server/core/index.ts';

export interface LogEntry {
  level: 'debug' | 'info' | 'warn' | 'error';
  message: string;
  fields: Record<string, unknown> | undefined;
}

export function recordLog(): { logger: Logger; entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const keep = (level: LogEntry['level']) => (message: string, fields?: Record<string, unknown>) => void entries.push({ level, message, fields });
  return { logger: { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') }, entries };
}
