// The longer profile (npm run mutate:browser): the page's server-side files, tested with every suite
// including the browser suite in Chromium, because much of what they render only a browser checks.
// Its own incremental file and report, beside the main profile's.
import base from './stryker.config.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  vitest: { ...base.vitest, configFile: 'test/mutation/vitest.browser.config.ts' },
  mutate: ['server/http/page/**/*.ts', '!server/http/page/index.ts'],
  // Each browser test launches Chromium: give a mutant's run more room.
  timeoutMS: 30_000,
  incrementalFile: 'reports/stryker-incremental-browser.json',
  htmlReporter: { fileName: 'reports/mutation-browser/index.html' },
  jsonReporter: { fileName: 'reports/mutation-browser/mutation.json' },
};
