export { createApp, MAX_BODY_BYTES, type AccessOptions, type AppDeps } from './app.ts';
export { renderEventJson } from './api.ts';
