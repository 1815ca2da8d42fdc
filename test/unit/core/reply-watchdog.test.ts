import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  describeReplyTimeout,
  describeSlowStart,
  markSlowStart,
  ReplyTimeoutError,
  selectReplyLimit,
  startReplyWatchdog,
} from '../../../server/core/reply-watchdog.ts';
import type { ChatChunk } from '../../../server/core/ports.ts';
import { collectAll } from '../../helpers/streams.ts';

const LIMITS = { firstTokenMs: 300_000, stallMs: 120_000 };

describe('selectReplyLimit (the policy)', () => {
  it('waits for the first line with the first-token limit, then with the stall limit', () => {
    expect(selectReplyLimit(false, LIMITS)).toEqual({ kind: 'first_token', ms: 300_000 });
    expect(selectReplyLimit(true, LIMITS)).toEqual({ kind: 'stall', ms: 120_000 });
  });

  it('0 means no limit', () => {
    expect(selectReplyLimit(false, { firstTokenMs: 0, stallMs: 5 })).toBeUndefined();
    expect(selectReplyLimit(true, { firstTokenMs: 5, stallMs: 0 })).toBeUndefined();
  });
});

describe('what the person reads', () => {
  it('a slow start says "Loading" only when Ollama did not have the model in memory', () => {
    expect(describeSlowStart('mistral:7b', false)).toBe('Loading mistral:7b…');
    expect(describeSlowStart('mistral:7b', true)).toBe('Waiting for mistral:7b to start answering…');
    expect(describeSlowStart('mistral:7b', undefined)).toBe('Waiting for mistral:7b to start answering…');
  });

  it('a first-token timeout names what happened, the flag and what to check, never `ollama serve`', () => {
    for (const loaded of [false, true, undefined]) {
      const { code, message } = describeReplyTimeout({ kind: 'first_token', ms: 300_000 }, { model: 'mistral:7b', loaded });
      expect(code).toBe('ollama_first_token_timeout');
      expect(message).toContain('300 s');
      expect(message).toContain('--first-token-timeout');
      expect(message).toContain('`ollama ps`');
      expect(message).toContain('Your message is kept');
      expect(message).not.toContain('ollama serve');
    }
    expect(describeReplyTimeout({ kind: 'first_token', ms: 300_000 }, { model: 'mistral:7b', loaded: false }).message).toMatch(/^Ollama took longer than 300 s to load mistral:7b/);
  });

  it('a stall says the model stopped mid-reply and names --stall-timeout', () => {
    const { code, message } = describeReplyTimeout({ kind: 'stall', ms: 120_000 }, { model: 'mistral:7b', loaded: true });
    expect(code).toBe('ollama_stall_timeout');
    expect(message).toMatch(/^mistral:7b stopped sending in the middle of its reply: nothing arrived for 120 s/);
    expect(message).toContain('--stall-timeout');
    expect(message).not.toContain('ollama serve');
  });
});

describe('startReplyWatchdog (the timer)', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('aborts with a first-token timeout when no line came in time', () => {
    const watchdog = startReplyWatchdog({ firstTokenMs: 1000, stallMs: 100 });
    vi.advanceTimersByTime(999);
    expect(watchdog.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(watchdog.signal.aborted).toBe(true);
    expect(watchdog.signal.reason).toBeInstanceOf(ReplyTimeoutError);
    expect(watchdog.expired).toMatchObject({ kind: 'first_token', ms: 1000 });
  });

  it('after the first line, each line restarts the stall limit', () => {
    const watchdog = startReplyWatchdog({ firstTokenMs: 1000, stallMs: 100 });
    vi.advanceTimersByTime(900);
    watchdog.sawLine();
    // The first-token limit no longer applies.
    vi.advanceTimersByTime(99);
    watchdog.sawLine();
    vi.advanceTimersByTime(99);
    watchdog.sawLine();
    expect(watchdog.signal.aborted).toBe(false);
    vi.advanceTimersByTime(100);
    expect(watchdog.expired).toMatchObject({ kind: 'stall', ms: 100 });
  });

  it('stop() ends the timing; 0 never fires', () => {
    const stopped = startReplyWatchdog({ firstTokenMs: 10, stallMs: 10 });
    stopped.stop();
    const unlimited = startReplyWatchdog({ firstTokenMs: 0, stallMs: 0 });
    vi.advanceTimersByTime(1_000_000);
    expect(stopped.signal.aborted).toBe(false);
    expect(unlimited.signal.aborted).toBe(false);
  });
});

describe('markSlowStart', () => {
  async function* chunksAfter(delay: Promise<void>): AsyncGenerator<ChatChunk> {
    await delay;
    yield { type: 'text', text: 'Hello' };
  }

  it('yields the status first when the first chunk is late', async () => {
    let release!: () => void;
    const late = new Promise<void>((resolve) => (release = resolve));
    const reading = collectAll(markSlowStart(chunksAfter(late), { afterMs: 5, describe: async () => 'Loading m…' }));
    await new Promise((resolve) => setTimeout(resolve, 30));
    release();
    expect(await reading).toEqual([{ type: 'slow', message: 'Loading m…' }, { type: 'text', text: 'Hello' }]);
  });

  it('yields no status when the first chunk comes first', async () => {
    const out = await collectAll(markSlowStart(chunksAfter(Promise.resolve()), { afterMs: 1000, describe: async () => 'never' }));
    expect(out).toEqual([{ type: 'text', text: 'Hello' }]);
  });

  it('drops the status when the first chunk beats the answer of `describe`', async () => {
    let release!: () => void;
    const late = new Promise<void>((resolve) => (release = resolve));
    const describe = () => new Promise<string>((resolve) => setTimeout(() => resolve('too late'), 1000));
    const reading = collectAll(markSlowStart(chunksAfter(late), { afterMs: 5, describe }));
    await new Promise((resolve) => setTimeout(resolve, 30));
    release();
    expect(await reading).toEqual([{ type: 'text', text: 'Hello' }]);
  });

  it('passes a failure of the stream through', async () => {
    async function* failing(): AsyncGenerator<ChatChunk> {
      await new Promise((resolve) => setTimeout(resolve, 20));
      throw new Error('broken');
    }
    await expect(collectAll(markSlowStart(failing(), { afterMs: 5, describe: async () => 'Loading…' }))).rejects.toThrow('broken');
  });
});
