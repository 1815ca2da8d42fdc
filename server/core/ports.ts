// Ports: what the core needs from the outside world. Adapters (ollama, sqlite, a1111, comfyui,
// openai-images) implement these structurally and never import each other.

import type { ChatMessage, ChatOptions } from '../protocol/index.ts';

export type { ChatMessage, ChatOptions, ChatRole } from '../protocol/index.ts';

export interface ChatRequest {
  messages: ChatMessage[];
  /** The conversation's chat model; absent: the adapter's default (--model). */
  model?: string;
  /** JSON Schema handed to Ollama's `format` (grammar-constrained output). */
  format?: Record<string, unknown>;
  options?: ChatOptions;
  signal?: AbortSignal;
}

export type ChatChunk =
  | { type: 'text'; text: string }
  /** A line without reply text (e.g. a thinking model's thoughts): the model is working, nothing to show. */
  | { type: 'alive' }
  | {
      type: 'end';
      /** Ollama's done_reason: 'stop' | 'length' | … */
      doneReason: string;
      evalCount: number;
      evalDurationNs: number;
      promptEvalCount: number;
    };

export interface ModelHealth {
  reachable: boolean;
  version: string | null;
  model: string;
  modelAvailable: boolean;
  /** What a person should run to fix it, e.g. `ollama pull mistral:7b`. Absent when healthy. */
  remedy?: string;
  /** One sentence saying what is wrong. Absent when healthy. */
  problem?: string;
  /** When the model is not pulled: the models Ollama has, to choose instead. */
  installed?: string[];
}

/** One model Ollama has, as GET /api/models lists it (from Ollama's /api/tags and /api/show). */
export interface InstalledChatModel {
  /** As Ollama names it, e.g. `mistral:7b`. */
  name: string;
  sizeBytes: number;
  /** Ollama's details.parameter_size, e.g. "7.2B"; null when it says none. */
  parameterSize: string | null;
  /** Ollama's details.quantization_level, e.g. "Q4_0". */
  quantization: string | null;
  /** Ollama's details.family, e.g. "llama". */
  family: string | null;
  /** /api/show's capabilities as Ollama reports them ("completion", "vision", "tools", "thinking", "embedding" …); [] when unknown. */
  capabilities: string[];
  /** /api/show's model_info `<architecture>.context_length`; null when unknown. */
  contextLength: number | null;
}

/** One line of Ollama's /api/pull stream (api.ProgressResponse). */
export interface PullProgress {
  status: string;
  digest?: string;
  completed?: number;
  total?: number;
}

export interface ChatModel {
  /** The default chat model (--model). */
  readonly model: string;
  /** Streams one reply. Throws ChatModelError. Aborting `signal` aborts the HTTP request to Ollama. */
  chat(request: ChatRequest): AsyncIterable<ChatChunk>;
  /** About `model` (default: the default model). */
  checkHealth(signal?: AbortSignal, model?: string): Promise<ModelHealth>;
  /**
   * Whether the model is in memory now (Ollama's /api/ps); undefined when that could not be told.
   * Never throws; gives up after a few seconds.
   */
  isLoaded(signal?: AbortSignal, model?: string): Promise<boolean | undefined>;
  /** Asks Ollama to unload the model now (keep_alive: 0) to free GPU memory. */
  unload(signal?: AbortSignal, model?: string): Promise<void>;
  /**
   * Asks Ollama to unload every model it has in memory now (each listed by /api/ps, keep_alive: 0), whichever
   * conversation loaded it; the names unloaded. Throws ChatModelError when Ollama cannot be asked or one
   * would not unload (after trying the others).
   */
  unloadAll(signal?: AbortSignal): Promise<string[]>;
  /** Every model Ollama has, with /api/show's details. Throws ChatModelError when Ollama cannot be asked. */
  listModels(signal?: AbortSignal): Promise<InstalledChatModel[]>;
  /**
   * Pulls a model, one progress line at a time as Ollama streams them. Aborting `signal` hangs up, which
   * cancels the pull. Throws ChatModelError with Ollama's own words when it refuses or fails.
   */
  pull(name: string, signal: AbortSignal): AsyncIterable<PullProgress>;
  /** Whether two names are one model to the server (`mistral` is `mistral:latest` to Ollama); absent: equal strings. */
  isSameModel?(a: string, b: string): boolean;
}

export interface ImageRequest {
  prompt: string;
  negativePrompt: string;
  steps: number;
  cfg: number;
  /** Always concrete (≥ 0): the core resolves −1 before calling a backend. */
  seed: number;
  width: number;
  height: number;
  /** The checkpoint to paint with, as `listModels` names it; absent: the server's current one. */
  checkpoint?: string;
  /** The sampler as `listModels` names it; absent: the server's default. */
  sampler?: string;
  /** The scheduler as `listModels` names it, on servers that have one; absent: the default. */
  scheduler?: string;
  /**
   * Image-to-image ("Vary"): the PNG to start from, as Easel stored it, and how much of it to change, 0.05–1
   * (A1111's denoising_strength, ComfyUI's KSampler denoise, sd.cpp's strength). Absent: text-to-image. Sent only
   * to a backend whose `canVary` is true; the image is made at `width` × `height` (the core defaults them to the
   * starting image's size).
   */
  init?: ImageInit;
}

/** The starting image of an image-to-image request. */
export interface ImageInit {
  png: Uint8Array;
  strength: number;
}

/** What an image server can paint with (GET /api/models `image`). */
export interface ImageModelOptions {
  /** Checkpoints by the name a request takes. */
  checkpoints: string[];
  /** The checkpoint the server paints with when none is asked; null when it cannot tell. */
  current: string | null;
  /** Sampler names a request takes; [] when the server has no choice. */
  samplers: string[];
  /** Scheduler names; [] when the server has none to choose. */
  schedulers: string[];
}

export interface ImageProgress {
  /** 0–1 when the backend reports it. */
  fraction?: number;
  /** Sampling steps done so far, and of how many; only once the backend's count belongs to this job. */
  step?: number;
  steps?: number;
  /** Seconds left by the backend's own estimate (A1111's eta_relative), once it means something. */
  etaSeconds?: number;
}

/** The values an image was made with, as the backend used them: its result, its record and its event share them. */
export interface UsedImageSettings {
  seed?: number;
  steps?: number;
  cfg?: number;
  /** The sampler's name as the backend names it (A1111 "Euler", ComfyUI "euler", sd.cpp "euler_a"). */
  sampler?: string;
  /** The scheduler the backend used, when it said (A1111 "Schedule type", ComfyUI's KSampler input). */
  scheduler?: string;
  /** Checkpoint / model name when the backend says which. */
  model?: string;
}

/**
 * What the backend really made the image with. A value is given only when the backend said it (A1111 and
 * sd.cpp's `info`, ComfyUI's history) or is known to honour what was sent; a value the server ignores and
 * does not report is left out, never filled in from the request.
 */
export interface ImageResult extends UsedImageSettings {
  /** PNG bytes exactly as the backend produced them. */
  png: Uint8Array;
  /** The prompt as the backend received it, when the adapter had to change it (LocalAI splits at "|"). */
  prompt?: string;
  /** The negative prompt the backend used, when it differs from the request ('' when it ignores one). */
  negativePrompt?: string;
}

export interface ImageBackendHealth {
  reachable: boolean;
  /** One sentence saying what is wrong, or what answered. */
  detail: string;
  /** The server that answered, when the adapter can tell (e.g. "stable-diffusion.cpp sd-server"). */
  server?: string;
  /** With --image-backend auto: what it found and how, in one sentence (the log and /api/health say it). */
  found?: string;
  /**
   * The check got no answer within its limit: nothing refused it, so a server may be there, too busy to answer
   * (the core then asks whether it is making one of our images).
   */
  slow?: true;
}

export type ImageBackendName = 'a1111' | 'comfyui' | 'openai' | 'localai';

/** The seeds a backend takes as given; a random seed is drawn inside it. */
export interface SeedRange {
  min: number;
  max: number;
}

export interface ImageBackend {
  /** `auto` until --image-backend auto has found the server, then the adapter it chose. */
  readonly name: ImageBackendName | 'auto';
  readonly url: string;
  /** Absent: any seed from 0 to 4294967295 (A1111's range). */
  readonly seedRange?: SeedRange;
  /** True when --image-backend auto chose the adapter. */
  readonly auto?: boolean;
  /**
   * Whether the server can start an image from another one (`ImageRequest.init`): true, or the one sentence
   * saying why it cannot (shown on the page beside the disabled Vary buttons, and the API's 422). Absent while
   * that cannot be told yet (--image-backend auto before it found its server; the OpenAI-compatible adapter
   * before it knows whether sd-server answers): the core then asks again after `prepare`.
   */
  readonly canVary?: true | string;
  /**
   * Awaited before each image, before its seed is drawn: lets --image-backend auto find its server first, so
   * `name` and `seedRange` are the real adapter's. Never throws.
   */
  prepare?(signal: AbortSignal): Promise<void>;
  /**
   * Generates one image. Aborting `signal` cancels the job on the backend (interrupt endpoint)
   * and rejects with ImageBackendError code 'cancelled'. Throws ImageBackendError.
   */
  generate(
    request: ImageRequest,
    options: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void },
  ): Promise<ImageResult>;
  /**
   * Makes `count` images (2–8) in one job, seeded `request.seed`, `request.seed + 1`, … in order, where the server
   * can (A1111's batch_size, ComfyUI's latent batch, sd-server's batch_count, an OpenAI-style `n` the server
   * honours): the results in that order, each saying the seed it was made with when it has one of its own. Never
   * a grid or anything but the images. Fewer results than asked (a job interrupted on the server) are the ones made.
   * Absent: the core calls `generate` once per image, with each seed. Cancelling stops the whole batch.
   */
  generateBatch?(
    request: ImageRequest & { count: number },
    options: { signal: AbortSignal; onProgress: (progress: ImageProgress) => void },
  ): Promise<ImageResult[]>;
  checkHealth(signal?: AbortSignal): Promise<ImageBackendHealth>;
  /**
   * The checkpoints, samplers and schedulers the server offers, read from it now. Throws ImageBackendError
   * (connection, bad_response…) when it cannot be asked.
   */
  listModels?(signal?: AbortSignal): Promise<ImageModelOptions>;
}
