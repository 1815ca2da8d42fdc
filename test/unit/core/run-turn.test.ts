// One turn (server/core/run-turn.ts) driven directly, with the real Ollama adapter against the fake Ollama:
// the edges the whole-folder mutation run found untested. What is logged for each failure (the operator's
// only view of them), the done event's numbers, the notices and the stored context at their bounds, a Stop
// between two calls, and which length cut is the context window's.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger, DEFAULT_SETTINGS, type ChatModel, type TurnEvent } from '../../../server/core/index.ts';
import { appendUserEntry } from '../../../server/core/context-change.ts';
import { runTurn, type TurnDeps, type TurnInput, type TurnOutcome } from '../../../server/core/run-turn.ts';
import { createOllamaChatModel } from '../../../server/ollama/index.ts';
import { MAX_REPLY_CHARS, NEUTRAL_FALLBACK_TEXT, RESET_MESSAGE, type ContextEntry } from '../../../server/protocol/index.ts';
import { createFakeOllama, scriptReply, type FakeOllama } from '../../fakes/fake-ollama.ts';

const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
/** The metadata-only call cut by its own num_predict cap. */
const METADATA_CUT = { chunks: ['{"prompt": "a cat in a hat, highly', ' detailed'], doneReason: 'length' };
/** The compaction call cut by its own num_predict cap. */
const COMPACTION_CUT = { chunks: ['{"prompt": "a cat'], doneReason: 'length' };
const NO_LIMITS = { firstTokenMs: 0, stallMs: 0, statusAfterMs: 0 };

let fake: FakeOllama;
let llm: ChatModel;
let logs: string[];

beforeEach(async () => {
  logs = [];
  fake = await createFakeOllama();
  llm = createOllamaChatModel({ host: fake.url, model: 'mistral:7b' });
});
afterEach(async () => {
  await fake.close();
});

function depsWith(over: Partial<TurnDeps> = {}): TurnDeps {
  return {
    llm,
    logger: createLogger({ level: 'debug', write: (line) => logs.push(line.replace(/^\S+ /, '')) }),
    now: Date.now,
    numCtx: 8192,
    conversationId: 'c1',
    timeouts: NO_LIMITS,
    ...over,
  };
}

/** A turn's input: `prior` is the working context before it; the user's message is appended as the service does. */
function inputWith(over: Partial<Omit<TurnInput, 'context'>> & { prior?: ContextEntry[]; userText?: string } = {}): TurnInput {
  const { prior = [], userText = 'a cat', ...rest } = over;
  return { context: appendUserEntry(prior, { kind: 'user', text: userText }), prompt: '', settings: DEFAULT_SETTINGS, signal: new AbortController().signal, ...rest };
}

/** Runs a turn to its end; `onEvent` may act between events (the generator waits for it). */
async function run(deps: TurnDeps, input: TurnInput, onEvent?: (event: TurnEvent) => void): Promise<{ events: TurnEvent[]; outcome: TurnOutcome }> {
  const turn = runTurn(deps, input);
  const events: TurnEvent[] = [];
  for (;;) {
    const step = await turn.next();
    if (step.done) return { events, outcome: step.value };
    events.push(step.value);
    onEvent?.(step.value);
  }
}

const shown = (events: TurnEvent[]) => events.flatMap((event) => (event.type === 'delta' ? [event.text] : [])).join('');

describe('a turn that ends in a reset', () => {
  it('says nothing of a length limit when the only cuts were the capped calls\' own, logs each failure, and stores no notice', async () => {
    fake.enqueue('prose 1', METADATA_CUT, 'prose 2', COMPACTION_CUT);
    const { events, outcome } = await run(depsWith(), inputWith());

    expect(events.filter((event) => event.type === 'error')).toEqual([]);
    expect(outcome.turn).toStrictEqual({ role: 'assistant', text: RESET_MESSAGE, status: 'reset' });
    expect(outcome.context).toEqual([]);
    expect(outcome.done).toMatchObject({ type: 'done', attempts: 4, repairs: [], level: 'reset' });
    const warnings = logs.filter((line) => line.startsWith('WARN'));
    expect(warnings.map((line) => line.slice(0, line.indexOf(' {')))).toEqual([
      'WARN  model reply broke the format',
      'WARN  the metadata asked for alone was unusable',
      'WARN  model reply broke the format',
      'WARN  model reply broke the format',
    ]);
    expect(warnings[0]).toContain('{"conversationId":"c1","attempt":1,"code":');
    // The metadata-only parse is told of its cut too: the logged detail says so.
    expect(warnings[1]).toContain('cut off by the length limit (done_reason \\"length\\")');
    const reset = logs.find((line) => line.startsWith('ERROR'));
    expect(reset).toMatch(/^ERROR format recovery failed; the model context was reset \{"conversationId":"c1","history":\[/);
    expect(reset).toContain('"reply":"prose 2"');
  });

  it('keeps the notice of a reply cut by the context window, as a notice and an error event', async () => {
    fake.enqueue({ chunks: ['Sure! ', 'A long', ' answer'], doneReason: 'length' }, 'again', 'still', COMPACTION_CUT);
    const { events, outcome } = await run(depsWith({ numCtx: 4096 }), inputWith());
    const notice = "The model's reply was cut off by the length limit (context window 4096 tokens). Start Easel with a larger --num-ctx, e.g. 8192.";
    expect(events.filter((event) => event.type === 'error')).toEqual([{ type: 'error', code: 'reply_truncated', message: notice }]);
    expect(outcome.turn).toStrictEqual({ role: 'assistant', text: RESET_MESSAGE, status: 'reset', notices: [notice] });
    expect(logs.filter((line) => line.includes('cut by the length limit'))).toEqual(['WARN  the model reply was cut by the length limit {"conversationId":"c1","numCtx":4096}']);
    // The parser is told of the cut: the logged detail says so.
    expect(logs.find((line) => line.startsWith('WARN  model reply broke the format'))).toContain('cut off by the length limit (done_reason \\"length\\")');
  });
});

describe('a turn that is answered', () => {
  it('a clean reply stores no notices, counts its speed from Ollama\'s numbers and its first token from the clock', async () => {
    fake.enqueue(scriptReply('A cat.', ASKING, { evalCount: 10 }));
    let time = 1000;
    const { outcome } = await run(depsWith({ now: () => (time += 250) }), inputWith());
    expect(outcome.turn).toStrictEqual({ role: 'assistant', text: 'A cat.', metadata: ASKING, status: 'ok' });
    // The fake reports 20 ms of eval per token: 50 tokens a second. The clock: 1250 at the start, 1500 at the first token.
    expect(outcome.done).toMatchObject({ evalCount: 10, tokensPerSecond: 50, firstTokenMs: 250, repairs: [] });
  });

  it('an answered reply keeps its notices in the stored turn, so a reload shows them too', async () => {
    fake.enqueue(scriptReply('A cat.', { ...ASKING, steps: 200 }));
    const { events, outcome } = await run(depsWith(), inputWith());
    const notice = 'Steps 200 is above the maximum 150, so 150 is used.';
    expect(events.find((event) => event.type === 'metadata')).toMatchObject({ steps: 150, notices: [notice] });
    expect(outcome.turn).toStrictEqual({ role: 'assistant', text: 'A cat.', metadata: { ...ASKING, steps: 150 }, status: 'ok', notices: [notice] });
  });

  it('text held back while it could start the delimiter is shown when the reply ends without one', async () => {
    fake.enqueue({ chunks: ['Hello\n', '--'] }, { chunks: [JSON.stringify(ASKING)] });
    const { events, outcome } = await run(depsWith(), inputWith());
    expect(shown(events)).toBe('Hello\n--');
    expect(outcome.turn.text).toBe('Hello\n--');
  });

  it('a reply with only metadata keeps its empty text outside a compaction', async () => {
    fake.enqueue({ chunks: ['---\n', JSON.stringify(ASKING)] });
    const { events, outcome } = await run(depsWith(), inputWith());
    expect(outcome.turn.text).toBe('');
    expect(shown(events)).toBe('');
    expect(events.some((event) => event.type === 'delta')).toBe(false);
  });

  it('a compaction reply with words keeps them, and the summary it leaves has no text', async () => {
    fake.enqueue('prose 1', METADATA_CUT, 'prose 2');
    fake.enqueue({ chunks: [JSON.stringify({ prompt: 'a cat', generate_image: false, steps: 20, cfg: 7, seed: -1 })] });
    const { events, outcome } = await run(depsWith(), inputWith({ prior: [{ kind: 'user', text: 'hello' }, { kind: 'assistant', text: 'Hi.', metadata: ASKING }] }));
    // The JSON-only compaction reply shows what the user last read.
    expect(outcome.turn.text).toBe('prose 2');
    expect(events.slice(-2)).toMatchObject([{ type: 'delta', text: 'prose 2' }, { type: 'metadata' }]);
    expect(outcome.context[0]).toEqual({ kind: 'summary', userWords: ['hello', 'a cat'], text: '' });
  });

  it('a JSON-only compaction after replies that showed nothing falls back to neutral words', async () => {
    const empty = { chunks: ['---\n{"prompt": 5'] };
    fake.enqueue(empty, empty, empty);
    fake.enqueue({ chunks: [JSON.stringify({ prompt: 'a cat', generate_image: false, steps: 20, cfg: 7, seed: -1 })] });
    const { outcome } = await run(depsWith(), inputWith());
    expect(outcome.done.level).toBe('compaction');
    expect(outcome.turn.text).toBe(NEUTRAL_FALLBACK_TEXT);
  });

  it('the stored context is bounded to 400 entries and never starts with a reply', async () => {
    const context: ContextEntry[] = [];
    for (let i = 0; i < 200; i++) context.push({ kind: 'user', text: `u${i}` }, { kind: 'assistant', text: `a${i}`, metadata: ASKING });
    fake.enqueue(scriptReply('A cat.', ASKING));
    const { outcome } = await run(depsWith(), inputWith({ prior: context }));
    // 402 entries: the oldest pair goes, leaving 400 that start with a user's message.
    expect(outcome.context).toHaveLength(400);
    expect(outcome.context[0]).toEqual({ kind: 'user', text: 'u1' });
    expect(outcome.context.at(-1)).toMatchObject({ kind: 'assistant', text: 'A cat.' });

    fake.enqueue(scriptReply('A dog.', ASKING));
    const odd = await run(depsWith(), inputWith({ prior: context.slice(0, 399) }));
    // 401 entries (u199 waits unanswered): the one over the bound is u0, and the reply after it goes too.
    expect(odd.outcome.context).toHaveLength(399);
    expect(odd.outcome.context[0]).toEqual({ kind: 'user', text: 'u1' });
  });
});

describe('failures', () => {
  it('a later call that is slow to start says "Waiting", not "Loading", and its timeout does not blame loading', async () => {
    // Not in memory when the turn began: only the first call may be loading it.
    fake.enqueue({ chunks: ['prose 1'] }, { chunks: [JSON.stringify(ASKING)], loadMs: 400 });
    const { events, outcome } = await run(depsWith({ timeouts: { firstTokenMs: 300, stallMs: 0, statusAfterMs: 150 } }), inputWith());
    expect(events.filter((event) => event.type === 'status')).toEqual([{ type: 'status', message: 'Waiting for mistral:7b to start answering…' }]);
    expect(outcome.turn.error?.code).toBe('ollama_first_token_timeout');
    expect(outcome.turn.error?.message).toMatch(/^mistral:7b did not start answering within 0.3 s/);
    expect(logs.filter((line) => line.startsWith('WARN  chat model request failed'))).toEqual([
      'WARN  chat model request failed {"conversationId":"c1","error":{"name":"ReplyTimeoutError","message":"no first token from the model within 300 ms"}}',
    ]);
  });

  it('a timeout of the metadata-only call ends the turn; a refused one lets the ladder go on, logged', async () => {
    fake.enqueue({ chunks: ['prose 1'] }, { chunks: [JSON.stringify(ASKING)], loadMs: 400 });
    const timedOut = await run(depsWith({ timeouts: { firstTokenMs: 300, stallMs: 0, statusAfterMs: 0 } }), inputWith());
    expect(timedOut.outcome.turn.status).toBe('error');
    expect(timedOut.outcome.done).toMatchObject({ attempts: 2, level: 'error', repairs: [] });

    logs = [];
    fake.enqueue('prose 1', { chunks: [], errorAfter: { chunks: 0, message: 'no JSON here', status: 500 } }, scriptReply('A cat.', ASKING));
    const refused = await run(depsWith(), inputWith());
    expect(refused.outcome.turn.text).toBe('A cat.');
    const warning = logs.find((line) => line.includes('metadata alone failed'));
    expect(warning).toMatch(/^WARN  the request for the metadata alone failed; asking for the whole reply again \{"conversationId":"c1","attempt":2,"error":\{"name":"ChatModelError"/);
  });

  it('a metadata-only call that failed is in the reset\'s logged history as an empty reply', async () => {
    fake.enqueue('prose 1', { chunks: [], errorAfter: { chunks: 0, message: 'no JSON here', status: 500 } }, 'prose 2', COMPACTION_CUT);
    const { outcome } = await run(depsWith(), inputWith());
    expect(outcome.turn.status).toBe('reset');
    const reset = logs.find((line) => line.startsWith('ERROR format recovery failed'));
    expect(reset?.match(/"reply":"[^"]*"/g)?.slice(0, 3)).toEqual(['"reply":"prose 1"', '"reply":""', '"reply":"prose 2"']);
  });

  it('a Stop between two calls asks Ollama nothing more', async () => {
    const controller = new AbortController();
    fake.enqueue('prose 1', scriptReply('A cat.', ASKING));
    const { outcome } = await run(depsWith(), inputWith({ signal: controller.signal }), (event) => {
      if (event.type === 'metadata_retry') controller.abort(new Error('Stop'));
    });
    expect(outcome.turn).toEqual({ role: 'assistant', text: 'prose 1', status: 'stopped' });
    expect(fake.chatRequests()).toHaveLength(1);
  });

  it('a retry that fails mid-reply stores only its own text', async () => {
    fake.enqueue('First words.', METADATA_CUT, { chunks: ['Second', ' try'], errorAfter: { chunks: 2, message: 'runner crashed' } });
    const { outcome } = await run(depsWith(), inputWith());
    expect(outcome.turn.status).toBe('error');
    expect(outcome.turn.text).toBe('Second try');
  });

  it('a failure inside Easel says so and is logged as an error, not as Ollama\'s', async () => {
    const broken: ChatModel = { ...llm, chat: () => ({ [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new TypeError('a bug')) }) }) };
    const { events, outcome } = await run(depsWith({ llm: broken }), inputWith());
    const failure = {
      code: 'internal_error',
      message: 'Something went wrong inside Easel while answering; the details are in the server log. Your message is kept: press Retry.',
    };
    expect(events.at(-1)).toEqual({ type: 'error', ...failure });
    expect(outcome.turn.error).toEqual(failure);
    // Nothing came from Ollama: no speed, no first token.
    expect(outcome.done).toMatchObject({ level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null });
    expect(logs).toEqual(['ERROR turn failed unexpectedly {"conversationId":"c1","error":{"name":"TypeError","message":"a bug"}}']);
  });

  it('a runaway reply is stopped at the cap and logged', async () => {
    // Lines of 10 000 characters: far more than a real token, within the stream reader's 64 KiB per line.
    fake.enqueue({ chunks: [...Array.from({ length: 20 }, () => 'x'.repeat(MAX_REPLY_CHARS / 20)), 'z'.repeat(10)] });
    const { outcome } = await run(depsWith(), inputWith());
    expect(outcome.turn.error?.code).toBe('reply_too_long');
    expect(logs).toContain(`WARN  the model reply passed the size cap and was stopped {"conversationId":"c1","maxChars":${MAX_REPLY_CHARS}}`);
  });

  it('a runaway metadata-only call does not end the turn: the ladder goes on', async () => {
    fake.enqueue('prose 1', { chunks: ['{"prompt": "' + 'y'.repeat(MAX_REPLY_CHARS), '"}'] }, scriptReply('A cat.', ASKING));
    const { outcome } = await run(depsWith(), inputWith());
    expect(outcome.turn.text).toBe('A cat.');
    expect(outcome.done.attempts).toBe(3);
  });
});

describe('appendUserEntry', () => {
  it('a Retry of the unanswered message keeps both notes, one per line', () => {
    const merged = appendUserEntry([{ kind: 'user', text: 'a cat', note: '[first]' }], { kind: 'user', text: 'a cat', note: '[second]' });
    expect(merged).toEqual([{ kind: 'user', text: 'a cat', note: '[first]\n[second]' }]);
  });
});
