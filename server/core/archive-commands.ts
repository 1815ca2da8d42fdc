// Export and import: a conversation as one zip, and a zip back as a new conversation. Its images are written
// before the one transaction that stores it, and removed again when anything after fails.
import { randomBytes } from 'node:crypto';
import { buildArchiveFiles, IMPORT_LIMITS, MAX_IMPORT_BYTES, nameArchive, readArchiveFiles } from './archive.ts';
import { describeConversation } from './library.ts';
import { notFound, refuse, type Result } from './results.ts';
import { MAX_TITLE_CHARS } from './text.ts';
import type { ServiceState } from './service-state.ts';

export interface ArchiveCommands {
  exportConversation(id: string): Promise<Result<{ fileName: string; bytes: Uint8Array }>>;
  /** A zip made by exportConversation, stored as a new conversation (new id, new image names). */
  importConversation(bytes: Uint8Array): Promise<Result<{ id: string }>>;
}

export function createArchiveCommands(state: ServiceState): ArchiveCommands {
  const { deps, findRecord, tryWrite } = state;
  return {
    async exportConversation(id) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      const conversation = state.view(record);
      const exportedAt = state.isoNow();
      const files = await buildArchiveFiles(
        {
          ...conversation,
          title: record.title,
          context: deps.store.readContext(id),
          promptVersions: deps.store.listPromptVersions(id),
          promptVersion: record.promptVersion,
          suggestion: record.suggestion,
          pinned: record.pinned,
          settingSuggestions: record.settingSuggestions,
        },
        {
          exportedAt,
          readImage: (file) =>
            deps.imageFiles.read(file).catch((error: unknown) => {
              deps.logger.warn('an image file is missing and was left out of the export', { conversationId: id, file, error });
              return undefined;
            }),
        },
      );
      return { ok: true, value: { fileName: nameArchive(conversation.title, exportedAt), bytes: deps.archive.pack(files) } };
    },

    async importConversation(bytes) {
      if (bytes.byteLength > MAX_IMPORT_BYTES) return refuse('too_large', describeImportTooLarge(bytes.byteLength));
      const unpacked = deps.archive.unpack(bytes, IMPORT_LIMITS);
      if (!unpacked.ok) {
        return refuse(unpacked.error.code === 'malformed' ? 'bad_archive' : unpacked.error.code === 'too_large' ? 'too_large' : 'invalid', unpacked.error.message);
      }
      const id = state.newId();
      const read = await readArchiveFiles(unpacked.files, { conversationId: id, newImageId: () => randomBytes(16).toString('hex'), maxPixels: deps.maxImagePixels });
      if (!read.ok) return refuse('invalid', read.error.message);
      // Stryker disable next-line ArrayDeclaration: removing a name that is no image fails, and the failure is ignored as for a file already gone
      const written: string[] = [];
      const removeWritten = async () => {
        for (const name of written) await deps.imageFiles.remove(name).catch(() => undefined);
      };
      try {
        for (const file of read.value.files) {
          await deps.imageFiles.save(file.name, file.bytes);
          written.push(file.name);
        }
      } catch (error) {
        await removeWritten();
        deps.logger.error('an imported image could not be written', { error });
        const code = (error as NodeJS.ErrnoException).code;
        return refuse(
          'storage',
          code === 'ENOSPC' || code === 'EDQUOT'
            ? `Nothing was imported: the disk holding the images folder is full (${code}). Free some disk space, then import the file again.`
            : `Nothing was imported: an image could not be written to the images folder${code ? ` (${code})` : ''}. Check that Easel may write to its data folder (--data-dir), then import the file again.`,
        );
      }
      const stored = tryWrite('import', () => deps.store.importConversation(read.value.conversation));
      if (!stored.ok) {
        await removeWritten();
        return stored;
      }
      // A copy of a conversation the library has (an export imported back) is told apart from its original.
      const record = findRecord(id);
      const title = record ? state.summarize(record).title : undefined;
      const others = new Set(deps.store.listConversations().filter((listing) => listing.id !== id).map((listing) => describeConversation(listing).title));
      if (title !== undefined && others.has(title)) tryWrite('import', () => deps.store.renameConversation(id, nameCopy(title, others)));
      state.announce(id, 'created');
      return { ok: true, value: { id } };
    },
  };
}

function describeImportTooLarge(bytes: number): string {
  return `The file is ${Math.round(bytes / 1024 / 1024)} MB; Easel imports conversations of at most ${MAX_IMPORT_BYTES / 1024 / 1024} MB.`;
}

/** `A fox (copy)`, then `A fox (copy 2)`…: the first that no other conversation has, within the title's length. */
export function nameCopy(title: string, taken: ReadonlySet<string>): string {
  for (let number = 1; ; number++) {
    const suffix = number === 1 ? ' (copy)' : ` (copy ${number})`;
    const name = `${title.slice(0, MAX_TITLE_CHARS - suffix.length).trimEnd()}${suffix}`;
    if (!taken.has(name)) return name;
  }
}
