// The word-level diff of two prompts (server/protocol/prompt-diff.ts), for the page's highlight of a comparison.
export { changedPhrases, diffPrompts, type DiffPart } from '../protocol/prompt-diff.ts';
