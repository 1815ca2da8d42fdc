// What Easel can chat with and paint with, as the servers say now: Ollama's installed models and the image
// server's checkpoints, samplers and schedulers. Kept from the last asking, so a choice is checked against
// what the user was shown (and asked again when a name is not known yet); a pull adds a model.
import { detectFamily, type ImageFamily } from '../protocol/index.ts';
import { isChatModelError, isImageBackendError } from './errors.ts';
import type { ImageGenerator } from './generation.ts';
import type { Logger } from './logger.ts';
import type { ChatModel, ImageBackend, InstalledChatModel, PullProgress } from './ports.ts';
import { refuse, type Result } from './results.ts';
import type { ModelChoice } from './settings.ts';

export interface ListedCheckpoint {
  name: string;
  /** The family its name says; null when it says none. */
  family: ImageFamily | null;
}

/** GET /api/models: what each server offers. A server that could not be asked lists nothing and says why in `problem`. */
export interface ModelsView {
  chat: { default: string; installed: InstalledChatModel[]; problem: string | null };
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
  /** Asks both servers now (in parallel) and keeps the answer. Never throws. */
  list(signal?: AbortSignal): Promise<ModelsView>;
  /** The image server's current checkpoint as last asked; null before the first asking or when it cannot tell. */
  serverCheckpoint(): string | null;
  /**
   * The model choices of a settings change, checked against the last listing: a name the server did not list is
   * refused ('invalid', 422). Names the listing does not know are asked for again first (a model pulled in a
   * terminal since), so only a name the server really lacks is refused.
   */
  checkChoice(choice: Partial<ModelChoice>, signal?: AbortSignal): Promise<Result<void>>;
  /** Checks against the last listing only (for commands that cannot wait): unknown names are refused. */
  checkChoiceNow(choice: Partial<ModelChoice>): Result<void>;
  /** Pulls a model through Ollama; the stream ends with `done` or `error`. Aborting `signal` cancels the pull. */
  pull(name: string, signal: AbortSignal): AsyncGenerator<PullEvent>;
}

export interface ModelCatalogDeps {
  llm: ChatModel;
  images: ImageGenerator;
  logger: Logger;
}

/** How a chat model or a pull is named to Ollama (the --model flag's rule). */
export const OLLAMA_NAME = /^[\w.\-/:]+$/;

const EMPTY_IMAGE = { checkpoints: [], current: null, samplers: [], schedulers: [] };

export function createModelCatalog(deps: ModelCatalogDeps): ModelCatalog {
  let last: ModelsView | undefined;

  async function listChat(signal: AbortSignal | undefined): Promise<ModelsView['chat']> {
    try {
      return { default: deps.llm.model, installed: await deps.llm.listModels(signal), problem: null };
    } catch (error) {
      if (!isChatModelError(error)) throw error;
      return { default: deps.llm.model, installed: [], problem: error.message };
    }
  }

  async function listImage(signal: AbortSignal | undefined): Promise<ModelsView['image']> {
    try {
      const listed = await deps.images.listModels(signal ?? new AbortController().signal);
      if (listed === null) return { backend: 'none', ...EMPTY_IMAGE, problem: null };
      const { options } = listed;
      return {
        backend: listed.backend,
        checkpoints: options.checkpoints.map((name) => ({ name, family: detectFamily(name) })),
        current: options.current,
        samplers: options.samplers,
        schedulers: options.schedulers,
        problem: null,
      };
    } catch (error) {
      if (!isImageBackendError(error)) throw error;
      return { backend: last?.image.backend ?? 'none', ...EMPTY_IMAGE, problem: error.message };
    }
  }

  async function list(signal?: AbortSignal): Promise<ModelsView> {
    const [chat, image] = await Promise.all([listChat(signal), listImage(signal)]);
    last = { chat, image };
    return last;
  }

  /** What is wrong with the choice against `view`, or undefined. A server that could not be asked is said as such. */
  function findProblem(choice: Partial<ModelChoice>, view: ModelsView | undefined): { field: keyof ModelChoice; message: string } | undefined {
    const chatModel = choice.chatModel;
    const same = (a: string, b: string) => deps.llm.isSameModel?.(a, b) ?? a === b;
    if (chatModel != null && !view?.chat.installed.some((model) => same(model.name, chatModel))) {
      const why = view?.chat.problem;
      return {
        field: 'chatModel',
        message: why ? `Easel could not ask Ollama for its models, so ${chatModel} cannot be chosen now: ${why}` : `Ollama has no model ${chatModel}: pull it first (\`ollama pull ${chatModel}\` or the Pull button), or pick an installed one.`,
      };
    }
    const image = view?.image;
    const lists: Array<[keyof ModelChoice, string | null | undefined, string[] | undefined, string]> = [
      ['checkpoint', choice.checkpoint, image?.checkpoints.map((entry) => entry.name), 'checkpoint'],
      ['sampler', choice.sampler, image?.samplers, 'sampler'],
      ['scheduler', choice.scheduler, image?.schedulers, 'scheduler'],
    ];
    for (const [field, name, names, what] of lists) {
      if (name == null || names?.includes(name)) continue;
      if (image?.problem) return { field, message: `Easel could not ask the image server for its ${what}s, so ${JSON.stringify(name)} cannot be chosen now: ${image.problem}` };
      if (image === undefined || image.backend === 'none') return { field, message: `No image server is configured, so there is no ${what} to choose; start Easel with --image-url.` };
      return {
        field,
        message: names === undefined || names.length === 0
          ? `The image server offers no ${what} to choose; leave it at the server's default (null).`
          : `The image server has no ${what} ${JSON.stringify(name)}; pick one it lists (GET /api/models).`,
      };
    }
    return undefined;
  }

  function toResult(problem: ReturnType<typeof findProblem>): Result<void> {
    return problem === undefined ? { ok: true, value: undefined } : refuse('invalid', problem.message, { [problem.field]: problem.message });
  }

  return {
    list,
    serverCheckpoint: () => last?.image.current ?? null,
    checkChoiceNow: (choice) => toResult(findProblem(choice, last)),
    async checkChoice(choice, signal) {
      if (findProblem(choice, last) === undefined) return { ok: true, value: undefined };
      return toResult(findProblem(choice, await list(signal)));
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
      await listChat(signal).then((chat) => {
        if (last !== undefined) last = { ...last, chat };
      }, () => {});
      yield { type: 'done', name };
    },
  };
}
