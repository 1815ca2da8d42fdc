#!/usr/bin/env node
// The `easel` command of the installed package (`npm install -g easel-<version>.tgz`). It runs the bundle that
// `npm pack` built (prepack: `npm run build`) and never builds: the install folder may be read-only. Without
// --data-dir, data goes to $XDG_DATA_HOME/easel (~/.local/share/easel), not to the working folder.
// From a checkout, `npm start` (scripts/start.mjs) builds when needed and keeps data in ./data.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const bundle = new URL('../dist/easel.mjs', import.meta.url);
if (!existsSync(bundle)) {
  // Only a checkout linked as a command (`npm link`) lacks it: a packed package always has it.
  process.stderr.write(`easel: ${fileURLToPath(bundle)} is missing; run \`npm run build\` in ${fileURLToPath(new URL('..', import.meta.url))}.\n`);
  process.exit(2);
}
const { main } = await import(bundle.href);
await main({ installed: true });
