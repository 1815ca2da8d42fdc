import type { ModelHealth } from './ports.ts';

/**
 * Ollama's state in one sentence for a person, with the exact command that fixes it said once, in
 * backticks (the page shows those as code). The log and the status line both use it.
 */
export function describeModelHealth(health: ModelHealth): string {
  if (health.reachable && health.modelAvailable) {
    return `Ollama${health.version ? ` ${health.version}` : ''} is ready with ${health.model}.`;
  }
  const remedy = health.remedy ?? (health.reachable ? `ollama pull ${health.model}` : 'ollama serve');
  const problem = health.problem ?? (health.reachable ? `The model ${health.model} is not pulled.` : 'Ollama is not reachable.');
  return problem.includes(remedy) ? problem : `${problem} Fix: run \`${remedy}\`.`;
}
