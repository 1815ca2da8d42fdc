// What every image adapter shares, named after no technology so that any adapter may import it.
export { createImageServerFetch, createRedirectError, isRedirectStatus } from './server-fetch.ts';
export type { ImageServerFetch, ImageServerFetchOptions, RedirectAnswer } from './server-fetch.ts';
export { describeConnectionFailure, describeImageTooLarge, describeStopped } from './errors.ts';
export type { ConnectionWords, ImageStopReason, StoppedWords, TooLargeWords } from './errors.ts';
export { DEFAULT_IMAGE_TIMEOUT_MS, runImageJob } from './run-job.ts';
export type { ImageJobOptions } from './run-job.ts';
export { checkWithin, DEFAULT_HEALTH_TIMEOUT_MS, listWithin } from './health.ts';
export type { HealthCheckOptions } from './health.ts';
