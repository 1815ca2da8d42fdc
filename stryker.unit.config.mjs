// The quick mutation profile: the same scope and options as stryker.config.mjs, against the unit suites only
// (test/mutation/vitest.unit.config.ts). A lower bound on the score, in minutes per folder:
//
//   npm run mutate:unit -- --mutate 'server/a1111/**/*.ts,!server/**/index.ts'
//
// Reports go to reports/mutation-unit/ and reports/stryker-incremental-unit.json (git-ignored).
import base from './stryker.config.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  vitest: { configFile: 'test/mutation/vitest.unit.config.ts', related: true },
  incrementalFile: 'reports/stryker-incremental-unit.json',
  htmlReporter: { fileName: 'reports/mutation-unit/index.html' },
  jsonReporter: { fileName: 'reports/mutation-unit/mutation.json' },
};
