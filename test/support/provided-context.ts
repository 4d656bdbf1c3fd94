import type {} from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A Redis URL found or started by global-setup.ts; empty when none could be had. */
    redisUrl: string;
  }
}
