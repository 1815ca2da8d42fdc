import { defineConfig } from 'vitest/config';

// The suites a mutation run executes (npm run mutate): everything `npm test` runs except the browser
// suite, which is the separate, longer profile (vitest.browser.config.ts, npm run mutate:browser).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/pack/**', 'test/live/**', 'test/browser/**', 'node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Instrumented code runs several times slower: bounds on the event loop's delay widen under it.
    env: { EASEL_INSTRUMENTED: '1' },
  },
});
