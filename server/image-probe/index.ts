// --image-backend auto: which image server answers at a URL, and the backend that becomes it once found.
export { probeImageServer } from './probe.ts';
export type { FoundImageServer, ProbeOptions, ProbeResult } from './probe.ts';
export { createAutoImageBackend } from './auto-backend.ts';
export type { AutoImageBackendOptions } from './auto-backend.ts';
