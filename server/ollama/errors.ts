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

/**
 * Ollama refused a chat because the model cannot read the images sent with it. No Ollama checks the
 * `vision` capability before a chat (server/routes.go ChatHandler :2610-2638 @ fb30760 asks only for
 * completion, tools and thinking); the runner refuses, in the words of the version:
 * - fb30760 (v0.33.0-rc2): llama-server has no projector and answers "Multimodal data provided, but model
 *   does not support multimodal requests." (llama.cpp tools/server server-common.cpp), which Ollama relays
 *   with its status and its JSON body as the error text (llm/llama_server.go:1648-1654, :1782-1794;
 *   routes.go:2903, streamResponse :2116-2118); on the llama-server chat path, "image input is not supported";
 * - v0.12.6: a gemma3, mistral3, llama4, mllama or qwen25vl model without vision weights answers 500
 *   "Failed to create new sequence: failed to process inputs: this model is missing data required for image
 *   input" (model/model.go:29, runner/ollamarunner/runner.go:119-121, :862); other models ignored the images.
 */
export function isImageInputRefused(error: OllamaResponseError): boolean {
  return /does not support multimodal|image input is not supported|missing data required for image input/i.test(error.error);
}

export function describeCannotSeeImages(model: string): string {
  return (
    `The model "${model}" cannot see images, so Ollama refused the request with the picture. ` +
    'Choose a vision model such as gemma3 or llava as the vision model in Settings → Models or with --vision-model ' +
    '(pull one with `ollama pull gemma3`).'
  );
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
    if (isImageInputRefused(error)) {
      return new ChatModelError('bad_response', describeCannotSeeImages(model), { cause: error });
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
