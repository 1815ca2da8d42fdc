// The service as main.ts wires it, for the tests that drive it without the whole server: SQLite (in memory
// unless a path is given), the real Ollama adapter pointed at `ollamaUrl` (a fake, or a closed port), the
// real zip codec and images folder, and no image backend (nor thumbnailer) unless one is given. `wrapStore` and
// `wrapImageFiles` put a test's failing double in front of the real one.
import { tmpdir } from 'node:os';
import {
  createEaselService,
  createImageGenerator,
  silentLogger,
  type ConversationStore,
  type EaselService,
  type ImageBackend,
  type ImageConverter,
  type ImageFiles,
  type ImageGenerator,
  type Logger,
  type Thumbnailer,
} from '../../server/core/index.ts';
import { createOllamaChatModel } from '../../server/ollama/index.ts';
import { createSqliteStore } from '../../server/sqlite/index.ts';
import { createImageFiles } from '../../server/util/index.ts';
import { createZipArchive } from '../../server/zip/index.ts';

export interface TestService {
  service: EaselService;
  /** The store the service uses (the wrapped one, when `wrapStore` was given). */
  store: ConversationStore;
  /** The real store underneath: close it when done. */
  realStore: ConversationStore;
  images: ImageGenerator;
}

/** A closed port: the Ollama adapter is wired but nothing answers there. */
export const NO_OLLAMA = 'http://127.0.0.1:9';

export interface TestServiceOptions {
  ollamaUrl?: string;
  dbPath?: string;
  imagesDir?: string;
  logger?: Logger;
  backend?: ImageBackend;
  wrapStore?: (real: ConversationStore) => ConversationStore;
  wrapImageFiles?: (real: ImageFiles) => ImageFiles;
  replySaveIntervalMs?: number;
  shutdownWaitMs?: number;
  /** --vision-model: the vision model of every conversation that chose none. */
  visionModel?: string;
  /** Reads pictures brought to Easel (a reference, Describe); none by default, as when sharp is missing. */
  converter?: ImageConverter;
  /** --max-image-pixels; the service's default when not given. */
  maxImagePixels?: number;
  /** Makes the thumbnails of stored pictures; none by default. */
  thumbnails?: Thumbnailer;
  /** The service's and the image generator's clock; Date by default. */
  clock?: { now(): number };
}

export function buildService(options: TestServiceOptions = {}): TestService {
  const logger = options.logger ?? silentLogger;
  const realStore = createSqliteStore({ path: options.dbPath ?? ':memory:' });
  const store = options.wrapStore ? options.wrapStore(realStore) : realStore;
  const realFiles = createImageFiles(options.imagesDir ?? tmpdir());
  const clock = options.clock ?? Date;
  const images = createImageGenerator({ backend: options.backend ?? null, store, logger, clock, saveFile: (name, bytes) => realFiles.save(name, bytes), readFile: (name) => realFiles.read(name) });
  const llm = createOllamaChatModel({ host: options.ollamaUrl ?? NO_OLLAMA, model: 'mistral:7b', numCtx: 8192 });
  const service = createEaselService({
    store,
    llm,
    images,
    imageFiles: options.wrapImageFiles ? options.wrapImageFiles(realFiles) : realFiles,
    archive: createZipArchive(),
    logger,
    clock,
    numCtx: 8192,
    ...(options.replySaveIntervalMs === undefined ? {} : { replySaveIntervalMs: options.replySaveIntervalMs }),
    ...(options.shutdownWaitMs === undefined ? {} : { shutdownWaitMs: options.shutdownWaitMs }),
    ...(options.visionModel === undefined ? {} : { visionModel: options.visionModel }),
    ...(options.converter === undefined ? {} : { converter: options.converter }),
    ...(options.maxImagePixels === undefined ? {} : { maxImagePixels: options.maxImagePixels }),
    ...(options.thumbnails === undefined ? {} : { thumbnails: options.thumbnails }),
  });
  return { service, store, realStore, images };
}

/** A new, empty conversation's id (the test fails at once if it cannot be made). */
export function newConversationId(service: EaselService): string {
  const created = service.createConversation();
  if (!created.ok) throw new Error(created.error.message);
  return created.value.id;
}

/** The store with `method` throwing `error` whenever `when()` says so (always by default): a store that breaks mid-way. */
export function failingStore(real: ConversationStore, method: keyof ConversationStore, error: Error, when: () => boolean = () => true): ConversationStore {
  const original = real[method] as (...args: unknown[]) => unknown;
  return {
    ...real,
    [method]: (...args: unknown[]) => {
      if (when()) throw error;
      return original(...args);
    },
  };
}
