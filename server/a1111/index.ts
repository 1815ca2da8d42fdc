export { createA1111Backend, describeA1111Error } from './a1111-backend.ts';
export type { A1111BackendOptions } from './a1111-backend.ts';
