import { describe, expect, it } from 'vitest';
import { isSameModel, normalizeModelName } from '../../../server/ollama/index.ts';

describe('model names', () => {
  it('adds the default tag and drops the default registry and namespace', () => {
    expect(normalizeModelName('mistral')).toBe('mistral:latest');
    expect(normalizeModelName('Mistral:7B')).toBe('mistral:7b');
    expect(normalizeModelName('registry.ollama.ai/library/mistral:7b')).toBe('mistral:7b');
    expect(normalizeModelName('myhost:5000/team/model')).toBe('myhost:5000/team/model:latest');
  });

  it('compares names the way Ollama resolves them', () => {
    expect(isSameModel('mistral', 'mistral:latest')).toBe(true);
    expect(isSameModel('mistral', 'mistral:7b')).toBe(false);
    expect(isSameModel('user/mistral', 'mistral')).toBe(false);
  });
});
