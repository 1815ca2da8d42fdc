// A conversation as one file: `conversation.json` (transcript, working context, prompt, settings, the
// images' records, a format version) and its PNGs under `images/` with readable names. The zip encoding
// is an adapter's (ArchiveCodec); what goes in and what an import accepts is decided here.
import { z } from 'zod';
import { checkPngImage } from '../png/index.ts';
import { LIMITS, MAX_REPLY_CHARS, metadataSchema, type ContextEntry } from '../protocol/index.ts';
import { turnErrorCodeSchema } from './error-codes.ts';
import { turnStatusSchema, type ConversationImport, type TranscriptTurn } from './conversation.ts';
import { compareSideSchema, imageMadeWithSchema, imageSourceSchema, pickMadeWith, type ImageRecord, type ImageSource } from './image-record.ts';
import { imageSkipReasonSchema, PINNABLE_FIELDS, promptSourceSchema, type PinnableField, type PromptSuggestion, type PromptVersion, type SettingSuggestions } from './pane.ts';
import { parseBoundedJson, type JsonBounds } from './bounded-json.ts';
import { toContextEntry } from './context-change.ts';
import { MAX_IMAGE_BYTES } from './image-limits.ts';
import { promptSchema, titleSchema, typedText } from './text.ts';
import { DEFAULT_MODEL_CHOICE, modelChoiceSchema, settingsSchema, type Settings } from './settings.ts';

export const ARCHIVE_FORMAT = 'easel-conversation';
/** 2 added the prompt's versions, pinned settings and the model's waiting suggestions; 1 is still read. */
export const ARCHIVE_VERSION = 2;
export const ARCHIVE_MANIFEST = 'conversation.json';
/** The largest zip an import reads (the request body), and what it may unpack to. */
export const MAX_IMPORT_BYTES = 200 * 1024 * 1024;
export const MAX_IMPORT_UNPACKED_BYTES = 256 * 1024 * 1024;
const MAX_MANIFEST_BYTES = 32 * 1024 * 1024;
const MAX_ARCHIVE_FILES = 2001;
const MAX_TURNS = 20_000;
const MAX_CONTEXT_ENTRIES = 5_000;
const MAX_IMAGES = 2_000;

/** The limits an archive's entries are read under; the codec refuses an archive past them before inflating. */
export const IMPORT_LIMITS: ArchiveLimits = {
  maxFiles: MAX_ARCHIVE_FILES,
  maxTotalBytes: MAX_IMPORT_UNPACKED_BYTES,
  // By its last part: a file manager's re-zip puts it in a folder (see toExportLayout).
  maxFileBytes: (name) => (name === ARCHIVE_MANIFEST || name.endsWith(`/${ARCHIVE_MANIFEST}`) ? MAX_MANIFEST_BYTES : MAX_IMAGE_BYTES),
};

export interface ArchiveLimits {
  maxFiles: number;
  maxTotalBytes: number;
  maxFileBytes(name: string): number;
}

export type ArchiveErrorCode = 'malformed' | 'too_large' | 'unsafe_path';

export type UnpackResult =
  | { ok: true; files: Map<string, Uint8Array> }
  | { ok: false; error: { code: ArchiveErrorCode; message: string } };

/** Packs and unpacks archives (the zip adapter). Unpacking checks names and sizes before inflating anything. */
export interface ArchiveCodec {
  pack(files: ReadonlyMap<string, Uint8Array>): Uint8Array;
  unpack(bytes: Uint8Array, limits: ArchiveLimits): UnpackResult;
}

/** The PNG files of the images folder. */
export interface ImageFiles {
  read(name: string): Promise<Uint8Array>;
  /** Leaves no partial file when it fails. */
  save(name: string, bytes: Uint8Array): Promise<void>;
  /** A file already gone is not an error. */
  remove(name: string): Promise<void>;
}

export interface ArchiveSource {
  title: string | null;
  createdAt: string;
  updatedAt: string;
  prompt: string;
  settings: Settings;
  turns: readonly TranscriptTurn[];
  context: readonly ContextEntry[];
  images: readonly ImageRecord[];
  /** Every prompt version, oldest first, and the current one's id. */
  promptVersions: readonly PromptVersion[];
  promptVersion: number | null;
  suggestion: PromptSuggestion | null;
  pinned: readonly PinnableField[];
  settingSuggestions: SettingSuggestions;
}

/** The files of an export, conversation.json first. Images whose file is gone are left out (and reported). */
export async function buildArchiveFiles(
  source: ArchiveSource,
  options: { exportedAt: string; readImage: (file: string) => Promise<Uint8Array | undefined> },
): Promise<Map<string, Uint8Array>> {
  const pictures: Array<{ name: string; bytes: Uint8Array; image: ImageRecord }> = [];
  for (const image of source.images) {
    const bytes = await options.readImage(image.file);
    if (!bytes) continue;
    pictures.push({ name: `images/${nameImage(pictures.length + 1, image)}`, bytes, image });
  }
  const turnIndex = new Map(source.turns.map((turn, index) => [turn.id, index]));
  // Ids are the store's; the file refers to turns and versions by their position, as an import renumbers them.
  const versionIndex = new Map(source.promptVersions.map((version, index) => [version.id, index]));
  const indexOf = (map: ReadonlyMap<number, number>, id: number | null) => (id === null ? null : (map.get(id) ?? null));
  const suggestionTurn = source.suggestion ? indexOf(turnIndex, source.suggestion.turnId) : null;
  // A Vary's starting image, by its position when it is exported too (an import gives it a new id), else by its id.
  const pictureIndex = new Map(pictures.map(({ image }, index) => [image.id, index]));
  const manifest = {
    format: ARCHIVE_FORMAT,
    version: ARCHIVE_VERSION,
    exportedAt: options.exportedAt,
    title: source.title,
    createdAt: source.createdAt,
    updatedAt: source.updatedAt,
    prompt: source.prompt,
    settings: source.settings,
    transcript: source.turns.map((turn) => ({
      role: turn.role,
      text: turn.text,
      status: turn.status === 'running' ? 'interrupted' : turn.status,
      ...(turn.metadata ? { metadata: turn.metadata } : {}),
      ...(turn.error ? { error: turn.error } : {}),
      ...(turn.notices ? { notices: turn.notices } : {}),
      ...(turn.imageNote ? { imageNote: turn.imageNote } : {}),
      createdAt: turn.createdAt,
    })),
    promptVersions: source.promptVersions.map((version) => ({
      parent: indexOf(versionIndex, version.parentId),
      prompt: version.prompt,
      source: version.source,
      turn: indexOf(turnIndex, version.turnId),
      createdAt: version.createdAt,
    })),
    promptVersion: indexOf(versionIndex, source.promptVersion),
    suggestion: source.suggestion && suggestionTurn !== null ? { prompt: source.suggestion.prompt, turn: suggestionTurn } : null,
    pinned: source.pinned,
    settingSuggestions: source.settingSuggestions,
    context: source.context,
    images: pictures.map(({ name, image }) => ({
      file: name,
      turn: image.turnId === null ? null : (turnIndex.get(image.turnId) ?? null),
      ...pickMadeWith(image),
      promptVersion: indexOf(versionIndex, image.promptVersion),
      source: image.source === null ? null : { ...image.source, image: pictureIndex.get(image.source.imageId) ?? null },
      ...(image.compareSide === null ? {} : { compareSide: image.compareSide }),
      createdAt: image.createdAt,
    })),
  };
  const files = new Map<string, Uint8Array>([[ARCHIVE_MANIFEST, new TextEncoder().encode(`${JSON.stringify(manifest, null, 2)}\n`)]]);
  for (const { name, bytes } of pictures) files.set(name, bytes);
  return files;
}

/** `01-a-red-fox-in-the-snow-seed-1234.png`: the order, the prompt's first words, the seed (when known). */
export function nameImage(position: number, image: Pick<ImageRecord, 'prompt' | 'seed'>): string {
  const seed = image.seed === null ? '' : `-seed-${image.seed}`;
  return `${String(position).padStart(2, '0')}-${slugify(image.prompt, 40) || 'image'}${seed}.png`;
}

/** A downloaded image's name: `easel-1234-a-red-fox-in-the-snow.png` (the seed when known, the prompt's first words). */
export function nameImageDownload(image: Pick<ImageRecord, 'prompt' | 'seed'>): string {
  // Stryker disable next-line ConditionalExpression: callers pass null for an unknown seed (bubbles.ts: image.seed ?? null)
  const seed = image.seed === null || image.seed === undefined ? '' : `-${image.seed}`;
  return `easel${seed}-${slugify(image.prompt, 40) || 'image'}.png`;
}

/** The export's file name: `easel-a-red-fox-2026-11-23.zip`. */
export function nameArchive(title: string, exportedAt: string): string {
  return `easel-${slugify(title, 40) || 'conversation'}-${exportedAt.slice(0, 10)}.zip`;
}

function slugify(text: string, max: number): string {
  const slug = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    // One dash at most at each end: the step before made every run of them one.
    .replace(/^-|-$/g, '');
  // Stryker disable next-line MethodExpression: the cut is empty only if it began with -, which the step before removes
  return slug.length <= max ? slug : slug.slice(0, max).replace(/-[^-]*$/, '') || slug.slice(0, max);
}

// ---- Import ----

const isoDate = z.iso.datetime({ offset: true, error: 'must be a date and time like 2026-11-23T10:00:00.000Z' });
const shortText = (max: number) => z.string().max(max);
/** Text Easel or a person wrote: the API's rule (no control characters), with the manifest's own length. */
const ruledText = (max: number, label: string) => typedText(z.string().max(max), label);

/**
 * The bounds conversation.json is read under before JSON.parse builds anything. An export nests 4 levels
 * (manifest → transcript → turn → metadata); its largest list is the transcript or the prompt versions.
 */
export const MANIFEST_BOUNDS: JsonBounds = {
  maxDepth: 16,
  maxValues: 1_000_000,
  maxContainers: 250_000,
  maxMembers: 64,
  maxItems: 20_000,
  // The longest text, a reply of MAX_REPLY_CHARS, with every character escaped as \uXXXX.
  maxStringBytes: MAX_REPLY_CHARS * 6 + 2,
  // An export's longest key is "settingSuggestions"; it uses about 60 different ones.
  maxKeyBytes: 64,
  maxDistinctKeys: 256,
};

// The model's metadata as Easel stores it: its prompt already had control characters removed (parse-reply).
const storedMetadataSchema = metadataSchema.extend({
  prompt: ruledText(LIMITS.promptMaxChars, 'The prompt'),
  negative_prompt: ruledText(LIMITS.promptMaxChars, 'The negative prompt').optional(),
});

// The model's own words (a reply) are kept as it wrote them; everything else obeys the typed-text rule.
const contextEntrySchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('user'), text: ruledText(MAX_REPLY_CHARS, 'The message'), note: ruledText(20_000, 'The note').optional() }).strict(),
  z.object({ kind: z.literal('assistant'), text: shortText(MAX_REPLY_CHARS), metadata: storedMetadataSchema }).strict(),
  z.object({ kind: z.literal('summary'), userWords: z.array(ruledText(MAX_REPLY_CHARS, 'The message')).max(MAX_TURNS), text: shortText(MAX_REPLY_CHARS) }).strict(),
]);

const turnSchema = z
  .object({
    role: z.enum(['user', 'assistant']),
    text: shortText(MAX_REPLY_CHARS),
    status: turnStatusSchema.exclude(['running']),
    metadata: storedMetadataSchema.optional(),
    // A code outside today's closed set (an older Easel, another tool) reads as internal_error; its words are kept.
    error: z.object({ code: turnErrorCodeSchema.catch('internal_error'), message: ruledText(4000, 'The error message') }).strict().optional(),
    notices: z.array(ruledText(4000, 'The notice')).max(20).optional(),
    createdAt: isoDate,
  })
  .strict();

const userText = typedText(z.string(), 'The message');

/** A user's turn holds a message they sent: the typed-text rule of messages applies to it as in the API. */
function checkUserText(turn: { role: 'user' | 'assistant'; text: string }, context: z.RefinementCtx): void {
  if (turn.role !== 'user') return;
  const checked = userText.safeParse(turn.text);
  if (!checked.success) context.addIssue({ code: 'custom', path: ['text'], message: firstIssue(checked.error).message });
}

/** The first issue of a failed parse. */
function firstIssue(error: z.ZodError): { path: PropertyKey[]; message: string } {
  // Stryker disable next-line ObjectLiteral,ArrayDeclaration,StringLiteral: never read: a failed parse always has an issue
  return error.issues[0] ?? { path: [], message: 'is not valid' };
}

// What an image was made with, by the one schema of an image's settings; a version 1 export may lack its sampler,
// and one made before the scheduler was recorded lacks its scheduler (both read as null: not said).
const imageSchema = imageMadeWithSchema
  .extend({
    file: z.string().regex(/^images\/[^/]+\.png$/, 'must be a PNG in the images/ folder'),
    turn: z.int().min(0).nullable(),
    sampler: imageMadeWithSchema.shape.sampler.default(null),
    scheduler: imageMadeWithSchema.shape.scheduler.default(null),
    createdAt: isoDate,
  })
  .strict();

const manifestV1Schema = z
  .object({
    format: z.literal(ARCHIVE_FORMAT),
    version: z.literal(1),
    exportedAt: isoDate.optional(),
    title: titleSchema.nullable(),
    createdAt: isoDate,
    updatedAt: isoDate,
    prompt: promptSchema,
    // An export from before the model choices has none: the defaults (each server's own) then.
    // An export from before the vision settings has none: off.
    settings: settingsSchema
      .extend({ ...modelChoiceSchema.partial().shape, autoCheck: settingsSchema.shape.autoCheck.default(false), autoRefine: settingsSchema.shape.autoRefine.default(0) })
      .transform((settings): Settings => ({ ...DEFAULT_MODEL_CHOICE, ...settings })),
    transcript: z.array(turnSchema.superRefine(checkUserText)).max(MAX_TURNS),
    context: z.array(contextEntrySchema).max(MAX_CONTEXT_ENTRIES),
    images: z.array(imageSchema).max(MAX_IMAGES),
  })
  .strict();

const turnV2Schema = turnSchema
  .extend({ imageNote: z.object({ reason: imageSkipReasonSchema, message: ruledText(4000, 'The image note') }).strict().optional() })
  .superRefine(checkUserText);

const MAX_PROMPT_VERSIONS = 20_000;
const position = z.int().min(0);

const promptVersionSchema = z
  .object({
    /** The version it was changed from, as a position in promptVersions (an earlier one). */
    parent: position.nullable(),
    prompt: promptSchema,
    source: promptSourceSchema,
    turn: position.nullable(),
    createdAt: isoDate,
  })
  .strict();

/**
 * A version-2 image: its prompt version, and (since Vary) the image it was made from, by its position among the
 * exported images when it is one of them (`image`), its id otherwise. An export made before Vary has no `source`:
 * read as null.
 */
const imageV2Schema = imageSchema.extend({
  promptVersion: position.nullable(),
  source: imageSourceSchema.extend({ image: position.nullable() }).strict().nullable().default(null),
  /** Compare's side; absent for any other image, and in an export made before it was kept. */
  compareSide: compareSideSchema.nullable().default(null),
});

const pinnableSettingsSchema = settingsSchema.pick({ steps: true, cfg: true, seed: true, negativePrompt: true });

const manifestV2Schema = manifestV1Schema
  .extend({
    version: z.literal(2),
    transcript: z.array(turnV2Schema).max(MAX_TURNS),
    images: z.array(imageV2Schema).max(MAX_IMAGES),
    promptVersions: z.array(promptVersionSchema).max(MAX_PROMPT_VERSIONS),
    promptVersion: position.nullable(),
    suggestion: z.object({ prompt: promptSchema, turn: position }).strict().nullable(),
    pinned: z.array(z.enum(PINNABLE_FIELDS)).max(PINNABLE_FIELDS.length),
    settingSuggestions: pinnableSettingsSchema.partial().strict(),
  })
  .strict();

const manifestSchema = z.discriminatedUnion('version', [manifestV1Schema, manifestV2Schema]);

type Manifest = z.infer<typeof manifestSchema>;

// The long lists are checked element by element, stopping at the first one wrong: one safeParse of the whole
// manifest records an issue for every bad element (a million, 850 MB and seconds, for a 2 MB file).
const unknownList = (max: number) => z.array(z.unknown()).max(max);
const manifestShellSchema = z.discriminatedUnion('version', [
  manifestV1Schema.extend({ transcript: unknownList(MAX_TURNS), context: unknownList(MAX_CONTEXT_ENTRIES), images: unknownList(MAX_IMAGES) }),
  manifestV2Schema.extend({
    transcript: unknownList(MAX_TURNS),
    context: unknownList(MAX_CONTEXT_ENTRIES),
    images: unknownList(MAX_IMAGES),
    promptVersions: unknownList(MAX_PROMPT_VERSIONS),
  }),
]);
const LIST_ELEMENTS = {
  1: { transcript: turnSchema.superRefine(checkUserText), context: contextEntrySchema, images: imageSchema },
  2: { transcript: turnV2Schema, context: contextEntrySchema, images: imageV2Schema, promptVersions: promptVersionSchema },
} as const;
/** Elements checked between two turns of the event loop. */
const ELEMENTS_PER_TURN = 500;

type ManifestCheck = { ok: true; value: Manifest } | { ok: false; issue: { path: PropertyKey[]; message: string } };

/** The manifest checked by its schema, the long lists one element at a time; the first issue found. */
async function checkManifest(raw: unknown): Promise<ManifestCheck> {
  const shell = manifestShellSchema.safeParse(raw);
  if (!shell.success) return { ok: false, issue: firstIssue(shell.error) };
  const lists: Record<string, unknown[]> = {};
  let checked = 0;
  for (const [name, schema] of Object.entries(LIST_ELEMENTS[shell.data.version])) {
    // Stryker disable next-line ArrayDeclaration: never read: the shell's schema requires every list named here
    const items = (shell.data as unknown as Record<string, unknown[]>)[name] ?? [];
    const parsed: unknown[] = [];
    for (const [index, item] of items.entries()) {
      const result = (schema as z.ZodType).safeParse(item);
      if (!result.success) {
        const issue = firstIssue(result.error);
        return { ok: false, issue: { path: [name, index, ...issue.path], message: issue.message } };
      }
      parsed.push(result.data);
      // Stryker disable next-line UpdateOperator: counting down meets -0 at the same counts, and -0 === 0
      if (++checked % ELEMENTS_PER_TURN === 0) await yieldToEventLoop();
    }
    lists[name] = parsed;
  }
  return { ok: true, value: { ...shell.data, ...lists } as Manifest };
}

/** The references a version-2 manifest makes by position point at something that is there. */
function checkPositions(manifest: Manifest): string | undefined {
  if (manifest.version === 1) return undefined;
  const turns = manifest.transcript.length;
  const versions = manifest.promptVersions;
  for (const [index, version] of versions.entries()) {
    if (version.parent !== null && version.parent >= index) return `promptVersions.${index}.parent must be the position of an earlier version.`;
    if (version.turn !== null && version.turn >= turns) return `promptVersions.${index}.turn is ${version.turn}, but the transcript has ${turns} turns.`;
  }
  if (manifest.promptVersion === null) {
    if (manifest.prompt !== '') return 'promptVersion is null, but the prompt is not empty (its current version must be listed).';
  } else {
    const current = versions[manifest.promptVersion];
    if (!current) return `promptVersion is ${manifest.promptVersion}, but there are ${versions.length} prompt versions.`;
    if (current.prompt !== manifest.prompt) return `the prompt differs from the text of its current version (promptVersion ${manifest.promptVersion}).`;
  }
  if (manifest.suggestion && manifest.suggestion.turn >= turns) return `suggestion.turn is ${manifest.suggestion.turn}, but the transcript has ${turns} turns.`;
  for (const [index, image] of manifest.images.entries()) {
    if (image.source !== null && image.source.image !== null && image.source.image >= manifest.images.length) {
      return `images.${index}.source.image is ${image.source.image}, but there are ${manifest.images.length} images.`;
    }
    if (image.promptVersion !== null && image.promptVersion >= versions.length) {
      return `images.${index}.promptVersion is ${image.promptVersion}, but there are ${versions.length} prompt versions.`;
    }
  }
  return undefined;
}

export interface ImportedArchive {
  conversation: ConversationImport;
  /** The PNGs to write, under their new names. */
  files: Array<{ name: string; bytes: Uint8Array }>;
}

export type ReadArchiveResult = { ok: true; value: ImportedArchive } | { ok: false; error: { code: 'invalid'; message: string } };

/**
 * Checks an unpacked archive and turns it into a new conversation (new id, new image names). Refuses,
 * naming what is wrong: another format or a newer version, a manifest that does not match the schema,
 * files that are not in the layout, a missing or broken PNG (checked like every image Easel saves).
 */
export async function readArchiveFiles(
  files: ReadonlyMap<string, Uint8Array>,
  ids: { conversationId: string; newImageId: () => string; /** --max-image-pixels; default checkPngImage's. */ maxPixels?: number },
): Promise<ReadArchiveResult> {
  const refuse = (message: string): ReadArchiveResult => ({ ok: false, error: { code: 'invalid', message } });
  files = toExportLayout(files);
  const manifestBytes = files.get(ARCHIVE_MANIFEST);
  if (!manifestBytes) return refuse(`The file holds no ${ARCHIVE_MANIFEST}: it is not a conversation exported by Easel.`);
  for (const name of files.keys()) {
    if (name !== ARCHIVE_MANIFEST && !/^images\/[^/]+\.png$/.test(name)) {
      return refuse(`The file holds "${name}", which is not part of an Easel export (only ${ARCHIVE_MANIFEST} and images/*.png are).`);
    }
  }
  // Bounded before anything is built, then parsed; the event loop gets a turn between the costly steps.
  const json = parseBoundedJson(manifestBytes, MANIFEST_BOUNDS);
  if (!json.ok) {
    return refuse(
      json.error.code === 'malformed'
        ? `${ARCHIVE_MANIFEST} ${json.error.message}: the file is damaged or was edited by hand.`
        : `${ARCHIVE_MANIFEST} ${json.error.message}, more than any conversation Easel exports: the file is damaged or was not made by Easel.`,
    );
  }
  const raw = json.value;
  await yieldToEventLoop();
  const header = z.object({ format: z.unknown().optional(), version: z.unknown().optional() }).safeParse(raw);
  if (!header.success || header.data.format !== ARCHIVE_FORMAT) {
    return refuse(`${ARCHIVE_MANIFEST} is not an Easel conversation (its "format" is not "${ARCHIVE_FORMAT}").`);
  }
  if (typeof header.data.version === 'number' && header.data.version > ARCHIVE_VERSION) {
    return refuse(`This conversation was exported by a newer Easel (format version ${header.data.version}; this one reads version ${ARCHIVE_VERSION}). Update Easel to import it.`);
  }
  const parsed = await checkManifest(raw);
  if (!parsed.ok) {
    const issue = parsed.issue;
    const where = issue.path.length > 0 ? issue.path.map(String).join('.') : 'its contents';
    return refuse(`${ARCHIVE_MANIFEST} does not describe a conversation Easel can import: ${where}: ${issue.message.replace(/\.$/, '')}.`);
  }
  const manifest = parsed.value;
  await yieldToEventLoop();
  const misplaced = checkPositions(manifest);
  if (misplaced) return refuse(`${ARCHIVE_MANIFEST} does not describe a conversation Easel can import: ${misplaced}`);
  // Every PNG an export holds is listed; one that is not was put there by something else.
  const listed = new Set(manifest.images.map((image) => image.file));
  const unlisted = [...files.keys()].find((name) => name !== ARCHIVE_MANIFEST && !listed.has(name));
  if (unlisted !== undefined) {
    return refuse(`The file holds ${unlisted}, which ${ARCHIVE_MANIFEST} does not list: Easel exports list every image they hold. Remove it from the file, or export the conversation again.`);
  }
  const written: ImportedArchive['files'] = [];
  const images: ConversationImport['images'] = [];
  const seen = new Set<string>();
  // New ids first: a Vary's starting image among them is named by its new id.
  const newIds = manifest.images.map(() => ids.newImageId());
  for (const [index, image] of manifest.images.entries()) {
    if (image.turn !== null && image.turn >= manifest.transcript.length) {
      return refuse(`Image ${index + 1} (${image.file}) belongs to turn ${image.turn + 1}, but the transcript has ${manifest.transcript.length}.`);
    }
    if (seen.has(image.file)) return refuse(`${image.file} is listed twice.`);
    seen.add(image.file);
    const bytes = files.get(image.file);
    if (!bytes) return refuse(`${image.file} is listed in ${ARCHIVE_MANIFEST} but missing from the file.`);
    const checked = await checkPngImage(bytes, { maxPixels: ids.maxPixels });
    if (!checked.ok) return refuse(`${image.file} is not an image Easel can use: ${checked.error.message}`);
    const id = newIds[index] as string;
    const name = `${id}.png`;
    written.push({ name, bytes });
    const { file: _file, source: imageSource, ...record } = { source: null, ...image };
    images.push({ promptVersion: null, compareSide: null, ...record, source: toImageSource(imageSource, newIds), id, file: name, width: checked.value.width, height: checked.value.height });
  }
  return {
    ok: true,
    value: {
      conversation: {
        id: ids.conversationId,
        title: manifest.title,
        createdAt: manifest.createdAt,
        updatedAt: manifest.updatedAt,
        prompt: manifest.prompt,
        settings: manifest.settings,
        turns: manifest.transcript.map((turn) => ({
          role: turn.role,
          // A user's words with CRLF become LF, as the API stores them; the model's stay as it wrote them.
          text: turn.role === 'user' ? turn.text.replace(/\r\n?/g, '\n') : turn.text,
          status: turn.status,
          ...(turn.metadata ? { metadata: turn.metadata } : {}),
          ...(turn.error ? { error: turn.error } : {}),
          ...(turn.notices && turn.notices.length > 0 ? { notices: turn.notices } : {}),
          ...('imageNote' in turn && turn.imageNote ? { imageNote: turn.imageNote } : {}),
          createdAt: turn.createdAt,
        })),
        context: manifest.context.map(toContextEntry),
        images,
        // A version-1 export kept no versions: its prompt becomes the first one, as for a conversation made before them.
        ...(manifest.version === 2
          ? {
              pane: {
                versions: manifest.promptVersions,
                current: manifest.promptVersion,
                suggestion: manifest.suggestion,
                pinned: PINNABLE_FIELDS.filter((field) => manifest.pinned.includes(field)),
                settingSuggestions: toSettingSuggestions(manifest.settingSuggestions),
              },
            }
          : {}),
      },
      files: written,
    },
  };
}

/** A Vary's starting image as stored: the new id of an imported one (by its position), else the id it had. */
function toImageSource(source: (ImageSource & { image: number | null }) | null, newIds: readonly string[]): ImageSource | null {
  if (source === null) return null;
  const imageId = source.image === null ? source.imageId : (newIds[source.image] ?? source.imageId);
  return { imageId, strength: source.strength };
}

/** Zod's partial output has `key?: T | undefined`; the store keeps only the keys that hold a value. */
function toSettingSuggestions(values: Partial<Pick<Settings, PinnableField>>): SettingSuggestions {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as SettingSuggestions;
}


// What a file manager adds when it zips a folder again: macOS's resource forks and Finder's, Windows' thumbnails.
const FILE_MANAGER_ENTRY = /(^|\/)(__MACOSX\/|\.DS_Store$|Thumbs\.db$|desktop\.ini$)/;
/** The folder of an entry at the top: no folder is named '' (the codec refuses an empty part of a name). */
// Stryker disable next-line StringLiteral: any name no entry's folder has does the same
const TOP_LEVEL = '';

/**
 * An export unzipped and zipped again by the operating system: its file manager's own entries are left
 * out, and when every entry sits in one folder (`easel-a-fox/conversation.json`) that folder is taken away.
 */
function toExportLayout(files: ReadonlyMap<string, Uint8Array>): ReadonlyMap<string, Uint8Array> {
  const kept = [...files].filter(([name]) => !FILE_MANAGER_ENTRY.test(name));
  const folders = new Set(kept.map(([name]) => (name.includes('/') ? name.slice(0, name.indexOf('/')) : TOP_LEVEL)));
  const [folder] = folders;
  const wrapped = folders.size === 1 && folder !== undefined && folder !== 'images' && files.has(`${folder}/${ARCHIVE_MANIFEST}`);
  return new Map(wrapped ? kept.map(([name, bytes]) => [name.slice(folder.length + 1), bytes]) : kept);
}

/** Lets the requests waiting behind a long import run between its steps. */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
