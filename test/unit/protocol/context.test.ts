import { describe, expect, it } from 'vitest';
import {
  COMPACTION_OPTIONS,
  SYSTEM_PROMPT,
  buildCompactionMessage,
  buildCompactionRequest,
  buildMetadataRequest,
  METADATA_OPTIONS,
  buildReminder,
  buildReminderRequest,
  collectUserWords,
  estimateTokens,
  formatCanonicalReply,
  renderContext,
} from '../../../server/protocol/index.ts';
import type { ChatMessage, ContextEntry, Metadata } from '../../../server/protocol/index.ts';

const META: Metadata = { prompt: 'a red fox', generate_image: false, steps: 20, cfg: 7, seed: -1 };
const BIG = 100_000;

function roles(messages: ChatMessage[]): string {
  return messages.map((message) => message.role[0]).join('');
}

function conversation(turns: number): ContextEntry[] {
  return Array.from({ length: turns }, (_, index): ContextEntry[] => [
    { kind: 'user', text: `user message ${index} ${'x'.repeat(200)}` },
    { kind: 'assistant', text: `reply ${index} ${'y'.repeat(200)}`, metadata: META },
  ]).flat();
}

describe('renderContext', () => {
  it('starts with the system prompt, the only system message', () => {
    const messages = renderContext([...conversation(3), { kind: 'user', text: 'now' }], { numCtx: BIG });
    expect(messages[0]).toEqual({ role: 'system', content: SYSTEM_PROMPT });
    expect(messages.filter((message) => message.role === 'system')).toHaveLength(1);
    expect(roles(messages)).toBe('suauauau');
  });

  it('renders notes before the user text and replies in canonical form', () => {
    const messages = renderContext(
      [
        { kind: 'user', text: 'a fox' },
        { kind: 'assistant', text: 'What colour?', metadata: META },
        { kind: 'user', text: 'red', note: '[Current settings: steps 20, cfg 7, seed -1]' },
      ],
      { numCtx: BIG },
    );
    expect(messages.slice(1)).toEqual([
      { role: 'user', content: 'a fox' },
      { role: 'assistant', content: formatCanonicalReply('What colour?', META) },
      { role: 'user', content: '[Current settings: steps 20, cfg 7, seed -1]\n\nred' },
    ]);
  });

  it('merges consecutive user and summary entries so roles alternate', () => {
    const messages = renderContext(
      [
        { kind: 'summary', userWords: ['a fox', 'in snow'], text: 'Current prompt: "a fox in snow"' },
        { kind: 'user', text: 'hello' },
        { kind: 'user', text: 'are you there?' },
      ],
      { numCtx: BIG },
    );
    expect(roles(messages)).toBe('su');
    const content = messages[1]?.content ?? '';
    expect(content).toContain('"a fox"\n- "in snow"');
    expect(content).toContain('Current prompt: "a fox in snow"');
    expect(content.endsWith('\n\nhello\n\nare you there?')).toBe(true);
  });

  it('keeps one canonical reply for consecutive assistant entries and drops a leading one', () => {
    const later: Metadata = { ...META, prompt: 'a blue fox' };
    const messages = renderContext(
      [
        { kind: 'assistant', text: 'Welcome!', metadata: META },
        { kind: 'user', text: 'a fox' },
        { kind: 'assistant', text: 'First.', metadata: META },
        { kind: 'assistant', text: 'Second.', metadata: later },
        { kind: 'user', text: 'ok' },
      ],
      { numCtx: BIG },
    );
    expect(roles(messages)).toBe('suau');
    expect(messages[2]?.content).toBe(formatCanonicalReply('First.\n\nSecond.', later));
  });

  it('drops the oldest pairs first to fit the budget, keeping the latest user entry', () => {
    const entries: ContextEntry[] = [...conversation(20), { kind: 'user', text: 'the latest request' }];
    const full = renderContext(entries, { numCtx: BIG });
    const trimmed = renderContext(entries, { numCtx: 2000, reserveTokens: 500 });
    expect(trimmed.length).toBeLessThan(full.length);
    expect(trimmed[0]).toEqual({ role: 'system', content: SYSTEM_PROMPT });
    expect(trimmed.at(-1)).toEqual({ role: 'user', content: 'the latest request' });
    expect(roles(trimmed)).toMatch(/^s(ua)*u$/);
    // What remains is the most recent part of the conversation, unchanged.
    expect(trimmed.slice(1)).toEqual(full.slice(full.length - trimmed.length + 1));
    const tokens = trimmed.reduce((sum, message) => sum + estimateTokens(message.content) + 4, 0);
    expect(tokens).toBeLessThanOrEqual(1500);
    // One more pair would not have fitted.
    const previousPair = full.slice(full.length - trimmed.length - 1, full.length - trimmed.length + 1);
    const withPair = previousPair.reduce((sum, message) => sum + estimateTokens(message.content) + 4, tokens);
    expect(withPair).toBeGreaterThan(1500);
  });

  it('never drops the system prompt or the latest user entry, even over budget', () => {
    const latest = `huge ${'z'.repeat(20_000)}`;
    const messages = renderContext([...conversation(3), { kind: 'user', text: latest }], { numCtx: 2048 });
    expect(messages).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: latest },
    ]);
  });

  it('estimates about 3.5 characters per token', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('x'.repeat(7))).toBe(2);
    expect(estimateTokens('x'.repeat(8))).toBe(3);
  });
});

describe('buildReminderRequest', () => {
  const context: ChatMessage[] = [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: 'a fox' },
  ];

  it('appends the failed reply, one reminder, then the question again', () => {
    const request = buildReminderRequest(context, 'A fox! {"prompt": "a fox"}');
    expect(request).toEqual([
      ...context,
      { role: 'assistant', content: 'A fox! {"prompt": "a fox"}' },
      { role: 'system', content: buildReminder() },
      { role: 'user', content: 'a fox' },
    ]);
    expect(request.filter((message) => message.role === 'system')).toHaveLength(2);
    expect(context).toHaveLength(2);
  });

  it('never carries an older reminder along', () => {
    const withStray = [...context, { role: 'system' as const, content: 'an old reminder' }];
    const request = buildReminderRequest(withStray, 'second failure');
    expect(request.filter((message) => message.role === 'system')).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'system', content: buildReminder() },
    ]);
    expect(request.at(-3)).toEqual({ role: 'assistant', content: 'second failure' });
  });
});

describe('buildMetadataRequest', () => {
  const context: ChatMessage[] = [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: 'a fox' },
  ];

  it('appends the kept text as the assistant and ends with the request as a user turn (the only one Mistral gives the system text)', () => {
    expect(buildMetadataRequest([...context, { role: 'system', content: 'stray' }], 'A fox!', 'JSON please')).toEqual([
      ...context,
      { role: 'assistant', content: 'A fox!' },
      { role: 'user', content: 'JSON please' },
    ]);
  });

  it('asks for a deterministic answer with a small cap', () => {
    expect(METADATA_OPTIONS).toEqual({ temperature: 0, num_predict: 256 });
  });
});

describe('buildCompactionRequest', () => {
  it('sends the system prompt, the compaction message and the latest user text', () => {
    const input = { userWords: ['a fox', 'in snow'], prompt: 'a fox', settings: { steps: 20, cfg: 7, seed: -1 } };
    expect(buildCompactionRequest({ ...input, latestUserText: 'in snow' })).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'system', content: buildCompactionMessage(input) },
      { role: 'user', content: 'in snow' },
    ]);
  });

  it('asks for a deterministic, short reply', () => {
    expect(COMPACTION_OPTIONS).toEqual({ temperature: 0, num_predict: 512 });
  });
});

describe('collectUserWords', () => {
  it('collects the user words in order, from summaries and user entries, without notes', () => {
    const entries: ContextEntry[] = [
      { kind: 'summary', userWords: ['a fox', 'in snow'], text: '' },
      { kind: 'assistant', text: 'Ok', metadata: META },
      { kind: 'user', text: 'make it red', note: '[The user edited the prompt to: "a fox"]' },
      { kind: 'assistant', text: 'Done', metadata: META },
      { kind: 'user', text: 'thanks' },
    ];
    expect(collectUserWords(entries)).toEqual(['a fox', 'in snow', 'make it red', 'thanks']);
  });
});
