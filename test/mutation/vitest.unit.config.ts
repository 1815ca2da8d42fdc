import { defineConfig } from 'vitest/config';

// The quick mutation profile (npm run mutate:unit): the unit suites alone. Each test there runs in
// milliseconds to a second against a fake, so a folder takes minutes, not hours; the score is a lower
// bound (the integration suite also covers these files). See docs/TESTING.md.
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    exclude: ['node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
