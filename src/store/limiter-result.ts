import { RateLimiterRes } from 'rate-limiter-flexible';
import type { LimiterResult } from './store-types.js';

/**
 * rate-limiter-flexible's answer in the store's own words (no library type crosses the port).
 * It rejects with a RateLimiterRes past the limit and with an Error when its store fails: the
 * first is an answer (`exceeded`), the second stays a rejection for the caller to name (D23).
 */
export function limiterResult(consumed: Promise<RateLimiterRes>): Promise<LimiterResult> {
  return consumed.then(
    (res) => fromLibrary(res, false),
    (rejection: unknown) => {
      if (rejection instanceof RateLimiterRes) return fromLibrary(rejection, true);
      throw rejection;
    },
  );
}

const fromLibrary = (res: RateLimiterRes, exceeded: boolean): LimiterResult => ({
  consumed: res.consumedPoints,
  remaining: res.remainingPoints,
  resetMs: res.msBeforeNext,
  exceeded,
});
