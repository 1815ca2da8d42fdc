// The gallery: every picture made, in every conversation, newest first; searched, narrowed, paged; an image
// deleted (its file and thumbnail with it, its conversation's followers told); thumbnails served.
import { z } from 'zod';
import type { ImageCursor } from './conversation.ts';
import type { ImageRecord } from './image-record.ts';
import { describeConversation, type ConversationSummary } from './library.ts';
import { invalid, refuse, type Result } from './results.ts';
import type { ServiceDeps, ServiceState } from './service-state.ts';
import { oneLineText, toSearchWords } from './text.ts';
import { isImageId, withThumbnails, type Thumbnailer } from './thumbnails.ts';

/** What the service needs for the gallery beside its own dependencies. */
export interface GalleryDeps {
  /** Makes and keeps the thumbnails; without one, thumbnails are not served (the gallery lists as ever). */
  thumbnails?: Thumbnailer;
}

/** A page of the gallery asks for this many images unless it says otherwise, and for at most GALLERY_MAX_LIMIT. */
export const GALLERY_DEFAULT_LIMIT = 60;
export const GALLERY_MAX_LIMIT = 200;
/** A search looks for at most this many words (each one narrows the result). */
const MAX_SEARCH_WORDS = 16;

export interface GalleryPage {
  /** Newest first. */
  images: ImageRecord[];
  /** What to send as `before` for the next page; null when this is the last. Opaque. */
  next: string | null;
}

export interface GalleryFilters {
  /** The conversations that have images, newest activity first. */
  conversations: ConversationSummary[];
  /** The checkpoints images were made with, as the image server named them. */
  checkpoints: string[];
}

/** The search and filters as the gallery shows them, checked: what a page of it was asked with. */
export interface GalleryQuery {
  q: string;
  conversationId: string | undefined;
  checkpoint: string | undefined;
  limit: number;
  before: string | undefined;
}

export interface GalleryCommands {
  /**
   * Every conversation's images, newest first: `q` (every word in the prompt, any case), `conversationId`,
   * `checkpoint` (the image's `model`), `limit` (1–200, default 60), `before` (the `next` of the page before).
   * A value out of range is 'invalid'; '' is the same as leaving it out.
   */
  listGallery(query: Record<string, unknown>): Result<GalleryPage & { query: GalleryQuery }>;
  /** What the gallery can be narrowed to. */
  listGalleryFilters(): GalleryFilters;
  /** Deletes one image: its record, then its file and thumbnail; the followers of its conversation see it go. */
  deleteImage(id: string): Promise<Result<void>>;
  /** The image's thumbnail (WebP), made now if it never was; `signal` ends the wait (the client hung up). */
  readThumbnail(id: string, signal?: AbortSignal): Promise<Result<Uint8Array>>;
}

const emptyIsAbsent = (value: unknown) => (value === '' ? undefined : value);

const galleryQuerySchema = z.object({
  q: z.preprocess(emptyIsAbsent, z.string({ error: 'q must be text.' }).max(500, { error: 'q holds at most 500 characters.' }).optional()),
  conversationId: z.preprocess(
    emptyIsAbsent,
    z.string({ error: 'conversationId must be a conversation id.' }).max(100, { error: 'conversationId must be a conversation id.' }).optional(),
  ),
  checkpoint: z.preprocess(emptyIsAbsent, oneLineText(z.string({ error: 'checkpoint must be text.' }).max(500, { error: 'checkpoint holds at most 500 characters.' }), 'The checkpoint').optional()),
  limit: z.preprocess(
    (value) => (typeof value === 'string' && /^\d{1,6}$/.test(value) ? Number(value) : emptyIsAbsent(value)),
    z
      .int({ error: `limit must be a whole number from 1 to ${GALLERY_MAX_LIMIT}.` })
      .min(1, { error: `limit must be a whole number from 1 to ${GALLERY_MAX_LIMIT}.` })
      .max(GALLERY_MAX_LIMIT, { error: `limit must be a whole number from 1 to ${GALLERY_MAX_LIMIT}.` })
      .optional(),
  ),
  before: z.preprocess(emptyIsAbsent, z.string({ error: 'before must be the `next` of an earlier page, as it was given.' }).optional()),
});

/**
 * A page's end as a cursor: opaque to clients (base64url), so it can change shape without breaking a script
 * that only passes it back. It names a place in the order, not an image, so deleting that image breaks nothing.
 */
export function encodeCursor(cursor: ImageCursor): string {
  return Buffer.from(`${cursor.seq}|${cursor.createdAt}`, 'utf8').toString('base64url');
}

export function decodeCursor(text: string): ImageCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(text)) return undefined;
  const match = /^(\d{1,15})\|([0-9T:.+Z-]{10,40})$/.exec(Buffer.from(text, 'base64url').toString('utf8'));
  return match?.[1] && match[2] ? { seq: Number(match[1]), createdAt: match[2] } : undefined;
}

/** The service's dependencies, each image it saves getting its thumbnail at once (not at its first showing). */
export function makeThumbnailsOnSave<D extends ServiceDeps & GalleryDeps>(deps: D): D {
  const { thumbnails } = deps;
  if (!thumbnails) return deps;
  const make = (imageId: string) => {
    try {
      const image = deps.store.getImage(imageId);
      if (!image) return;
      void thumbnails.ensure(image.file, image.id).then((made) => {
        if (!made.ok) deps.logger.warn('no thumbnail was made for a new image', { imageId, reason: made.error.message });
      });
    } catch (error) {
      // The store cannot be read now: the gallery makes it when it shows the image.
      deps.logger.warn('no thumbnail was made for a new image', { imageId, error });
    }
  };
  return { ...deps, images: withThumbnails(deps.images, make) };
}

export function createGalleryCommands(state: ServiceState, thumbnails: Thumbnailer | undefined): GalleryCommands {
  const { deps, deleting, tryWrite } = state;

  /** The stored image, unless its conversation is being deleted. */
  function findImage(id: string): ImageRecord | undefined {
    // Stryker disable next-line ConditionalExpression: every stored image has an id Easel made (an import makes new ones): the store finds nothing for another id either way
    if (!isImageId(id)) return undefined;
    const image = deps.store.getImage(id);
    return image && !deleting.has(image.conversationId) ? image : undefined;
  }

  const noSuchImage = (id: string) => refuse('not_found', `There is no image ${JSON.stringify(id)}: it was deleted, or the id is wrong.`);

  return {
    listGallery(raw) {
      const parsed = galleryQuerySchema.safeParse(raw);
      if (!parsed.success) return invalid(parsed.error);
      const { q = '', conversationId, checkpoint, limit = GALLERY_DEFAULT_LIMIT, before } = parsed.data;
      const cursor = before === undefined ? undefined : decodeCursor(before);
      if (before !== undefined && !cursor) {
        const message = 'before must be the `next` of an earlier page, as it was given.';
        return refuse('invalid', message, { before: message });
      }
      const list = deps.store.listAllImages({
        words: toSearchWords(q).slice(0, MAX_SEARCH_WORDS),
        limit,
        // Undefined when not asked for: the store then adds no condition for it.
        conversationId,
        model: checkpoint,
        before: cursor,
      });
      return {
        ok: true,
        value: {
          images: list.images.filter((image) => !deleting.has(image.conversationId)),
          next: list.next === null ? null : encodeCursor(list.next),
          query: { q, conversationId, checkpoint, limit, before },
        },
      };
    },

    listGalleryFilters() {
      const facets = deps.store.listImageFacets();
      return {
        conversations: facets.conversations.filter((listing) => !deleting.has(listing.id)).map(describeConversation),
        checkpoints: facets.models,
      };
    },

    async deleteImage(id) {
      const image = findImage(id);
      if (!image) return noSuchImage(id);
      const deleted = tryWrite('delete', () => deps.store.deleteImage(id));
      if (!deleted.ok) return deleted;
      if (!deleted.value) return noSuchImage(id);
      state.feed.publish(image.conversationId, { type: 'image_deleted', imageId: id });
      // The record is gone first: a file left behind by a crash here is only unused, never missing.
      await deps.imageFiles.remove(image.file).catch((error: unknown) => deps.logger.warn('the file of a deleted image could not be removed', { file: image.file, error }));
      await thumbnails?.remove(id).catch((error: unknown) => deps.logger.warn('the thumbnail of a deleted image could not be removed', { imageId: id, error }));
      return { ok: true, value: undefined };
    },

    async readThumbnail(id, signal) {
      const image = findImage(id);
      if (!image) return noSuchImage(id);
      if (!thumbnails) return refuse('unavailable', 'This Easel makes no thumbnails; open the image itself.');
      return thumbnails.ensure(image.file, image.id, signal);
    },
  };
}

