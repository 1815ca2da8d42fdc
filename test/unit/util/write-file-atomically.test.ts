import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writeFileAtomically, type AtomicWriteFs } from '../../../server/util/index.ts';
import { makeErrnoError } from '../../helpers/streams.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'easel-atomic-'));
  dirs.push(dir);
  return dir;
}

/** Real file-system calls, except that the write stops half-way with ENOSPC, as on a full disk. */
const diskFullHalfway: AtomicWriteFs = {
  rename: fs.rename,
  rm: fs.rm,
  async open(path, flags) {
    const handle = await fs.open(path, flags);
    return new Proxy(handle, {
      get(target, key) {
        if (key === 'writeFile') {
          return async (bytes: Uint8Array) => {
            await target.writeFile(bytes.subarray(0, bytes.length / 2));
            throw makeErrnoError('ENOSPC');
          };
        }
        const value = Reflect.get(target, key) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  },
};

describe('writeFileAtomically', () => {
  it('writes the file whole and leaves nothing else behind', async () => {
    const dir = tempDir();
    await writeFileAtomically(join(dir, 'a.png'), Uint8Array.of(1, 2, 3));
    expect(readdirSync(dir)).toEqual(['a.png']);
    expect([...readFileSync(join(dir, 'a.png'))]).toEqual([1, 2, 3]);
  });

  it('a disk that fills up mid-write leaves no partial file, and the error says ENOSPC', async () => {
    const dir = tempDir();
    let written = false;
    const spy: AtomicWriteFs = {
      ...diskFullHalfway,
      async open(path, flags) {
        const handle = await diskFullHalfway.open(path, flags);
        written = existsSync(path as string);
        return handle;
      },
    };
    await expect(writeFileAtomically(join(dir, 'a.png'), new Uint8Array(4096), spy)).rejects.toMatchObject({ code: 'ENOSPC' });
    expect(written).toBe(true); // the temporary file did exist…
    expect(readdirSync(dir)).toEqual([]); // …and is gone
  });

  it('a failed rename (read-only, EROFS) removes the temporary file', async () => {
    const dir = tempDir();
    const io: AtomicWriteFs = { open: fs.open, rm: fs.rm, rename: () => Promise.reject(makeErrnoError('EROFS')) };
    await expect(writeFileAtomically(join(dir, 'a.png'), new Uint8Array(10), io)).rejects.toMatchObject({ code: 'EROFS' });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a file where the folder should be fails with ENOTDIR and creates nothing', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'images'), 'not a folder');
    await expect(writeFileAtomically(join(dir, 'images', 'a.png'), new Uint8Array(10))).rejects.toMatchObject({ code: 'ENOTDIR' });
    expect(readdirSync(dir)).toEqual(['images']);
  });
});
