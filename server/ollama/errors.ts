// Turns whatever the `ollama` client or fetch threw into a ChatModelError that says what
// happened and what to run, keeping the original as `cause`.
import { ChatModelError, isChatModelError } from '../core/errors.ts';

/** The `ollama` package throws this class for HTTP errors but does not export it. */
export interface OllamaResponseError extends Error {
  error: string;
  status_code: number;
}

export function isOllamaResponseError(error: unknown): error is OllamaResponseError {
  return (
    error instanceof Error &&
    error.name === 'ResponseError' &&
    typeof (error as Partial<OllamaResponseError>).status_code === 'number'
  );
}

export const STREAM_ENDED_EARLY = 'Did not receive done or success response in stream.';

/** fetch (undici) rejects with `TypeError: fetch failed` and the socket error as `cause`. */
export function isConnectionFailure(error: unknown): boolean {
  return error instanceof TypeError && error.message === 'fetch failed';
}

export function isModelNotFound(error: OllamaResponseError): boolean {
  return error.status_code === 404 && /model/i.test(error.error) && /not found/i.test(error.error);
}

export function describeUnreachable(host: string): string {
  return `Ollama is not reachable at ${host}. Start it with \`ollama serve\` (or set --ollama-url).`;
}

export function describeModelMissing(model: string, installed: readonly string[] = []): string {
  const pull = `The model "${model}" is not pulled in Ollama. Run \`ollama pull ${model}\``;
  if (installed.length === 0) return `${pull}.`;
  const shown = installed.slice(0, 5).join(', ') + (installed.length > 5 ? ` and ${installed.length - 5} more` : '');
  return `${pull}, or choose one it has (${shown}) in Settings → Models or with --model.`;
}

function describeCause(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause;
  if (cause instanceof Error && cause.message && cause.message !== error.message) {
    return `${error.message}: ${cause.message}`;
  }
  return error.message;
}

export interface ErrorContext {
  host: string;
  model: string;
  /** 'stream' once Ollama has answered 200 and the reply is being read. */
  phase: 'request' | 'stream';
  /** What we were doing, for the message: "chat", "unload". */
  action: string;
  signal?: AbortSignal | undefined;
}

export function toChatModelError(error: unknown, context: ErrorContext): ChatModelError {
  if (isChatModelError(error)) return error;
  const { host, model, phase, action } = context;
  if (context.signal?.aborted) {
    return new ChatModelError(
      'aborted',
      `The ${action} request to Ollama was cancelled before it finished; send it again to retry.`,
      { cause: error },
    );
  }
  if (isOllamaResponseError(error)) {
    if (isModelNotFound(error)) {
      return new ChatModelError('model_not_found', describeModelMissing(model), { cause: error });
    }
    return new ChatModelError(
      'bad_response',
      `Ollama at ${host} refused the ${action} request with HTTP ${error.status_code}: ${error.error}. ` +
        'Check the Ollama logs, and that --ollama-url points at Ollama.',
      { cause: error },
    );
  }
  if (phase === 'stream') {
    if (error instanceof TypeError) {
      return new ChatModelError(
        'stream_failed',
        `The connection to Ollama at ${host} broke in the middle of the reply (${describeCause(error)}). ` +
          'Check that Ollama is still running, then try again.',
        { cause: error },
      );
    }
    if (error instanceof Error && error.message === STREAM_ENDED_EARLY) {
      return new ChatModelError(
        'stream_failed',
        `Ollama at ${host} ended the reply before saying it was done. Check the Ollama logs, then try again.`,
        { cause: error },
      );
    }
    // The client turns an {"error": "…"} line into a plain Error carrying Ollama's words.
    return new ChatModelError(
      'stream_failed',
      `Ollama stopped the reply with an error: ${describeCause(error)}. ` +
        'Try again; if it keeps happening, check the Ollama logs (`ollama serve` output).',
      { cause: error },
    );
  }
  if (isConnectionFailure(error)) {
    return new ChatModelError('unreachable', describeUnreachable(host), { cause: error });
  }
  return new ChatModelError(
    'bad_response',
    `Ollama at ${host} sent a ${action} reply that could not be read (${describeCause(error)}). ` +
      'Check that --ollama-url points at Ollama and that Ollama is up to date.',
    { cause: error },
  );
}

/** A reply line past the line cap (MAX_OLLAMA_LINE_CHARS): `ended` when its newline had arrived. */
export function overlongLineError(host: string, maxChars: number, ended: boolean): ChatModelError {
  const size = `${maxChars.toLocaleString('en')} characters`;
  return new ChatModelError(
    'stream_failed',
    `Ollama at ${host} sent a reply line longer than ${size}${ended ? '' : ' without ending it'}; ` +
      'no line of a real Ollama reply comes near that, so Easel stopped reading the reply. The text shown so far is kept. ' +
      'Check that --ollama-url points at Ollama itself (not another server, or a proxy that changes its replies), then try again.',
  );
}

/** A reply line that is not a chat chunk (`why` says how); at most 200 characters of it are quoted. */
export function unreadableLineError(host: string, line: string, why: string): ChatModelError {
  const quoted = `${JSON.stringify(line.slice(0, 200))}${line.length > 200 ? '…' : ''}`;
  return new ChatModelError(
    'stream_failed',
    `Ollama at ${host} sent a reply line Easel cannot read (${why}): ${quoted}. ` +
      'Easel stopped reading the reply there; the text shown so far is kept. ' +
      'Check that --ollama-url points at Ollama, update Ollama if it is old, and look at its log (`ollama serve` output) for what went wrong.',
  );
}
