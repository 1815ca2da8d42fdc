import { describe, expect, it } from 'vitest';
import { describeModelHealth } from '../../../server/core/index.ts';

const base = { model: 'mistral:7b', version: '0.12.6' };

describe('describeModelHealth', () => {
  it('says Ollama is ready', () => {
    expect(describeModelHealth({ ...base, reachable: true, modelAvailable: true })).toBe('Ollama 0.12.6 is ready with mistral:7b.');
  });

  it('states the remedy once when the problem already names it', () => {
    const problem = 'Ollama is not reachable at http://127.0.0.1:11434. Start it with `ollama serve` (or set --ollama-url).';
    expect(describeModelHealth({ ...base, reachable: false, modelAvailable: false, problem, remedy: 'ollama serve' })).toBe(problem);
  });

  it('adds the remedy when the problem does not name it', () => {
    expect(describeModelHealth({ ...base, reachable: true, modelAvailable: false, problem: 'The model is missing.', remedy: 'ollama pull mistral:7b' })).toBe(
      'The model is missing. Fix: run `ollama pull mistral:7b`.',
    );
  });

  it('without words from the adapter, names the pull command when Ollama runs but the model is missing', () => {
    expect(describeModelHealth({ ...base, reachable: true, modelAvailable: false })).toBe(
      'The model mistral:7b is not pulled. Fix: run `ollama pull mistral:7b`.',
    );
    expect(describeModelHealth({ ...base, version: null, reachable: false, modelAvailable: false })).toBe('Ollama is not reachable. Fix: run `ollama serve`.');
  });
});
