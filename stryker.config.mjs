// Mutation testing (npm run mutate): StrykerJS changes one thing in the code at a time and runs the
// tests that cover it; a change no test notices is a gap. Not part of `npm test` or CI. See docs/TESTING.md.
//
//   npm run mutate                               the whole scope below, without the browser suite
//   npm run mutate -- --mutate 'server/protocol/**/*.ts'   one folder (or file)
//   npm run mutate:browser                       the page files, with the browser suite (longer)
//
// Reports go to reports/ (git-ignored): reports/mutation/index.html, mutation.json, and the
// incremental file that lets a re-run test only what changed (add --force for a full run).

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  testRunner: 'vitest',
  vitest: { configFile: 'test/mutation/vitest.config.ts', related: true },
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  mutate: [
    'server/protocol/**/*.ts',
    'server/core/**/*.ts',
    'server/http/**/*.ts',
    'server/sqlite/**/*.ts',
    'server/png/**/*.ts',
    'server/a1111/**/*.ts',
    'server/comfyui/**/*.ts',
    'server/openai-images/**/*.ts',
    'server/image-probe/**/*.ts',
    'server/image-backend/**/*.ts',
    'server/util/**/*.ts',
    // index.ts files only re-export.
    '!server/**/index.ts',
  ],
  // Only the tests that execute a mutant run against it.
  coverageAnalysis: 'perTest',
  // 2 cores: one test runner and the type checker beside it. Raise it on a bigger, quiet machine.
  concurrency: 1,
  // The tests start real servers and fakes on loopback ports, and a static mutant (a module-level
  // constant) reloads and runs every related test: a busy machine needs slack.
  timeoutMS: 30_000,
  timeoutFactor: 2,
  dryRunTimeoutMinutes: 15,
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  ignorePatterns: ['data', 'dist', 'reports', 'test-results', '.scratch', 'docs/screenshot.png'],
  tempDirName: '.stryker-tmp',
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  clearTextReporter: { allowColor: false, logTests: false, maxTestsToLog: 0 },
  // The targets: ≥ 85 % for protocol and core, ≥ 75 % overall. A report, never a failure.
  thresholds: { high: 85, low: 75, break: null },
};
