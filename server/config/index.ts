import { z } from 'zod';
import { OLLAMA_MODEL_NAME } from '../core/settings.ts';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const IMAGE_BACKENDS = ['none', 'auto', 'a1111', 'comfyui', 'localai', 'openai'] as const;
export type ImageBackendName = (typeof IMAGE_BACKENDS)[number];

const DEFAULT_IMAGE_URLS: Record<Exclude<ImageBackendName, 'none' | 'auto'>, string> = {
  a1111: 'http://127.0.0.1:7860',
  comfyui: 'http://127.0.0.1:8188',
  localai: 'http://127.0.0.1:8080',
  openai: 'http://127.0.0.1:8080',
};

/**
 * Where `--image-backend auto` looks when no --image-url is given, in this order: AUTOMATIC1111 / Forge (7860),
 * ComfyUI (8188), LocalAI (8080), stable-diffusion.cpp's sd-server (its default --port, 1234: runtime.h SDSvrParams).
 */
export const AUTO_IMAGE_URLS: readonly string[] = ['http://127.0.0.1:7860', 'http://127.0.0.1:8188', 'http://127.0.0.1:8080', 'http://127.0.0.1:1234'];

const httpUrl = z
  .string()
  .refine((value) => /^https?:\/\/[^\s/]+/.test(value), 'must be an http:// or https:// URL, e.g. http://127.0.0.1:11434')
  .transform((value) => value.replace(/\/+$/, ''));

const intFlag = (min: number, max: number) =>
  z.coerce
    .number({ error: `must be a whole number from ${min} to ${max}` })
    .refine((n) => Number.isInteger(n) && n >= min && n <= max, `must be a whole number from ${min} to ${max}`);

// A Host-header name with an optional port: a DNS name, an IPv4 address or a bracketed IPv6 address.
const HOST_ENTRY = /^(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.?)(?::\d{1,5})?$/i;

const allowedHosts = z
  .string()
  .transform((value) => value.split(',').map((entry) => entry.trim().toLowerCase()).filter((entry) => entry !== ''))
  .refine(
    (entries) => entries.every((entry) => HOST_ENTRY.test(entry)),
    'must be host names separated by commas, each with an optional :port, e.g. my-laptop.local,192.168.1.20:8377 (IPv6 in brackets)',
  );

const MIN_TOKEN_CHARS = 16;

/** --max-image-pixels: 8192×8192 by default (checkPngImage's DEFAULT_MAX_PNG_PIXELS), at most 16384×16384 (its per-side cap). */
const DEFAULT_MAX_IMAGE_PIXELS = 8192 * 8192;
const MAX_IMAGE_PIXELS_CEILING = 16_384 * 16_384;
/** 64×64, the smallest image a Stable Diffusion server makes: a cap below it would refuse every image. */
const MIN_IMAGE_PIXELS = 64 * 64;

const secondsFlag = (max: number) =>
  z.coerce
    .number({ error: `must be a number of seconds from 0 (never give up) to ${max}` })
    .refine((n) => Number.isFinite(n) && n >= 0 && n <= max, `must be a number of seconds from 0 (never give up) to ${max}`);

const configSchema = z.object({
  host: z.string().min(1, 'must not be empty'),
  allowedHosts,
  token: z
    .string()
    .min(MIN_TOKEN_CHARS, `must be at least ${MIN_TOKEN_CHARS} characters (\`openssl rand -hex 16\` makes one)`)
    .regex(/^[A-Za-z0-9._~+/-]+$/, 'may hold only letters, digits and . _ ~ + / - (it travels in URLs, headers and a cookie)')
    .optional(),
  port: intFlag(0, 65535),
  ollamaUrl: httpUrl,
  model: z.string().regex(OLLAMA_MODEL_NAME, 'must be an Ollama model name such as mistral:7b'),
  visionModel: z.string().regex(OLLAMA_MODEL_NAME, 'must be an Ollama model name such as gemma3:4b').optional(),
  llmSeed: intFlag(0, 2_147_483_647).optional(),
  // Ollama reads keep_alive as seconds (a number) or a Go duration ("30m", "1h"); negative keeps it loaded for good
  // (api/types.go Duration.UnmarshalJSON).
  keepAlive: z
    .string()
    .regex(/^(-1|\d+(s|m|h)?)$/, 'must be minutes or hours like 30m or 2h, seconds like 600, or -1 (keep loaded)')
    .transform((value): string | number => (/^-?\d+$/.test(value) ? Number(value) : value)),
  numCtx: intFlag(512, 1_048_576),
  firstTokenTimeout: secondsFlag(86_400),
  stallTimeout: secondsFlag(86_400),
  logLevel: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }),
  dataDir: z.string().min(1, 'must not be empty'),
  imageBackend: z.enum(IMAGE_BACKENDS, { error: `must be one of ${IMAGE_BACKENDS.join(', ')}` }),
  imageUrl: httpUrl.optional(),
  imageModel: z.string().min(1).optional(),
  comfyWorkflow: z.string().min(1).optional(),
  comfyImg2imgWorkflow: z.string().min(1).optional(),
  imageTimeout: intFlag(1, 86_400),
  maxImagePixels: intFlag(MIN_IMAGE_PIXELS, MAX_IMAGE_PIXELS_CEILING),
  unloadLlm: z.boolean(),
});

export type Config = Omit<z.infer<typeof configSchema>, 'imageUrl'> & { imageUrl: string | undefined };

/**
 * Whether only this machine can reach an address: 127.0.0.0/8, ::1 and localhost. A wildcard
 * (0.0.0.0, ::) or a LAN address is not, and then Easel requires a token.
 */
export function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return name === 'localhost' || name === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
}

/**
 * How Easel was started, which decides the usage line of `--help` and where data goes without --data-dir:
 * from a checkout (`npm start`, ./data) or as the installed `easel` command ($XDG_DATA_HOME/easel).
 */
export interface Invocation {
  /** The command line shown by `--help`, e.g. `easel [flags]`. */
  usage: string;
  /** The data folder when neither --data-dir nor $EASEL_DATA_DIR is given; a relative one is under the working folder. */
  defaultDataDir: string;
}

export const CHECKOUT_INVOCATION: Invocation = { usage: 'npm start -- [flags]', defaultDataDir: 'data' };

/**
 * The installed command's data folder, by the XDG Base Directory rules: `$XDG_DATA_HOME/easel`, or
 * `<home>/.local/share/easel` when XDG_DATA_HOME is unset, empty or relative (the spec says to ignore a relative one).
 */
export function installedDataDir(env: Record<string, string | undefined>, home: string): string {
  const xdgDataHome = env.XDG_DATA_HOME;
  const base = xdgDataHome?.startsWith('/') ? xdgDataHome : `${home.replace(/\/+$/, '')}/.local/share`;
  return `${base.replace(/\/+$/, '')}/easel`;
}

/** The installed `easel` command (bin/easel.mjs): its usage line and its data under the XDG data folder. */
export function installedInvocation(env: Record<string, string | undefined>, home: string): Invocation {
  return { usage: 'easel [flags]', defaultDataDir: installedDataDir(env, home) };
}

interface FlagSpec {
  key: keyof z.infer<typeof configSchema>;
  env: string;
  /** A function when the text depends on how Easel was started (the data folder's default). */
  help: string | ((invocation: Invocation) => string);
  /** The value's name in --help (`--port PORT`); a boolean flag takes none. */
  value?: string;
  boolean?: boolean;
  fallback?: (env: Record<string, string | undefined>, invocation: Invocation) => string | undefined;
}

function helpOf(spec: FlagSpec, invocation: Invocation): string {
  return typeof spec.help === 'string' ? spec.help : spec.help(invocation);
}

/** A relative data folder shown the way a shell would take it: `./data`. */
function shownPath(path: string): string {
  return path.startsWith('/') || path.startsWith('./') ? path : `./${path}`;
}

const FLAGS: Record<string, FlagSpec> = {
  host: { key: 'host', env: 'EASEL_HOST', value: 'HOST', help: 'address to listen on (default 127.0.0.1; anything else needs a token)', fallback: () => '127.0.0.1' },
  'allowed-hosts': {
    key: 'allowedHosts',
    env: 'EASEL_ALLOWED_HOSTS',
    value: 'HOSTS',
    help: 'extra names this server answers to, comma-separated, e.g. my-laptop.local (default: none)',
    fallback: () => '',
  },
  token: {
    key: 'token',
    env: 'EASEL_TOKEN',
    value: 'TOKEN',
    help: `access token, at least ${MIN_TOKEN_CHARS} characters (default: a random one when --host is not loopback)`,
  },
  port: { key: 'port', env: 'EASEL_PORT', value: 'PORT', help: 'port to listen on, 0 = any free port (default 8377)', fallback: () => '8377' },
  'ollama-url': {
    key: 'ollamaUrl',
    env: 'EASEL_OLLAMA_URL',
    value: 'URL',
    help: 'Ollama base URL (default $OLLAMA_HOST, else http://127.0.0.1:11434)',
    fallback: (env) => normaliseOllamaHost(env.OLLAMA_HOST) ?? 'http://127.0.0.1:11434',
  },
  model: { key: 'model', env: 'EASEL_MODEL', value: 'NAME', help: 'chat model (default mistral:7b)', fallback: () => 'mistral:7b' },
  'keep-alive': {
    key: 'keepAlive',
    env: 'EASEL_KEEP_ALIVE',
    value: 'DURATION',
    help: 'how long Ollama keeps the chat and vision models loaded after a call: 30m, 2h, 600 (seconds), -1 = always (default 30m)',
    fallback: () => '30m',
  },
  'vision-model': {
    key: 'visionModel',
    env: 'EASEL_VISION_MODEL',
    value: 'NAME',
    help: 'Ollama vision model that checks and describes pictures, e.g. gemma3:4b (default: none; each conversation may choose one)',
  },
  'llm-seed': { key: 'llmSeed', env: 'EASEL_LLM_SEED', value: 'SEED', help: 'fixed sampling seed for the chat model (default: random)' },
  'num-ctx': { key: 'numCtx', env: 'EASEL_NUM_CTX', value: 'TOKENS', help: 'context window in tokens, 512–1048576 (default 8192)', fallback: () => '8192' },
  'first-token-timeout': {
    key: 'firstTokenTimeout',
    env: 'EASEL_FIRST_TOKEN_TIMEOUT',
    value: 'SECONDS',
    help: 'seconds to wait for the first word of a reply (model loading included), 0 = never (default 300)',
    fallback: () => '300',
  },
  'stall-timeout': {
    key: 'stallTimeout',
    env: 'EASEL_STALL_TIMEOUT',
    value: 'SECONDS',
    help: 'seconds to wait between words once a reply runs, 0 = never (default 120)',
    fallback: () => '120',
  },
  'log-level': { key: 'logLevel', env: 'EASEL_LOG_LEVEL', value: 'LEVEL', help: 'debug | info | warn | error (default info)', fallback: () => 'info' },
  'data-dir': {
    key: 'dataDir',
    env: 'EASEL_DATA_DIR',
    value: 'DIR',
    help: (invocation) => `where conversations and images are kept (default ${shownPath(invocation.defaultDataDir)})`,
    fallback: (_env, invocation) => invocation.defaultDataDir,
  },
  'image-backend': {
    key: 'imageBackend',
    env: 'EASEL_IMAGE_BACKEND',
    value: 'NAME',
    help: 'none | auto | a1111 | comfyui | localai | openai (default auto when --image-url is given, else none)',
  },
  'image-url': {
    key: 'imageUrl',
    env: 'EASEL_IMAGE_URL',
    value: 'URL',
    help: 'image server base URL; without --image-backend, Easel finds out which server answers there (default per backend)',
  },
  'image-model': { key: 'imageModel', env: 'EASEL_IMAGE_MODEL', value: 'NAME', help: 'model name sent to an openai or localai backend' },
  'comfy-workflow': { key: 'comfyWorkflow', env: 'EASEL_COMFY_WORKFLOW', value: 'FILE', help: 'ComfyUI API-format workflow file (default: bundled SD 1.5 graph)' },
  'comfy-img2img-workflow': {
    key: 'comfyImg2imgWorkflow',
    env: 'EASEL_COMFY_IMG2IMG_WORKFLOW',
    value: 'FILE',
    help: 'ComfyUI API-format workflow for Vary (image to image), with %init_image% and %denoise% (default: bundled SD 1.5 graph)',
  },
  'image-timeout': { key: 'imageTimeout', env: 'EASEL_IMAGE_TIMEOUT', value: 'SECONDS', help: 'seconds before an image generation is given up (default 600)', fallback: () => '600' },
  'max-image-pixels': {
    key: 'maxImagePixels',
    env: 'EASEL_MAX_IMAGE_PIXELS',
    value: 'PIXELS',
    help: `the most pixels (width × height) an image from the backend or an import may have, ${MIN_IMAGE_PIXELS}–${MAX_IMAGE_PIXELS_CEILING} (default ${DEFAULT_MAX_IMAGE_PIXELS} = 8192×8192)`,
    fallback: () => String(DEFAULT_MAX_IMAGE_PIXELS),
  },
  'unload-llm': { key: 'unloadLlm', env: 'EASEL_UNLOAD_LLM', help: 'unload every model Ollama has in memory before each image (for small GPUs)', boolean: true },
};

export type ParseConfigResult =
  | { ok: true; value: Config }
  | { ok: true; value: null; exit: 'help' | 'version' }
  | { ok: false; error: { code: 'invalid_flag'; message: string } };

/**
 * Ollama's own OLLAMA_HOST may be `0.0.0.0`, `host:port` or a URL. Same rule as Ollama's envconfig:
 * without a scheme the port defaults to 11434, with one to the scheme's own port.
 */
function normaliseOllamaHost(raw: string | undefined): string | undefined {
  if (!raw?.trim()) return undefined;
  const value = raw.trim();
  const hasScheme = /^https?:\/\//.test(value);
  const url = new URL(hasScheme ? value : `http://${value}`);
  if (url.hostname === '0.0.0.0') url.hostname = '127.0.0.1';
  if (!hasScheme && !url.port) url.port = '11434';
  return url.origin;
}

const HELP_INDENT = '  ';
const HELP_GAP = '  ';

/**
 * `--help`: each flag with its value's name, then its description in a column of its own, wrapped at `columns`
 * (the terminal's width, 60 to 100; 80 when it is not a terminal) and ending with its environment variable.
 * The usage line and the data folder's default are those of `invocation`.
 */
export function formatHelp(columns?: number, invocation: Invocation = CHECKOUT_INVOCATION): string {
  // A terminal that reports no size (0) is taken as 80 columns, like no terminal.
  const width = columns ? Math.min(Math.max(columns, 60), 100) : 80;
  const rows: Array<[string, string]> = [
    ...Object.entries(FLAGS).map(([name, spec]): [string, string] => [
      spec.value === undefined ? `--${name}` : `--${name} ${spec.value}`,
      `${helpOf(spec, invocation)} [$${spec.env}]`,
    ]),
    ['--help', 'show this help'],
    ['--version', 'print the version'],
  ];
  // The descriptions' column starts after the longest flag and its value's name, and a gap.
  const column = HELP_INDENT.length + Math.max(...rows.map(([flag]) => flag.length)) + HELP_GAP.length;
  const lines = rows.flatMap(([flag, text]) => {
    const [first, ...rest] = wrapWords(text, width - column);
    return [`${`${HELP_INDENT}${flag}`.padEnd(column)}${first}`, ...rest.map((line) => `${' '.repeat(column)}${line}`)];
  });
  return [`Usage: ${invocation.usage}`, '', 'Flags (each also read from the environment variable shown):', ...lines].join('\n');
}

/** Lines of at most `width` characters, broken at spaces; a longer word (a URL) gets a line of its own. */
function wrapWords(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter((part) => part !== '')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  return [...lines, line];
}

/** Flags win over environment variables, which win over defaults (the data folder's is `invocation`'s). */
export function parseConfig(argv: readonly string[], env: Record<string, string | undefined>, invocation: Invocation = CHECKOUT_INVOCATION): ParseConfigResult {
  const raw: Record<string, unknown> = {};
  const fail = (message: string): ParseConfigResult => ({ ok: false, error: { code: 'invalid_flag', message } });

  for (const spec of Object.values(FLAGS)) {
    const fromEnv = env[spec.env];
    if (fromEnv !== undefined && fromEnv !== '') raw[spec.key] = spec.boolean ? fromEnv : fromEnv;
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h') return { ok: true, value: null, exit: 'help' };
    if (arg === '--version' || arg === '-v') return { ok: true, value: null, exit: 'version' };
    const match = /^--([a-z0-9-]+)(?:=(.*))?$/.exec(arg);
    const spec = match ? FLAGS[match[1] as string] : undefined;
    if (!match || !spec) return fail(`Unknown flag ${arg}. Run with --help to see the flags.`);
    if (spec.boolean) {
      raw[spec.key] = match[2] ?? 'true';
      continue;
    }
    const value = match[2] ?? argv[++i];
    if (value === undefined) return fail(`--${match[1]} needs a value: ${helpOf(spec, invocation)}.`);
    raw[spec.key] = value;
  }
  // An image server's address without a backend: find out which server it is.
  raw['imageBackend'] ??= raw['imageUrl'] === undefined ? 'none' : 'auto';
  for (const spec of Object.values(FLAGS)) {
    if (raw[spec.key] === undefined && spec.fallback) {
      try {
        raw[spec.key] = spec.fallback(env, invocation);
      } catch {
        return fail(`$OLLAMA_HOST (${env.OLLAMA_HOST}) is not a usable address; set --ollama-url, e.g. http://127.0.0.1:11434.`);
      }
    }
    if (spec.boolean) {
      const value = raw[spec.key];
      if (value === undefined) raw[spec.key] = false;
      else if (value === 'true' || value === '1' || value === 'yes') raw[spec.key] = true;
      else if (value === 'false' || value === '0' || value === 'no') raw[spec.key] = false;
      else return fail(`--${flagName(spec)} must be true or false, got "${String(value)}".`);
    }
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = issue?.path[0];
    const spec = Object.values(FLAGS).find((s) => s.key === key);
    const name = spec ? `--${flagName(spec)}` : String(key);
    return fail(`${name} ${issue?.message ?? 'is invalid'} (got "${String(raw[key as string])}").`);
  }
  const value = parsed.data;
  const imageUrl = value.imageUrl ?? (value.imageBackend === 'none' || value.imageBackend === 'auto' ? undefined : DEFAULT_IMAGE_URLS[value.imageBackend]);
  return { ok: true, value: { ...value, imageUrl } };
}

function flagName(spec: FlagSpec): string {
  return Object.entries(FLAGS).find(([, s]) => s === spec)?.[0] ?? spec.key;
}
