import { closeSync, openSync, writeSync } from 'node:fs';
import Database from 'better-sqlite3';

/** Overwrites every page after the first with garbage, then has another connection write page 1 so a running store's cache is dropped. */
export function damageFromPage2(path: string): void {
  const checkpoint = new Database(path);
  checkpoint.pragma('wal_checkpoint(TRUNCATE)');
  const pageSize = checkpoint.pragma('page_size', { simple: true }) as number;
  const pages = checkpoint.pragma('page_count', { simple: true }) as number;
  checkpoint.close();
  const garbage = Buffer.alloc((pages - 1) * pageSize, 0xab);
  const fd = openSync(path, 'r+');
  writeSync(fd, garbage, 0, garbage.length, pageSize);
  closeSync(fd);
  const other = new Database(path);
  other.pragma('application_id = 7');
  other.close();
}
