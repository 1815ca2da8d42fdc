// The only module that reads process.env / argv and wires adapters together.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { AUTO_IMAGE_URLS, CHECKOUT_INVOCATION, formatHelp, installedInvocation, isLoopbackHost, parseConfig, type Config } from './config/index.ts';
import { createA1111Backend } from './a1111/index.ts';
import { createComfyUiBackend, DEFAULT_IMG2IMG_WORKFLOW_PATH, DEFAULT_WORKFLOW_PATH, loadWorkflow } from './comfyui/index.ts';
import {
  createEaselService,
  createImageGenerator,
  createLogger,
  DEFAULT_REPLY_TIMEOUTS,
  describeModelHealth,
  type ImageBackend,
  type Logger,
} from './core/index.ts';
import { createAutoImageBackend, probeImageServer } from './image-probe/index.ts';
import { createOpenAiImagesBackend } from './openai-images/index.ts';
import { createApp } from './http/index.ts';
import { createPageRoutes } from './http/page/index.ts';
import { createOllamaChatModel } from './ollama/index.ts';
import { createSqliteStore, StoreOpenError } from './sqlite/index.ts';
import { createImageConverter, createThumbnailer } from './sharp/index.ts';
import { createImageFiles, writeFileAtomically } from './util/index.ts';
import { createZipArchive } from './zip/index.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface RunningServer {
  url: string;
  /** The token every request needs; undefined on a loopback address without --token. */
  token: string | undefined;
  /** Where to open Easel, the token included: one address per network interface for 0.0.0.0 / ::. */
  openUrls: string[];
  /** Stops taking connections, stops every reply and image (interrupting the backend), then closes the store. */
  close(): Promise<void>;
}

/** The whole shutdown on SIGTERM/SIGINT stays under 5 s; past this the process exits anyway. */
export const SHUTDOWN_DEADLINE_MS = 4_500;
/** After the work has stopped, how long open streams get to deliver their last event before being cut. */
const STREAM_FLUSH_MS = 500;

/** Waits that are not flags: tests shorten them instead of waiting real seconds. */
export interface ServerTiming {
  /** Silence before a reply's first word after which a `status` event says what is happening. Default 2000. */
  statusAfterMs?: number;
  /** Quiet time on an event stream before an SSE keep-alive comment. Default 15 000. */
  keepAliveMs?: number;
  /** The longest one check or description by the vision model may take. Default VISION_TIMEOUT_MS, 5 minutes. */
  visionTimeoutMs?: number;
}

/** Starts Easel with a parsed config; used by the CLI below and by tests that need a real port. */
export async function startServer(config: Config, logger: Logger, timing: ServerTiming = {}): Promise<RunningServer> {
  checkDataDir(config.dataDir);
  const store = openStore(join(config.dataDir, 'easel.db'), logger);
  const llm = createOllamaChatModel({
    host: config.ollamaUrl,
    model: config.model,
    numCtx: config.numCtx,
    // Loaded between turns (Ollama's own default is 5 minutes): a reply does not wait for the model to load again.
    keepAlive: config.keepAlive,
    ...(config.llmSeed !== undefined ? { seed: config.llmSeed } : {}),
  });
  const imagesDir = join(config.dataDir, 'images');
  mkdirSync(imagesDir, { recursive: true });
  const imageFiles = createImageFiles(imagesDir);
  const images = createImageGenerator({
    backend: await createImageBackend(config, logger),
    store,
    logger,
    clock: Date,
    saveFile: (name, bytes) => writeFileAtomically(join(imagesDir, name), bytes),
    removeFile: (name) => imageFiles.remove(name),
    readFile: (name) => imageFiles.read(name),
    imagesDir,
    writer: `Easel ${VERSION}`,
    maxImagePixels: config.maxImagePixels,
    ...(config.unloadLlm ? { unloadLlm: async () => void (await llm.unloadAll()) } : {}),
  });
  const replyTimeouts = {
    firstTokenMs: config.firstTokenTimeout * 1000,
    stallMs: config.stallTimeout * 1000,
    statusAfterMs: timing.statusAfterMs ?? DEFAULT_REPLY_TIMEOUTS.statusAfterMs,
  };
  // The gallery's thumbnails, kept beside the images folder (thumbs/<image id>.webp), which holds the PNGs alone.
  const thumbnails = createThumbnailer({ imagesDir, thumbsDir: join(config.dataDir, 'thumbs'), logger, maxPixels: config.maxImagePixels });
  const service = createEaselService({
    store,
    llm,
    images,
    imageFiles,
    thumbnails,
    // A reference image (dropped, pasted, or sent to the API) made a PNG with sharp.
    converter: createImageConverter({ logger }),
    archive: createZipArchive(),
    logger,
    clock: Date,
    numCtx: config.numCtx,
    replyTimeouts,
    maxImagePixels: config.maxImagePixels,
    ...(config.visionModel === undefined ? {} : { visionModel: config.visionModel }),
    ...(timing.visionTimeoutMs === undefined ? {} : { visionTimeoutMs: timing.visionTimeoutMs }),
  });
  // Off loopback, other machines can connect: they need a token (128 random bits unless --token gave one).
  // A --token given on loopback is enforced too: it guards against other users of this machine.
  const token = config.token ?? (isLoopbackHost(config.host) ? undefined : randomBytes(16).toString('hex'));
  const addresses = isWildcardHost(config.host) ? listNetworkAddresses() : [];
  const access = { allowedHosts: [config.host, ...addresses, ...config.allowedHosts], token };
  const keepAlive = timing.keepAliveMs === undefined ? {} : { keepAliveMs: timing.keepAliveMs };
  const app = createApp({ service, logger, imagesDir, access, page: createPageRoutes({ service, logger, ...keepAlive }), ...keepAlive });

  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: config.host, port: config.port }, () => resolve(s));
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  // 0.0.0.0 and :: are no address to open; this machine reaches them at 127.0.0.1.
  const url = `http://${isWildcardHost(config.host) ? '127.0.0.1' : bracketIpv6(config.host)}:${port}`;
  const openUrls = (addresses.length > 0 ? ['127.0.0.1', ...addresses] : [config.host]).map(
    (address) => `http://${bracketIpv6(address)}:${port}/${token === undefined ? '' : `?token=${token}`}`,
  );

  if (!isLoopbackHost(config.host)) {
    logger.warn(
      `Easel listens on ${config.host}, so other machines on your network can reach it. Each needs the token ` +
        '(printed below, inside the address to open); anyone who has it can use Easel. To keep Easel to this machine, start it without --host.',
    );
  }
  void images.checkHealth().then((status) => {
    const server = status.server === undefined ? '' : ` (${status.server})`;
    if (!status.configured) logger.info(status.detail);
    // The adapter's own sentence: a server that answers with a redirect or without the API is reachable, not ready.
    else if (status.reachable) logger.info(`Image backend ${status.backend}${server}: ${status.detail}`);
    else logger.warn(`Image backend ${status.backend} at ${status.url}: ${status.detail} Chat works meanwhile.`);
  });
  // What the servers offer, asked once now: the family of the checkpoint that paints is known from the first turn.
  void service.listModels();
  // Not fatal: Easel starts anyway and re-checks on every turn, so starting Ollama later just works.
  void service.checkHealth().then(({ ollama }) => {
    if (ollama.reachable && ollama.modelAvailable) logger.info(describeModelHealth(ollama));
    else logger.warn(describeModelHealth(ollama));
  });

  const connections = server as { closeAllConnections?: () => void; closeIdleConnections?: () => void };
  let closing: Promise<void> | undefined;
  return {
    url,
    token,
    openUrls,
    close: () =>
      (closing ??= (async () => {
        // The port is freed first; streams in progress stay open to carry their last event.
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        connections.closeIdleConnections?.();
        await service.shutdown();
        // Streams that just wrote their last event still have to flush it: give them a moment to end.
        const flushed = setInterval(() => connections.closeIdleConnections?.(), 20);
        await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, STREAM_FLUSH_MS))]);
        clearInterval(flushed);
        connections.closeAllConnections?.();
        await closed;
        // A thumbnail being made is finished (or given up) before the data folder may go.
        await thumbnails.settled();
        store.close();
      })()),
  };
}

/** The data folder exists and can be written, or Easel says so at once (exit code 2) rather than at the first message. */
function checkDataDir(dataDir: string): void {
  const probe = join(dataDir, `.easel-write-check-${process.pid}`);
  try {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(probe, 'ok');
    rmSync(probe, { force: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown';
    const cause = code === 'EROFS' ? 'it is on a read-only disk' : code === 'EACCES' || code === 'EPERM' ? 'Easel may not write there' : code === 'ENOSPC' ? 'the disk is full' : `it cannot be written (${code})`;
    throw new StartupError(`The data folder ${dataDir} cannot be used: ${cause}. Make it writable, free some space, or start Easel with another --data-dir.`);
  }
}

function openStore(path: string, logger: Logger) {
  try {
    return createSqliteStore({ path, logger });
  } catch (error) {
    if (error instanceof StoreOpenError) throw new StartupError(error.message, { cause: error });
    throw error;
  }
}

function isWildcardHost(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}

function bracketIpv6(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** The machine's own addresses (IPv6 link-local ones left out: they need a zone the browser will not send). */
function listNetworkAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flatMap((entries) => entries ?? [])
    .filter((entry) => !entry.internal && !entry.address.toLowerCase().startsWith('fe80:'))
    .map((entry) => entry.address);
}

async function createImageBackend(config: Config, logger: Logger): Promise<ImageBackend | null> {
  if (config.imageBackend === 'none') return null;
  const timeoutMs = config.imageTimeout * 1000;
  const model = config.imageModel ? { model: config.imageModel } : {};
  // Read at start for auto too, so a broken --comfy-workflow is said now and finding ComfyUI later needs no I/O.
  const comfy = config.imageBackend === 'comfyui' || config.imageBackend === 'auto';
  const workflow = comfy ? await loadWorkflow(config.comfyWorkflow ?? DEFAULT_WORKFLOW_PATH) : undefined;
  if (workflow !== undefined && !workflow.ok) throw new StartupError(workflow.error.message);
  const img2imgWorkflow = comfy ? await loadWorkflow(config.comfyImg2imgWorkflow ?? DEFAULT_IMG2IMG_WORKFLOW_PATH, 'img2img') : undefined;
  if (img2imgWorkflow !== undefined && !img2imgWorkflow.ok) throw new StartupError(img2imgWorkflow.error.message.replace('--comfy-workflow', '--comfy-img2img-workflow'));
  const createAdapter = (backend: Exclude<Config['imageBackend'], 'none' | 'auto'>, url: string): ImageBackend => {
    switch (backend) {
      // The progress endpoint is local and cheap: a quarter second keeps the bar smooth.
      case 'a1111':
        return createA1111Backend({ url, timeoutMs, pollIntervalMs: 250 });
      case 'openai':
      case 'localai':
        return createOpenAiImagesBackend({ url, timeoutMs, dialect: backend, ...model });
      case 'comfyui':
        return createComfyUiBackend({
          url,
          timeoutMs,
          workflow: workflow?.ok === true ? workflow.value : {},
          ...(img2imgWorkflow?.ok === true ? { img2imgWorkflow: img2imgWorkflow.value } : {}),
        });
    }
  };
  if (config.imageBackend !== 'auto') return config.imageUrl === undefined ? null : createAdapter(config.imageBackend, config.imageUrl);
  return createAutoImageBackend({
    urls: config.imageUrl === undefined ? AUTO_IMAGE_URLS : [config.imageUrl],
    probe: (url) => probeImageServer(url),
    create: (found) => createAdapter(found.backend, found.url),
    logger,
  });
}

/** A start-up problem the person can fix; printed as one line, exit code 2. */
class StartupError extends Error {
  override readonly name = 'StartupError';
}

export interface MainOptions {
  /**
   * Run as the installed `easel` command (bin/easel.mjs): `--help` says `easel [flags]` and data goes to
   * $XDG_DATA_HOME/easel (~/.local/share/easel). Otherwise, from a checkout: `npm start -- [flags]` and ./data.
   */
  installed?: boolean;
}

export async function main(options: MainOptions = {}): Promise<void> {
  const invocation = options.installed ? installedInvocation(process.env, homedir()) : CHECKOUT_INVOCATION;
  const parsed = parseConfig(process.argv.slice(2), process.env, invocation);
  if (!parsed.ok) {
    process.stderr.write(`easel: ${parsed.error.message}\n`);
    process.exit(2);
  }
  if (parsed.value === null) {
    // Wrapped at the terminal's width (undefined when the output is not a terminal: 80 columns).
    process.stdout.write(parsed.exit === 'help' ? `${formatHelp(process.stdout.columns, invocation)}\n` : `easel ${VERSION}\n`);
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
  // Printed, not logged: the address is needed whatever the log level.
  if (running.token !== undefined) {
    process.stderr.write(`\n  Open Easel with its token (keep it private):\n${running.openUrls.map((u) => `    ${u}\n`).join('')}\n`);
  }
  let stopping = false;
  const shutdown = (signal: NodeJS.Signals) => {
    // npm forwards the terminal's Ctrl-C as a second SIGINT: one shutdown is enough.
    if (stopping) return;
    stopping = true;
    logger.info(`${signal}: stopping Easel (interrupting any image being made)…`);
    setTimeout(() => {
      logger.warn(`Easel did not stop within ${SHUTDOWN_DEADLINE_MS / 1000} s; exiting anyway.`);
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS).unref();
    running.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error('shutdown failed', { error });
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('server/main.ts')) {
  void main();
}
