import type {} from 'vitest';
import type { TestKeys } from './test-keys.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A Redis URL found or started by global-setup.ts; empty when none could be had. */
    redisUrl: string;
    /** The run's keys and certificate, made once by global-setup.ts. */
    testKeys: TestKeys;
  }
}
