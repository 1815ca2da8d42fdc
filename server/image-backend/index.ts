// What every image adapter shares, named after no technology so that any adapter may import it.
export { createImageServerFetch, createRedirectError, isRedirectStatus } from './server-fetch.ts';
export type { ImageServerFetch, ImageServerFetchOptions, RedirectAnswer } from './server-fetch.ts';
