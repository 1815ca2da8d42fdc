import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MISTRAL_TEMPLATE, renderMistralPrompt } from '../../fakes/fake-ollama.ts';

describe("the fake's rendering of Ollama's mistral:7b template", () => {
  it('holds the registry template byte for byte (the digest of the layer `ollama pull mistral:7b` fetches)', () => {
    expect(MISTRAL_TEMPLATE).toHaveLength(801);
    expect(createHash('sha256').update(MISTRAL_TEMPLATE).digest('hex')).toBe('491dfa501e59ed17239711477601bdc7f559de5407fbd4a2a79078b271045621');
  });

  it('puts every system message into the last user turn, and ends with the template\'s space before the response', () => {
    expect(
      renderMistralPrompt([
        { role: 'system', content: 'S1' },
        { role: 'user', content: 'u1' },
        { role: 'assistant', content: 'a1' },
        { role: 'system', content: 'S2' },
        { role: 'user', content: 'u2' },
      ]),
    ).toBe('[INST] u1[/INST] a1</s>[INST] S1\n\nS2\n\nu2[/INST] ');
  });

  it('drops system text entirely when the last message is not a user turn', () => {
    expect(
      renderMistralPrompt([
        { role: 'system', content: 'S1' },
        { role: 'user', content: 'u1' },
        { role: 'assistant', content: 'a1' },
        { role: 'system', content: 'reminder' },
      ]),
    ).toBe('[INST] u1[/INST] a1</s> ');
  });

  it('merges consecutive messages of one role, as Ollama collates them', () => {
    expect(renderMistralPrompt([{ role: 'user', content: 'u1' }, { role: 'user', content: 'u2' }])).toBe('[INST] u1\n\nu2[/INST] ');
  });

  it('lower-cases roles, renders nothing for a role without a branch, and closes an empty assistant turn', () => {
    expect(
      renderMistralPrompt([
        { role: 'USER', content: 'u1' },
        { role: 'narrator', content: 'never rendered' },
        { role: 'Assistant', content: '' },
        { role: 'tool', content: '"ok"' },
      ]),
    ).toBe('[INST] u1[/INST]</s>[TOOL_RESULTS] {"content": "ok"} [/TOOL_RESULTS] ');
  });
});
