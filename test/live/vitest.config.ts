import { defineConfig } from 'vitest/config';

// Needs a real Ollama with mistral:7b; the suite skips itself, saying why, when there is none.
export default defineConfig({
  test: {
    include: ['test/live/**/*.live.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 60_000,
  },
});
