import { unzipSync, zipSync, type Zippable } from 'fflate';
import type { ArchiveCodec, ArchiveErrorCode, ArchiveLimits, UnpackResult } from '../core/index.ts';

/**
 * Zip archives with fflate. PNGs are stored as they are (already compressed), text is deflated. Unpacking
 * reads the central directory first and refuses, before inflating anything, a name that would leave the
 * folder, a repeated name, too many entries, or declared sizes past the limits; fflate then inflates each
 * entry into a buffer of its declared size, so an entry can never grow past it.
 */
export function createZipArchive(): ArchiveCodec {
  return {
    pack(files) {
      const input: Zippable = {};
      for (const [name, bytes] of files) input[name] = [bytes, { level: name.endsWith('.png') ? 0 : 6 }];
      return zipSync(input);
    },
    unpack(bytes, limits) {
      return unpackZip(bytes, limits);
    },
  };
}

function unpackZip(bytes: Uint8Array, limits: ArchiveLimits): UnpackResult {
  let problem: { code: ArchiveErrorCode; message: string } | undefined;
  const refuse = (code: ArchiveErrorCode, message: string) => {
    problem ??= { code, message };
    return false;
  };
  const names = new Set<string>();
  let total = 0;
  let unpacked: Record<string, Uint8Array>;
  try {
    unpacked = unzipSync(bytes, {
      filter(file) {
        if (problem) return false;
        const unsafe = describeUnsafeName(file.name);
        if (unsafe) return refuse('unsafe_path', `The file holds an entry named ${JSON.stringify(file.name)}, ${unsafe}; Easel does not import it.`);
        // Folders carry no data.
        if (file.name.endsWith('/')) return false;
        if (names.has(file.name)) return refuse('unsafe_path', `The file holds two entries named ${JSON.stringify(file.name)}; Easel does not import it.`);
        names.add(file.name);
        if (names.size > limits.maxFiles) return refuse('too_large', `The file holds more than ${limits.maxFiles} entries; an Easel export holds one per image and conversation.json.`);
        if (file.originalSize > limits.maxFileBytes(file.name)) {
          return refuse('too_large', `${file.name} unpacks to ${describeBytes(file.originalSize)}, more than Easel accepts for it (${describeBytes(limits.maxFileBytes(file.name))}).`);
        }
        total += file.originalSize;
        if (total > limits.maxTotalBytes) return refuse('too_large', `The file unpacks to more than ${describeBytes(limits.maxTotalBytes)}, more than Easel imports at once.`);
        if (file.compression !== 0 && file.compression !== 8) {
          return refuse('malformed', `${file.name} is compressed with a method Easel cannot read (zip method ${file.compression}); export the conversation from Easel again.`);
        }
        return true;
      },
    });
  } catch {
    return { ok: false, error: { code: 'malformed', message: 'The file is not a zip archive, or it is damaged: import a .zip made with Export.' } };
  }
  if (problem) return { ok: false, error: problem };
  return { ok: true, files: new Map(Object.entries(unpacked)) };
}

/** Why a name could point outside the folder it is unpacked into, or undefined when it cannot. */
export function describeUnsafeName(name: string): string | undefined {
  if (name === '') return 'which is empty';
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'which holds a control character';
  if (name.includes('\\')) return 'which uses a backslash (a Windows path)';
  if (name.startsWith('/')) return 'which is an absolute path';
  if (/^[A-Za-z]:/.test(name)) return 'which names a drive';
  const segments = name.replace(/\/$/, '').split('/');
  if (segments.some((segment) => segment === '..')) return 'which leads out of its folder ("..")';
  if (segments.some((segment) => segment === '' || segment === '.')) return 'which is not a plain path';
  return undefined;
}

function describeBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${Math.round(bytes / 1024 / 1024)} MB` : `${Math.ceil(bytes / 1024)} KB`;
}
