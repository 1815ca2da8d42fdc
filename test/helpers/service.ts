// The service as main.ts wires it, for the tests that drive it without the whole server: SQLite (in memory
// unless a path is given), the real Ollama adapter pointed at `ollamaUrl` (a fake, or a closed port), no
// image backend, the real zip codec and images folder.
import { tmpdir } from 'node:os';
import { createEaselService, createImageGenerator, silentLogger, type ConversationStore, type EaselService, type ImageGenerator, type Logger } from '../../server/core/index.ts';
import { createOllamaChatModel } from '../../server/ollama/index.ts';
import { createSqliteStore } from '../../server/sqlite/index.ts';
import { createImageFiles } from '../../server/util/index.ts';
import { createZipArchive } from '../../server/zip/index.ts';

export interface TestService {
  service: EaselService;
  store: ConversationStore;
  images: ImageGenerator;
}

/** A closed port: the Ollama adapter is wired but nothing answers there. */
export const NO_OLLAMA = 'http://127.0.0.1:9';

export function buildService(options: { ollamaUrl?: string; dbPath?: string; imagesDir?: string; logger?: Logger } = {}): TestService {
  const logger = options.logger ?? silentLogger;
  const store = createSqliteStore({ path: options.dbPath ?? ':memory:' });
  const images = createImageGenerator({ backend: null, store, logger, clock: Date, saveFile: async () => undefined });
  const llm = createOllamaChatModel({ host: options.ollamaUrl ?? NO_OLLAMA, model: 'mistral:7b', numCtx: 8192 });
  const service = createEaselService({
    store,
    llm,
    images,
    imageFiles: createImageFiles(options.imagesDir ?? tmpdir()),
    archive: createZipArchive(),
    logger,
    clock: Date,
    numCtx: 8192,
  });
  return { service, store, images };
}
