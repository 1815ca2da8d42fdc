import { describe, expect, it } from 'vitest';
import {
  NEUTRAL_FALLBACK_TEXT,
  RESET_MESSAGE,
  SYSTEM_PROMPT,
  buildCompactionMessage,
  buildMetadataReminder,
  buildReminder,
  formatUserNote,
  parseMetadataReply,
  parseReply,
} from '../../../server/protocol/index.ts';
import type { ParseResult } from '../../../server/protocol/index.ts';

function metadataOf(result: ParseResult) {
  if (!result.ok) throw new Error(`example does not parse: ${result.error.message}`);
  return result.value;
}

function exampleAfter(heading: string): string {
  const start = SYSTEM_PROMPT.indexOf(`${heading}\n`);
  expect(start).toBeGreaterThanOrEqual(0);
  const body = SYSTEM_PROMPT.slice(start + heading.length + 1);
  return body.slice(0, body.indexOf('\n\n'));
}

describe('SYSTEM_PROMPT', () => {
  it('requires ---\\n{JSON} at the end of every message, text before the delimiter', () => {
    expect(SYSTEM_PROMPT).toContain('End EVERY message with ---\\n{JSON}');
    expect(SYSTEM_PROMPT).toContain('It goes BEFORE the delimiter');
    expect(SYSTEM_PROMPT).toContain('ALWAYS include the delimiter and JSON, even if just asking questions');
    expect(SYSTEM_PROMPT).toContain('under 200 characters');
  });

  it('has a question-asking example with an empty prompt, and a ready example, both valid replies', () => {
    const asking = metadataOf(parseReply(exampleAfter('Example, asking questions:')));
    expect(asking.text).toContain('Let me ask a few questions');
    expect(asking.metadata).toEqual({ prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 });
    expect(asking.repairs).toEqual([]);
    const ready = metadataOf(parseReply(exampleAfter('Example, ready:')));
    expect(ready.metadata).toMatchObject({ generate_image: true, steps: 20, cfg: 7, seed: -1 });
    expect(ready.metadata.prompt).not.toBe('');
  });

  it('has negative examples: JSON without the delimiter, no JSON, JSON in the middle', () => {
    expect(SYSTEM_PROMPT).toMatch(/JSON without the delimiter\. Wrong:/);
    expect(SYSTEM_PROMPT).toMatch(/No JSON at all\. Wrong:/);
    expect(SYSTEM_PROMPT).toMatch(/JSON in the middle\. Wrong:/);
  });

  it('keeps the user edits and current settings', () => {
    expect(SYSTEM_PROMPT).toContain('[The user edited the prompt to: "..."]');
    expect(SYSTEM_PROMPT).toContain('build on that prompt, not on your previous one');
    expect(SYSTEM_PROMPT).toContain('[Current settings: ...]');
  });

  it('stays compact for a 7B model', () => {
    expect(SYSTEM_PROMPT.length).toBeLessThan(2500);
  });
});

describe('buildReminder', () => {
  it('asks for --- and JSON and shows a complete example that parses', () => {
    const reminder = buildReminder();
    expect(reminder.startsWith('Please end your response with `---` followed by JSON using this format:')).toBe(true);
    const example = /format:\n\n([\s\S]*?\n---\n\{.*\})/.exec(reminder)?.[1];
    expect(example).toBeDefined();
    const parsed = metadataOf(parseReply(example ?? ''));
    expect(parsed.text).not.toBe('');
    expect(Object.keys(parsed.metadata)).toEqual(['prompt', 'generate_image', 'steps', 'cfg', 'seed']);
    expect(parsed.repairs).toEqual([]);
  });
});

describe('buildMetadataReminder', () => {
  it('asks for the JSON alone, with the current prompt and settings, and an example that parses alone', () => {
    const reminder = buildMetadataReminder({ prompt: 'a "red" fox', settings: { steps: 30, cfg: 6.5, seed: 42 } });
    expect(reminder).toMatch(/^Your reply above is missing its JSON\. Do not write your reply again: write ONLY the JSON/);
    expect(reminder).toContain('Current prompt: "a \\"red\\" fox"');
    expect(reminder).toContain('Current settings: steps 30, cfg 6.5, seed 42');
    const example = /For example: (\{.*\})$/.exec(reminder)?.[1] ?? '';
    expect(metadataOf(parseMetadataReply(example)).metadata).toEqual({ prompt: 'a "red" fox', generate_image: false, steps: 30, cfg: 6.5, seed: 42 });
    expect(buildMetadataReminder({ prompt: '', settings: { steps: 20, cfg: 7, seed: -1 } })).toContain('Current prompt: (none yet)');
  });
});

describe('buildCompactionMessage', () => {
  const input = {
    userWords: ['a cat in a hat', 'make the hat "blue"', 'and\nmake it a watercolour'],
    prompt: 'a cat wearing a blue hat',
    settings: { steps: 30, cfg: 6.5, seed: 1234 },
  };

  it('keeps every user message verbatim, most recent last, with the prompt and settings', () => {
    const message = buildCompactionMessage(input);
    const lines = message.split('\n');
    expect(lines[0]).toBe('User wants:');
    expect(lines.slice(1, 4)).toEqual(input.userWords.map((words) => `- ${JSON.stringify(words)}`));
    expect(lines.slice(1, 4).map((line) => JSON.parse(line.slice(2)))).toEqual(input.userWords);
    expect(message).toContain('Current prompt: "a cat wearing a blue hat"');
    expect(message).toContain('Current settings: steps 30, cfg 6.5, seed 1234');
  });

  it('ends by asking for JSON only, with an example that the parser accepts', () => {
    const message = buildCompactionMessage(input);
    const match = /Respond with ONLY JSON \(no conversational text\): (\{.*\})$/.exec(message);
    expect(match).not.toBeNull();
    const parsed = metadataOf(parseReply(match?.[1] ?? ''));
    expect(parsed.metadata).toEqual({ prompt: input.prompt, generate_image: false, steps: 30, cfg: 6.5, seed: 1234 });
  });

  it('is deterministic and says when there is no prompt yet', () => {
    const empty = { userWords: ['a dog'], prompt: '', settings: { steps: 20, cfg: 7, seed: -1 } };
    expect(buildCompactionMessage(empty)).toBe(buildCompactionMessage(structuredClone(empty)));
    expect(buildCompactionMessage(empty)).toContain('Current prompt: (none yet)');
  });
});

describe('formatUserNote', () => {
  it('writes the edited prompt', () => {
    expect(formatUserNote({ editedPrompt: 'a dog in the rain' })).toBe('[The user edited the prompt to: "a dog in the rain"]');
  });

  it('writes the current settings', () => {
    expect(formatUserNote({ settings: { steps: 30, cfg: 6.5, seed: 1234 } })).toBe('[Current settings: steps 30, cfg 6.5, seed 1234]');
    expect(
      formatUserNote({ settings: { steps: 30, cfg: 6.5, seed: -1, width: 512, height: 768, negativePrompt: 'blurry' } }),
    ).toBe('[Current settings: steps 30, cfg 6.5, seed -1, size 512x768, negative prompt "blurry"]');
  });

  it('writes both on two lines, and nothing when there is nothing to say', () => {
    expect(formatUserNote({ editedPrompt: 'say "hi"', settings: { steps: 20, cfg: 7, seed: -1 } })).toBe(
      '[The user edited the prompt to: "say \\"hi\\""]\n[Current settings: steps 20, cfg 7, seed -1]',
    );
    expect(formatUserNote({})).toBeUndefined();
  });
});

describe('fixed messages', () => {
  it('uses the reset message of story 010 exactly', () => {
    expect(RESET_MESSAGE).toBe("I'm having trouble understanding the format. Let's start fresh.");
  });

  it('has a short neutral fallback text that is not machine format', () => {
    expect(NEUTRAL_FALLBACK_TEXT).toMatch(/^[A-Z][^{}\n-]{5,60}\.$/);
  });
});
