// The models Ollama has (GET /api/tags, then POST /api/show for each) and pulling one (POST /api/pull).
// Wire shapes are Ollama's (ollama/ollama @ fb30760): api/types.go ListModelResponse :822-832, ModelDetails
// :933-942, ShowResponse :737-755, ProgressResponse :777-782.
import type { Ollama } from 'ollama';
import type { Agent } from 'undici';
import { ChatModelError } from '../core/errors.ts';
import type { InstalledChatModel, PullProgress } from '../core/ports.ts';
import { isOllamaResponseError, toChatModelError } from './errors.ts';
import { readLineBatches } from './ndjson.ts';

export interface ModelsContext {
  /** Ollama's base URL, without a trailing slash. */
  host: string;
  fetch: typeof fetch;
  /** How long /api/tags and each /api/show may take. */
  healthTimeoutMs: number;
  /** A client whose every request is scoped to `signal` (one per call). */
  createClient(signal: AbortSignal): Ollama;
  /** undici's dispatcher without headers/body timeouts, for the pull's long stream. */
  loadDispatcher(): Promise<Agent>;
}

/** How many /api/show requests run at once: Ollama reads each model's GGUF header to answer one. */
export const SHOW_CONCURRENCY = 4;

/**
 * The longest pull progress line Easel reads, in characters. A real one is under 200 (ProgressResponse has
 * four short fields); the cap only stops a server that is not Ollama from filling memory with one line.
 */
export const MAX_PULL_LINE_CHARS = 64 * 1024;

/** Every model Ollama has, in /api/tags order, with what /api/show says of each. */
export async function listInstalledModels(context: ModelsContext, signal?: AbortSignal): Promise<InstalledChatModel[]> {
  const { host, healthTimeoutMs } = context;
  const errorContext = { host, model: '', action: 'model list', signal, phase: 'request' as const };
  if (signal?.aborted) throw toChatModelError(signal.reason, errorContext);
  const timeout = AbortSignal.timeout(healthTimeoutMs);
  let listed: unknown;
  try {
    listed = await context.createClient(signal ? AbortSignal.any([signal, timeout]) : timeout).list();
  } catch (error) {
    if (!signal?.aborted && timeout.aborted) {
      throw new ChatModelError(
        'unreachable',
        `Ollama at ${host} did not answer within ${healthTimeoutMs / 1000} s; restart it with \`ollama serve\`.`,
        { cause: error },
      );
    }
    throw toChatModelError(error, errorContext);
  }
  const entries = readTags(listed, host);
  const shown = await mapBounded(entries, SHOW_CONCURRENCY, (entry) => showModel(context, entry.name, signal));
  if (signal?.aborted) throw toChatModelError(signal.reason, errorContext);
  return entries.map((entry, index) => ({ ...entry, ...shown[index]! }));
}

type ListedModel = Omit<InstalledChatModel, 'capabilities' | 'contextLength'>;
type ShownModel = Pick<InstalledChatModel, 'capabilities' | 'contextLength'>;

const UNKNOWN_SHOW: ShownModel = { capabilities: [], contextLength: null };

/** GET /api/tags' `models` (api.ListResponse); an entry without a name is left out. */
function readTags(listed: unknown, host: string): ListedModel[] {
  const models = isRecord(listed) ? listed.models : undefined;
  if (!Array.isArray(models)) {
    throw new ChatModelError(
      'bad_response',
      `Ollama at ${host} answered /api/tags without a list of models. Check that --ollama-url points at Ollama and that Ollama is up to date.`,
    );
  }
  return models.flatMap((entry: unknown): ListedModel[] => {
    if (!isRecord(entry)) return [];
    const name = nonEmptyString(entry.name) ?? nonEmptyString(entry.model);
    if (name === null) return [];
    const details = isRecord(entry.details) ? entry.details : {};
    return [
      {
        name,
        sizeBytes: typeof entry.size === 'number' && Number.isFinite(entry.size) ? entry.size : 0,
        parameterSize: nonEmptyString(details.parameter_size),
        quantization: nonEmptyString(details.quantization_level),
        family: nonEmptyString(details.family),
      },
    ];
  });
}

/**
 * POST /api/show of one model, within the health timeout. Any failure (a broken model, a timeout) leaves its
 * capabilities and context length unknown rather than failing the list.
 */
async function showModel(context: ModelsContext, name: string, signal: AbortSignal | undefined): Promise<ShownModel> {
  if (signal?.aborted) return UNKNOWN_SHOW;
  const timeout = AbortSignal.timeout(context.healthTimeoutMs);
  try {
    const shown: unknown = await context.createClient(signal ? AbortSignal.any([signal, timeout]) : timeout).show({ model: name });
    if (!isRecord(shown)) return UNKNOWN_SHOW;
    // `capabilities,omitempty`: absent when the model has none Ollama can tell (types/model/capability.go).
    const capabilities = Array.isArray(shown.capabilities)
      ? shown.capabilities.filter((capability): capability is string => typeof capability === 'string')
      : [];
    return { capabilities, contextLength: readContextLength(shown.model_info) };
  } catch {
    return UNKNOWN_SHOW;
  }
}

/** model_info's `<general.architecture>.context_length`, the GGUF key-value (e.g. `llama.context_length`). */
function readContextLength(modelInfo: unknown): number | null {
  if (!isRecord(modelInfo)) return null;
  const architecture = nonEmptyString(modelInfo['general.architecture']);
  if (architecture === null) return null;
  const value = modelInfo[`${architecture}.context_length`];
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : null;
}

/** `work` for every item, at most `limit` at a time, the results in the items' order. */
async function mapBounded<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * POST /api/pull `{model, stream: true}`, one progress line at a time until `success`. Ollama streams a
 * failure as an `{"error": "…"}` line (server/routes.go:1147-1149 and :2116-2125, after its first
 * "pulling manifest" line), which becomes a ChatModelError carrying Ollama's words. Aborting `signal` hangs
 * up; Ollama then cancels the pull (the request's context ends it: routes.go:1144, server/download.go:446-466).
 * The request is sent by fetch, not ollama-js, whose pull sends the older `name` field (src/browser.ts:208-212)
 * and skips lines that are not JSON (src/utils.ts:320-325).
 */
export async function* pullModel(context: ModelsContext, name: string, signal: AbortSignal): AsyncGenerator<PullProgress> {
  const { host } = context;
  const cancelled = (cause: unknown) =>
    new ChatModelError('aborted', `The pull of "${name}" was cancelled before it finished; start it again to carry on.`, {
      cause,
    });
  if (signal.aborted) throw cancelled(signal.reason);
  // Our own controller also hangs up when the caller stops iterating early or on failure.
  const hangUp = new AbortController();
  const scoped = AbortSignal.any([signal, hangUp.signal]);
  let finished = false;
  let phase: 'request' | 'stream' = 'request';
  try {
    // Ollama is silent while it verifies a large model's digest (images.go:1073-1092), so undici's 300 s
    // body timeout is off here as it is for chats; aborting `signal` is how a pull is stopped.
    const init = {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' },
      body: JSON.stringify({ model: name, stream: true }),
      signal: scoped,
      dispatcher: await context.loadDispatcher(),
    };
    const response = await context.fetch(`${host}/api/pull`, init as RequestInit);
    if (!response.ok) throw await refusal(response, host, name);
    if (response.body === null) throw new Error('Ollama answered the pull without a body.');
    phase = 'stream';
    for await (const progress of readPullStream(response.body, host, name)) {
      yield progress;
      if (progress.status === 'success') {
        finished = true;
        return;
      }
    }
    throw new ChatModelError(
      'stream_failed',
      `Ollama at ${host} ended the pull of "${name}" before saying it succeeded. Check the Ollama logs, then pull it again.`,
    );
  } catch (error) {
    if (signal.aborted) throw cancelled(error);
    if (error instanceof ChatModelError) throw error;
    if (phase === 'stream') {
      throw new ChatModelError(
        'stream_failed',
        `The connection to Ollama at ${host} broke in the middle of the pull of "${name}" (${describeError(error)}). ` +
          'Check that Ollama is still running, then pull it again.',
        { cause: error },
      );
    }
    // Nothing listening is 'unreachable' in the adapter's usual words (describeUnreachable).
    throw toChatModelError(error, { host, model: name, action: 'pull', phase, signal });
  } finally {
    if (!finished) hangUp.abort();
  }
}

/** An HTTP error before the stream: Ollama's `{"error"}` (e.g. 400 "invalid model name"), or whatever answered. */
async function refusal(response: Response, host: string, name: string): Promise<ChatModelError> {
  const text = (await response.text().catch(() => '')).trim();
  let words = text.slice(0, 500);
  try {
    const parsed: unknown = JSON.parse(text);
    if (isRecord(parsed) && typeof parsed.error === 'string') words = parsed.error;
  } catch {
    // Not JSON: not Ollama's own answer, quoted as it came.
  }
  return new ChatModelError(
    'bad_response',
    `Ollama at ${host} refused to pull "${name}" with HTTP ${response.status}: ${words || response.statusText}. ` +
      'Check the name, and that --ollama-url points at Ollama.',
  );
}

/** The pull's NDJSON lines as PullProgress; an `{"error"}` line or a line that is none throws. */
async function* readPullStream(body: ReadableStream<Uint8Array>, host: string, name: string): AsyncGenerator<PullProgress> {
  const overlong = () =>
    new ChatModelError(
      'stream_failed',
      `Ollama at ${host} sent a pull progress line longer than ${MAX_PULL_LINE_CHARS.toLocaleString('en')} characters; ` +
        'Easel stopped reading it. Check that --ollama-url points at Ollama itself.',
    );
  for await (const lines of readLineBatches(body, { maxLineChars: MAX_PULL_LINE_CHARS, overlong })) {
    for (const line of lines) {
      if (line.trim() === '') continue;
      const progress = readPullLine(line, host, name);
      yield progress;
      if (progress.status === 'success') return;
    }
  }
}

function readPullLine(line: string, host: string, name: string): PullProgress {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw unreadablePullLine(host, line, 'it is not JSON');
  }
  if (!isRecord(value)) throw unreadablePullLine(host, line, 'it is not a JSON object');
  if (typeof value.error === 'string' && value.error !== '') throw pullFailed(host, name, value.error);
  if (typeof value.status !== 'string') throw unreadablePullLine(host, line, 'it has no "status"');
  const progress: PullProgress = { status: value.status };
  if (typeof value.digest === 'string' && value.digest !== '') progress.digest = value.digest;
  if (typeof value.total === 'number' && Number.isFinite(value.total)) progress.total = value.total;
  if (typeof value.completed === 'number' && Number.isFinite(value.completed)) progress.completed = value.completed;
  return progress;
}

/** Ollama's own words, e.g. "pull model manifest: file does not exist" for a name the registry does not have. */
function pullFailed(host: string, name: string, words: string): ChatModelError {
  // server/images.go:1023-1026 wraps the registry's 404 (os.ErrNotExist, images.go:1337-1339) in these words.
  const hint = /file does not exist/.test(words)
    ? ' The registry has no model of that name: check its spelling and tag at https://ollama.com/library.'
    : ` Check the Ollama logs (\`ollama serve\` output) and that Ollama at ${host} can reach the registry, then pull it again.`;
  return new ChatModelError('stream_failed', `Ollama could not pull "${name}": ${words}.${hint}`);
}

function unreadablePullLine(host: string, line: string, why: string): ChatModelError {
  const quoted = `${JSON.stringify(line.slice(0, 200))}${line.length > 200 ? '…' : ''}`;
  return new ChatModelError(
    'stream_failed',
    `Ollama at ${host} sent a pull progress line Easel cannot read (${why}): ${quoted}. ` +
      'Check that --ollama-url points at Ollama, and update Ollama if it is old.',
  );
}

function describeError(error: unknown): string {
  if (isOllamaResponseError(error)) return `HTTP ${error.status_code}: ${error.error}`;
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause;
  return cause instanceof Error && cause.message && cause.message !== error.message ? `${error.message}: ${cause.message}` : error.message;
}

function nonEmptyString(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
