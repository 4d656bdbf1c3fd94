import type { CardStatus } from '../foundation/card-status.js';
import type { EventStore } from './event-store.js';

/**
 * Why the shared store cannot serve (D55), in the words of the log lines, `/readyz` and the
 * `reason` label: the server does not answer a connection (`unreachable`) or a command in time
 * (`timed_out`), refuses the gateway's password (`authentication_refused`: NOAUTH, WRONGPASS),
 * refuses writes because it is full (`out_of_memory`) or a replica (`read_only`), or runs a
 * maxmemory-policy that drops keys (`evicting_policy`, D54: production only).
 */
export const STORE_FAILURE_REASONS = ['unreachable', 'timed_out', 'authentication_refused', 'out_of_memory', 'evicting_policy', 'read_only'] as const;
export type StoreFailureReason = (typeof STORE_FAILURE_REASONS)[number];

/** A named store failure: the reason, and the server's or the connection's own words for it. */
export interface StoreFailure {
  readonly reason: StoreFailureReason;
  /** e.g. `WRONGPASS invalid username-password pair or user is disabled.`; never a secret. */
  readonly detail: string;
}

/** The shared store could not serve in time; rendered as 503 + retryAfter (D23). */
export class StoreUnavailableError extends Error {
  /** Why, when the store knows (D55): `/readyz` shows it as `reason: detail`. */
  readonly failure: StoreFailure | undefined;

  constructor(cause?: unknown, failure?: StoreFailure) {
    super('shared store unavailable', { cause });
    this.name = 'StoreUnavailableError';
    this.failure = failure;
  }

  /** `/readyz`'s words for the failure (admin-server.ts reads a probe error's `reason`). */
  get reason(): string | undefined {
    return this.failure && `${this.failure.reason}: ${this.failure.detail}`;
  }
}

/**
 * Addresses one refresh token (D3): its family, its generation in the family (0 at login, one
 * more at each rotation) and the SHA-256 of the whole token. Every key of a family shares its
 * hash tag. A token of the format before issue 35 has no generation: the Redis store serves it
 * from the records that format wrote (a token key per token), until those sessions end.
 */
export interface TokenRef {
  familyId: string;
  generation?: number;
  tokenHash: string;
}

/** `ended`: the session ended with its credential's secret (D41); the family is revoked. */
export type RotateOutcome = 'rotated' | 'sibling' | 'unknown' | 'mismatch' | 'revoked' | 'ended' | 'expired' | 'reuse';
/**
 * A rotation's answer; a new token's expiry never passes its session's end (D41).
 * - `rotated`: the proposed successor is now the family's current token.
 * - `sibling`: the presented token is the previous generation, within its grace (D5): the
 *   family's current token is answered again, as the successor the first rotation stored
 *   sealed under the presented token (`sealed`), with its hash and expiry. Nothing changes.
 */
export type RotateResult =
  | { outcome: 'rotated'; expiresAt: number }
  | { outcome: 'sibling'; expiresAt: number; sealed: string; tokenHash: string }
  | { outcome: Exclude<RotateOutcome, 'rotated' | 'sibling'> };
export type RevokeOutcome = 'revoked' | 'unknown' | 'mismatch' | 'already-revoked' | 'ended' | 'expired' | 'rotated-out';

/**
 * What a refresh or logout checks a session against (D41), inside the same atomic step: the
 * credential's secret fingerprint now (a family made under another one has ended) and its
 * not-before instant (a family logged in before it has ended; 0: none).
 */
export interface SessionBinding {
  fingerprint: string;
  notBefore: number;
}

/**
 * Refresh-token families (D3-D6, D41), each one record of constant size however often it is
 * refreshed: the current generation's token hash, expiry and successor seal, the previous
 * generation's hash and expiry, and the instant of the last rotation (docs/operations/redis.md,
 * "How a session is kept"). Every instant is epoch ms from the injected clock.
 */
export interface SessionStore {
  /**
   * Login: a new family whose current token is `token` (generation 0). The family keeps its
   * login instant (`now`), the credential's secret fingerprint and its absolute end (`endsAt`);
   * `expiresAt` is the first token's, at or before `endsAt`.
   */
  createFamily(input: { token: TokenRef; credentialId: string; fingerprint: string; expiresAt: number; endsAt: number; now: number }): Promise<void>;
  /**
   * Removes a family whose login did not complete: its first token never left the gateway
   * (written in the login's first round trip, before the password was checked).
   */
  discardFamily(familyId: string): Promise<void>;
  /**
   * Refresh (D5). The current generation's token rotates: `next` (its hash, and its secret
   * sealed under the presented token) becomes current, expiring at `newExpiresAt` or the
   * family's end, whichever is first, and the presented one previous, with the grace running
   * from `now`. The previous generation's token within `graceMs` of that rotation is a sibling:
   * answered the current token again (RotateResult), the family unchanged. The previous one past
   * the grace, or any older generation, is reuse: the family is revoked. A family that fails its
   * binding has ended (D41): revoked, whatever the token. Atomic.
   */
  rotate(
    input: {
      token: TokenRef;
      credentialId: string;
      next: { tokenHash: string; sealed: string };
      newExpiresAt: number;
      now: number;
      graceMs: number;
    } & SessionBinding,
  ): Promise<RotateResult>;
  /**
   * Logout (D6): revokes the whole family of a live token of its current or previous
   * generation. A token presented after its grace, or of an older generation, is reuse (D5):
   * the family is revoked too, and the answer is `rotated-out`. A family that fails its binding
   * has ended (D41): revoked, answer `ended`. Atomic.
   */
  revokeFamily(input: { token: TokenRef; credentialId: string; now: number; graceMs: number } & SessionBinding): Promise<RevokeOutcome>;
}

/**
 * D41: per credential, the instant before which its sessions and access tokens are void,
 * written by the replica that sees the credential deactivated (or its secret changed) and read
 * by every replica at start and on reload. Kept without expiry: one small entry per credential.
 */
export interface NotBeforeStore {
  /** Raises `credentialId`'s instant to `at`, never lowering it; resolves with the instant stored. */
  raise(credentialId: string, at: number): Promise<number>;
  /** The stored instants of these credentials (epoch ms); credentials without one are absent. */
  read(credentialIds: readonly string[]): Promise<Map<string, number>>;
}

/** No credential id is empty (the config requires one), so no requester ever matches it. */
export const UNKNOWN_CREATOR = '';

/** What an idempotency record keeps of a card: no plaintext PAN or CVC (D18). */
export interface StoredCard {
  /** sha256 of the canonical request body, for the payload-mismatch header (D16). */
  fingerprint: string;
  /**
   * The credential that created the card: the only one that may reveal it on a replay (D28).
   * UNKNOWN_CREATOR when the connector replayed a card whose first attempt the gateway no longer
   * knows (its record expired or was lost): then no credential may reveal it.
   */
  creator: string;
  card: {
    cardId: string;
    maskedPan: string;
    /** `***` or `****`: the CVC's length is all a masked answer shows (D18). */
    maskedCvc?: string;
    expMonth: number;
    expYear: number;
    status: CardStatus;
    requestedCardLimit: number;
    cardLimit: number;
    currency: string;
    createdAt: string;
  };
  /** AES-256-GCM sealed `{ pan, cvc }`, so a replay can still reveal (D18). */
  sealedSecrets: string;
}

/**
 * The first attempt under a key: what a later attempt needs to know when the connector answers
 * with the card that attempt may have made (D31): its payload fingerprint, its requested limit
 * and its credential.
 */
export interface ClaimAttempt {
  fingerprint: string;
  requestedCardLimit: number;
  credentialId: string;
}

export type Reservation =
  /**
   * The key is ours to forward. `previous` is the first attempt of a claim that was released
   * (its forward failed) or whose gateway died: the connector may already hold its card.
   */
  { state: 'reserved'; previous: ClaimAttempt | undefined } | { state: 'completed'; record: StoredCard } | { state: 'pending'; leaseExpiresAt: number };

/** Card-creation idempotency (D16, D17, D31), keyed by issuing account + requestId. */
export interface IdempotencyStore {
  /**
   * Atomically claims the key for `owner` unless a live record or claim exists. A released
   * claim, or a pending one whose lease has run out (its gateway died), may be taken over; the
   * new claim then carries the first attempt forward.
   */
  reserve(key: string, input: { owner: string; now: number; leaseMs: number; attempt: ClaimAttempt }): Promise<Reservation>;
  /** Reads without claiming; `reserved` here means "nothing live under this key, free to claim". */
  peek(key: string, now: number): Promise<Reservation>;
  complete(key: string, input: { owner: string; record: StoredCard; expiresAt: number; now: number }): Promise<void>;
  /**
   * Releases a pending claim held by `owner` (the forward failed, D17): the key is free, and
   * the first attempt is remembered until `keepUntil` (D31).
   */
  release(key: string, input: { owner: string; now: number; keepUntil: number }): Promise<void>;
}

/** Where one submitted username stands with the lockout (D11a). */
export interface LockoutState {
  /** The lock-out end when locked out at the instant asked about, else 0. */
  lockedUntil: number;
  /** Consecutive failures counted towards the next lock-out (0: a success has nothing to reset). */
  failures: number;
}

/** Failed-login lockout (D11a). */
export interface LockoutStore {
  /** Counts one failure; returns the lock-out end (epoch ms) when this failure triggers one, else 0. */
  recordFailure(key: string, input: { now: number; maxFailures: number; lockoutMs: number }): Promise<number>;
  /** Where `key` stands at `now`. */
  read(key: string, now: number): Promise<LockoutState>;
  reset(key: string): Promise<void>;
}

/** Where one fixed-window counter stands after counting a request. */
export interface LimiterResult {
  /** Points counted in the window, this request's included (past the limit too: every attempt counts). */
  consumed: number;
  /** Points left in the window; 0 once the limit is reached. */
  remaining: number;
  /** Milliseconds until the window's counter expires. */
  resetMs: number;
  /** This request is over the limit (`consumed` > points): refuse it. */
  exceeded: boolean;
}

/**
 * One fixed-window counter. `consume` counts one point and resolves with where the counter
 * stands, over the limit too (`exceeded`): being over the limit is an answer of the store. It
 * rejects only when the store fails, with a StoreUnavailableError (D23: a 503, never a 429).
 */
export interface Limiter {
  consume(key: string): Promise<LimiterResult>;
}

export interface LimiterOptions {
  keyPrefix: string;
  points: number;
  durationSeconds: number;
}

export type StoreTopology = 'memory' | 'standalone' | 'sentinel' | 'cluster';

/** What readiness and metrics say about the store (D35): which topology, and can it serve now. */
export interface StoreDescription {
  readonly topology: StoreTopology;
  /** The last health check found every master answering (memory: always). */
  readonly up: boolean;
  /** `host:port` of the master(s) serving now: one, or one per Cluster shard; empty for memory. */
  readonly masters: readonly string[];
  /** Master changes seen since start (a Sentinel promotion, a Cluster shard's new master). */
  readonly masterChanges: number;
  /** Card records stored without the `replicasToAck` acknowledgements they waited for. */
  readonly unacknowledgedRecords: number;
  /** Idempotency writes whose outcome is unknown, waiting to be settled (RedisStore repairs). */
  readonly pendingRepairs: number;
  /** Why the store does not serve (`up` false), as the last health check found; else undefined. */
  readonly failure: StoreFailure | undefined;
  /**
   * D54: the evicting `maxmemory-policy` a master runs (`allkeys-lru on host:port`), whatever
   * the environment; undefined while every master runs `noeviction` (or none answered yet).
   */
  readonly evictingPolicy: string | undefined;
  /** The fullest master's used memory as a share of its `maxmemory`; undefined without a limit or an answer. */
  readonly memoryUsedRatio: number | undefined;
  /** Store operations that failed since start, by reason (each answered 503). */
  readonly failedOperations: Readonly<Record<StoreFailureReason, number>>;
}

/** No failed operation yet: the starting value of `failedOperations`. */
export const noFailedOperations = (): Record<StoreFailureReason, number> =>
  Object.fromEntries(STORE_FAILURE_REASONS.map((reason) => [reason, 0])) as Record<StoreFailureReason, number>;

/**
 * A change worth one log line: the store became unavailable (with its reason) or available
 * again, a master started or stopped running an evicting policy, a master changed, or replicas
 * stopped or resumed acknowledging card records in time. Emitted once per change, never per
 * request.
 */
export type StoreEvent =
  | ({ readonly kind: 'down' } & StoreFailure)
  | { readonly kind: 'up' }
  | { readonly kind: 'evicting-policy'; readonly policy: string | undefined }
  | { readonly kind: 'master-changed'; readonly from: string | undefined; readonly to: string; readonly slots?: string }
  | { readonly kind: 'replicas-behind'; readonly wanted: number; readonly acknowledged: number }
  | { readonly kind: 'replicas-caught-up' };

/** The shared state of all replicas: one per process, built by createStore(). */
export interface GatewayStore {
  readonly sessions: SessionStore;
  readonly idempotency: IdempotencyStore;
  readonly lockouts: LockoutStore;
  readonly notBefore: NotBeforeStore;
  /** The event log and the webhook delivery queues (D66). */
  readonly events: EventStore;
  createRateLimiter(options: LimiterOptions): Limiter;
  /** Rejects with StoreUnavailableError when the store cannot serve (readiness, D22). */
  ping(): Promise<void>;
  /** The store's topology and state now (cheap, synchronous: metrics read it on every scrape). */
  describe(): StoreDescription;
  /** Calls `listener` on every StoreEvent until the returned function is called. */
  subscribe(listener: (event: StoreEvent) => void): () => void;
  close(): Promise<void>;
}
