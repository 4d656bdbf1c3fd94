import { RateLimiterRedis } from 'rate-limiter-flexible';
import { limiterResult } from '../limiter-result.js';
import type { Limiter, LimiterOptions } from '../store-types.js';
import type { RecordContext } from './record-context.js';

/**
 * rate-limiter-flexible's RedisLimiter: one key per subject and window (no hash tag: each
 * counter is one key, any slot of a Cluster), one single-key script per consume. Its
 * `rejectIfRedisNotReady` looks at the client's status, which on a Cluster stays `ready`
 * while one shard fails over: there the command deadline gives the 503.
 */
export function redisRateLimiter({ redis, prefix, guarded }: RecordContext, { keyPrefix, points, durationSeconds }: LimiterOptions): Limiter {
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${prefix}${keyPrefix}`,
    points,
    duration: durationSeconds,
    // Without this it waits for ioredis to reconnect instead of failing (rate-limiter-flexible #184).
    rejectIfRedisNotReady: true,
  });
  // The same command deadline as every other store call. Over the limit is an answer of the
  // store (its script ran and counted, so Redis took the write); any rejection is a failure,
  // named (D55).
  return { consume: (key) => guarded(true, () => limiterResult(limiter.consume(key))) };
}
