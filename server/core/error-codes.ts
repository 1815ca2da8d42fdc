import { z } from 'zod';
import type { ImageBackendErrorCode } from './errors.ts';

/**
 * Every code an `error` event of a turn or an image carries (docs/API.md lists the same): what went wrong, for
 * scripts; the message beside it is for a person. A turn stored with an error keeps its code.
 */
export const TURN_ERROR_CODES = [
  'ollama_unreachable',
  'model_not_found',
  'ollama_stream_failed',
  'ollama_error',
  'ollama_first_token_timeout',
  'ollama_stall_timeout',
  'reply_too_long',
  'reply_truncated',
  'storage_full',
  'storage_read_only',
  'storage_failed',
  'not_found',
  'internal_error',
  'image_backend_missing',
  'image_cancelled',
  'image_unreachable',
  'image_backend_error',
  'image_timeout',
  'image_too_large',
  'image_bad_response',
  'image_disk_full',
  'image_save_failed',
  'image_seed_out_of_range',
  'image_cannot_vary',
  'image_source_unreadable',
  'image_failed',
  'vision_failed',
  'vision_bad_response',
  'vision_cancelled',
] as const;

export const turnErrorCodeSchema = z.enum(TURN_ERROR_CODES);
export type TurnErrorCode = z.infer<typeof turnErrorCodeSchema>;

/** An image backend's failure as the image's error code. */
export const IMAGE_BACKEND_FAILURES: Record<ImageBackendErrorCode, TurnErrorCode> = {
  unreachable: 'image_unreachable',
  backend_error: 'image_backend_error',
  timeout: 'image_timeout',
  cancelled: 'image_cancelled',
  too_large: 'image_too_large',
  bad_response: 'image_bad_response',
};
