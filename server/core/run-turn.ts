import type { TurnErrorCode } from './error-codes.ts';
import {
  buildCompactionRequest,
  buildMetadataReminder,
  buildMetadataRequest,
  buildReminderRequest,
  collectUserWords,
  COMPACTION_OPTIONS,
  createWithholder,
  MAX_REPLY_CHARS,
  metadataJsonSchema,
  buildSystemPrompt,
  fitMetadataToFamily,
  type FamilyStyle,
  METADATA_OPTIONS,
  NEUTRAL_FALLBACK_TEXT,
  parseMetadataReply,
  parseWithheld,
  planRecovery,
  renderContext,
  RESET_MESSAGE,
  type ContextEntry,
  type FailedReply,
  type Metadata,
  type WithheldReply,
} from '../protocol/index.ts';
import type { NewTurn } from './conversation.ts';
import { isChatModelError, type ChatModelError } from './errors.ts';
import type { DoneEvent, TurnEvent } from './events.ts';
import type { Logger } from './logger.ts';
import type { ChatMessage, ChatModel, ChatRequest } from './ports.ts';
import {
  describeReplyTimeout,
  describeSlowStart,
  isReplyTimeoutError,
  markSlowStart,
  startReplyWatchdog,
  type ReplyTimeouts,
} from './reply-watchdog.ts';
import type { Settings } from './settings.ts';

export interface TurnInput {
  /** The working context of this turn, its user's message last (appendUserEntry): computed once, by the caller that stores it. */
  context: ContextEntry[];
  prompt: string;
  settings: Settings;
  signal: AbortSignal;
  /** The family of the checkpoint that will paint: the system prompt asks for its style, and its metadata is fitted to it. */
  family?: FamilyStyle;
}

export interface TurnOutcome {
  turn: NewTurn;
  context: ContextEntry[];
  metadata?: Metadata;
  done: DoneEvent;
}

export interface TurnDeps {
  llm: ChatModel;
  logger: Logger;
  now: () => number;
  numCtx: number;
  conversationId: string;
  timeouts: ReplyTimeouts;
}

interface AttemptResult {
  raw: string;
  shown: string;
  /** The withholder's split of a streamed reply (null for a metadata-only call): parsed as it is. */
  split: WithheldReply | null;
  doneReason: string;
  /** True when the reply ran past MAX_REPLY_CHARS and was stopped there. */
  capped: boolean;
}

/** The working context is stored whole (renderContext trims per request); this only bounds its size on disk. */
const MAX_STORED_ENTRIES = 400;

/**
 * One turn: stream the reply (withholding the metadata), then climb the recovery ladder until a reply
 * parses: reminder ×2 (the first asks for the metadata alone when the text can be kept) → compaction ×1
 * → reset. At most 4 model calls. Yields TurnEvents and returns what to store.
 */
export async function* runTurn(deps: TurnDeps, input: TurnInput): AsyncGenerator<TurnEvent, TurnOutcome> {
  const startedAt = deps.now();
  const stats = { attempts: 0, evalCount: 0, evalDurationNs: 0, firstTokenAt: null as number | null };
  const turnContext = input.context;
  const systemPrompt = buildSystemPrompt(input.family);
  const baseMessages = renderContext(turnContext, { numCtx: deps.numCtx, systemPrompt });
  // The conversation's own chat model, or --model.
  const model = input.settings.chatModel ?? deps.llm.model;
  const history: Array<{ messages: ChatMessage[]; reply: string }> = [];
  let level: DoneEvent['level'] = 'clean';
  let truncated = false;
  // Stryker disable next-line StringLiteral: set before it is read (the first call clears it)
  let shownSoFar = '';
  let previousShown = '';
  // Asked as the turn starts, before the request: once Ollama begins a load, /api/ps either lists the
  // model already (v0.12.6 server/sched.go:481 adds the runner before WaitUntilRunning at :487) or, in
  // newer versions, blocks until the load ends (sched.go loadedModels takes each runner's refMu, held
  // for the whole load). Only the answer from before the load tells "loading" from "thinking".
  let loaded: boolean | undefined;
  const loadedCheck = deps.llm.isLoaded(input.signal, model).then(
    (value) => (loaded = value),
    () => undefined,
  );

  const done = (doneLevel: DoneEvent['level'], repairs: string[] = []): DoneEvent => ({
    type: 'done',
    attempts: stats.attempts,
    repairs,
    level: doneLevel,
    evalCount: stats.evalCount,
    tokensPerSecond: stats.evalDurationNs > 0 ? round(stats.evalCount / (stats.evalDurationNs / 1e9), 1) : 0,
    firstTokenMs: stats.firstTokenAt === null ? null : stats.firstTokenAt - startedAt,
  });

  /**
   * One model call: streams the visible text; the watchdog aborts it when the model stays silent too long.
   * A `silent` call (the metadata alone) shows nothing and leaves the text shown so far as it is.
   */
  // Stryker disable next-line BooleanLiteral: every call passes silent
  async function* streamAttempt(request: ChatRequest, silent = false): AsyncGenerator<TurnEvent, AttemptResult> {
    stats.attempts++;
    if (!silent) shownSoFar = '';
    const withholder = createWithholder();
    let silentRaw = '';
    // Stryker disable next-line StringLiteral: set before it is read (Ollama's last line, or the cap)
    let doneReason = 'stop';
    let rawChars = 0;
    let capped = false;
    const watchdog = startReplyWatchdog(deps.timeouts);
    const call = new AbortController();
    const abortCall = (reason: unknown) => call.abort(reason);
    const onUserAbort = () => abortCall(input.signal.reason);
    const onTimeout = () => abortCall(watchdog.signal.reason);
    if (input.signal.aborted) onUserAbort();
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: the listener is removed in finally
    input.signal.addEventListener('abort', onUserAbort, { once: true });
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: the listener is removed in finally
    watchdog.signal.addEventListener('abort', onTimeout, { once: true });
    try {
      // A later attempt follows a reply, so the model is in memory by then.
      const describe = async () => describeSlowStart(model, stats.attempts > 1 ? true : await loadedCheck);
      const chunks = markSlowStart(deps.llm.chat({ ...request, model, signal: call.signal }), { afterMs: deps.timeouts.statusAfterMs, describe });
      for await (const chunk of chunks) {
        if (chunk.type === 'slow') {
          yield { type: 'status', message: chunk.message };
          continue;
        }
        watchdog.sawLine();
        if (chunk.type === 'alive') continue;
        if (chunk.type === 'text') {
          stats.firstTokenAt ??= deps.now();
          // A runaway reply is cut at the cap; leaving the loop hangs up on Ollama.
          // Stryker disable next-line EqualityOperator: a chunk that fills the cap exactly is sliced to itself
          const text = chunk.text.length > MAX_REPLY_CHARS - rawChars ? chunk.text.slice(0, MAX_REPLY_CHARS - rawChars) : chunk.text;
          rawChars += text.length;
          // Stryker disable next-line ConditionalExpression: the raw text is read only from a silent call
          if (silent) silentRaw += text;
          const visible = silent ? '' : withholder.push(text);
          if (visible) {
            shownSoFar += visible;
            yield { type: 'delta', text: visible };
          }
          if (text.length < chunk.text.length) {
            capped = true;
            break;
          }
        } else {
          doneReason = chunk.doneReason;
          stats.evalCount += chunk.evalCount;
          stats.evalDurationNs += chunk.evalDurationNs;
        }
      }
    } catch (error) {
      // The user's Stop wins over a limit that passed at the same moment.
      if (watchdog.expired && !input.signal.aborted) throw watchdog.expired;
      // Stryker disable BlockStatement: the finally below emptied: the call has ended, so a late abort of its controller changes nothing
      throw error;
    } finally {
      // Stryker restore BlockStatement
      watchdog.stop();
      // Stryker disable next-line StringLiteral: resources only: the call has ended, so a late abort changes nothing
      input.signal.removeEventListener('abort', onUserAbort);
      // Stryker disable next-line StringLiteral: resources only: the call has ended, so a late abort changes nothing
      watchdog.signal.removeEventListener('abort', onTimeout);
    }
    // Stryker disable next-line StringLiteral: shown is read only from a shown call; the silent calls cannot reach the size cap (num_predict 256)
    if (silent) return { raw: silentRaw, shown: '', split: null, doneReason: capped ? 'length' : doneReason, capped };
    const finished = withholder.finish();
    if (finished.flushed) {
      shownSoFar += finished.flushed;
      yield { type: 'delta', text: finished.flushed };
    }
    // Stryker disable next-line StringLiteral: a capped reply ends the turn with reply_too_long whatever the parser says
    return { raw: finished.raw, shown: finished.shown, split: finished, doneReason: capped ? 'length' : doneReason, capped };
  }

  let request: ChatRequest = { messages: baseMessages, signal: input.signal };
  /** 'metadata' while the current call asks for the metadata alone (the reply's text is kept). */
  let mode: 'reply' | 'metadata' = 'reply';
  let failures = 0;
  let firstFailure: FailedReply | undefined;
  /** The latest full reply that failed: what a format reminder shows the model. */
  // Stryker disable next-line StringLiteral: set before it is read (a reminder follows a failed reply)
  let lastFailedReply = '';
  try {
    for (;;) {
      let attempt: AttemptResult | null;
      try {
        attempt = yield* streamAttempt(request, mode === 'metadata');
      } catch (error) {
        // The metadata-only call may fail on its own (an Ollama without JSON-schema support, a network
        // error): the ladder goes on. Stop and the timeouts still end the turn.
        // Stryker disable next-line ConditionalExpression: our call's signal aborts only with the user's (checked first) or the watchdog, whose error is thrown instead
        if (mode !== 'metadata' || input.signal.aborted || !isChatModelError(error) || error.code === 'aborted') throw error;
        deps.logger.warn('the request for the metadata alone failed; asking for the whole reply again', {
          conversationId: deps.conversationId,
          attempt: stats.attempts,
          error,
        });
        history.push({ messages: request.messages, reply: '' });
        attempt = null;
      }
      if (attempt !== null) {
        history.push({ messages: request.messages, reply: attempt.raw });
        if (attempt.capped) {
          deps.logger.warn('the model reply passed the size cap and was stopped', { conversationId: deps.conversationId, maxChars: MAX_REPLY_CHARS });
        } else if (isCutByContext(attempt, request)) {
          truncated = true;
          deps.logger.warn('the model reply was cut by the length limit', { conversationId: deps.conversationId, numCtx: deps.numCtx });
        }
      }
      const parsed =
        attempt === null
          ? null
          : attempt.split === null
            ? parseMetadataReply(attempt.raw, { doneReason: attempt.doneReason })
            : parseWithheld(attempt.split, { doneReason: attempt.doneReason });
      if (attempt !== null && parsed?.ok) {
        const compacted = level === 'compaction';
        // The metadata-only step keeps, byte for byte, the text the user already read.
        let text = mode === 'metadata' ? shownSoFar : parsed.value.text;
        // Stryker disable next-line ConditionalExpression: the compaction call asks for the JSON alone (format), so its text is always empty
        if (compacted && text === '') {
          // The JSON-only compaction reply has no words of its own: keep what the user last read.
          text = previousShown || NEUTRAL_FALLBACK_TEXT;
          yield { type: 'delta', text };
        }
        const { repairs } = parsed.value;
        const metadata = input.family === undefined ? parsed.value.metadata : fitMetadataToFamily(parsed.value.metadata, input.family);
        const notices = attempt.capped
          ? [...parsed.value.notices, REPLY_CAP_NOTICE]
          : isCutByContext(attempt, request)
            ? [...parsed.value.notices, truncationNotice(deps.numCtx)]
            : parsed.value.notices;
        yield { type: 'metadata', ...metadata, notices };
        const assistant: ContextEntry = { kind: 'assistant', text, metadata };
        const context = compacted
          ? [{ kind: 'summary', userWords: collectUserWords(turnContext), text: '' } satisfies ContextEntry, assistant]
          : boundContext([...turnContext, assistant]);
        return {
          turn: { role: 'assistant', text, metadata, status: 'ok', ...(notices.length > 0 ? { notices } : {}) },
          context,
          metadata,
          done: done(level, repairs),
        };
      }

      // Stryker disable next-line ConditionalExpression: the metadata and compaction calls (num_predict 256, 512) cannot reach the size cap
      if (attempt?.capped && mode === 'reply') {
        // Asking again would resend the runaway reply and likely run away again: end the turn here.
        const failure = { code: 'reply_too_long' as const, message: REPLY_CAP_ERROR };
        yield { type: 'error', ...failure };
        return { turn: { role: 'assistant', text: shownSoFar, status: 'error', error: failure }, context: boundContext(turnContext), done: done('error') };
      }
      failures++;
      if (parsed && !parsed.ok) {
        deps.logger.warn(mode === 'metadata' ? 'the metadata asked for alone was unusable' : 'model reply broke the format', {
          conversationId: deps.conversationId,
          attempt: stats.attempts,
          code: parsed.error.code,
          detail: parsed.error.message,
        });
      }
      if (mode === 'reply' && attempt !== null) {
        previousShown = attempt.shown || previousShown;
        lastFailedReply = attempt.raw;
        firstFailure ??= { text: attempt.shown, doneReason: attempt.doneReason };
      }
      const step = planRecovery(failures, firstFailure);
      if (step.level === 'reset') {
        deps.logger.error('format recovery failed; the model context was reset', {
          conversationId: deps.conversationId,
          history,
        });
        yield { type: 'reset', message: RESET_MESSAGE };
        // Stryker disable next-line ArrayDeclaration: read only when the reply was cut by the context window, which sets them
        const notices = truncated ? [truncationNotice(deps.numCtx)] : [];
        if (truncated) yield { type: 'error', code: 'reply_truncated', message: notices[0]! };
        return { turn: { role: 'assistant', text: RESET_MESSAGE, status: 'reset', ...(truncated ? { notices } : {}) }, context: [], done: done('reset') };
      }
      level = step.level;
      if (step.level === 'metadata') {
        // The text stays in the bubble; only the metadata is asked for, constrained to its JSON Schema.
        mode = 'metadata';
        yield { type: 'metadata_retry', attempt: step.attempt };
        request = {
          messages: buildMetadataRequest(
            baseMessages,
            shownSoFar,
            buildMetadataReminder({ prompt: input.prompt, settings: input.settings, ...(input.family ? { style: input.family } : {}) }),
          ),
          format: metadataJsonSchema,
          options: { ...METADATA_OPTIONS },
          signal: input.signal,
        };
        continue;
      }
      mode = 'reply';
      yield { type: 'retry', attempt: step.attempt, level: step.level };
      request =
        step.level === 'reminder'
          ? { messages: buildReminderRequest(baseMessages, lastFailedReply), signal: input.signal }
          : {
              messages: buildCompactionRequest({
                userWords: collectUserWords(turnContext),
                prompt: input.prompt,
                settings: input.settings,
                latestUserText: latestUserText(turnContext),
                systemPrompt,
                ...(input.family ? { style: input.family } : {}),
              }),
              format: metadataJsonSchema,
              options: { ...COMPACTION_OPTIONS },
              signal: input.signal,
            };
    }
  } catch (error) {
    // The user's message stays in the working context, unanswered, so Retry or the next message keeps it.
    const context = boundContext(turnContext);
    // Stryker disable next-line LogicalOperator,ConditionalExpression: our call's signal aborts only with the user's or the watchdog, whose error is thrown instead
    if (input.signal.aborted || (isChatModelError(error) && error.code === 'aborted')) {
      return { turn: { role: 'assistant', text: shownSoFar, status: 'stopped' }, context, done: done('stopped') };
    }
    const failure = isReplyTimeoutError(error)
      ? describeReplyTimeout(error, { model, loaded: stats.attempts > 1 ? true : loaded })
      : describeFailure(error);
    if (failure.code === 'internal_error') {
      deps.logger.error('turn failed unexpectedly', { conversationId: deps.conversationId, error });
    } else {
      deps.logger.warn('chat model request failed', { conversationId: deps.conversationId, error });
    }
    yield { type: 'error', ...failure };
    return { turn: { role: 'assistant', text: shownSoFar, status: 'error', error: failure }, context, done: done('error') };
  }
}

/**
 * A reply Ollama ended with `done_reason: "length"` ran into the context window, unless the call had its own
 * `num_predict` cap (the metadata-only and compaction calls): then it met that cap, and --num-ctx is no remedy.
 */
function isCutByContext(attempt: Pick<AttemptResult, 'doneReason'>, request: ChatRequest): boolean {
  return attempt.doneReason === 'length' && request.options?.num_predict === undefined;
}

function boundContext(context: ContextEntry[]): ContextEntry[] {
  // Stryker disable next-line ConditionalExpression,EqualityOperator: a context Easel writes starts with a message or a summary, so cutting nothing keeps the same entries
  if (context.length <= MAX_STORED_ENTRIES) return context;
  const kept = context.slice(-MAX_STORED_ENTRIES);
  // Stryker disable next-line ConditionalExpression,EqualityOperator: a stored context is never all replies
  while (kept.length > 1 && kept[0]?.kind === 'assistant') kept.shift();
  return kept;
}

const CHAT_FAILURES: Record<Exclude<ChatModelError['code'], 'aborted'>, TurnErrorCode> = {
  unreachable: 'ollama_unreachable',
  model_not_found: 'model_not_found',
  stream_failed: 'ollama_stream_failed',
  bad_response: 'ollama_error',
};

function describeFailure(error: unknown): { code: TurnErrorCode; message: string } {
  if (isChatModelError(error) && error.code !== 'aborted') {
    return { code: CHAT_FAILURES[error.code], message: `${error.message} Your message is kept: press Retry once it is fixed.` };
  }
  return {
    code: 'internal_error',
    message: 'Something went wrong inside Easel while answering; the details are in the server log. Your message is kept: press Retry.',
  };
}

const REPLY_CAP_NOTICE = `The model's reply ran past ${MAX_REPLY_CHARS.toLocaleString('en')} characters, so Easel stopped it there; the settings above were read from what had arrived.`;
const REPLY_CAP_ERROR =
  `The model's reply ran past ${MAX_REPLY_CHARS.toLocaleString('en')} characters without finishing, so Easel stopped it. ` +
  'What arrived is kept. Your message is kept too: press Retry, or rephrase it to ask for a shorter answer.';

function truncationNotice(numCtx: number): string {
  return `The model's reply was cut off by the length limit (context window ${numCtx} tokens). Start Easel with a larger --num-ctx, e.g. ${numCtx * 2}.`;
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** The words of the message this turn answers: the context's last entry (see TurnInput.context). */
function latestUserText(context: readonly ContextEntry[]): string {
  const last = context.at(-1);
  return last?.kind === 'user' ? last.text : '';
}
