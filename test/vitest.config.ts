import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * `npm test`: everything that needs only Node and Redis. The promtool checks live in
 * test/deploy-tools/ with a config of their own (`npm run check:deploy`).
 */

/** The only files that replace a module (`vi.mock`): they need a module graph of their own. */
export const MOCKING = ['test/least-privilege/login-address-ranges.test.ts', 'test/operations/build-info.test.ts'];

export default defineConfig({
  test: {
    root: fileURLToPath(new URL('..', import.meta.url)),
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
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts', 'client/test/**/*.test.ts'],
          exclude: ['test/deploy-tools/**', '**/node_modules/**', ...MOCKING],
          // Files share a worker's module graph: importing Fastify, ioredis and the gateway once
          // per worker instead of once per file halves the suite's CPU. Every file builds its
          // own apps, stores and clocks through the fixtures and closes them, so nothing a test
          // checks lives in a module's state (test/tooling/shared-module-graph.test.ts
          // keeps module replacement out of this project).
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: 'isolated', include: MOCKING },
      },
    ],
  },
});
