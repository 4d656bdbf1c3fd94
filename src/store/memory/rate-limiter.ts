import { RateLimiterMemory } from 'rate-limiter-flexible';
import { limiterResult } from '../limiter-result.js';
import { StoreUnavailableError, type Limiter, type LimiterOptions } from '../store-types.js';

/** rate-limiter-flexible's counter in the process; any failure of it is the store's (D23: never a 429). */
export function memoryRateLimiter({ keyPrefix, points, durationSeconds }: LimiterOptions): Limiter {
  const limiter = new RateLimiterMemory({ keyPrefix, points, duration: durationSeconds });
  return {
    consume: (key) =>
      limiterResult(limiter.consume(key)).catch((error: unknown) => {
        throw new StoreUnavailableError(error);
      }),
  };
}
