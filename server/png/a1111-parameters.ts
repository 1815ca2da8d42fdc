// The "parameters" text AUTOMATIC1111 stores in its PNGs, which its PNG Info tab, Civitai and
// ComfyUI loaders read: prompt lines, an optional "Negative prompt:" block, then one
// "Key: value, Key: value" line. Formatting follows create_infotext (modules/processing.py:705-816 in
// A1111 v1.10.1) and quote() (modules/infotext_utils.py:56-60); parsing follows
// parse_generation_parameters in the same file.

/** A value left out is one the backend did not use or did not say: like A1111's None, it is not written. */
export interface A1111Parameters {
  prompt: string;
  negativePrompt: string;
  steps?: number;
  sampler?: string;
  /** A1111's "Schedule type" (its scheduler's label, e.g. "Karras"), right after Sampler as create_infotext puts it. */
  scheduler?: string;
  cfg?: number;
  seed?: number;
  width: number;
  height: number;
  model?: string;
  /**
   * An image made from another one (img2img): how much of it was changed, as A1111 writes it ("Denoising strength:
   * 0.35", StableDiffusionProcessingImg2Img.init puts it in extra_generation_params, processing.py:1507 at A1111
   * 45b8a499; create_infotext places it after the model, :738).
   */
  denoisingStrength?: number;
  /** What wrote the text, A1111's last field (add_version_to_infotext, on by default), e.g. "Easel 0.1.0". */
  version?: string;
}

export interface ParsedA1111Parameters {
  prompt: string;
  negativePrompt: string;
  steps?: number;
  sampler?: string;
  /** The "Schedule type" field (A1111 v1.9 and later). */
  scheduler?: string;
  cfg?: number;
  seed?: number;
  width?: number;
  height?: number;
  model?: string;
  /** "Denoising strength" (an img2img image's, or a hires pass's). */
  denoisingStrength?: number;
  /** Every key of the parameters line with its unquoted value, including ones Easel does not use (Model hash, Version…). */
  fields: Record<string, string>;
}

const NEGATIVE_PREFIX = 'Negative prompt:';
// A1111's re_param_code: a key, a colon, then a JSON-quoted or comma-free value.
const PARAM_PATTERN = /\s*(\w[\w \-/]+):\s*("(?:\\.|[^\\"])+"|[^,]*)(?:,|$)/g;
const SIZE_PATTERN = /^(\d+)x(\d+)$/;

/** A1111's quote(): values holding a comma, colon or newline are written as JSON strings. */
function quoteValue(value: string): string {
  return /[,:\n]/.test(value) ? JSON.stringify(value) : value;
}

function unquoteValue(value: string): string {
  // Stryker disable next-line ConditionalExpression,LogicalOperator,StringLiteral: JSON.parse decides alone: only a value in quotes gives a string
  if (value.length < 2 || !value.startsWith('"') || !value.endsWith('"')) return value;
  try {
    const parsed: unknown = JSON.parse(value);
    return typeof parsed === 'string' ? parsed : value;
  } catch {
    return value;
  }
}

/** Python's str() of a float, as A1111 writes `cfg_scale: float`: 7 → "7.0", 7.5 → "7.5". */
function formatPythonFloat(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

/**
 * A1111's infotext: the prompt, "Negative prompt: …" only when there is one, then the generation parameters
 * in create_infotext's order (Steps, Sampler, Schedule type, CFG scale, Seed, Size, Model; processing.py:770-800,
 * "Schedule type" at 773 since A1111 v1.9), each left
 * out when unknown (processing.py:812 drops None values), and Version last. Prompts are never quoted; values
 * are, by quote(). A reader takes a last line of fewer than three fields for prompt text, so Version also keeps
 * the line of a server that reported nothing (Size, Model) readable.
 */
export function formatA1111Parameters(parameters: A1111Parameters): string {
  const fields: [string, string | undefined][] = [
    ['Steps', parameters.steps === undefined ? undefined : String(parameters.steps)],
    ['Sampler', parameters.sampler === '' ? undefined : parameters.sampler],
    ['Schedule type', parameters.scheduler === '' ? undefined : parameters.scheduler],
    ['CFG scale', parameters.cfg === undefined ? undefined : formatPythonFloat(parameters.cfg)],
    ['Seed', parameters.seed === undefined ? undefined : String(parameters.seed)],
    ['Size', `${parameters.width}x${parameters.height}`],
    ['Model', parameters.model === '' ? undefined : parameters.model],
    ['Denoising strength', parameters.denoisingStrength === undefined ? undefined : formatPythonFloat(parameters.denoisingStrength)],
    ['Version', parameters.version === '' ? undefined : parameters.version],
  ];
  const line = fields
    .filter((field): field is [string, string] => field[1] !== undefined)
    .map(([key, value]) => `${key}: ${quoteValue(value)}`)
    .join(', ');
  const negative = parameters.negativePrompt === '' ? '' : `\n${NEGATIVE_PREFIX} ${parameters.negativePrompt}`;
  // A1111 strips the whole text, so a prompt's leading whitespace is not kept (its trailing whitespace is, before the line).
  return `${parameters.prompt}${negative}\n${line}`.trim();
}

function readParameterLine(line: string): [string, string][] {
  // Stryker disable next-line StringLiteral: both groups always take part in a match
  return [...line.matchAll(PARAM_PATTERN)].map((match) => [match[1] ?? '', unquoteValue((match[2] ?? '').trim())]);
}

function toInteger(value: string | undefined): number | undefined {
  if (value === undefined || !/^-?\d+$/.test(value.trim())) return undefined;
  // Stryker disable next-line MethodExpression: Number() ignores the same outer whitespace trim() removes
  return Number(value.trim());
}

function toNumber(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  // Stryker disable next-line MethodExpression: Number() ignores the same outer whitespace trim() removes
  const number = Number(value.trim());
  return Number.isFinite(number) ? number : undefined;
}

/** Reads text written by A1111 (or formatA1111Parameters) back into its parts; never fails. */
export function parseA1111Parameters(text: string): ParsedA1111Parameters {
  const lines = text.trim().split('\n');
  // Stryker disable next-line StringLiteral: split always gives at least one element
  let lastLine = lines.pop() ?? '';
  // Like A1111: a last line with fewer than three "Key: value" pairs is still prompt text.
  if (readParameterLine(lastLine).length < 3) {
    lines.push(lastLine);
    // Stryker disable next-line StringLiteral: that text has no Key: value pair, so the line reads as none either way
    lastLine = '';
  }
  let prompt = '';
  let negativePrompt = '';
  let inNegative = false;
  for (const rawLine of lines) {
    let line = rawLine.trim();
    if (line.startsWith(NEGATIVE_PREFIX)) {
      inNegative = true;
      line = line.slice(NEGATIVE_PREFIX.length).trim();
    }
    if (inNegative) negativePrompt += (negativePrompt === '' ? '' : '\n') + line;
    else prompt += (prompt === '' ? '' : '\n') + line;
  }
  // The first occurrence of a key wins (A1111 keeps the last): sd.cpp ends its line with an SDCPP JSON block
  // that repeats the prompt, so a prompt holding "Seed: 5" must not override the real Seed before it.
  const fields: Record<string, string> = {};
  for (const [key, value] of readParameterLine(lastLine)) if (!Object.hasOwn(fields, key)) fields[key] = value;
  // Stryker disable next-line StringLiteral: neither text matches the size pattern
  const size = SIZE_PATTERN.exec(fields['Size'] ?? '');
  const parsed: ParsedA1111Parameters = { prompt, negativePrompt, fields };
  const steps = toInteger(fields['Steps']);
  const cfg = toNumber(fields['CFG scale']);
  const seed = toInteger(fields['Seed']);
  if (steps !== undefined) parsed.steps = steps;
  if (fields['Sampler'] !== undefined && fields['Sampler'] !== '') parsed.sampler = fields['Sampler'];
  if (fields['Schedule type'] !== undefined && fields['Schedule type'] !== '') parsed.scheduler = fields['Schedule type'];
  if (cfg !== undefined) parsed.cfg = cfg;
  if (seed !== undefined) parsed.seed = seed;
  if (size !== null) {
    parsed.width = Number(size[1]);
    parsed.height = Number(size[2]);
  }
  if (fields['Model'] !== undefined) parsed.model = fields['Model'];
  const strength = toNumber(fields['Denoising strength']);
  if (strength !== undefined) parsed.denoisingStrength = strength;
  return parsed;
}

/**
 * A server's own parameters text with "Denoising strength" added where it lacks one: sd.cpp's text names only a
 * hires pass's (get_image_params, examples/common/common.cpp:3091-3096 at 97d29908), not an img2img strength. It
 * goes where A1111 puts it, before "Version" (create_infotext's order), or at the end of the parameters line; a
 * text that already says one (A1111's own) is kept as it is.
 */
export function addDenoisingStrength(text: string, strength: number): string {
  const parsed = parseA1111Parameters(text);
  if (parsed.fields['Denoising strength'] !== undefined) return text;
  const field = `Denoising strength: ${formatPythonFloat(strength)}`;
  const trimmed = text.trimEnd();
  const cut = trimmed.lastIndexOf('\n');
  const head = cut === -1 ? '' : trimmed.slice(0, cut + 1);
  const line = cut === -1 ? trimmed : trimmed.slice(cut + 1);
  // A last line that is no parameters line (prompt text only): the field starts a line of its own.
  if (Object.keys(parsed.fields).length === 0) return `${trimmed}\n${field}`;
  // The first ", Version: " of the line: sd.cpp's SDCPP block after it may hold anything.
  const version = line.indexOf('Version: ') === 0 ? 0 : line.indexOf(', Version: ');
  if (version === 0) return `${head}${field}, ${line}`;
  if (version > 0) return `${head}${line.slice(0, version)}, ${field}${line.slice(version)}`;
  return `${head}${line}, ${field}`;
}
