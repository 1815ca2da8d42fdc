// The metadata a scripted model reply ends with: one builder for every suite (scriptReply in
// test/fakes/fake-ollama.ts puts it after the `---` line). Defaults: no prompt yet, no image, 20 steps.
export interface ReplyMeta {
  prompt: string;
  generate_image: boolean;
  steps: number;
  cfg: number;
  seed: number;
  [key: string]: unknown;
}

/** A reply's metadata: the prompt so far, not asking for an image. */
export function replyMeta(prompt = '', extra: Record<string, unknown> = {}): ReplyMeta {
  return { prompt, generate_image: false, steps: 20, cfg: 7, seed: -1, ...extra };
}

/** A reply's metadata that says the prompt is ready: an image is made when automatic generation is on. */
export function readyMeta(prompt: string, extra: Record<string, unknown> = {}): ReplyMeta {
  return replyMeta(prompt, { generate_image: true, ...extra });
}
