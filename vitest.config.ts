import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // live: a real Ollama (npm run test:live); pack: npm pack and a global install (npm run test:pack).
    exclude: ['test/live/**', 'test/pack/**', 'node_modules/**'],
    // Vitest's default is one worker per core less one: a single worker on a 2-core machine. The tests wait on
    // loopback servers and Chromium far more than they compute, so two files at a time take 0.6 of the time.
    maxWorkers: 2,
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
