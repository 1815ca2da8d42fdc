import type { z } from 'zod';

// What a service command answers: a value, or an expected failure with a code the HTTP edge maps to a status
// and a message for a person. Unexpected failures are thrown errors instead.

export const SERVICE_ERROR_CODES = ['not_found', 'busy', 'conflict', 'invalid', 'unavailable', 'storage', 'bad_archive', 'too_large'] as const;
export type ServiceErrorCode = (typeof SERVICE_ERROR_CODES)[number];

export interface ServiceError {
  code: ServiceErrorCode;
  message: string;
  /** Field → message, for 'invalid'. */
  fields?: Record<string, string>;
  /** For 'storage': the documented code (storage_full, storage_read_only, storage_failed). */
  storageCode?: string;
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
