export { createOllamaChatModel, MAX_OLLAMA_LINE_CHARS } from './chat-model.ts';
export type { OllamaChatModelOptions } from './chat-model.ts';
export { isSameModel, normalizeModelName } from './model-name.ts';
export { MAX_PULL_LINE_CHARS, SHOW_CONCURRENCY } from './models.ts';
