import { defineConfig } from 'vitest/config';

// The browser profile of a mutation run (npm run mutate:browser): every suite but live, Chromium
// included, for the page files whose behaviour only the browser suite sees.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/pack/**', 'test/live/**', 'node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
