// One folder of server/ at a time, with its own incremental file and reports, so a finished folder keeps its
// results while the next one runs (docs/TESTING.md, "Time"):
//
//   MUTATE_FOLDER=a1111 npm run mutate:folder -- --ignoreStatic --concurrency 2
//
// Reports: reports/mutation-<folder>.json and .html; incremental file reports/stryker-incremental-<folder>.json.
import base from './stryker.config.mjs';

const folder = process.env.MUTATE_FOLDER;
if (folder === undefined || !/^[a-z0-9-]+$/.test(folder)) {
  throw new Error('Set MUTATE_FOLDER to one folder of server/, for example: MUTATE_FOLDER=a1111 npm run mutate:folder');
}

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  mutate: [`server/${folder}/**/*.ts`, `!server/${folder}/index.ts`],
  incrementalFile: `reports/stryker-incremental-${folder}.json`,
  htmlReporter: { fileName: `reports/mutation-${folder}.html` },
  jsonReporter: { fileName: `reports/mutation-${folder}.json` },
};
