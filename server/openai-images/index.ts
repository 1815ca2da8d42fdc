export { createOpenAiImagesBackend, describeOpenAiError } from './openai-images-backend.ts';
export type { OpenAiImagesBackendOptions, OpenAiImagesDialect } from './openai-images-backend.ts';
