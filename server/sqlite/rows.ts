// The store's rows and the records they are read into. A JSON column is parsed with zod, never cast: a value
// that does not match what Easel writes throws StoredValueError, and the reader skips that record with a log line.
import { z } from 'zod';
import { toContextEntry, toMetadata } from '../core/context-change.ts';
import { turnErrorCodeSchema } from '../core/error-codes.ts';
import { turnStatusSchema, type ConversationRecord, type PendingNotes, type TranscriptTurn } from '../core/conversation.ts';
import type { ImageCheck } from '../core/image-check.ts';
import { IMAGE_MADE_WITH_FIELDS, type CompareSide, type ImageMadeWith, type ImageRecord } from '../core/image-record.ts';
import { imageSkipReasonSchema, isPinnableField, promptSourceSchema, type PromptVersion } from '../core/pane.ts';
import { DEFAULT_SETTINGS } from '../core/settings.ts';
import { imageFamilySchema, metadataSchema, type ContextEntry, type Metadata } from '../protocol/index.ts';

export const NO_PENDING: PendingNotes = { promptEdited: false, settingsChanged: false };

export class StoredValueError extends Error {
  override readonly name = 'StoredValueError';
}

/** Types, not today's ranges: a value stored under older limits is still read (the defaults fill what is missing). */
const storedSettingsSchema = z
  .object({
    steps: z.number(),
    cfg: z.number(),
    seed: z.number(),
    width: z.number(),
    height: z.number(),
    negativePrompt: z.string(),
    autoGenerate: z.boolean(),
    chatModel: z.string().nullable(),
    checkpoint: z.string().nullable(),
    sampler: z.string().nullable(),
    scheduler: z.string().nullable(),
    // A family a later Easel knows reads as "detect it".
    family: imageFamilySchema.nullable().catch(null),
    visionModel: z.string().nullable(),
    autoCheck: z.boolean(),
    autoRefine: z.number(),
  })
  .partial();
const settingSuggestionsSchema = z.object({ steps: z.number(), cfg: z.number(), seed: z.number(), negativePrompt: z.string() }).partial();
const pendingSchema = z.object({ promptEdited: z.boolean(), settingsChanged: z.boolean(), compared: z.object({ chosen: z.string(), over: z.string() }) }).partial();
const suggestionSchema = z.union([z.object({ prompt: z.string(), turnId: z.number() }), z.object({ prompt: z.string(), turnId: z.null(), imageId: z.string() })]);
// The message is for a person and is kept whole; a code outside today's closed set reads as internal_error.
const turnErrorSchema = z.object({ code: turnErrorCodeSchema.catch('internal_error'), message: z.string() });
const imageNoteSchema = z.object({ reason: imageSkipReasonSchema, message: z.string() });

function readJson<T>(text: string, schema: z.ZodType<T>): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new StoredValueError('a stored JSON value cannot be parsed', { cause: error });
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new StoredValueError(`a stored value is not what Easel writes: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data;
}

// An entry of the working context as Easel writes it; its metadata by type, not today's ranges (an entry the
// model saw under older limits is still part of what it saw).
const storedMetadataSchema = z.object({
  prompt: z.string(),
  generate_image: z.boolean(),
  steps: z.number(),
  cfg: z.number(),
  seed: z.number(),
  negative_prompt: z.string().optional(),
});
const contextEntrySchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('user'), text: z.string(), note: z.string().optional() }),
  z.object({ kind: z.literal('assistant'), text: z.string(), metadata: storedMetadataSchema }),
  z.object({ kind: z.literal('summary'), userWords: z.array(z.string()), text: z.string() }),
]);

/** One stored entry of the working context; throws StoredValueError when it is not what Easel writes. */
export function readContextEntry(text: string): ContextEntry {
  return toContextEntry(readJson(text, contextEntrySchema));
}

/** Metadata as the model's reply gave it, read with the same schema (an older reply may lack negative_prompt). */
function readMetadata(text: string): Metadata {
  return toMetadata(readJson(text, metadataSchema));
}

/** Zod's partial output has `key?: T | undefined`; a record keeps only the keys that hold a value. */
function dropUndefined<T extends object>(value: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}

export interface ConversationRow {
  id: string;
  title: string | null;
  created_at: string;
  updated_at: string;
  prompt: string;
  settings: string;
  pending: string;
  prompt_version_id: number | null;
  suggestion: string | null;
  pinned: string;
  setting_suggestions: string;
  pane_revision: number;
}

export interface ListingRow extends ConversationRow {
  first_message: string | null;
  last_message: string | null;
}

export interface TurnRow {
  id: number;
  role: 'user' | 'assistant';
  text: string;
  metadata: string | null;
  status: z.infer<typeof turnStatusSchema>;
  error: string | null;
  notices: string | null;
  image_note: string | null;
  created_at: string;
}

export interface PromptVersionRow {
  id: number;
  parent_id: number | null;
  prompt: string;
  source: z.infer<typeof promptSourceSchema>;
  turn_id: number | null;
  created_at: string;
}

/** An image's columns: its place, then what it was made with, each setting in its snake_case column. */
export type ImageRow = {
  id: string;
  conversation_id: string;
  turn_id: number | null;
  file: string;
  prompt_version_id: number | null;
  created_at: string;
  /** Vary: the image it was made from and the strength (migration 009); NULL for one made from the prompt. */
  source_image_id: string | null;
  source_strength: number | null;
  /** Compare: the side it was made for (migration 011); NULL for every other image. */
  compare_side: CompareSide | null;
} & { [Field in keyof ImageMadeWith as ToColumn<Field>]: ImageMadeWith[Field] };

type ToColumn<Field extends string> = Field extends `${infer Head}${infer Tail}`
  ? `${Head extends Lowercase<Head> ? Head : `_${Lowercase<Head>}`}${ToColumn<Tail>}`
  : Field;

/** `negativePrompt` → `negative_prompt`: the column of each field of the one list. */
function toColumn<Field extends string>(field: Field): ToColumn<Field> {
  return field.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`) as ToColumn<Field>;
}

/** The images table's columns, in the order of its INSERT. */
export const IMAGE_COLUMNS = ['id', 'conversation_id', 'turn_id', 'file', ...IMAGE_MADE_WITH_FIELDS.map(toColumn), 'prompt_version_id', 'created_at', 'source_image_id', 'source_strength', 'compare_side'] as const;

export function toConversation(row: ConversationRow): ConversationRecord {
  return {
    id: row.id,
    title: row.title,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    prompt: row.prompt,
    promptVersion: row.prompt_version_id,
    paneRevision: row.pane_revision,
    suggestion: row.suggestion ? readJson(row.suggestion, suggestionSchema) : null,
    settings: { ...DEFAULT_SETTINGS, ...readJson(row.settings, storedSettingsSchema) },
    pinned: readJson(row.pinned, z.array(z.unknown())).filter(isPinnableField),
    settingSuggestions: dropUndefined(readJson(row.setting_suggestions, settingSuggestionsSchema)),
    pending: { ...NO_PENDING, ...dropUndefined(readJson(row.pending, pendingSchema)) },
  };
}

/** NULL when there are none: most turns. */
export function encodeNotices(notices: readonly string[] | undefined): string | null {
  return notices && notices.length > 0 ? JSON.stringify(notices) : null;
}

export function toPromptVersion(row: PromptVersionRow): PromptVersion {
  return { id: row.id, parentId: row.parent_id, prompt: row.prompt, source: row.source, turnId: row.turn_id, createdAt: row.created_at };
}

/** A part of a turn that cannot be read is left out and reported (`onUnreadable`), so the rest of the turn still shows. */
export function toTurn(row: TurnRow, images: ImageRecord[], onUnreadable: (column: string, error: unknown) => void = () => {}): TranscriptTurn {
  const optional = <T>(column: string, text: string | null, read: (text: string) => T): T | undefined => {
    if (text === null) return undefined;
    try {
      return read(text);
    } catch (error) {
      onUnreadable(column, error);
      return undefined;
    }
  };
  const metadata = optional('metadata', row.metadata, readMetadata);
  const error = optional('error', row.error, (text) => readJson(text, turnErrorSchema));
  const notices = optional('notices', row.notices, (text) => readJson(text, z.array(z.string())));
  const imageNote = optional('image_note', row.image_note, (text) => readJson(text, imageNoteSchema));
  return {
    id: row.id,
    role: row.role,
    text: row.text,
    ...(metadata ? { metadata } : {}),
    status: row.status,
    ...(error ? { error } : {}),
    ...(notices ? { notices } : {}),
    images: images.filter((image) => image.turnId === row.id),
    ...(imageNote ? { imageNote } : {}),
    createdAt: row.created_at,
  };
}

export function toImageRow(image: ImageRecord): ImageRow {
  const madeWith = Object.fromEntries(IMAGE_MADE_WITH_FIELDS.map((field) => [toColumn(field), image[field]]));
  return {
    id: image.id,
    conversation_id: image.conversationId,
    turn_id: image.turnId,
    file: image.file,
    prompt_version_id: image.promptVersion,
    created_at: image.createdAt,
    source_image_id: image.source?.imageId ?? null,
    source_strength: image.source?.strength ?? null,
    compare_side: image.compareSide,
    ...(madeWith as Omit<ImageRow, 'id' | 'conversation_id' | 'turn_id' | 'file' | 'prompt_version_id' | 'created_at' | 'source_image_id' | 'source_strength' | 'compare_side'>),
  };
}

export function toImage(row: ImageRow): ImageRecord {
  const madeWith = Object.fromEntries(IMAGE_MADE_WITH_FIELDS.map((field) => [field, row[toColumn(field)]])) as ImageMadeWith;
  return {
    id: row.id,
    conversationId: row.conversation_id,
    turnId: row.turn_id,
    file: row.file,
    url: `/images/${row.file}`,
    ...madeWith,
    promptVersion: row.prompt_version_id,
    source: row.source_image_id === null || row.source_strength === null ? null : { imageId: row.source_image_id, strength: row.source_strength },
    compareSide: row.compare_side,
    createdAt: row.created_at,
  };
}

/** A check's row (migration 012): its lists as JSON. */
export interface ImageCheckRow {
  id: number;
  image_id: string;
  conversation_id: string;
  model: string;
  matches: string;
  misses: string;
  revised_prompt: string;
  created_at: string;
}

const checkMatchesSchema = z.array(z.string());
const checkMissesSchema = z.array(z.object({ element: z.string(), evidence: z.string() }));

export function toImageCheck(row: ImageCheckRow): ImageCheck {
  return {
    id: row.id,
    imageId: row.image_id,
    conversationId: row.conversation_id,
    model: row.model,
    matches: readJson(row.matches, checkMatchesSchema),
    misses: readJson(row.misses, checkMissesSchema),
    revisedPrompt: row.revised_prompt,
    createdAt: row.created_at,
  };
}
