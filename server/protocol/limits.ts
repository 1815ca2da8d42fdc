// Ranges shared by the metadata schema (what the model may send) and the settings schema
// (what the user may set): one source so the two can never disagree.
export const LIMITS = {
  promptMaxChars: 2000,
  steps: { min: 1, max: 150 },
  cfg: { min: 0, max: 30 },
  seed: { min: -1, max: 4_294_967_295 },
  size: { min: 64, max: 2048, multipleOf: 8 },
} as const;

export const RANDOM_SEED = -1;

/**
 * The most raw model output one model call may produce. A reply that runs on past it (a model
 * repeating itself) is stopped: the request to Ollama is aborted and what arrived is parsed.
 */
export const MAX_REPLY_CHARS = 200_000;
