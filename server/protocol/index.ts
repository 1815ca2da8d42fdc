// The protocol between Easel and the model, free of HTTP and I/O: the delimiter rule, the metadata
// schema and its lossless repairs, the prompts, the model's context and the recovery ladder.

export { LIMITS, MAX_REPLY_CHARS, RANDOM_SEED } from './limits.ts';
export type { ChatMessage, ChatOptions, ChatRole } from './messages.ts';
export { DELIMITER } from './delimiter.ts';
export { createWithholder } from './withhold.ts';
export type { MarkerKind, WithheldReply, Withholder } from './withhold.ts';
export {
  formatCanonicalReply,
  formatMetadataJson,
  metadataJsonSchema,
  metadataSchema,
  REQUIRED_METADATA_FIELDS,
} from './metadata.ts';
export type { Metadata, MetadataField } from './metadata.ts';
export { parseMetadataReply, parseReply, parseWithheld, REPAIR_CODES } from './parse-reply.ts';
export type { ParseError, ParseErrorCode, ParsedReply, ParseReplyOptions, ParseResult, RepairCode } from './parse-reply.ts';
export {
  buildCompactionMessage,
  buildMetadataReminder,
  buildReminder,
  buildSystemPrompt,
  formatUserNote,
  NEUTRAL_FALLBACK_TEXT,
  RESET_MESSAGE,
  SYSTEM_PROMPT,
} from './prompts.ts';
export type { CompactionInput, GenerationSettings, MetadataReminderInput, UserNoteInput } from './prompts.ts';
export { changedPhrases, diffPrompts } from './prompt-diff.ts';
export type { DiffPart } from './prompt-diff.ts';
export {
  buildCompactionRequest,
  buildMetadataRequest,
  buildReminderRequest,
  collectUserWords,
  COMPACTION_OPTIONS,
  DEFAULT_RESERVE_TOKENS,
  estimateTokens,
  METADATA_OPTIONS,
  renderContext,
} from './context.ts';
export type { CompactionRequestInput, ContextEntry, RenderContextOptions } from './context.ts';
export { canKeepText, MAX_ATTEMPTS, MAX_COMPACTIONS, MAX_REMINDERS, planRecovery } from './ladder.ts';
export type { FailedReply, RecoveryPlan } from './ladder.ts';
export {
  detectFamily,
  estimateEncoderTokens,
  FALLBACK_FAMILY,
  FAMILY_STYLES,
  fitMetadataToFamily,
  fitPromptToFamily,
  fitSizeToFamily,
  IMAGE_FAMILIES,
  imageFamilySchema,
  isInFamilyStyle,
  resolveFamily,
} from './families.ts';
export type { FamilyStyle, ImageFamily, ImageSize, ResolvedFamily } from './families.ts';
export {
  buildCheckMessages,
  buildCheckReminder,
  buildDescribeReminder,
  buildDescribeMessages,
  critiqueJsonSchema,
  critiqueSchema,
  describeJsonSchema,
  describeSchema,
  MAX_CRITIQUE_ITEMS,
  MAX_ELEMENT_CHARS,
  parseCritique,
  parseDescription,
} from './vision.ts';
export type { CheckMessagesInput, Critique, CritiqueResult, DescribeMessagesInput, Description, DescriptionResult, VisionMessages } from './vision.ts';
