// renderContext trims before it renders (issue 12): checked against the plain rule, "render every
// turn, then drop the oldest user+assistant pairs while over budget, never the latest user message",
// over random histories, and by counting how many replies a long history actually renders.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SYSTEM_PROMPT, estimateTokens, formatCanonicalReply, renderContext } from '../../../server/protocol/index.ts';
import type { ChatMessage, ContextEntry, Metadata } from '../../../server/protocol/index.ts';

const META: Metadata = { prompt: 'a red fox', generate_image: false, steps: 20, cfg: 7, seed: -1 };

function cost(message: ChatMessage): number {
  return estimateTokens(message.content) + 4;
}

/** The reference: every turn rendered, then trimmed from the front a pair at a time. */
function renderThenTrim(entries: ContextEntry[], numCtx: number, reserveTokens: number): ChatMessage[] {
  const messages: ChatMessage[] = [];
  for (const entry of entries) {
    const previous = messages.at(-1);
    if (entry.kind === 'assistant') {
      if (previous?.role === 'assistant') throw new Error('the generator never makes two replies in a row');
      messages.push({ role: 'assistant', content: formatCanonicalReply(entry.text, entry.metadata) });
      continue;
    }
    if (entry.kind !== 'user' || entry.note !== undefined) throw new Error('plain user entries only');
    if (previous?.role === 'user') previous.content += `\n\n${entry.text}`;
    else messages.push({ role: 'user', content: entry.text });
  }
  while (messages[0]?.role === 'assistant') messages.shift();
  const system: ChatMessage = { role: 'system', content: SYSTEM_PROMPT };
  const latestUser = messages.map((message) => message.role).lastIndexOf('user');
  let total = [system, ...messages].reduce((sum, message) => sum + cost(message), 0);
  let start = 0;
  while (total > numCtx - reserveTokens && start + 1 < latestUser) {
    total -= cost(messages[start] as ChatMessage) + cost(messages[start + 1] as ChatMessage);
    start += 2;
  }
  return [system, ...messages.slice(start)];
}

const entryArbitrary: fc.Arbitrary<ContextEntry> = fc.oneof(
  fc.string({ maxLength: 400 }).map((text): ContextEntry => ({ kind: 'user', text })),
  fc.string({ maxLength: 400 }).map((text): ContextEntry => ({ kind: 'assistant', text: `reply ${text}`, metadata: META })),
);

/** No two replies in a row (merging those is tested in context.test.ts). */
const historyArbitrary = fc.array(entryArbitrary, { maxLength: 40 }).map((entries) =>
  entries.filter((entry, index) => !(entry.kind === 'assistant' && entries[index - 1]?.kind === 'assistant')),
);

describe('renderContext: trimmed before rendering', () => {
  it('gives exactly what rendering everything and then trimming gives', () => {
    fc.assert(
      fc.property(historyArbitrary, fc.integer({ min: 0, max: 4000 }), fc.integer({ min: 0, max: 1500 }), (entries, numCtx, reserveTokens) => {
        expect(renderContext(entries, { numCtx, reserveTokens })).toEqual(renderThenTrim(entries, numCtx, reserveTokens));
      }),
      { numRuns: 2000 },
    );
  });

  it('renders only the replies it keeps, plus the pair that did not fit', () => {
    let rendered = 0;
    // formatCanonicalReply reads the prompt once per rendered reply; grouping entries into turns does not.
    const counted: Metadata = {
      ...META,
      get prompt() {
        rendered += 1;
        return META.prompt;
      },
    };
    const entries: ContextEntry[] = Array.from({ length: 1000 }, (_, index): ContextEntry[] => [
      { kind: 'user', text: `message ${index} ${'x'.repeat(300)}` },
      { kind: 'assistant', text: `reply ${index} ${'y'.repeat(300)}`, metadata: counted },
    ]).flat();
    entries.push({ kind: 'user', text: 'the latest request' });
    const messages = renderContext(entries, { numCtx: 8192 });
    const keptReplies = messages.filter((message) => message.role === 'assistant').length;
    expect(keptReplies).toBeGreaterThan(5);
    expect(keptReplies).toBeLessThan(100);
    expect(rendered).toBe(keptReplies + 1);
  });
});
