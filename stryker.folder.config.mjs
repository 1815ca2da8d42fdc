// One folder of server/ at a time, with its own incremental file and reports, so a finished folder keeps its
// results while the next one runs (docs/TESTING.md, "Time"):
//
//   MUTATE_FOLDER=a1111 npm run mutate:folder -- --ignoreStatic --concurrency 2
//
// A large folder in parts (each part keeps its own report when a later one is stopped), or only some lines:
//
//   MUTATE_FOLDER=core-service MUTATE_FILES=server/core/service.ts npm run mutate:folder -- --ignoreStatic --concurrency 2
//   MUTATE_FOLDER=core-recheck MUTATE_FILES='server/core/pane.ts:78-79,server/core/pane.ts:183-183' npm run mutate:folder -- …
//
// Reports: reports/mutation-<folder>.json and .html; incremental file reports/stryker-incremental-<folder>.json.
import base from './stryker.config.mjs';

const folder = process.env.MUTATE_FOLDER;
if (folder === undefined || !/^[a-z0-9-]+$/.test(folder)) {
  throw new Error('Set MUTATE_FOLDER to one folder of server/, for example: MUTATE_FOLDER=a1111 npm run mutate:folder');
}
const files = process.env.MUTATE_FILES;

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  mutate: files ? files.split(',') : [`server/${folder}/**/*.ts`, `!server/${folder}/index.ts`],
  incrementalFile: `reports/stryker-incremental-${folder}.json`,
  htmlReporter: { fileName: `reports/mutation-${folder}.html` },
  jsonReporter: { fileName: `reports/mutation-${folder}.json` },
};
