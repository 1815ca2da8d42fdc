import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // live: a real Ollama (npm run test:live); pack: npm pack and a global install (npm run test:pack).
    exclude: ['test/live/**', 'test/pack/**', 'node_modules/**'],
    // Vitest's default is one worker per core less one: a single worker on a 2-core machine. The tests wait on
    // loopback servers and Chromium far more than they compute, so two files at a time take 0.6 of the time.
    maxWorkers: 2,
    // A worker reuses the modules it already imported for its next file instead of importing the server afresh
    // for each of 158 files (import time 50 s → 8 s, the suite 196 s → 157 s here). Nothing in server/ keeps
    // module-level state, and the tests that fake timers or listen on process undo it in afterEach/onTestFinished.
    isolate: false,
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
