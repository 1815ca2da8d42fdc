// The chat messages the protocol builds for the model. They live here, on the ground floor, so the
// protocol never imports the core above it; the core's ports use these types.

export type ChatRole = 'system' | 'user' | 'assistant';

export interface ChatMessage {
  role: ChatRole;
  content: string;
  /** Raw bytes of images (PNG, JPEG…) the model should see with this message; only a vision model reads them. */
  images?: Uint8Array[];
}

/** The model options the protocol chooses (e.g. for compaction); Ollama's names. */
export interface ChatOptions {
  temperature?: number;
  num_predict?: number;
  num_ctx?: number;
  seed?: number;
}
