export { createOllamaChatModel, MAX_OLLAMA_LINE_CHARS } from './chat-model.ts';
export type { OllamaChatModelOptions } from './chat-model.ts';
export { isSameModel, normalizeModelName } from './model-name.ts';
