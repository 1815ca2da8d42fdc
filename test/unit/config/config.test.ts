import { describe, expect, it } from 'vitest';
import { formatHelp, isLoopbackHost, parseConfig } from '../../../server/config/index.ts';
import { DEFAULT_MAX_PNG_PIXELS, MAX_PNG_SIDE } from '../../../server/png/index.ts';

function ok(argv: string[], env: Record<string, string> = {}) {
  const result = parseConfig(argv, env);
  if (!result.ok || result.value === null) throw new Error(`expected a config, got ${JSON.stringify(result)}`);
  return result.value;
}

function failure(argv: string[], env: Record<string, string> = {}) {
  const result = parseConfig(argv, env);
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result)}`);
  return result.error.message;
}

describe('parseConfig', () => {
  it('has the documented defaults', () => {
    expect(ok([])).toMatchObject({
      host: '127.0.0.1',
      port: 8377,
      ollamaUrl: 'http://127.0.0.1:11434',
      model: 'mistral:7b',
      numCtx: 8192,
      logLevel: 'info',
      imageBackend: 'none',
      imageUrl: undefined,
      unloadLlm: false,
      allowedHosts: [],
    });
    expect(ok([]).llmSeed).toBeUndefined();
    expect(ok([]).token).toBeUndefined();
  });

  it('reads OLLAMA_HOST the way Ollama writes it', () => {
    expect(ok([], { OLLAMA_HOST: '0.0.0.0' }).ollamaUrl).toBe('http://127.0.0.1:11434');
    expect(ok([], { OLLAMA_HOST: 'gpu-box:11500' }).ollamaUrl).toBe('http://gpu-box:11500');
    expect(ok([], { OLLAMA_HOST: 'https://ollama.example/' }).ollamaUrl).toBe('https://ollama.example');
  });

  it('flags win over environment variables', () => {
    expect(ok(['--model', 'llama3.1:8b'], { EASEL_MODEL: 'qwen2.5:7b' }).model).toBe('llama3.1:8b');
    expect(ok([], { EASEL_MODEL: 'qwen2.5:7b', EASEL_PORT: '9000' })).toMatchObject({ model: 'qwen2.5:7b', port: 9000 });
    expect(ok(['--port=0', '--llm-seed', '42', '--unload-llm']).llmSeed).toBe(42);
  });

  it('fills the image URL per backend', () => {
    expect(ok(['--image-backend', 'a1111']).imageUrl).toBe('http://127.0.0.1:7860');
    expect(ok(['--image-backend', 'comfyui']).imageUrl).toBe('http://127.0.0.1:8188');
    expect(ok(['--image-backend', 'localai']).imageUrl).toBe('http://127.0.0.1:8080');
    expect(ok(['--image-backend', 'openai', '--image-url', 'http://x:1/']).imageUrl).toBe('http://x:1');
  });

  it('an image URL without a backend means auto; auto without a URL looks at the default ports', () => {
    expect(ok(['--image-url', 'http://gpu-box:7860'])).toMatchObject({ imageBackend: 'auto', imageUrl: 'http://gpu-box:7860' });
    expect(ok([], { EASEL_IMAGE_URL: 'http://gpu-box:8188' })).toMatchObject({ imageBackend: 'auto', imageUrl: 'http://gpu-box:8188' });
    expect(ok(['--image-backend', 'auto'])).toMatchObject({ imageBackend: 'auto', imageUrl: undefined });
    expect(ok(['--image-backend', 'none', '--image-url', 'http://gpu-box:7860']).imageBackend).toBe('none');
    expect(ok(['--image-backend', 'a1111', '--image-url', 'http://gpu-box:7860']).imageBackend).toBe('a1111');
  });

  it('reads --keep-alive as Ollama does (a Go duration, or seconds), 30m by default, and --vision-model', () => {
    expect(ok([]).keepAlive).toBe('30m');
    expect(ok([]).visionModel).toBeUndefined();
    expect(ok(['--keep-alive', '2h', '--vision-model', 'gemma3:4b'])).toMatchObject({ keepAlive: '2h', visionModel: 'gemma3:4b' });
    expect(ok(['--keep-alive', '600']).keepAlive).toBe(600);
    expect(ok([], { EASEL_KEEP_ALIVE: '-1' }).keepAlive).toBe(-1);
    expect(failure(['--keep-alive', 'forever'])).toMatch(/^--keep-alive must be minutes or hours like 30m/);
    expect(failure(['--vision-model', 'two words'])).toMatch(/^--vision-model must be an Ollama model name/);
  });

  it('reads the reply timeouts in seconds, fractions and 0 (never) included', () => {
    expect(ok([])).toMatchObject({ firstTokenTimeout: 300, stallTimeout: 120 });
    expect(ok(['--first-token-timeout', '600', '--stall-timeout=0.5'])).toMatchObject({ firstTokenTimeout: 600, stallTimeout: 0.5 });
    expect(ok([], { EASEL_FIRST_TOKEN_TIMEOUT: '0', EASEL_STALL_TIMEOUT: '30' })).toMatchObject({ firstTokenTimeout: 0, stallTimeout: 30 });
    expect(failure(['--first-token-timeout', '-1'])).toMatch(/^--first-token-timeout must be a number of seconds from 0 \(never give up\) to 86400/);
    expect(failure(['--stall-timeout', 'soon'])).toMatch(/^--stall-timeout must be a number of seconds/);
    expect(formatHelp()).toMatch(/--first-token-timeout SECONDS +seconds to wait for the first word[^[]*\[\$EASEL_FIRST_TOKEN_TIMEOUT\]/);
    expect(formatHelp()).toMatch(/--stall-timeout SECONDS +seconds to wait between words[^[]*\[\$EASEL_STALL_TIMEOUT\]/);
  });

  it('reads --max-image-pixels: 8192×8192 by default, 64×64 to the per-side cap squared, from the flag or the environment', () => {
    expect(ok([]).maxImagePixels).toBe(DEFAULT_MAX_PNG_PIXELS);
    expect(ok(['--max-image-pixels', String(MAX_PNG_SIDE * MAX_PNG_SIDE)]).maxImagePixels).toBe(268_435_456);
    expect(ok([], { EASEL_MAX_IMAGE_PIXELS: '1048576' }).maxImagePixels).toBe(1_048_576);
    expect(ok(['--max-image-pixels=4096'], { EASEL_MAX_IMAGE_PIXELS: '1048576' }).maxImagePixels).toBe(4096);
    for (const bad of ['0', '4095', '268435457', '1.5', 'lots', '-1']) {
      expect(failure(['--max-image-pixels', bad]), bad).toBe(`--max-image-pixels must be a whole number from 4096 to 268435456 (got "${bad}").`);
    }
    expect(failure([], { EASEL_MAX_IMAGE_PIXELS: 'huge' })).toMatch(/^--max-image-pixels must be a whole number/);
    expect(formatHelp().replace(/\s+/g, ' ')).toMatch(/--max-image-pixels PIXELS the most pixels .* \(default 67108864 = 8192×8192\) \[\$EASEL_MAX_IMAGE_PIXELS\]/);
  });

  it('names the flag and the allowed range on bad input', () => {
    expect(failure(['--port', '70000'])).toBe('--port must be a whole number from 0 to 65535 (got "70000").');
    expect(failure(['--num-ctx', 'lots'])).toMatch(/^--num-ctx must be a whole number from 512 to 1048576/);
    expect(failure(['--log-level', 'chatty'])).toMatch(/^--log-level must be one of debug, info, warn, error/);
    expect(failure(['--image-backend', 'dalle'])).toMatch(/^--image-backend must be one of none, auto, a1111, comfyui, localai, openai/);
    expect(failure(['--ollama-url', 'localhost:11434'])).toMatch(/^--ollama-url must be an http/);
    expect(failure(['--model'])).toMatch(/^--model needs a value/);
    expect(failure(['--nope'])).toMatch(/Unknown flag --nope/);
    expect(failure([], { EASEL_UNLOAD_LLM: 'maybe' })).toMatch(/--unload-llm must be true or false/);
  });

  it('answers --help and --version', () => {
    expect(parseConfig(['--help'], {})).toEqual({ ok: true, value: null, exit: 'help' });
    expect(parseConfig(['--version'], {})).toEqual({ ok: true, value: null, exit: 'version' });
    for (const flag of ['--host', '--allowed-hosts', '--token', '--port', '--ollama-url', '--model', '--llm-seed', '--num-ctx', '--log-level', '--data-dir']) {
      expect(formatHelp()).toContain(flag);
    }
  });

  it('--help names each value, and sets every description apart in one column, wrapped to the width', () => {
    for (const columns of [undefined, 0, 60, 80, 100, 200]) {
      const help = formatHelp(columns);
      const width = columns ? Math.min(Math.max(columns, 60), 100) : 80;
      const lines = help.split('\n').slice(3);
      // Each flag starts a row; its description starts in the same column as every other one.
      const rows = lines.filter((line) => line.startsWith('  --'));
      expect(rows, String(columns)).toHaveLength(24);
      const starts = rows.map((row) => /^  (--[a-z0-9-]+(?: [A-Z]+)?) +/.exec(row)![0].length);
      const column = starts[0]!;
      expect(new Set(starts), String(columns)).toEqual(new Set([column]));
      // At least two spaces between the longest flag with its value and its description.
      expect(rows.find((row) => row.startsWith('  --first-token-timeout'))).toMatch(/^ {2}--first-token-timeout SECONDS {2}seconds/);
      // A continued description stays in the column; no line passes the width but a word longer than the column.
      for (const line of lines) {
        if (line.length > width) expect(line.slice(column), line).toMatch(/^\S+$/);
        if (!line.startsWith('  --')) expect(line, line).toMatch(new RegExp(`^ {${column}}\\S`));
      }
    }
    // Every flag that takes a value names it; a switch takes none.
    const help = formatHelp();
    for (const [flag, value] of [['--port', 'PORT'], ['--ollama-url', 'URL'], ['--num-ctx', 'TOKENS'], ['--data-dir', 'DIR'], ['--comfy-workflow', 'FILE'], ['--comfy-img2img-workflow', 'FILE'], ['--image-timeout', 'SECONDS']]) {
      expect(help).toMatch(new RegExp(`^  ${flag} ${value}  `, 'm'));
    }
    expect(help).not.toContain('VALUE');
    expect(help).toMatch(/^ {2}--unload-llm {2,}unload every model Ollama has/m);
    // Words are kept whole when wrapped: the environment variable's name and a URL too.
    expect(formatHelp(60)).toMatch(/\[\$EASEL_ALLOWED_HOSTS\]/);
    expect(formatHelp(60)).toContain('http://127.0.0.1:11434)');
  });

  it('reads --allowed-hosts as a comma-separated list of names with optional ports', () => {
    expect(ok(['--allowed-hosts', 'My-Laptop.local, 192.168.1.20:8377,,[fe80::1]']).allowedHosts).toEqual([
      'my-laptop.local',
      '192.168.1.20:8377',
      '[fe80::1]',
    ]);
    expect(ok([], { EASEL_ALLOWED_HOSTS: 'easel.lan' }).allowedHosts).toEqual(['easel.lan']);
    expect(ok(['--allowed-hosts', 'a.lan'], { EASEL_ALLOWED_HOSTS: 'b.lan' }).allowedHosts).toEqual(['a.lan']);
    for (const bad of ['http://my-laptop.local', 'my-laptop.local/x', 'a b', 'user@host', 'host:port', '*.lan', 'fe80::1']) {
      expect(failure(['--allowed-hosts', bad]), bad).toMatch(/^--allowed-hosts must be host names separated by commas/);
    }
  });

  it('reads --token and refuses one too short or with characters that cannot travel in a URL or cookie', () => {
    expect(ok(['--token', 'abcdef0123456789']).token).toBe('abcdef0123456789');
    expect(ok([], { EASEL_TOKEN: 'from-the-environment-1' }).token).toBe('from-the-environment-1');
    expect(failure(['--token', 'short'])).toMatch(/^--token must be at least 16 characters/);
    expect(failure(['--token', 'sixteen chars, no'])).toMatch(/^--token may hold only letters, digits/);
    expect(failure(['--token', 'abcdefgh12345678;x=1'])).toMatch(/^--token may hold only/);
  });

  it('tells loopback addresses (no token needed) from the others', () => {
    for (const host of ['127.0.0.1', '127.0.0.2', 'localhost', 'LOCALHOST', '::1', '[::1]']) expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '192.168.1.20', 'my-laptop.local', '127.0.0.1.nip.io', 'fe80::1']) expect(isLoopbackHost(host), host).toBe(false);
  });
});
