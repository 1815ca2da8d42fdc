import type { TurnErrorCode } from './error-codes.ts';
// How long one model call may stay silent. Ollama sends nothing at all (not even HTTP headers) while
// it loads a model, so without these limits a stuck load or a hung runner waits forever. A pure
// policy says which limit applies and what the person reads; a small timer enforces it.
import type { ChatChunk } from './ports.ts';

export interface ReplyTimeouts {
  /** Milliseconds from the request until the model's first line (loading + reading the prompt); 0 waits forever. */
  firstTokenMs: number;
  /** Milliseconds allowed between two lines once the reply runs; 0 waits forever. */
  stallMs: number;
  /** Milliseconds of silence before the first line after which the person is told what is happening. */
  statusAfterMs: number;
}

export const DEFAULT_REPLY_TIMEOUTS: ReplyTimeouts = { firstTokenMs: 300_000, stallMs: 120_000, statusAfterMs: 2_000 };

export type ReplyTimeoutKind = 'first_token' | 'stall';

/** Thrown by a model call that passed a limit: the request to Ollama was aborted. */
export class ReplyTimeoutError extends Error {
  override readonly name = 'ReplyTimeoutError';
  readonly kind: ReplyTimeoutKind;
  readonly ms: number;
  constructor(kind: ReplyTimeoutKind, ms: number) {
    super(`no ${kind === 'first_token' ? 'first token' : 'token'} from the model within ${ms} ms`);
    this.kind = kind;
    this.ms = ms;
  }
}

export function isReplyTimeoutError(error: unknown): error is ReplyTimeoutError {
  return error instanceof ReplyTimeoutError;
}

/** Pure: the limit that applies now (before the first line, or between lines), undefined when none does. */
export function selectReplyLimit(linesSeen: boolean, timeouts: Pick<ReplyTimeouts, 'firstTokenMs' | 'stallMs'>): { kind: ReplyTimeoutKind; ms: number } | undefined {
  const ms = linesSeen ? timeouts.stallMs : timeouts.firstTokenMs;
  return ms > 0 ? { kind: linesSeen ? 'stall' : 'first_token', ms } : undefined;
}

/**
 * Pure: the status line shown while the model has not started answering. `loaded` is what Ollama's
 * /api/ps said when the turn began (false: it has to load the model first; undefined: unknown).
 */
export function describeSlowStart(model: string, loaded: boolean | undefined): string {
  return loaded === false ? `Loading ${model}…` : `Waiting for ${model} to start answering…`;
}

/** Pure: the error a person reads when a limit passed. Ollama did answer, so it never says `ollama serve`. */
export function describeReplyTimeout(
  error: Pick<ReplyTimeoutError, 'kind' | 'ms'>,
  context: { model: string; loaded: boolean | undefined },
): { code: TurnErrorCode; message: string } {
  const { model } = context;
  const time = formatSeconds(error.ms);
  if (error.kind === 'first_token') {
    const what =
      context.loaded === false
        ? `Ollama took longer than ${time} to load ${model} and start answering, so Easel stopped waiting.`
        : `${model} did not start answering within ${time}: Ollama took too long to load it or to read the conversation, so Easel stopped waiting.`;
    return {
      code: 'ollama_first_token_timeout',
      message:
        `${what} Try a smaller model (--model), check with \`ollama ps\` that it fits in GPU memory, ` +
        `or allow more time with --first-token-timeout. Your message is kept: press Retry.`,
    };
  }
  return {
    code: 'ollama_stall_timeout',
    message:
      `${model} stopped sending in the middle of its reply: nothing arrived for ${time}, so Easel stopped waiting. ` +
      'Check `ollama ps` and the GPU memory (the model may have been pushed out of it) and the Ollama log, try a smaller model (--model), ' +
      'or allow more time with --stall-timeout. What arrived is kept, and your message too: press Retry.',
  };
}

function formatSeconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

export interface ReplyWatchdog {
  /** Aborted, with a ReplyTimeoutError as reason, when a limit passes. */
  readonly signal: AbortSignal;
  /** The limit that passed, if one did. */
  readonly expired: ReplyTimeoutError | undefined;
  /** Call for every line the model sends: the first switches to the between-lines limit, later ones restart it. */
  sawLine(): void;
  /** Call when the call ends, however it ends. */
  stop(): void;
}

/** Starts timing one model call. Runs on its own timer, so it fires even while nobody pulls the stream. */
export function startReplyWatchdog(timeouts: Pick<ReplyTimeouts, 'firstTokenMs' | 'stallMs'>): ReplyWatchdog {
  const controller = new AbortController();
  let expired: ReplyTimeoutError | undefined;
  let linesSeen = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    const limit = selectReplyLimit(linesSeen, timeouts);
    if (!limit) return;
    timer = setTimeout(() => {
      expired = new ReplyTimeoutError(limit.kind, limit.ms);
      controller.abort(expired);
    }, limit.ms);
  };
  arm();
  return {
    signal: controller.signal,
    get expired() {
      return expired;
    },
    sawLine() {
      if (expired) return;
      // Stryker disable next-line ConditionalExpression,BlockStatement: a new timer for the same limit keeps the same deadline
      if (linesSeen) {
        // Same limit again: re-arm the existing timer instead of making one per token.
        timer?.refresh();
        return;
      }
      linesSeen = true;
      clearTimeout(timer);
      timer = undefined;
      arm();
    },
    stop() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}

/**
 * Passes a model's chunks through. When the first one has not come within `afterMs`, asks `describe`
 * for a status line and, unless the first chunk beats it, yields it first as `{ type: 'slow', message }`.
 * Stopping early stops the inner stream too.
 */
export async function* markSlowStart(
  chunks: AsyncIterable<ChatChunk>,
  options: { afterMs: number; describe: () => Promise<string> },
): AsyncGenerator<ChatChunk | { type: 'slow'; message: string }> {
  const iterator = chunks[Symbol.asyncIterator]();
  let finished = false;
  try {
    const first = iterator.next();
    if (options.afterMs > 0) {
      // A rejection of `first` is handled below, where it is awaited.
      const arrived = first.then(() => ({ kind: 'chunk' as const }), () => ({ kind: 'chunk' as const }));
      let timer: NodeJS.Timeout | undefined;
      const slow = new Promise<{ kind: 'slow' }>((resolve) => (timer = setTimeout(() => resolve({ kind: 'slow' }), options.afterMs)));
      const waited = await Promise.race([arrived, slow]);
      clearTimeout(timer);
      if (waited.kind === 'slow') {
        const status = await Promise.race([arrived, options.describe().then((message) => ({ kind: 'status' as const, message }))]);
        if (status.kind === 'status') yield { type: 'slow', message: status.message };
      }
    }
    for (let step = await first; !step.done; step = await iterator.next()) yield step.value;
    // Stryker disable next-line BooleanLiteral: return() on an inner stream that has ended does nothing
    finished = true;
  } finally {
    // Not awaited: while a next() is pending (the mark was just yielded), return() would wait for it.
    // Stryker disable next-line ConditionalExpression: return() on an inner stream that has ended does nothing
    if (!finished) void iterator.return?.()?.catch(() => undefined);
  }
}
