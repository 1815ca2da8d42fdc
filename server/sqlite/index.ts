export { createSqliteStore, latestSchemaVersion, StoreOpenError, toSearchTerms } from './store.ts';
export type { SqliteStoreOptions, StoreOpenErrorCode } from './store.ts';
