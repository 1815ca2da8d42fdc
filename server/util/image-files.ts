import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomically } from './write-file-atomically.ts';

// Image names are 128 random bits as hex: nothing else is ever read, written or removed, so a name from
// the database or an archive can never reach outside the images folder.
const IMAGE_NAME = /^[a-f0-9]{32}\.png$/;

export function isImageFileName(name: string): boolean {
  return IMAGE_NAME.test(name);
}

/** The PNG files of the images folder (structurally core's ImageFiles port). */
export function createImageFiles(dir: string) {
  const pathOf = (name: string) => {
    if (!IMAGE_NAME.test(name)) throw new Error(`not an image file name: ${JSON.stringify(name)}`);
    return join(dir, name);
  };
  return {
    async read(name: string): Promise<Uint8Array> {
      return new Uint8Array(await readFile(pathOf(name)));
    },
    save: (name: string, bytes: Uint8Array): Promise<void> => writeFileAtomically(pathOf(name), bytes),
    async remove(name: string): Promise<void> {
      await rm(pathOf(name), { force: true });
    },
  };
}
