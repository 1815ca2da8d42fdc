// A file appears whole or not at all: it is written under a temporary name in the same folder, flushed,
// then renamed; on any failure (disk full, read-only, no permission) the temporary file is removed.
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** The file-system calls used, so a test can make one of them fail like a full disk would. */
export interface AtomicWriteFs {
  open: typeof fs.open;
  rename: typeof fs.rename;
  rm: typeof fs.rm;
}

const NODE_FS: AtomicWriteFs = { open: fs.open, rename: fs.rename, rm: fs.rm };

/** The temporary name starts with a dot, so it never matches the names Easel serves. */
export function temporaryNameFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
}

export async function writeFileAtomically(path: string, bytes: Uint8Array, io: AtomicWriteFs = NODE_FS): Promise<void> {
  const temporary = temporaryNameFor(path);
  let handle: fs.FileHandle | undefined;
  try {
    handle = await io.open(temporary, 'wx');
    await handle.writeFile(bytes);
    // Flushed before the rename, so a power cut cannot leave the final name on an empty file.
    await handle.sync();
    await handle.close();
    handle = undefined;
    await io.rename(temporary, path);
  } catch (error) {
    await handle?.close().catch(() => {});
    await io.rm(temporary, { force: true }).catch(() => {});
    throw error;
  }
}
