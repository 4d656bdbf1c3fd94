import { createHash } from 'node:crypto';
import { RateLimiterRes } from 'rate-limiter-flexible';
import type { Clock } from '../foundation/clock.js';
import type { GatewayConfig } from '../config/config-types.js';
import { errors } from '../foundation/errors.js';
import { StoreUnavailableError, type GatewayStore, type Limiter } from '../store/store-types.js';

/** `login` counts per submitted username, `loginAddress` per client address, `refresh` per credential. */
export type LimitedAction = 'login' | 'loginAddress' | 'refresh';

export interface LimitState {
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  reset: number;
}

/** Usernames and addresses arrive from the client: hashed into fixed-size, opaque limiter and lockout keys. */
export const subjectKey = (text: string): string => createHash('sha256').update(text).digest('base64url').slice(0, 32);

/** The standard RateLimit-* headers of one limiter's state (D11). */
export function rateLimitHeaders(state: LimitState): Record<string, string> {
  return { 'ratelimit-limit': String(state.limit), 'ratelimit-remaining': String(state.remaining), 'ratelimit-reset': String(state.reset) };
}

/** Of several limiters applied to one request, the one closest to refusing speaks in the headers. */
export function tightest(states: readonly LimitState[]): LimitState | undefined {
  return states.reduce<LimitState | undefined>((best, state) => (best === undefined || state.remaining < best.remaining ? state : best), undefined);
}

/**
 * D11, D27: fixed windows of `windowSeconds`, counted by rate-limiter-flexible in the shared
 * store. The window is chosen from the injected clock and is part of the key, so windows are
 * testable without sleeping and agree across replicas; the store's TTL (one window) only
 * cleans up. As with every fixed window, a burst straddling a window edge can see up to twice
 * the limit (README).
 */
export class AuthRateLimits {
  readonly #limiters: Record<LimitedAction, { limiter: Limiter; points: number; windowMs: number }>;

  constructor(
    store: GatewayStore,
    settings: GatewayConfig['rateLimits'],
    private readonly clock: Clock,
  ) {
    const make = (prefix: string, { points, windowSeconds }: { points: number; windowSeconds: number }) => ({
      // The window is in the key; the key only has to outlive its own window.
      limiter: store.createRateLimiter({ keyPrefix: `rl:${prefix}:`, points, durationSeconds: windowSeconds + 1 }),
      points,
      windowMs: windowSeconds * 1000,
    });
    this.#limiters = {
      login: make('login', settings.login),
      loginAddress: make('login-addr', settings.loginPerAddress),
      refresh: make('refresh', settings.refresh),
    };
  }

  /**
   * Counts one attempt for `subject`. Throws the 429 GatewayError (with its RateLimit-* headers)
   * past the limit, StoreUnavailableError when the store fails (D23: never a 429).
   */
  async consume(action: LimitedAction, subject: string): Promise<LimitState> {
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
    if (consumed > points) throw errors.rateLimited(reset, rateLimitHeaders(state));
    return state;
  }
}
