import type { RateLimiterAbstract } from 'rate-limiter-flexible';

/** The shared store could not be reached in time; rendered as 503 + retryAfter (D23). */
export class StoreUnavailableError extends Error {
  constructor(cause?: unknown) {
    super('shared store unavailable', { cause });
    this.name = 'StoreUnavailableError';
  }
}

/** Addresses one refresh token inside its family; every key of a family shares its hash tag. */
export interface TokenRef {
  familyId: string;
  tokenHash: string;
}

export type RotateOutcome = 'rotated' | 'unknown' | 'mismatch' | 'revoked' | 'expired' | 'reuse';
export type RevokeOutcome = 'revoked' | 'unknown' | 'mismatch' | 'already-revoked' | 'expired' | 'rotated-out';

/** Refresh-token families (D3-D6). Every instant is epoch ms from the injected clock. */
export interface SessionStore {
  /** Login: a new family holding its first token. */
  createFamily(input: { token: TokenRef; credentialId: string; expiresAt: number; now: number }): Promise<void>;
  /**
   * Refresh (D5): the presented token refreshes if it is live and either not yet rotated or
   * rotated less than `graceMs` ago; each success adds `newTokenHash` to the family. Presented
   * after the grace it is reuse: the family is revoked. Atomic.
   */
  rotate(input: { token: TokenRef; credentialId: string; newTokenHash: string; newExpiresAt: number; now: number; graceMs: number }): Promise<RotateOutcome>;
  /**
   * Logout (D6): revokes the whole family of a live token. A token presented after its grace
   * is reuse (D5): the family is revoked too, and the answer is `rotated-out`. Atomic.
   */
  revokeFamily(input: { token: TokenRef; credentialId: string; now: number; graceMs: number }): Promise<RevokeOutcome>;
}

/** What an idempotency record keeps of a card: no plaintext PAN or CVC (D18). */
export interface StoredCard {
  /** sha256 of the canonical request body, for the payload-mismatch header (D16). */
  fingerprint: string;
  card: {
    cardId: string;
    maskedPan: string;
    /** `***` or `****`: the CVC's length is all a masked answer shows (D18). */
    maskedCvc?: string;
    expMonth: number;
    expYear: number;
    status: string;
    requestedCardLimit: number;
    cardLimit: number;
    currency: string;
    createdAt: string;
  };
  /** AES-256-GCM sealed `{ pan, cvc }`, so a replay can still reveal (D18). */
  sealedSecrets: string;
}

export type Reservation =
  | { state: 'reserved' }
  | { state: 'completed'; record: StoredCard }
  | { state: 'pending'; leaseExpiresAt: number };

/** Card-creation idempotency (D16, D17), keyed by issuing account + requestId. */
export interface IdempotencyStore {
  /**
   * Atomically claims the key for `owner` unless a live record exists. A pending claim whose
   * lease has run out (its gateway died) may be taken over.
   */
  reserve(key: string, input: { owner: string; now: number; leaseMs: number }): Promise<Reservation>;
  /** Reads without claiming; `reserved` here means "nothing live under this key". */
  peek(key: string, now: number): Promise<Reservation>;
  complete(key: string, input: { owner: string; record: StoredCard; expiresAt: number; now: number }): Promise<void>;
  /** Releases a pending claim held by `owner` (the forward failed, D17). */
  release(key: string, owner: string): Promise<void>;
}

/** Failed-login lockout (D11a). */
export interface LockoutStore {
  /** Counts one failure; returns the lock-out end (epoch ms) when this failure triggers one, else 0. */
  recordFailure(key: string, input: { now: number; maxFailures: number; lockoutMs: number }): Promise<number>;
  /** The lock-out end when `key` is locked out at `now`, else 0. */
  lockedUntil(key: string, now: number): Promise<number>;
  reset(key: string): Promise<void>;
}

export interface LimiterOptions {
  keyPrefix: string;
  points: number;
  durationSeconds: number;
}

/** The shared state of all replicas: one per process, built by createStore(). */
export interface GatewayStore {
  readonly sessions: SessionStore;
  readonly idempotency: IdempotencyStore;
  readonly lockouts: LockoutStore;
  createRateLimiter(options: LimiterOptions): RateLimiterAbstract;
  /** Rejects with StoreUnavailableError when the store cannot serve (readiness, D22). */
  ping(): Promise<void>;
  close(): Promise<void>;
}
