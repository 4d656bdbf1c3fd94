import { createHash } from 'node:crypto';
import type { Clock } from '../foundation/clock.js';
import type { GatewayConfig } from '../config/config-types.js';
import type { GatewayStore, Limiter } from '../store/store-types.js';

/**
 * `login` counts per submitted username, `loginAddress` per client address, `refresh` per
 * credential; `cardRead` (reading one card and listing) and `cardStatus` (status changes) per
 * credential too (D48).
 */
export type LimitedAction = 'login' | 'loginAddress' | 'refresh' | 'cardRead' | 'cardStatus';

/** Each limit's name: its policy in the RateLimit-Policy and RateLimit headers (D49), and its `limiter` metric label. */
export const POLICY_NAMES = {
  login: 'login',
  loginAddress: 'login_address',
  refresh: 'refresh',
  cardRead: 'card_read',
  cardStatus: 'card_status',
} as const satisfies Record<LimitedAction, string>;
export type PolicyName = (typeof POLICY_NAMES)[LimitedAction];

/** Where one limit stands after counting a request. */
export interface LimitState {
  policy: PolicyName;
  limit: number;
  /** Seconds of one window. */
  window: number;
  remaining: number;
  /** Seconds until the window resets. */
  reset: number;
  /** This request was over the limit: it is refused. */
  exceeded: boolean;
}

/** Usernames and addresses arrive from the client: hashed into fixed-size, opaque limiter and lockout keys. */
export const subjectKey = (text: string): string => createHash('sha256').update(text).digest('base64url').slice(0, 32);

/** Of several limiters applied to one request, the one closest to refusing. */
export function tightest(states: readonly LimitState[]): LimitState | undefined {
  return states.reduce<LimitState | undefined>((best, state) => (best === undefined || state.remaining < best.remaining ? state : best), undefined);
}

/**
 * D11, D27: fixed windows of `windowSeconds`, counted by rate-limiter-flexible in the shared
 * store. The window is chosen from the injected clock and is part of the key, so windows are
 * testable without sleeping and agree across replicas; the store's TTL (one window) only
 * cleans up. As with every fixed window, a burst straddling a window edge can see up to twice
 * the limit (the API guide's "Rate limits").
 */
export class AuthRateLimits {
  readonly #limiters: Record<LimitedAction, { limiter: Limiter; policy: PolicyName; points: number; windowSeconds: number }>;

  constructor(
    store: GatewayStore,
    settings: GatewayConfig['rateLimits'],
    private readonly clock: Clock,
  ) {
    const make = (action: LimitedAction, prefix: string, { points, windowSeconds }: { points: number; windowSeconds: number }) => ({
      // The window is in the key; the key only has to outlive its own window.
      limiter: store.createRateLimiter({ keyPrefix: `rl:${prefix}:`, points, durationSeconds: windowSeconds + 1 }),
      policy: POLICY_NAMES[action],
      points,
      windowSeconds,
    });
    this.#limiters = {
      login: make('login', 'login', settings.login),
      loginAddress: make('loginAddress', 'login-addr', settings.loginPerAddress),
      refresh: make('refresh', 'refresh', settings.refresh),
      cardRead: make('cardRead', 'card-read', settings.cardReads),
      cardStatus: make('cardStatus', 'card-status', settings.cardStatusChanges),
    };
  }

  /**
   * Counts one attempt for `subject` and tells where the limit stands (`exceeded`: refuse it);
   * throws StoreUnavailableError when the store fails (D23: never a 429).
   */
  async consume(action: LimitedAction, subject: string): Promise<LimitState> {
    const { limiter, policy, points, windowSeconds } = this.#limiters[action];
    const windowMs = windowSeconds * 1000;
    const now = this.clock.now();
    const window = Math.floor(now / windowMs);
    const reset = Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000));
    // A store failure rejects with StoreUnavailableError (the Limiter's contract) and passes through.
    const { consumed, exceeded } = await limiter.consume(`${subject}:${window}`);
    return { policy, limit: points, window: windowSeconds, remaining: Math.max(0, points - consumed), reset, exceeded };
  }
}
