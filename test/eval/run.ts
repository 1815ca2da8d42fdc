// `npm run eval -- --model NAME [--conversations 10] [--vision-model NAME [--checks-only]] [--out report.json]`:
// the model report card. docs/MODELS.md explains the columns and how to compare models.
import { IMAGE_FAMILIES, imageFamilySchema } from '../../server/protocol/index.ts';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { CHECK_CASES } from './checks.ts';
import { DEFAULT_CONVERSATIONS, EVAL_CONVERSATIONS } from './conversations.ts';
import { formatCheckReport, formatReport, renderProgressBar } from './report.ts';
import { runEval } from './run-eval.ts';

const HELP = `npm run eval -- [options]

Runs ${EVAL_CONVERSATIONS.length} fixed multi-turn conversations through Easel against Ollama and prints how
often the model kept the reply format, how Easel recovered, and how fast it answered. With --vision-model a
second table follows: ${CHECK_CASES.length} fixed pictures (simple shapes, most lacking something asked for)
checked and described by the vision model, and what it found (docs/MODELS.md).

  --model NAME              the Ollama model (default mistral:7b)
  --family NAME             the image model family the prompts are written for: ${IMAGE_FAMILIES.join(', ')} (default sdxl)
  --conversations N         how many of the ${EVAL_CONVERSATIONS.length} conversations to run (default ${DEFAULT_CONVERSATIONS})
  --vision-model NAME       also check and describe ${CHECK_CASES.length} pictures with this Ollama vision model (e.g. gemma3:4b)
  --checks-only             with --vision-model: skip the conversations, run the checks alone
  --out FILE                also write the report and every turn (and every check) as JSON
  --ollama-url URL          where Ollama answers (default $OLLAMA_HOST, else http://127.0.0.1:11434)
  --llm-seed N              sampling seed (default 42, so runs repeat)
  --num-ctx N               context window in tokens (default 8192)
  --first-token-timeout S   seconds to wait for a reply's first word (default 300)
  --stall-timeout S         seconds to wait between words (default 120)`;

function fail(message: string, code = 2): never {
  process.stderr.write(`eval: ${message}\n`);
  process.exit(code);
}

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        model: { type: 'string' },
        family: { type: 'string' },
        conversations: { type: 'string' },
        'vision-model': { type: 'string' },
        'checks-only': { type: 'boolean' },
        out: { type: 'string' },
        'ollama-url': { type: 'string' },
        'llm-seed': { type: 'string' },
        'num-ctx': { type: 'string' },
        'first-token-timeout': { type: 'string' },
        'stall-timeout': { type: 'string' },
        help: { type: 'boolean' },
      },
      strict: true,
    }));
  } catch (error) {
    fail(`${(error as Error).message}. See --help.`);
  }
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const count = values.conversations === undefined ? DEFAULT_CONVERSATIONS : Number(values.conversations);
  if (!Number.isInteger(count) || count < 1 || count > EVAL_CONVERSATIONS.length) {
    fail(`--conversations must be a whole number from 1 to ${EVAL_CONVERSATIONS.length}, got ${values.conversations}.`);
  }
  const visionModel = values['vision-model'];
  const checksOnly = values['checks-only'] === true;
  if (checksOnly && visionModel === undefined) fail('--checks-only needs --vision-model NAME: the checks are what is left.');
  if (visionModel !== undefined && visionModel.trim() === '') fail('--vision-model needs the name of an Ollama vision model, e.g. gemma3:4b.');
  const family = imageFamilySchema.safeParse(values.family ?? 'sdxl');
  if (!family.success) fail(`--family must be one of ${IMAGE_FAMILIES.join(', ')}, got ${values.family}.`);
  const flags: string[] = ['--llm-seed', values['llm-seed'] ?? '42'];
  for (const name of ['model', 'ollama-url', 'num-ctx', 'first-token-timeout', 'stall-timeout'] as const) {
    const value = values[name];
    if (value !== undefined) flags.push(`--${name}`, value);
  }

  // The bar is for a person watching a terminal; redirected output stays clean.
  const showProgress = process.stderr.isTTY === true;
  // One bar for the turns, then one for the checks; a bar left unfinished (a failure) gets its line ended after.
  let barOpen = false;
  const progress = (unit: string) => (done: number, total: number) => {
    barOpen = done < total;
    process.stderr.write(`\r${renderProgressBar(done, total, 30, unit)}${barOpen ? '' : '\n'}`);
  };
  const result = await runEval({
    flags,
    env: { OLLAMA_HOST: process.env.OLLAMA_HOST },
    conversations: checksOnly ? [] : EVAL_CONVERSATIONS.slice(0, count),
    family: family.data,
    onTurn: showProgress ? progress('turns') : undefined,
    ...(visionModel === undefined
      ? {}
      : {
          checks: {
            visionModel,
            cases: CHECK_CASES,
            onCheck: showProgress ? progress('checks') : undefined,
          },
        }),
  });
  if (barOpen) process.stderr.write('\n');
  if (!result.ok) {
    if (result.skip) {
      process.stdout.write(`eval skipped: ${result.reason}\n`);
      return;
    }
    fail(result.reason, 1);
  }
  const tables = [...(checksOnly ? [] : [formatReport(result.report)]), ...(result.checkReport ? [formatCheckReport(result.checkReport)] : [])];
  process.stdout.write(`${tables.join('\n\n')}\n`);
  if (values.out) {
    const written = {
      ...(checksOnly ? {} : { report: result.report, turns: result.turns }),
      ...(result.checkReport ? { checkReport: result.checkReport, checks: result.checks } : {}),
    };
    writeFileSync(values.out, `${JSON.stringify(written, null, 2)}\n`);
    process.stdout.write(`\nWritten to ${values.out}\n`);
  }
}

await main();
