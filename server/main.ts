// The only module that reads process.env / argv and wires adapters together.
import { mkdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { formatHelp, parseConfig, type Config } from './config/index.ts';
import { createA1111Backend } from './a1111/index.ts';
import { createComfyUiBackend, DEFAULT_WORKFLOW_PATH, loadWorkflow } from './comfyui/index.ts';
import {
  createEaselService,
  createImageGenerator,
  createLogger,
  DEFAULT_REPLY_TIMEOUTS,
  describeModelHealth,
  type ImageBackend,
  type Logger,
} from './core/index.ts';
import { createOpenAiImagesBackend } from './openai-images/index.ts';
import { createApp } from './http/index.ts';
import { createPageRoutes } from './http/page/index.ts';
import { createOllamaChatModel } from './ollama/index.ts';
import { createSqliteStore } from './sqlite/index.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

/** Waits that are not flags: tests shorten them instead of waiting real seconds. */
export interface ServerTiming {
  /** Silence before a reply's first word after which a `status` event says what is happening. Default 2000. */
  statusAfterMs?: number;
  /** Quiet time on an event stream before an SSE keep-alive comment. Default 15 000. */
  keepAliveMs?: number;
}

/** Starts Easel with a parsed config; used by the CLI below and by tests that need a real port. */
export async function startServer(config: Config, logger: Logger, timing: ServerTiming = {}): Promise<RunningServer> {
  mkdirSync(config.dataDir, { recursive: true });
  const store = createSqliteStore({ path: join(config.dataDir, 'easel.db') });
  const llm = createOllamaChatModel({
    host: config.ollamaUrl,
    model: config.model,
    numCtx: config.numCtx,
    ...(config.llmSeed !== undefined ? { seed: config.llmSeed } : {}),
  });
  const imagesDir = join(config.dataDir, 'images');
  mkdirSync(imagesDir, { recursive: true });
  const images = createImageGenerator({
    backend: await createImageBackend(config),
    store,
    logger,
    clock: Date,
    saveFile: (name, bytes) => writeFile(join(imagesDir, name), bytes, { flag: 'wx' }),
    ...(config.unloadLlm ? { unloadLlm: () => llm.unload() } : {}),
  });
  const replyTimeouts = {
    firstTokenMs: config.firstTokenTimeout * 1000,
    stallMs: config.stallTimeout * 1000,
    statusAfterMs: timing.statusAfterMs ?? DEFAULT_REPLY_TIMEOUTS.statusAfterMs,
  };
  const service = createEaselService({ store, llm, images, logger, clock: Date, numCtx: config.numCtx, replyTimeouts });
  const keepAlive = timing.keepAliveMs === undefined ? {} : { keepAliveMs: timing.keepAliveMs };
  const app = createApp({ service, logger, imagesDir, page: createPageRoutes({ service, logger, ...keepAlive }), ...keepAlive });

  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: config.host, port: config.port }, () => resolve(s));
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;

  void images.checkHealth().then((status) => {
    if (!status.configured) logger.info(status.detail);
    else if (status.reachable) logger.info(`Image backend ${status.backend} answers at ${status.url}`);
    else logger.warn(`Image backend ${status.backend} at ${status.url}: ${status.detail} Chat works meanwhile.`);
  });
  // Not fatal: Easel starts anyway and re-checks on every turn, so starting Ollama later just works.
  void service.checkHealth().then(({ ollama }) => {
    if (ollama.reachable && ollama.modelAvailable) logger.info(describeModelHealth(ollama));
    else logger.warn(describeModelHealth(ollama));
  });

  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          store.close();
          resolve();
        });
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}

async function createImageBackend(config: Config): Promise<ImageBackend | null> {
  const timeoutMs = config.imageTimeout * 1000;
  const url = config.imageUrl;
  if (config.imageBackend === 'none' || url === undefined) return null;
  // The progress endpoint is local and cheap: a quarter second keeps the bar smooth.
  if (config.imageBackend === 'a1111') return createA1111Backend({ url, timeoutMs, pollIntervalMs: 250 });
  if (config.imageBackend === 'openai') {
    return createOpenAiImagesBackend({ url, timeoutMs, ...(config.imageModel ? { model: config.imageModel } : {}) });
  }
  const workflow = await loadWorkflow(config.comfyWorkflow ?? DEFAULT_WORKFLOW_PATH);
  if (!workflow.ok) throw new StartupError(workflow.error.message);
  return createComfyUiBackend({ url, timeoutMs, workflow: workflow.value });
}

/** A start-up problem the person can fix; printed as one line, exit code 2. */
class StartupError extends Error {
  override readonly name = 'StartupError';
}

async function main(): Promise<void> {
  const parsed = parseConfig(process.argv.slice(2), process.env);
  if (!parsed.ok) {
    process.stderr.write(`easel: ${parsed.error.message}\n`);
    process.exit(2);
  }
  if (parsed.value === null) {
    process.stdout.write(parsed.exit === 'help' ? `${formatHelp()}\n` : `easel ${VERSION}\n`);
    return;
  }
  const config = parsed.value;
  const logger = createLogger({ level: config.logLevel, write: (line) => process.stderr.write(`${line}\n`) });
  const running = await startServer(config, logger).catch((error: NodeJS.ErrnoException) => {
    if (error instanceof StartupError) {
      process.stderr.write(`easel: ${error.message}\n`);
      process.exit(2);
    }
    const hint = error.code === 'EADDRINUSE' ? ` Port ${config.port} is taken: pick another with --port.` : '';
    process.stderr.write(`easel: could not start: ${error.message}.${hint}\n`);
    process.exit(1);
  });
  logger.info(`Easel ${VERSION} is running at ${running.url}`);
  const shutdown = () => void running.close().then(() => process.exit(0));
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('server/main.ts')) {
  void main();
}
