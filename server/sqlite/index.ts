export { createSqliteStore } from './store.ts';
