import type { z } from 'zod';
import type { PaneView } from './pane.ts';

// What a service command answers: a value, or an expected failure with a code the HTTP edge maps to a status
// and a message for a person. Unexpected failures are thrown errors instead.

export const SERVICE_ERROR_CODES = ['not_found', 'busy', 'conflict', 'stale', 'invalid', 'unavailable', 'storage', 'bad_archive', 'too_large'] as const;
export type ServiceErrorCode = (typeof SERVICE_ERROR_CODES)[number];

export interface ServiceError {
  code: ServiceErrorCode;
  message: string;
  /** Field → message, for 'invalid'. */
  fields?: Record<string, string>;
  /** For 'storage': the documented code (storage_full, storage_read_only, storage_failed). */
  storageCode?: string;
  /** For 'stale': the pane as it stands now, for the page to show. */
  pane?: PaneView;
}

export type Result<T> = { ok: true; value: T } | { ok: false; error: ServiceError };
export type Refusal = { ok: false; error: ServiceError };

export function refuse(code: ServiceErrorCode, message: string, fields?: Record<string, string>): Refusal {
  return { ok: false, error: { code, message, ...(fields ? { fields } : {}) } };
}

export function notFound(id: string): Refusal {
  return refuse('not_found', `There is no conversation ${JSON.stringify(id)}. Start a new one.`);
}

export function busy(): Refusal {
  return refuse('busy', 'A reply is still being written in this conversation. Wait for it or press Stop.');
}

/** Zod's issues as one message and a field → message map; unknown keys are named as settings Easel does not know. */
export function invalid(error: z.ZodError, field?: string): Refusal {
  const fields: Record<string, string> = {};
  for (const issue of error.issues) {
    // Stryker disable next-line StringLiteral: the title, message and settings schemas are flat: a path has one element at most
    const key = issue.path.length > 0 ? issue.path.join('.') : (field ?? 'body');
    if (issue.code === 'unrecognized_keys') {
      for (const name of issue.keys) fields[name] = `${name} is not a setting Easel knows.`;
      continue;
    }
    fields[key] ??= issue.message;
  }
  const message = Object.entries(fields)
    .map(([key, text]) => (text.startsWith(key) ? text : `${key}: ${text}`))
    .join(' ');
  return refuse('invalid', message, fields);
}

/** The change was made from a pane older than the stored one: nothing changed, and here is the newer pane. */
export function stale(pane: PaneView): Refusal {
  return {
    ok: false,
    error: {
      code: 'stale',
      message: 'The prompt or settings were changed elsewhere (another tab or window) since this page showed them: nothing was changed. The newer ones are shown now; your text is kept so you can use it.',
      pane,
    },
  };
}

/**
 * `baseRevision`: the pane revision the change was made from. Absent: no check (scripts); otherwise a whole
 * number, and a change from any other revision than the stored one is refused as stale.
 */
export function readBaseRevision(value: unknown): Result<number | undefined> {
  if (value === undefined) return { ok: true, value: undefined };
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return { ok: true, value };
  return refuse('invalid', 'baseRevision must be the paneRevision the change was made from (a whole number).', { baseRevision: 'baseRevision must be a whole number.' });
}
