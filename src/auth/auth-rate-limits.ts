import { createHash } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Clock } from '../clock.js';
import type { GatewayConfig } from '../config/load-config.js';
import { errors } from '../edge/errors.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { StoreUnavailableError, type GatewayStore } from '../store/store-types.js';

export type LimitedAction = 'login' | 'refresh';

export interface LimitState {
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  reset: number;
}

/** Usernames arrive from the client: hashed into fixed-size, opaque limiter and lockout keys. */
export const subjectKey = (text: string): string => createHash('sha256').update(text).digest('base64url').slice(0, 32);

/**
 * D11: fixed windows of `windowSeconds`, counted by rate-limiter-flexible in the shared store.
 * The window is chosen from the injected clock and is part of the key, so windows are testable
 * without sleeping and agree across replicas; the store's TTL only cleans up. As with every
 * fixed window, a burst straddling a window edge can see up to twice the limit (README).
 */
export class AuthRateLimits {
  readonly #limiters: Record<LimitedAction, { limiter: RateLimiterAbstract; points: number; windowMs: number }>;

  constructor(
    store: GatewayStore,
    settings: GatewayConfig['rateLimits'],
    private readonly clock: Clock,
    private readonly metrics: GatewayMetrics,
  ) {
    const make = (action: LimitedAction) => {
      const { points, windowSeconds } = settings[action];
      return {
        limiter: store.createRateLimiter({ keyPrefix: `rl:${action}:`, points, durationSeconds: windowSeconds * 2 }),
        points,
        windowMs: windowSeconds * 1000,
      };
    };
    this.#limiters = { login: make('login'), refresh: make('refresh') };
  }

  /**
   * Counts one attempt for `subject` and sets the RateLimit-* headers. Throws the 429
   * GatewayError past the limit, StoreUnavailableError when the store fails (D23: never a 429).
   */
  async consume(action: LimitedAction, subject: string, reply: FastifyReply): Promise<LimitState> {
    const { limiter, points, windowMs } = this.#limiters[action];
    const now = this.clock.now();
    const window = Math.floor(now / windowMs);
    const reset = Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000));
    let consumed: number;
    try {
      consumed = (await limiter.consume(`${subject}:${window}`)).consumedPoints;
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw new StoreUnavailableError(rejection);
      consumed = rejection.consumedPoints;
    }
    const state = { limit: points, remaining: Math.max(0, points - consumed), reset };
    reply.header('ratelimit-limit', String(points));
    reply.header('ratelimit-remaining', String(state.remaining));
    reply.header('ratelimit-reset', String(reset));
    if (consumed > points) {
      this.metrics.rateLimited.inc({ limiter: action });
      throw errors.rateLimited(reset);
    }
    return state;
  }
}
