export { createOpenAiImagesBackend, describeOpenAiError } from './openai-images-backend.ts';
export type { OpenAiImagesBackendOptions } from './openai-images-backend.ts';
