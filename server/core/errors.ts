// Unexpected failures of an outside service: errors with a `name`, a `code` and a `cause`.

export type ChatModelErrorCode =
  | 'unreachable' // Ollama is not running / refused the connection
  | 'model_not_found' // the model is not pulled
  | 'stream_failed' // Ollama sent an {"error"} line mid-stream, a line that is no chat chunk or too long, or the connection broke
  | 'aborted' // our own signal aborted the request
  | 'bad_response'; // an HTTP error or a body we could not read

export class ChatModelError extends Error {
  override readonly name = 'ChatModelError';
  readonly code: ChatModelErrorCode;
  constructor(code: ChatModelErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export type ImageBackendErrorCode =
  | 'unreachable'
  | 'backend_error' // the backend answered with an error
  | 'timeout'
  | 'cancelled'
  | 'too_large' // the answer is larger than MAX_IMAGE_BYTES allows; it was not read whole
  | 'bad_response';

export class ImageBackendError extends Error {
  override readonly name = 'ImageBackendError';
  readonly code: ImageBackendErrorCode;
  constructor(code: ImageBackendErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export function isChatModelError(error: unknown): error is ChatModelError {
  return error instanceof ChatModelError;
}

export function isImageBackendError(error: unknown): error is ImageBackendError {
  return error instanceof ImageBackendError;
}

export const STORAGE_ERROR_CODES = [
  'full', // the disk holding the database is full (SQLITE_FULL)
  'read_only', // the database or its folder cannot be written (read-only file system, permissions)
  'gone', // the database file was deleted or replaced while Easel had it open
  'corrupt', // SQLite found the file damaged (SQLITE_CORRUPT, SQLITE_NOTADB)
  'failed', // any other failure of the database
] as const;

export type StorageErrorCode = (typeof STORAGE_ERROR_CODES)[number];

/** The conversation store failed; nothing of the transaction was kept. */
export class StorageError extends Error {
  override readonly name = 'StorageError';
  readonly code: StorageErrorCode;
  /** The database file, named in messages for a person. */
  readonly location: string;
  /** For 'gone': where Easel saved a copy of what it had, when it could. */
  readonly recoveredTo: string | undefined;
  /** For 'gone': another file is at the path now (moved over it), rather than none. */
  readonly replaced: boolean;
  constructor(code: StorageErrorCode, message: string, options: { location: string; recoveredTo?: string | undefined; replaced?: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.code = code;
    this.location = options.location;
    this.recoveredTo = options.recoveredTo;
    this.replaced = options.replaced ?? false;
  }
}

export function isStorageError(error: unknown): error is StorageError {
  return error instanceof StorageError;
}

/** A vanished or damaged database: the store logs it once, with its path, so its callers log nothing more. */
export function isLoggedByStore(error: unknown): boolean {
  return isStorageError(error) && (error.code === 'gone' || error.code === 'corrupt');
}
