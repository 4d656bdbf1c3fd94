import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * `npm test`: everything that needs only Node and Redis. The promtool checks live in
 * test/deploy-tools/ with a config of their own (`npm run check:deploy`).
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('..', import.meta.url)),
    include: ['test/**/*.test.ts', 'client/test/**/*.test.ts'],
    exclude: ['test/deploy-tools/**', '**/node_modules/**'],
    globalSetup: ['test/support/global-setup.ts'],
    // Hang guards, not limits anything is measured against: a test that reaches one has hung
    // (the message names the test or hook), on a machine however busy.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    pool: 'forks',
    // Two test files at a time: on 2 shared cores more workers only queue behind each other and
    // stretch every process-level test; fewer leaves the machine idle while a file waits on I/O.
    maxWorkers: 2,
  },
});
