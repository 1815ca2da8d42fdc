// What Easel can chat with and paint with, as the servers say now: Ollama's installed models and the image
// server's checkpoints, samplers and schedulers. Kept from the last asking, so a choice is checked against
// what the user was shown (and asked again when a name is not known yet); a pull adds a model.
import { detectFamily, type ImageFamily } from '../protocol/index.ts';
import { isChatModelError, isImageBackendError } from './errors.ts';
import type { ImageGenerator } from './generation.ts';
import type { Logger } from './logger.ts';
import type { ChatModel, ImageBackend, ImageModelOptions, InstalledChatModel, PullProgress } from './ports.ts';
import { refuse, type Result } from './results.ts';
import type { ModelChoice } from './settings.ts';

export interface ListedCheckpoint {
  name: string;
  /** The family its name says; null when it says none. */
  family: ImageFamily | null;
}

/** GET /api/models: what each server offers. A server that could not be asked lists nothing and says why in `problem`. */
export interface ModelsView {
  /** `visionDefault`: --vision-model, the vision model of every conversation that chose none (null: none). */
  chat: { default: string; visionDefault: string | null; installed: InstalledChatModel[]; problem: string | null };
  image: {
    backend: ImageBackend['name'] | 'none';
    checkpoints: ListedCheckpoint[];
    current: string | null;
    samplers: string[];
    schedulers: string[];
    problem: string | null;
  };
}

/** One event of a pull as the API streams it. */
export type PullEvent = ({ type: 'progress' } & PullProgress) | { type: 'done'; name: string } | { type: 'error'; code: 'pull_failed'; message: string };

export interface ModelCatalog {
  /** Asks both servers now (in parallel). Never throws. */
  list(signal?: AbortSignal): Promise<ModelsView>;
  /** The image server's current checkpoint as last heard; null before the first answer or when it cannot tell. */
  serverCheckpoint(): string | null;
  /** Why Ollama's models could not be listed last time it was asked (it is down, say); null when they were. */
  chatProblem(): string | null;
  /**
   * Asks the servers again when the choice names something the last answers did not list (a model pulled in a
   * terminal, a checkpoint copied in since), so that checkChoice then decides on what they have now.
   */
  refreshFor(choice: Partial<ModelChoice>, signal?: AbortSignal): Promise<void>;
  /**
   * The model choices of a settings change, checked against what the servers last listed: a name a server lacks
   * is refused ('invalid', 422). The value is the choice with the chat model named as Ollama lists it.
   */
  checkChoice(choice: Partial<ModelChoice>): Result<Partial<ModelChoice>>;
  /** Pulls a model through Ollama; the stream ends with `done` or `error`. Aborting `signal` cancels the pull. */
  pull(name: string, signal: AbortSignal): AsyncGenerator<PullEvent>;
}

export interface ModelCatalogDeps {
  llm: ChatModel;
  images: ImageGenerator;
  logger: Logger;
  /** --vision-model, said with the listing; absent or undefined: none. */
  visionModel?: string | undefined;
}

const NO_IMAGE_OPTIONS: ImageModelOptions = { checkpoints: [], current: null, samplers: [], schedulers: [] };

/** The choices that name an Ollama model, and the capability each needs (/api/show, types/model/capability.go). */
const OLLAMA_CHOICES = [
  { field: 'chatModel', needs: 'completion', job: 'chat' },
  { field: 'visionModel', needs: 'vision', job: 'see images' },
] as const;

export function createModelCatalog(deps: ModelCatalogDeps): ModelCatalog {
  const visionDefault = deps.visionModel ?? null;
  // What each server last listed, kept through a failed or cancelled asking (the lists do not vanish because
  // a server was slow once), with the problem of its latest answer. An older asking never overwrites a newer one.
  const chat = { installed: undefined as InstalledChatModel[] | undefined, problem: null as string | null, asked: 0, stored: 0 };
  const image = { listed: undefined as Omit<ModelsView['image'], 'problem'> | undefined, problem: null as string | null, asked: 0, stored: 0 };

  async function listChat(signal: AbortSignal | undefined): Promise<ModelsView['chat']> {
    const asking = ++chat.asked;
    let answer: ModelsView['chat'];
    try {
      answer = { default: deps.llm.model, visionDefault, installed: await deps.llm.listModels(signal), problem: null };
    } catch (error) {
      if (!isChatModelError(error)) throw error;
      answer = { default: deps.llm.model, visionDefault, installed: [], problem: error.message };
    }
    // Stryker disable next-line EqualityOperator: each asking has its own number and only it stores it, after this check: never equal
    const newest = asking > chat.stored;
    if (signal?.aborted !== true && newest) {
      chat.stored = asking;
      chat.problem = answer.problem;
      if (answer.problem === null) chat.installed = answer.installed;
    }
    return answer;
  }

  async function listImage(signal: AbortSignal | undefined): Promise<ModelsView['image']> {
    const asking = ++image.asked;
    let answer: ModelsView['image'];
    try {
      const listed = await deps.images.listModels(signal ?? new AbortController().signal);
      const options = listed?.options ?? NO_IMAGE_OPTIONS;
      answer = {
        backend: listed?.backend ?? 'none',
        checkpoints: options.checkpoints.map((name) => ({ name, family: detectFamily(name) })),
        current: options.current,
        samplers: options.samplers,
        schedulers: options.schedulers,
        problem: null,
      };
    } catch (error) {
      if (!isImageBackendError(error)) throw error;
      answer = { backend: image.listed?.backend ?? 'none', checkpoints: [], current: null, samplers: [], schedulers: [], problem: error.message };
    }
    // Stryker disable next-line EqualityOperator: each asking has its own number and only it stores it, after this check: never equal
    const newest = asking > image.stored;
    if (signal?.aborted !== true && newest) {
      image.stored = asking;
      image.problem = answer.problem;
      if (answer.problem === null) image.listed = answer;
    }
    return answer;
  }

  async function list(signal?: AbortSignal): Promise<ModelsView> {
    const [chatAnswer, imageAnswer] = await Promise.all([listChat(signal), listImage(signal)]);
    return { chat: chatAnswer, image: imageAnswer };
  }

  const isSame = (a: string, b: string) => deps.llm.isSameModel?.(a, b) ?? a === b;

  /** What is wrong with the choice against what the servers last listed, or undefined. */
  function findProblem(choice: Partial<ModelChoice>): { field: keyof ModelChoice; message: string } | undefined {
    // An Ollama model must be installed, and able to do its job as Ollama reports its capabilities.
    for (const { field, needs, job } of OLLAMA_CHOICES) {
      const name = choice[field];
      if (name == null) continue;
      const listed = chat.installed?.find((model) => isSame(model.name, name));
      if (listed === undefined) {
        const message = chat.problem
          ? `Easel could not ask Ollama for its models, so ${name} cannot be chosen now: ${chat.problem}`
          : chat.installed === undefined
            ? `Easel has not heard from Ollama yet, so ${name} cannot be chosen now; try again in a moment.`
            : `Ollama has no model ${name}: pull it first (\`ollama pull ${name}\` or the Pull button), or pick an installed one.`;
        return { field, message };
      }
      // A chat model whose capabilities are unknown (an old Ollama says none) is taken; a vision model never is.
      const lacks = needs === 'vision' ? !listed.capabilities.includes('vision') : listed.capabilities.length > 0 && !listed.capabilities.includes(needs);
      if (lacks) {
        const can = listed.capabilities.length > 0 ? ` (it can: ${listed.capabilities.join(', ')})` : '';
        return { field, message: `${listed.name} cannot ${job}${can}; pick ${needs === 'vision' ? 'a vision model such as gemma3, llava or qwen2.5vl' : 'a chat model'}.` };
      }
    }
    const lists: Array<[keyof ModelChoice, string | null | undefined, string[] | undefined, string]> = [
      ['checkpoint', choice.checkpoint, image.listed?.checkpoints.map((entry) => entry.name), 'checkpoint'],
      ['sampler', choice.sampler, image.listed?.samplers, 'sampler'],
      ['scheduler', choice.scheduler, image.listed?.schedulers, 'scheduler'],
    ];
    for (const [field, name, names, what] of lists) {
      if (name == null || names?.includes(name)) continue;
      if (image.problem) return { field, message: `Easel could not ask the image server for its ${what}s, so ${JSON.stringify(name)} cannot be chosen now: ${image.problem}` };
      if (image.listed === undefined) return { field, message: `Easel has not heard from the image server yet, so ${JSON.stringify(name)} cannot be chosen now; try again in a moment.` };
      if (image.listed.backend === 'none') return { field, message: `No image server is configured, so there is no ${what} to choose; start Easel with --image-url.` };
      return {
        field,
        message: names?.length
          ? `The image server has no ${what} ${JSON.stringify(name)}; pick one it lists (GET /api/models).`
          : `The image server offers no ${what} to choose; leave it at the server's default (null).`,
      };
    }
    return undefined;
  }

  return {
    list,
    serverCheckpoint: () => image.listed?.current ?? null,
    chatProblem: () => chat.problem,
    async refreshFor(choice, signal) {
      if (findProblem(choice) !== undefined) await list(signal);
    },
    checkChoice(choice) {
      const problem = findProblem(choice);
      if (problem !== undefined) return refuse('invalid', problem.message, { [problem.field]: problem.message });
      // Stored as Ollama names it: `mistral` is kept as the `mistral:latest` the list shows.
      const named = { ...choice };
      for (const { field } of OLLAMA_CHOICES) {
        const name = choice[field];
        const listed = name == null ? undefined : chat.installed?.find((model) => isSame(model.name, name));
        if (listed !== undefined) named[field] = listed.name;
      }
      return { ok: true, value: named };
    },
    async *pull(name, signal) {
      try {
        for await (const progress of deps.llm.pull(name, signal)) yield { type: 'progress', ...progress };
      } catch (error) {
        if (!isChatModelError(error)) throw error;
        if (!signal.aborted) deps.logger.warn('a model pull failed', { name, error });
        yield { type: 'error', code: 'pull_failed', message: error.message };
        return;
      }
      // The new model is listed at once, so it can be chosen without another asking.
      await listChat(signal);
      yield { type: 'done', name };
    },
  };
}
