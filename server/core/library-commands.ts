// The library: conversations listed, searched, made, renamed and deleted (with their image files).
import { describeFamily } from './pane.ts';
import type { Thumbnailer } from './thumbnails.ts';
import { describeConversation, UNTITLED, type ConversationSummary } from './library.ts';
import { invalid, notFound, type Result } from './results.ts';
import { DEFAULT_SETTINGS } from './settings.ts';
import type { ConversationView, ServiceState } from './service-state.ts';
import { titleSchema } from './text.ts';

export interface LibraryCommands {
  /** An empty conversation (POST /api/conversations). The page never creates one before its first message. */
  createConversation(): Result<ConversationView>;
  /** The page's empty "new conversation": a fresh id and the defaults, stored by nothing until its first message or Generate. */
  draftConversation(): ConversationView;
  getConversation(id: string): ConversationView | undefined;
  getSummary(id: string): ConversationSummary | undefined;
  /** Newest activity first; `query` finds conversations holding every word (messages, titles, prompts). */
  listConversations(query?: string): ConversationSummary[];
  /** An empty title gives the conversation back its title from the first message. */
  renameConversation(id: string, title: unknown): Result<ConversationSummary>;
  /** Stops its reply or image first; removes every record of it and its image files. */
  deleteConversation(id: string): Promise<Result<void>>;
}

/** `stop` ends a conversation's reply and images, before it is deleted; `thumbnails` go with their images. */
export function createLibraryCommands(state: ServiceState, turns: { stop(id: string): boolean }, thumbnails?: Thumbnailer): LibraryCommands {
  const { deps, findRecord, tryWrite, deleting } = state;
  const getSummary = (id: string): ConversationSummary | undefined => {
    const record = findRecord(id);
    return record ? state.summarize(record) : undefined;
  };
  return {
    createConversation() {
      const created = tryWrite('change', () => deps.store.createConversation({ id: state.newId(), createdAt: state.isoNow(), settings: DEFAULT_SETTINGS }));
      if (!created.ok) return created;
      state.announce(created.value.id, 'created');
      return { ok: true, value: state.view(created.value) };
    },

    draftConversation() {
      const now = state.isoNow();
      const pane = { paneRevision: 0, prompt: '', promptVersion: null, suggestion: null, settings: DEFAULT_SETTINGS, pinned: [], settingSuggestions: {}, canUndo: false, canRedo: false, family: describeFamily(DEFAULT_SETTINGS, state.catalog.serverCheckpoint()) };
      return { id: state.newId(), title: UNTITLED, createdAt: now, updatedAt: now, preview: '', prompt: '', settings: DEFAULT_SETTINGS, turns: [], images: [], checks: [], pane, generating: [] };
    },

    getConversation(id) {
      const record = findRecord(id);
      return record ? state.view(record) : undefined;
    },

    getSummary,

    listConversations(query) {
      // Stryker disable ConditionalExpression: { query: undefined } below: the store reads an undefined query as none
      return deps.store
        .listConversations(query === undefined ? {} : { query })
        .filter((listing) => !deleting.has(listing.id))
        .map(describeConversation);
    },

    // Stryker restore ConditionalExpression
    renameConversation(id, title) {
      if (!findRecord(id)) return notFound(id);
      const parsed = titleSchema.safeParse(title);
      if (!parsed.success) return invalid(parsed.error, 'title');
      const renamed = tryWrite('change', () => deps.store.renameConversation(id, parsed.data === '' ? null : parsed.data));
      if (!renamed.ok) return renamed;
      state.announce(id, 'renamed');
      const summary = getSummary(id);
      return summary ? { ok: true, value: summary } : notFound(id);
    },

    async deleteConversation(id) {
      // Stryker disable next-line ConditionalExpression: an unknown id: the store finds nothing to delete and the same not_found follows
      if (!findRecord(id)) return notFound(id);
      deleting.add(id);
      try {
        // Its reply and images stop first, so nothing writes into a conversation that is gone.
        const images = state.activities.listRunning(id);
        turns.stop(id);
        await state.running.get(id)?.settled;
        await Promise.all(images.map((activity) => activity.settled));
        const deleted = tryWrite('delete', () => deps.store.deleteConversation(id));
        if (!deleted.ok) return deleted;
        if (!deleted.value) return notFound(id);
        state.announceDeleted(id);
        // The records are gone first: a file left behind by a crash here is only unused, never missing.
        for (const file of deleted.value.files) {
          await deps.imageFiles.remove(file).catch((error: unknown) => deps.logger.warn('an image file of a deleted conversation could not be removed', { file, error }));
        }
        // Listed by the deletion itself, after the images being made have settled: none saved meanwhile is missed.
        if (thumbnails) {
          for (const imageId of deleted.value.imageIds) {
            await thumbnails.remove(imageId).catch((error: unknown) => deps.logger.warn('the thumbnail of a deleted image could not be removed', { imageId, error }));
          }
        }
        return { ok: true, value: undefined };
      } finally {
        deleting.delete(id);
      }
    },
  };
}
