export type {
  BeginTurnInput,
  ContextChange,
  ConversationImport,
  ConversationListing,
  ConversationRecord,
  ConversationStore,
  FinishPane,
  ImageCursor,
  ImageFacets,
  ImageList,
  ImageListQuery,
  ImageNote,
  NewTurn,
  StartedTurn,
  TranscriptTurn,
  TurnStatus,
} from './conversation.ts';
export { TURN_STATUSES, turnStatusSchema } from './conversation.ts';
export {
  COMPARE_SIDES,
  compareSideSchema,
  IMAGE_MADE_WITH_FIELDS,
  imageMadeWithSchema,
  imageSourceSchema,
  pickMadeWith,
  VARY_STRENGTH,
  type CompareSide,
  type ImageMadeWith,
  type ImageRecord,
  type ImageSource,
} from './image-record.ts';
export {
  ARCHIVE_FORMAT,
  ARCHIVE_MANIFEST,
  ARCHIVE_VERSION,
  MAX_IMPORT_BYTES,
  MAX_IMPORT_UNPACKED_BYTES,
  nameImage,
  nameImageDownload,
} from './archive.ts';
export type { ArchiveCodec, ArchiveErrorCode, ArchiveLimits, ImageFiles, UnpackResult } from './archive.ts';
export { describeContextChange } from './context-change.ts';
export { describeConversation, describeStorageFailure, UNTITLED, type ConversationSummary } from './library.ts';
export { createReplySaver, type ReplySaver } from './reply-saver.ts';
export { ChatModelError, ImageBackendError, isChatModelError, isImageBackendError, isLoggedByStore, isStorageError, StorageError } from './errors.ts';
export type { ChatModelErrorCode, ImageBackendErrorCode, StorageErrorCode } from './errors.ts';
export type { CompareVersion, DoneEvent, ImageEvent, ImageNotMadeEvent, LibraryEvent, LiveEvent, MetadataEvent, PaneEvent, TurnEvent, TurnEventType } from './events.ts';
// The families of checkpoints, for the page's lists and labels (the rules stay in server/protocol).
export { FAMILY_STYLES, IMAGE_FAMILIES, type ImageFamily } from '../protocol/index.ts';
export { createModelCatalog, type ListedCheckpoint, type ModelCatalog, type ModelsView, type PullEvent } from './model-catalog.ts';
export { createLiveFeed, MAX_UNREAD, REPLAYED_EVENTS, type FeedEntry, type FollowOptions, type LiveFeed } from './live-feed.ts';
export {
  applyReplyPane,
  applyUserSettings,
  decideReplyImage,
  decideReplyPane,
  describeFamily,
  findRedoVersion,
  findUndoVersion,
  IMAGE_SKIP_REASONS,
  imageSkipReasonSchema,
  isGenerateOffered,
  isPinnableField,
  pinChangedFrom,
  PINNABLE_FIELDS,
  PROMPT_SOURCES,
  promptSourceSchema,
} from './pane.ts';
export type {
  ImageDecision,
  ImageSkipReason,
  PaneState,
  PaneView,
  FamilyView,
  PinnableField,
  PromptSource,
  PromptSuggestion,
  PromptVersion,
  ReplyPaneChange,
  SettingsChange,
  SettingSuggestions,
} from './pane.ts';
export { createImageActivities, type ImageActivities, type ImageActivity, type ImageInProgress } from './image-activities.ts';
export { describeModelHealth } from './health.ts';
export { MAX_BACKEND_ANSWER_BYTES, MAX_ERROR_TEXT_BYTES, MAX_IMAGE_BYTES, MAX_IMAGE_JSON_BYTES } from './image-limits.ts';
export { createLogger, silentLogger, type Logger } from './logger.ts';
export type * from './ports.ts';
export { createEaselService, isConversationId, MAX_IMAGE_COUNT, REPLY_SAVE_INTERVAL_MS } from './service.ts';
export { decodeCursor, encodeCursor, GALLERY_DEFAULT_LIMIT, GALLERY_MAX_LIMIT, type GalleryCommands, type GalleryDeps, type GalleryFilters, type GalleryPage, type GalleryQuery } from './gallery-commands.ts';
export {
  describeReferenceTypes,
  isReferenceImage,
  isReferenceType,
  MAX_REFERENCE_BYTES,
  REFERENCE_TYPES,
  type AddedReference,
  type ConvertedImage,
  type ImageConverter,
  type ReferenceCommands,
} from './reference-commands.ts';
export { isImageId, THUMBNAIL_MAX_SIDE, thumbnailSize, thumbnailUrl, withThumbnails, type Thumbnailer } from './thumbnails.ts';
export type { ConversationFollowing, ConversationSnapshot, LibraryFollowing } from './follow-commands.ts';
export type { ConversationView, EaselService, Health, Result, SendOptions, ServiceError, ServiceErrorCode, GenerateOverrides } from './service.ts';
export { DEFAULT_SETTINGS, SETTING_LIMITS, settingsPatchSchema, settingsSchema, type Settings, type SettingsPatch } from './settings.ts';
export { createImageGenerator, NO_BACKEND_MESSAGE } from './generation.ts';
export {
  DEFAULT_REPLY_TIMEOUTS,
  describeReplyTimeout,
  describeSlowStart,
  isReplyTimeoutError,
  markSlowStart,
  ReplyTimeoutError,
  selectReplyLimit,
  startReplyWatchdog,
} from './reply-watchdog.ts';
export type { ReplyTimeoutKind, ReplyTimeouts, ReplyWatchdog } from './reply-watchdog.ts';
export { createEventBuffer, type EventBuffer } from './event-buffer.ts';
export type { GenerateInput, ImageBackendStatus, ImageGenerator, ImageGeneratorDeps } from './generation.ts';
export { MAX_MESSAGE_CHARS, MAX_TITLE_CHARS } from './text.ts';
export { IMAGE_BACKEND_FAILURES, TURN_ERROR_CODES, turnErrorCodeSchema, type TurnErrorCode } from './error-codes.ts';
export { decideTurnOffers, statusOfDone, TURN_NOTICES, type TurnOffers } from './turn-offers.ts';
