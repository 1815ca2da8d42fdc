// A reference image: a picture the user brings (dropped, pasted, or sent to the API) as a starting point for Vary.
// It is converted to PNG off the event loop (the ImageConverter port; server/sharp/ implements it), checked like
// any image a backend sends (checkPngImage), and stored as an image of the conversation, so that
// `from: { imageId, strength }` starts from it like any other. No schema of its own: a reference is the image
// record with an empty prompt, no settings it was made with (steps, cfg, seed, sampler, scheduler, model null),
// no prompt version, no turn and no source (isReferenceImage).
import { randomBytes } from 'node:crypto';
import { checkPngImage } from '../png/index.ts';
import type { ImageRecord } from './image-record.ts';
import { MAX_IMAGE_BYTES } from './image-limits.ts';
import { notFound, refuse, type Result } from './results.ts';
import type { ServiceState } from './service-state.ts';
import type { Thumbnailer } from './thumbnails.ts';

/** The picture types a reference may be sent as (the request's Content-Type). */
export const REFERENCE_TYPES = ['image/png', 'image/jpeg', 'image/webp'] as const;
export type ReferenceType = (typeof REFERENCE_TYPES)[number];

/** The largest reference accepted, as sent: no larger than an image a backend may send. */
export const MAX_REFERENCE_BYTES = MAX_IMAGE_BYTES;

/** What converting a picture to PNG gave: the PNG, or why not (its header unreadable, or more pixels than allowed). */
export type ConvertedImage =
  | { ok: true; png: Uint8Array; width: number; height: number }
  | { ok: false; reason: 'unreadable'; detail: string }
  | { ok: false; reason: 'too_many_pixels'; width: number; height: number };

/** The port: a PNG, JPEG or WebP made a PNG (EXIF orientation applied, metadata dropped), never on the event loop. */
export interface ImageConverter {
  /** Reads the size from the header first and refuses, before decoding, a picture of more than `maxPixels`. */
  toPng(bytes: Uint8Array, options: { maxPixels: number }): Promise<ConvertedImage>;
}

export interface ReferenceDeps {
  /** Without one, references are refused as unavailable. */
  converter?: ImageConverter;
  thumbnails?: Thumbnailer;
  /** Makes a new, empty conversation with this id (the page's empty page), as a first message or Generate would. */
  createConversation: (id: string) => Result<unknown>;
}

export interface AddReferenceOptions {
  /** The conversation does not exist yet (the empty page): the picture creates it, once it is known to be good. */
  create?: boolean;
}

export interface AddedReference {
  id: string;
  url: string;
  width: number;
  height: number;
  image: ImageRecord;
}

export interface ReferenceCommands {
  /** Stores `bytes` (a picture of type `type`) as a reference image of the conversation. */
  addReference(conversationId: string, bytes: Uint8Array, type: string, options?: AddReferenceOptions): Promise<Result<AddedReference>>;
}

/** A reference image (brought by the user), told apart from a made one by what it lacks. */
export function isReferenceImage(image: Pick<ImageRecord, 'prompt' | 'steps' | 'seed' | 'model' | 'source' | 'turnId'>): boolean {
  return image.prompt === '' && image.steps === null && image.seed === null && image.model === null && image.source === null && image.turnId === null;
}

export function isReferenceType(type: string | null | undefined): type is ReferenceType {
  // Stryker disable next-line StringLiteral: a missing type (null, undefined) is looked up as a string no picture type equals; which one does not matter
  return (REFERENCE_TYPES as readonly string[]).includes(type ?? '');
}

/** What to send, for a refusal of another type. */
export function describeReferenceTypes(sent: string | null | undefined): string {
  return `Send a PNG, JPEG or WebP picture as the body, with Content-Type image/png, image/jpeg or image/webp (this body ${sent ? `was sent as "${sent}"` : 'has no Content-Type'}).`;
}

const DEFAULT_MAX_PIXELS = 8192 * 8192;

/**
 * A picture the user brings, as a checked PNG: its size said, or why it cannot be taken, in the user's words.
 * Its type is one of REFERENCE_TYPES: each caller refuses another type first, in its own words.
 */
export type PictureReader = (bytes: Uint8Array, type: ReferenceType) => Promise<Result<{ png: Uint8Array; width: number; height: number }>>;

/**
 * Reads a picture the user brings (a reference, a picture to describe): PNG, JPEG or WebP, at most
 * MAX_REFERENCE_BYTES and `maxPixels`, converted to PNG off the event loop and checked like any image a backend sends.
 */
export function createPictureReader(converter: ImageConverter | undefined, maxPixels = DEFAULT_MAX_PIXELS): PictureReader {
  return async (bytes, type) => {
    if (bytes.byteLength > MAX_REFERENCE_BYTES) {
      return refuse('too_large', `The picture is ${Math.ceil(bytes.byteLength / 1024 / 1024)} MB; Easel takes pictures of at most ${MAX_REFERENCE_BYTES / 1024 / 1024} MB.`);
    }
    if (bytes.byteLength === 0) return refuse('invalid', 'The body is empty: send the picture itself.');
    if (!converter) return refuse('unavailable', 'This Easel cannot read pictures (no image converter), so it takes none.');
    const converted = await converter.toPng(bytes, { maxPixels });
    if (!converted.ok) {
      if (converted.reason === 'too_many_pixels') {
        return refuse(
          'invalid',
          `The picture is ${converted.width}×${converted.height} pixels (${converted.width * converted.height}), more than the ${maxPixels} Easel accepts; send a smaller one, or raise --max-image-pixels to allow it.`,
        );
      }
      return refuse('invalid', `The body cannot be read as a ${type.slice('image/'.length).toUpperCase()} picture (${converted.detail}); send a PNG, JPEG or WebP file.`);
    }
    const checked = await checkPngImage(converted.png, { maxPixels });
    if (!checked.ok) return refuse('invalid', checked.error.message);
    return { ok: true, value: { png: converted.png, width: checked.value.width, height: checked.value.height } };
  };
}

export function createReferenceCommands(state: ServiceState, references: ReferenceDeps): ReferenceCommands {
  const { deps } = state;
  const readPicture = createPictureReader(references.converter, deps.maxImagePixels);
  return {
    async addReference(conversationId, bytes, type, options = {}) {
      if (!isReferenceType(type)) return refuse('invalid', describeReferenceTypes(type));
      const creating = !state.findRecord(conversationId) && options.create === true;
      if (!creating && !state.findRecord(conversationId)) return notFound(conversationId);
      const picture = await readPicture(bytes, type);
      if (!picture.ok) return picture;
      // Only a good picture makes a conversation.
      if (creating) {
        const created = references.createConversation(conversationId);
        if (!created.ok) return created;
      }
      const id = randomBytes(16).toString('hex');
      const file = `${id}.png`;
      try {
        await deps.imageFiles.save(file, picture.value.png);
      } catch (error) {
        deps.logger.error('a reference image could not be written', { conversationId, error });
        return refuse('storage', 'The picture could not be written to the images folder. Check that Easel may write to its data folder (--data-dir) and that the disk has room, then try again.');
      }
      const image: ImageRecord = {
        id,
        conversationId,
        turnId: null,
        file,
        url: `/images/${file}`,
        prompt: '',
        negativePrompt: '',
        steps: null,
        cfg: null,
        seed: null,
        sampler: null,
        scheduler: null,
        width: picture.value.width,
        height: picture.value.height,
        model: null,
        promptVersion: null,
        source: null,
        compareSide: null,
        createdAt: state.isoNow(),
      };
      const stored = state.tryWrite('image', () => deps.store.addImage(image));
      if (!stored.ok) {
        // No record, no file: an image the library does not know would never be shown or deleted.
        await deps.imageFiles.remove(file).catch(() => undefined);
        return stored;
      }
      void references.thumbnails?.ensure(file, id).then((made) => {
        if (!made.ok) deps.logger.warn('no thumbnail was made for a reference image', { imageId: id, reason: made.error.message });
      });
      state.announce(conversationId);
      // Every page of the conversation shows it (its own answer shows it too: the page draws it once).
      state.feed.publish(conversationId, { type: 'reference_added', imageId: id });
      return { ok: true, value: { id, url: image.url, width: image.width, height: image.height, image } };
    },
  };
}
