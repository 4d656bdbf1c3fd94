import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * `npm run check:deploy`: the checks that need promtool (Debian's `prometheus` package) besides
 * Node. `npm test` leaves this folder out so that it passes with Node and Redis alone.
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/deploy-tools/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Hang guards only: a check that runs into one has hung, it is not slow.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
  },
});
