import { defineConfig } from 'vitest/config';

// `npm run test:pack`: packs Easel, installs the tarball globally into a temporary prefix (better-sqlite3 built
// by node-gyp, dependencies from npm's cache or registry) and runs the `easel` command. Slow, so not in `npm test`;
// .ci/run runs it after the main suites.
export default defineConfig({
  test: {
    include: ['test/pack/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 600_000,
  },
});
