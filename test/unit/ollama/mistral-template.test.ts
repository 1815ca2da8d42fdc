import { describe, expect, it } from 'vitest';
import { renderMistralPrompt } from '../../fakes/fake-ollama.ts';

describe("the fake's rendering of Ollama's mistral:7b template", () => {
  it('puts every system message into the last user turn', () => {
    expect(
      renderMistralPrompt([
        { role: 'system', content: 'S1' },
        { role: 'user', content: 'u1' },
        { role: 'assistant', content: 'a1' },
        { role: 'system', content: 'S2' },
        { role: 'user', content: 'u2' },
      ]),
    ).toBe('[INST] u1[/INST] a1</s>[INST] S1\n\nS2\n\nu2[/INST]');
  });

  it('drops system text entirely when the last message is not a user turn', () => {
    expect(
      renderMistralPrompt([
        { role: 'system', content: 'S1' },
        { role: 'user', content: 'u1' },
        { role: 'assistant', content: 'a1' },
        { role: 'system', content: 'reminder' },
      ]),
    ).toBe('[INST] u1[/INST] a1</s>');
  });

  it('merges consecutive messages of one role, as Ollama collates them', () => {
    expect(renderMistralPrompt([{ role: 'user', content: 'u1' }, { role: 'user', content: 'u2' }])).toBe('[INST] u1\n\nu2[/INST]');
  });
});
